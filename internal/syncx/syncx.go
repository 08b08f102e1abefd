// Package syncx holds the small concurrency helpers the engine and the
// membership protocol share: a lock held for one read or write (Guard,
// Guarded), store calls run a bounded number at once (Bounded), a
// non-blocking look at a closed channel (Closed), and a read its callers
// share (Shared).
package syncx

import (
	"context"
	"sync"
	"sync/atomic"
)

// Guard runs f holding mu.
func Guard(mu sync.Locker, f func()) {
	mu.Lock()
	defer mu.Unlock()
	f()
}

// Guarded returns what f reads holding mu.
func Guarded[T any](mu sync.Locker, f func() T) T {
	mu.Lock()
	defer mu.Unlock()
	return f()
}

// Bounded runs fn(0..n-1), at most limit at once, until ctx ends, and
// waits for those it started.
func Bounded(ctx context.Context, limit, n int, fn func(i int)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, limit)
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
}

// Closed reports whether ch is closed, without waiting.
func Closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Shared shares a read among its callers: each asks for a read sent at or
// after an instant (Read), and one sent since, in flight or done, serves
// them all; a new one starts only when none will, so that the reads run
// back to back however many callers ask. Make it with NewShared.
type Shared struct {
	// sem guards last (a channel, not a mutex, held across a store call:
	// a goroutine waiting on a channel lets a synctest bubble's clock
	// move).
	sem  chan struct{}
	last *sharedRead
}

// NewShared returns a Shared that has read nothing yet.
func NewShared() *Shared { return &Shared{sem: make(chan struct{}, 1)} }

// sharedRead is one read of a Shared: sent (now()) before the read, ok
// (set before done is closed) what it returned.
type sharedRead struct {
	sent int64
	done chan struct{}
	ok   bool
}

// Read returns what a read sent at or after at (on the clock now) returned:
// one already sent then, waited for, or read() run now by this caller. It
// returns false if ctx ends while it waits for another caller's read.
func (s *Shared) Read(ctx context.Context, at int64, now func() int64, read func() bool) bool {
	for {
		s.sem <- struct{}{}
		c := s.last
		if c == nil || c.sent < at && Closed(c.done) {
			c = &sharedRead{sent: now(), done: make(chan struct{})}
			s.last = c
			<-s.sem
			c.ok = read()
			close(c.done)
			return c.ok
		}
		<-s.sem
		select {
		case <-c.done:
		case <-ctx.Done():
			return false
		}
		if c.sent >= at {
			return c.ok
		}
	}
}

// PutIn sets (*m)[k] to v, making the map first if *m is nil (a map kept
// nil until used, under its owner's lock).
func PutIn[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

// LoadString returns the string p points to, "" for none.
func LoadString(p *atomic.Pointer[string]) string {
	if s := p.Load(); s != nil {
		return *s
	}
	return ""
}
