//go:build race

package plan

// raceScale divides the trials of the randomised tests under the race
// detector, which slows them some tenfold and has no goroutines to watch
// here.
const raceScale = 4
