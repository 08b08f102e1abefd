package engine

import (
	"math"
	"sync/atomic"
	"time"
)

// signal wakes the goroutines waiting for a change, without a lock or a
// poll. A waiter takes the channel (wait) first, then checks what it waits
// for, and if it must wait, waits on the channel; whoever makes the change
// makes it first, then calls broadcast. Either the waiter's check sees the
// change, or the broadcast closes the channel it waits on. Nothing is
// allocated while nobody waits.
type signal struct{ ch atomic.Pointer[chan struct{}] }

// wait returns a channel that the next broadcast closes.
func (s *signal) wait() <-chan struct{} {
	for {
		if p := s.ch.Load(); p != nil {
			return *p
		}
		c := make(chan struct{})
		if s.ch.CompareAndSwap(nil, &c) {
			return c
		}
	}
}

// broadcast wakes every goroutine waiting on a channel wait returned.
func (s *signal) broadcast() {
	if p := s.ch.Swap(nil); p != nil {
		close(*p)
	}
}

// fence is an instance's fence of the membership protocol: mono() after
// which none of its leases may deliver. Moving it (Store) wakes the
// workers waiting for their lease to be deliverable again (moved).
//
// The fence passes at the first of two instants: at on the monotonic
// clock, and the same instant as read then on the wall clock (wall). The
// monotonic clock stops while the machine is suspended (a VM paused, an
// instance hibernated) and the wall clock does not, so a process that
// resumes sees its fence passed, not a fence with seconds left while
// takers, whose own clocks ran, may have taken its leases. A wall clock
// stepped forward only passes the fence early (safe); one stepped back
// leaves the monotonic instant in charge. Takers time others on the
// monotonic clock alone: a clock of theirs that stops only makes them wait
// longer.
type fence struct {
	at    atomic.Int64
	wall  atomic.Int64 // Unix nanoseconds
	moved signal
}

// Load returns the fence on the monotonic clock (mono()).
func (f *fence) Load() int64 { return f.at.Load() }

// Store moves the fence to at (mono()) and wakes the workers waiting on
// moved.
func (f *fence) Store(at int64) {
	wall := int64(math.MinInt64)
	if at != math.MinInt64 {
		now := time.Now()
		wall = now.UnixNano() + at - int64(now.Sub(epoch))
	}
	// Either order of the two stores, read half old and half new, gives a
	// fence no later than one of the two: never a delivery past a fence.
	f.at.Store(at)
	f.wall.Store(wall)
	f.moved.broadcast()
}

// passedAt reports whether the fence has passed at the instant whose
// monotonic reading is m (mono()) and wall reading w (Unix nanoseconds).
func (f *fence) passedAt(m, w int64) bool { return m >= f.at.Load() || w >= f.wall.Load() }

// passed reports whether the fence has passed now: no time left.
func (f *fence) passed() bool { return f.left() <= 0 }

// left returns how long until the fence passes: 0 or less if it has.
func (f *fence) left() time.Duration {
	now := time.Now()
	at, wall := f.at.Load(), f.wall.Load()
	if at == math.MinInt64 || wall == math.MinInt64 {
		return math.MinInt64
	}
	return time.Duration(min(at-int64(now.Sub(epoch)), wall-now.UnixNano()))
}
