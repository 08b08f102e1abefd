// Package backoff holds the waits every part of kinesislease shares: a
// sleep that ends with its context, and exponential backoff with jitter.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Sleep waits d, or until ctx ends, and returns ctx's error in that case.
// A d of zero or less returns at once (ctx's error, if it ended).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Delay returns the wait before retry n (1-based): exponential from base,
// capped at ceiling, with full jitter over its upper half (between d/2 and
// d).
func Delay(n int, base, ceiling time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	return d/2 + rand.N(d/2+1)
}

// Jitter returns d ±10%.
func Jitter(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5+1)
}
