package harness

import (
	"context"
	"errors"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// Watch runs a run's watcher in a goroutine of its own until stop is called
// or ctx is done: poll every interval, and every second a progress line
// from row on out. stop returns once the watcher has; calling it again does
// nothing.
func Watch(ctx context.Context, out *Progress, every time.Duration, poll func(context.Context), row func() string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pollTick := time.NewTicker(every)
		defer pollTick.Stop()
		rowTick := time.NewTicker(time.Second)
		defer rowTick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-pollTick.C:
				poll(ctx)
			case <-rowTick.C:
				out.Printf("%s\n", row())
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Poll calls failed, then check, every interval until failed returns an
// error (the run failed: see Fleet.Died), check reports done or an error, or
// ctx is done, and returns the error.
func Poll(ctx context.Context, every time.Duration, failed func() error, check func() (done bool, err error)) error {
	for {
		if err := failed(); err != nil {
			return err
		}
		if done, err := check(); done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// ReadRows reads the lease table's row of each of the shards of stream, in
// order, and hands it to fn; a shard without a row is skipped.
func ReadRows(ctx context.Context, store leases.Store, stream string, shards []string, fn func(shard string, l leases.Lease)) error {
	for _, s := range shards {
		l, err := store.Get(ctx, leases.Key{Stream: stream, Shard: s})
		if errors.Is(err, leases.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		fn(s, l)
	}
	return nil
}
