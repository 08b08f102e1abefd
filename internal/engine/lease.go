package engine

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// epoch is the base of the monotonic instants kept in atomics.
var epoch = time.Now()

func mono() int64 { return int64(time.Since(epoch)) }

// fenced is the expiry of a lease no longer ours: before every mono(),
// which is negative inside a testing/synctest bubble (its clock starts in
// 2000, before epoch), so 0 would not do.
const fenced = math.MinInt64

// heldLease is a lease this instance holds. Every store write on it goes
// through write, one at a time, so renewals and checkpoints never race on
// the counter.
type heldLease struct {
	store leases.Store
	ttl   time.Duration
	fence time.Duration // how long after a successful write's send delivery may go on
	// writing holds a token while a write is in progress: writes go one at
	// a time. A channel rather than mu, which is never held across a store
	// call: a goroutine waiting on a sync.Mutex blocks a testing/synctest
	// bubble's clock, so a slow store call would hang a simulation.
	writing chan struct{}
	mu      sync.Mutex // guards lease, lost and released
	lease   leases.Lease
	lost    bool
	expiry  atomic.Int64 // mono() after which no record may be handed over
	// shared, if set, is the instance's fence of the membership protocol
	// (mono() after which none of its leases may deliver), checked beside
	// expiry.
	shared *atomic.Int64
	// vanished is set when a write found the row gone (a table recreated, a
	// row deleted): the membership protocol recreates it from the
	// checkpoint it knows.
	vanished atomic.Bool

	// released: this instance released the lease itself (lost is then set
	// too, to fence further writes); another owner did not take it.
	released bool

	// proofSent is mono() when the last successful write of the row was
	// sent. Under the membership protocol a holder delivers only within
	// proof of it (see deliverable): a row deleted behind its back is
	// noticed at the next write, and an idle shard proves its row with a
	// write (touch) before it delivers again. 0 proof: no such bound.
	proofSent atomic.Int64
	proof     time.Duration
}

func newHeldLease(store leases.Store, l leases.Lease, sentAt int64, ttl, fence time.Duration) *heldLease {
	h := &heldLease{store: store, ttl: ttl, fence: fence, lease: l, writing: make(chan struct{}, 1)}
	h.expiry.Store(sentAt + int64(fence))
	return h
}

// valid reports whether records may be handed to handlers: the last
// successful write was sent less than the fence ago.
func (h *heldLease) valid() bool {
	now := mono()
	// The shared fence first: markLost (expiry) happens before a sticky
	// fence moves on, so reading them the other way round could pair an old
	// expiry with a new fence.
	if h.shared != nil && now >= h.shared.Load() {
		return false
	}
	return now < h.expiry.Load()
}

// validFor returns how long the lease stays valid if no write moves its
// fence: 0 or less if it is not valid now.
func (h *heldLease) validFor() time.Duration {
	now := mono()
	left := h.expiry.Load() - now
	if h.shared != nil {
		left = min(left, h.shared.Load()-now)
	}
	return time.Duration(left)
}

// newMemberLease returns l held under the membership protocol: valid while
// the instance's fence (shared) has not passed and the lease is not lost.
func newMemberLease(store leases.Store, l leases.Lease, shared *atomic.Int64, sent int64, proof time.Duration) *heldLease {
	h := &heldLease{store: store, lease: l, writing: make(chan struct{}, 1), shared: shared, proof: proof}
	h.expiry.Store(math.MaxInt64)
	h.proofSent.Store(sent)
	return h
}

// deliverable reports whether a record may be handed to a handler now: the
// lease is valid, its row was not found missing, and its last successful
// write was sent within the proof bound. proven is false when only that
// bound stands in the way: a touch may restore it.
func (h *heldLease) deliverable() (ok, proven bool) {
	if !h.valid() || h.vanished.Load() {
		return false, true
	}
	if h.proof > 0 && mono()-h.proofSent.Load() >= int64(h.proof) {
		return false, false
	}
	return true, true
}

