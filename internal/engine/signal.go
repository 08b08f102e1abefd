package engine

import "sync/atomic"

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
type fence struct {
	at    atomic.Int64
	moved signal
}

// Load returns the fence.
func (f *fence) Load() int64 { return f.at.Load() }

// Store moves the fence to at and wakes the workers waiting on moved.
func (f *fence) Store(at int64) {
	f.at.Store(at)
	f.moved.broadcast()
}
