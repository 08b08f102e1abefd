//go:build !race

package plan

const raceScale = 1
