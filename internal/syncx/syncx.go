// Package syncx holds the small concurrency helpers the engine and the
// membership protocol share: a lock held for one read or write (Guard,
// Guarded), store calls run a bounded number at once (Bounded), and a
// non-blocking look at a closed channel (Closed).
package syncx

import (
	"context"
	"sync"
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
