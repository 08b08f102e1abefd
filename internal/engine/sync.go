package engine

// What the Group's goroutines share: locks held for one read or write
// (guard, guarded), the round's store calls run a bounded number at once
// (bounded), a worker's end (closed), and the monotonic clock (mono).

import (
	"context"
	"sync"

	"github.com/kinesislease/kinesislease/internal/membership"
)

// guard runs f holding mu.
func guard(mu sync.Locker, f func()) {
	mu.Lock()
	defer mu.Unlock()
	f()
}

// guarded returns what f reads holding mu.
func guarded[T any](mu sync.Locker, f func() T) T {
	mu.Lock()
	defer mu.Unlock()
	return f()
}

// storeConcurrency bounds the concurrent store calls of a round (row
// reads, takes, releases).
const storeConcurrency = 16

// bounded runs fn(0..n-1), at most storeConcurrency at once, until ctx
// ends, and waits for them.
func bounded(ctx context.Context, n int, fn func(i int)) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, storeConcurrency)
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

// closed reports whether ch is closed: a worker's done.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// mono is membership.Mono: the instants kept in atomics, the fence's among
// them, are on its clock.
func mono() int64 { return membership.Mono() }
