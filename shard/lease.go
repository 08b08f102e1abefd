package shard

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// epoch is the base of the monotonic instants kept in atomics.
var epoch = time.Now()

func mono() int64 { return int64(time.Since(epoch)) }

// heldLease is a lease this instance holds. Every store write on it goes
// through write, one at a time, so renewals and checkpoints never race on
// the counter.
type heldLease struct {
	store  leases.Store
	ttl    time.Duration
	fence  time.Duration // how long after a successful write's send delivery may go on
	mu     sync.Mutex
	lease  leases.Lease
	lost   bool
	expiry atomic.Int64 // mono() after which no record may be handed over
}

func newHeldLease(store leases.Store, l leases.Lease, sentAt int64, ttl, fence time.Duration) *heldLease {
	h := &heldLease{store: store, ttl: ttl, fence: fence, lease: l}
	h.expiry.Store(sentAt + int64(fence))
	return h
}

// valid reports whether records may be handed to handlers: the last
// successful write was sent less than the fence ago.
func (h *heldLease) valid() bool { return mono() < h.expiry.Load() }

// current returns the lease as last written or read.
func (h *heldLease) current() leases.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// errLost means another owner holds the lease now.
var errLost = errors.New("shard: lease lost")

// write runs one store write with the lease as last known. The lease counts
// from the moment the write was sent. On a conflict it re-reads the row: if
// this instance still owns it (someone asked for a handoff, or our own write
// landed with its answer lost) it adopts the row and tries once more;
// otherwise the lease is lost.
func (h *heldLease) write(ctx context.Context, do func(context.Context, leases.Lease) (leases.Lease, error)) (leases.Lease, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost {
		return h.lease, errLost
	}
	for attempt := 0; ; attempt++ {
		sent := mono()
		l, err := do(ctx, h.lease)
		if err == nil {
			h.lease = l
			h.expiry.Store(sent + int64(h.fence))
			return l, nil
		}
		if !errors.Is(err, leases.ErrConflict) || attempt > 0 {
			return h.lease, err
		}
		cur, gerr := h.store.Get(ctx, h.lease.Key)
		if gerr != nil {
			return h.lease, gerr
		}
		if cur.Owner != h.lease.Owner {
			h.lost = true
			h.expiry.Store(0)
			h.lease = cur
			return cur, errLost
		}
		h.lease = cur
	}
}

func (h *heldLease) isLost() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// markLost fences the lease at once.
func (h *heldLease) markLost() {
	h.mu.Lock()
	h.lost = true
	h.mu.Unlock()
	h.expiry.Store(0)
}

func (h *heldLease) renew(ctx context.Context) (leases.Lease, error) {
	return h.write(ctx, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		return h.store.Renew(ctx, l, h.ttl)
	})
}

func (h *heldLease) checkpoint(ctx context.Context, cp leases.Checkpoint) error {
	if h.current().Checkpoint == cp {
		return nil
	}
	_, err := h.write(ctx, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		return h.store.Checkpoint(ctx, l, cp)
	})
	return err
}

func (h *heldLease) applyRewind(ctx context.Context) (leases.Lease, error) {
	return h.write(ctx, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		return h.store.ApplyRewind(ctx, l)
	})
}

func (h *heldLease) release(ctx context.Context, cp leases.Checkpoint) error {
	_, err := h.write(ctx, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		if l.Checkpoint == cp {
			cp = leases.Checkpoint{}
		}
		return h.store.Release(ctx, l, cp)
	})
	if err == nil {
		h.markLost() // no longer ours
	}
	return err
}
