//go:build !unix && !windows

package kinesislease

import "time"

// processCPUTime: unavailable on this platform (ProcessCPU returns -1).
func processCPUTime() (time.Duration, bool) { return 0, false }
