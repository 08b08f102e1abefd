package kinesislease

import (
	"fmt"
	"runtime"
	"sync"
	"time"
)

// WithUtilization publishes this instance's own utilization in its
// membership entry, so that the plan corrects for what throughput does not
// show: a handler whose cost per byte differs by shard. f returns the
// instance's utilization of its capacity now, 1 when fully used (above 1
// when overloaded); ProcessCPU measures the process's CPU. A negative
// value, NaN or an infinity is no measure (nothing is published until a
// first one).
//
// Each instance publishes a decayed average of f's values (over about 15
// s), to two significant digits, and again only when it moves by more
// than 10%. From the utilizations, loads and capacities the members
// publish, every member computes the same correction: an instance's cost
// per byte is its utilization times its capacity over its load; one whose
// cost per byte is above the fleet's (the members that publish one) is
// given a smaller share of the load, in proportion (at most three times
// smaller), so that it sheds load first, through the same tolerance and
// holds as every load move (ByThroughput). Instances that publish none
// count at the fleet's cost per byte. Off by default; ignored with
// ByCount. See docs/balance.md.
//
// f is called once a heartbeat (every 1.25 s at the defaults) on the
// heartbeat's goroutine: it must return quickly.
func WithUtilization(f func() float64) Option {
	return serviceOption(func(c *config) {
		if f == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithUtilization(nil)", ErrInvalidOption))
			return
		}
		c.utilization = f
	})
}

// ProcessCPU returns a function for WithUtilization that measures this
// process's CPU time (user and system) per second of wall time since its
// previous call (the first: since ProcessCPU was called), divided by
// runtime.GOMAXPROCS (which follows a container's CPU limit): 1 when the
// process keeps every CPU it may use busy. Give instances capacities
// (WithCapacity) in proportion to their CPUs.
//
// It reads getrusage(2) on Unix systems (Linux, macOS, the BSDs,
// Solaris, illumos, AIX, Android, iOS) and GetProcessTimes on Windows. On
// other platforms (Plan 9, WebAssembly: js and wasip1) the function
// returns -1, no measure: the instance publishes no utilization and
// counts, in every member's plan, at the fleet's cost per byte.
//
// A process's CPU counts all its work, not only its handlers': where
// something else in the process dominates it, give WithUtilization a
// function of your own.
func ProcessCPU() func() float64 {
	cpu0, ok := processCPUTime()
	if !ok {
		return func() float64 { return -1 }
	}
	var mu sync.Mutex
	t0 := time.Now()
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		cpu, ok := processCPUTime()
		now := time.Now()
		dt := now.Sub(t0)
		if !ok || dt <= 0 {
			return -1
		}
		v := float64(cpu-cpu0) / float64(dt) / float64(runtime.GOMAXPROCS(0))
		cpu0, t0 = cpu, now
		return max(v, 0)
	}
}
