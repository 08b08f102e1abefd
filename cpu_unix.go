//go:build unix

package kinesislease

import (
	"syscall"
	"time"
)

// processCPUTime returns the CPU time (user and system) this process used
// so far.
func processCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
