//go:build race

package main

// raceEnabled says this binary was built with -race; the test then builds
// the instances with -race too.
const raceEnabled = true
