package syncx

import "sync"

// Latest is a value set again and again (a round's outcome) that other
// goroutines wait on: how many times it was set, the last value, whether
// it is stopped (set no more), and a channel closed at the next Set or at
// Stop. The zero value is ready to use.
type Latest[T any] struct {
	mu      sync.Mutex
	n       int
	v       T
	stopped bool
	next    chan struct{}
}

// Set records v as the latest value and wakes the waiters.
func (l *Latest[T]) Set(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	l.v = v
	l.wake()
}

// Stop records that no Set will come again and wakes the waiters.
func (l *Latest[T]) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	l.wake()
}

func (l *Latest[T]) wake() {
	if l.next != nil {
		close(l.next)
		l.next = nil
	}
}

// State returns how many times the value was set, the latest, whether l
// is stopped, and a channel closed at the next Set or Stop.
func (l *Latest[T]) State() (n int, v T, stopped bool, next <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next == nil {
		l.next = make(chan struct{})
	}
	return l.n, l.v, l.stopped, l.next
}
