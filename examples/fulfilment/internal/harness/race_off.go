//go:build !race

package harness

// RaceEnabled says this binary was built with -race; the tests then build
// the instances with -race too.
const RaceEnabled = false
