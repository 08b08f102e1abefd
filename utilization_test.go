package kinesislease

import (
	"math"
	"testing"
	"time"
)

// TestProcessCPU: after a busy loop of some CPU time, ProcessCPU measures
// a positive utilization, at most what GOMAXPROCS allows (with slack for
// the clock's granularity); a measure is since the previous call.
func TestProcessCPU(t *testing.T) {
	if _, ok := processCPUTime(); !ok {
		if f := ProcessCPU(); f() != -1 {
			t.Fatal("no CPU time on this platform: want -1")
		}
		return
	}
	f := ProcessCPU()
	start, _ := processCPUTime()
	x := 0.0
	for i := 0; ; i++ {
		x += math.Sqrt(float64(i))
		if i%100_000 == 0 {
			if now, _ := processCPUTime(); now-start >= 50*time.Millisecond {
				break
			}
		}
	}
	v := f()
	if !(v > 0) || v > 2 {
		t.Fatalf("after 50 ms of CPU: ProcessCPU = %v (x %v), want above 0, at most about 1", v, x)
	}
}