// touch proves the row still exists and is ours, with a write that changes
// nothing but the counter and token (TakeAs of its own holder).
func (h *heldLease) touch(ctx context.Context) error {
	mem, ok := h.store.(leases.Membership)
	if !ok {
		return nil
	}
	_, err := h.write(ctx, false, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		return mem.TakeAs(ctx, l, l.Owner, l.Incarnation)
	})
	return err
}

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
//
// Only a renewal (extend) moves the fence: it is the write that changes
// expires_at, which takers watch (see Coordinator). A checkpoint does not,
// so a taker never acts while the holder still trusts a write the taker
// could not see as a sign of life. Nor does a renewal that left expires_at
// as it was (the holder's wall clock stood still): takers cannot tell it
// from no renewal at all.
func (h *heldLease) write(ctx context.Context, extend bool, do func(context.Context, leases.Lease) (leases.Lease, error)) (leases.Lease, error) {
	h.writing <- struct{}{}
	defer func() { <-h.writing }()
	h.mu.Lock()
	known, lost := h.lease, h.lost
	h.mu.Unlock()
	if lost {
		return known, errLost
	}
	for attempt := 0; ; attempt++ {
		sent := mono()
		l, err := do(ctx, known)
		if err == nil {
			if sent > h.proofSent.Load() {
				h.proofSent.Store(sent)
			}
			h.mu.Lock()
			h.lease = l
			if extend && !h.lost && !l.ExpiresAt.Equal(known.ExpiresAt) {
				h.expiry.Store(sent + int64(h.fence))
			}
			h.mu.Unlock()
			return l, nil
		}
		if errors.Is(err, leases.ErrNotFound) {
			h.vanished.Store(true)
		}
		if !errors.Is(err, leases.ErrConflict) || attempt > 0 {
			return known, err
		}
		cur, gerr := h.store.Get(ctx, known.Key)
		if gerr != nil {
			if errors.Is(gerr, leases.ErrNotFound) {
				h.vanished.Store(true)
			}
			return known, gerr
		}
		h.mu.Lock()
		h.lease = cur
		if cur.Owner != known.Owner || cur.Incarnation != known.Incarnation {
			h.lost = true
			h.expiry.Store(fenced)
			h.mu.Unlock()
			return cur, errLost
		}
		h.mu.Unlock()
		known = cur
	}
}

// exclusive runs fn with the lease's write token held: no renewal,
// checkpoint or release of the lease runs meanwhile. fn returns the lease as
// it left the row (adopted when fn succeeds).
func (h *heldLease) exclusive(fn func(known leases.Lease) (leases.Lease, error)) error {
	h.writing <- struct{}{}
	defer func() { <-h.writing }()
	l, err := fn(h.current())
	if err == nil {
		h.adopt(l)
	}
	return err
}

// adopt makes l, read again from the store and still ours, the lease as
// last known.
func (h *heldLease) adopt(l leases.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lease = l
}

func (h *heldLease) isLost() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// takenOver reports whether another owner took the lease from this
// instance, as opposed to this instance releasing it.
func (h *heldLease) takenOver() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost && !h.released
}

// isReleased reports whether this instance released the lease itself.
func (h *heldLease) isReleased() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.released
}

// markLost fences the lease at once.
func (h *heldLease) markLost() {
	h.mu.Lock()
	h.lost = true
	h.mu.Unlock()
	h.expiry.Store(fenced)
}

func (h *heldLease) renew(ctx context.Context) (leases.Lease, error) {
	return h.write(ctx, true, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		return h.store.Renew(ctx, l, h.ttl)
	})
}

func (h *heldLease) checkpoint(ctx context.Context, cp leases.Checkpoint) error {
	if h.current().Checkpoint == cp {
		return nil
	}
	_, err := h.write(ctx, false, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		return h.store.Checkpoint(ctx, l, cp)
	})
	return err
}

func (h *heldLease) applyRewind(ctx context.Context) (leases.Lease, error) {
	return h.write(ctx, false, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		return h.store.ApplyRewind(ctx, l)
	})
}

func (h *heldLease) release(ctx context.Context, cp leases.Checkpoint) error {
	_, err := h.write(ctx, false, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		if l.Checkpoint == cp {
			cp = leases.Checkpoint{}
		}
		return h.store.Release(ctx, l, cp)
	})
	if err == nil {
		h.mu.Lock()
		h.released = true
		h.mu.Unlock()
		h.markLost() // no longer ours
	}
	return err
}
