//go:build race

package sim

// raceEnabled: the race detector makes the simulations several times
// slower; TestMembership runs fewer seeds by default under it.
const raceEnabled = true
