package syncx

import (
	"sync"
	"sync/atomic"
)

// Signal wakes the goroutines waiting for a change, without a lock or a
// poll. A waiter takes the channel (Wait) first, then checks what it waits
// for, and if it must wait, waits on the channel; whoever makes the change
// makes it first, then calls Broadcast. Either the waiter's check sees the
// change, or the broadcast closes the channel it waits on. Nothing is
// allocated while nobody waits. The zero Signal is ready to use.
type Signal struct{ ch atomic.Pointer[chan struct{}] }

// Wait returns a channel that the next Broadcast closes.
func (s *Signal) Wait() <-chan struct{} {
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

// Broadcast wakes every goroutine waiting on a channel Wait returned.
func (s *Signal) Broadcast() {
	if p := s.ch.Swap(nil); p != nil {
		close(*p)
	}
}

// Latest is a value set again and again (a round's outcome) that other
// goroutines wait on: how many times it was set, the last value, whether
// it is stopped (set no more), and a channel closed at the next Set or at
// Stop. The zero value is ready to use.
type Latest[T any] struct {
	mu      sync.Mutex
	n       int
	v       T
	stopped bool
	next    Signal
}

// Set records v as the latest value and wakes the waiters.
func (l *Latest[T]) Set(v T) {
	Guard(&l.mu, func() { l.n, l.v = l.n+1, v })
	l.next.Broadcast()
}

// Stop records that no Set will come again and wakes the waiters.
func (l *Latest[T]) Stop() {
	Guard(&l.mu, func() { l.stopped = true })
	l.next.Broadcast()
}

// State returns how many times the value was set, the latest, whether l
// is stopped, and a channel closed at the next Set or Stop.
func (l *Latest[T]) State() (n int, v T, stopped bool, next <-chan struct{}) {
	next = l.next.Wait() // before the state: a Set after it closes next
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.v, l.stopped, next
}
