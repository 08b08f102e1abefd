package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesislease/kinesislease/internal/membership"
	"github.com/kinesislease/kinesislease/leases"
)

// mono is membership.Mono: the instants kept in atomics, the fence's among
// them, are on its clock.
func mono() int64 { return membership.Mono() }

// heldLease is a lease this instance holds under the membership protocol.
// It may deliver while the instance's fence (shared) has not passed and the
// lease is not lost. Every store write on it goes through write, one at a
// time, so checkpoints, rewinds and the release never race on the counter.
type heldLease struct {
	store leases.Store
	// writing holds a token while a write is in progress: writes go one at
	// a time. A channel rather than mu, which is never held across a store
	// call: a goroutine waiting on a sync.Mutex blocks a testing/synctest
	// bubble's clock, so a slow store call would hang a simulation.
	writing chan struct{}
	mu      sync.Mutex // guards lease, attempted, rewoundByRecreate and rewoundTo
	lease   leases.Lease
	// attempted is the checkpoint last asked for (every record before it
	// acknowledged), whether or not its write landed or was answered: a
	// row recreated after it vanished starts there, not at the last
	// checkpoint whose answer came back.
	attempted leases.Checkpoint
	// rewoundByRecreate: the row vanished while the worker was stopping
	// to apply an operator's rewind, and was recreated at the rewind's
	// position (Group.recreate): applyRewind has nothing left to write.
	rewoundByRecreate bool
	// rewoundTo is that rewind's position, where a recreation of the row
	// whose take's answer was lost left it (resumeAt); set only while
	// rewoundByRecreate, zero if unknown.
	rewoundTo leases.Checkpoint
	// state is leaseHeld, leaseLost (another owner took the lease, or it was
	// fenced) or leaseReleased (this instance released it itself): an
	// atomic, as valid runs on every delivery and takes no lock. It never
	// goes back to leaseHeld.
	state atomic.Int32
	// shared is the instance's fence of the membership protocol: mono()
	// after which none of its leases may deliver.
	shared *membership.Fence
	// vanished is set when a write found the row gone (a table recreated, a
	// row deleted): the Group recreates it from the checkpoint it knows
	// (recreated).
	vanished atomic.Bool
	// back wakes the worker waiting for the row to be recreated.
	back membership.Signal

	// proofSent is mono() when the last successful write of the row was
	// sent. A holder delivers only within proof of it (see deliverable): a
	// row deleted behind its back is noticed at the next write, and an idle
	// shard proves its row with a write (touch) before it delivers again.
	// 0 proof: no such bound.
	proofSent atomic.Int64
	proof     time.Duration
	// onVanish, if set, is told when a write finds the row missing (the
	// Group recreates it at once).
	onVanish func()
}

// The states of a heldLease.
const (
	leaseHeld int32 = iota
	leaseLost
	leaseReleased
)

func (h *heldLease) markVanished() {
	h.vanished.Store(true)
	if h.onVanish != nil {
		h.onVanish()
	}
}

// proved moves the proof of the row to a successful write sent at sent.
func (h *heldLease) proved(sent int64) {
	if sent > h.proofSent.Load() {
		h.proofSent.Store(sent)
	}
}

// recreated says the Group wrote the row again after it vanished, with a
// write sent at sent: the worker may deliver again, and is woken.
func (h *heldLease) recreated(sent int64, atRewind bool) {
	if atRewind {
		h.rewoundAt(leases.Checkpoint{}) // the lease holds the recreated row
	}
	h.proved(sent)
	h.vanished.Store(false)
	h.back.Broadcast()
}

// rewoundAt records that the row was recreated at an operator's rewind
// (see rewoundByRecreate).
func (h *heldLease) rewoundAt(to leases.Checkpoint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rewoundByRecreate = true
	h.attempted = leases.Checkpoint{}     // the row is at the rewind's position: resume there
	h.rewoundTo = cmp.Or(to, h.rewoundTo) // an unknown position keeps the known one
}

// rewoundPending reports whether the row was recreated at an operator's
// rewind that the worker has not applied yet.
func (h *heldLease) rewoundPending() bool {
	return guarded(&h.mu, func() bool { return h.rewoundByRecreate })
}

// errVanishedRow: a release not written, the holder's row vanished (see
// heldLease.release).
var errVanishedRow = errors.New("kinesislease: the lease row vanished; released once it is back")

// errRecoveredByOther: a write not made, the holder's row vanished and
// recreated free by another member (see heldLease.write). It matches
// leases.ErrNotFound.
var errRecoveredByOther = fmt.Errorf("kinesislease: the lease row vanished and was recreated by another member: %w", leases.ErrNotFound)

// errRewoundByRecreate: a checkpoint not written, the row recreated at an
// operator's rewind meanwhile (see heldLease.checkpoint).
var errRewoundByRecreate = errors.New("kinesislease: the row was recreated at an operator's rewind")

// newMemberLease returns l held under the membership protocol: valid while
// the instance's fence (shared) has not passed and the lease is not lost;
// sent is when the write that took it was sent, proof the proof bound.
func newMemberLease(store leases.Store, l leases.Lease, shared *membership.Fence, sent int64, proof time.Duration) *heldLease {
	h := &heldLease{store: store, lease: l, writing: make(chan struct{}, 1), shared: shared, proof: proof}
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

// withinProof reports whether the lease's last successful write was sent
// within the proof bound: a member that did not wait for a recovery of its
// row may hold the row only until then (Group.recreate).
func (h *heldLease) withinProof() bool {
	return h.proof > 0 && mono()-h.proofSent.Load() < int64(h.proof)
}

// touch proves the row still exists and is ours, with a write that changes
// nothing but the counter and token: its checkpoint written again, or, for
// a row with none yet, a TakeAs by its own holder (the store of a lease
// held under the membership protocol is a leases.Membership: the Group's,
// which NewGroup requires to be one).
func (h *heldLease) touch(ctx context.Context) error {
	_, err := h.write(ctx, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		if !l.Checkpoint.IsZero() {
			return h.store.Checkpoint(ctx, l, l.Checkpoint)
		}
		return h.store.(leases.Membership).TakeAs(ctx, l, l.Owner, l.Incarnation)
	})
	return err
}

// valid reports whether records may be handed to handlers: the instance's
// fence has not passed and the lease is not lost.
func (h *heldLease) valid() bool {
	// The shared fence first: markLost happens before a sticky fence moves
	// on, so reading them the other way round could pair a lease not yet
	// marked lost with the new fence.
	return !h.shared.Passed() && !h.isLost()
}

// validFor returns how long the lease stays valid if no heartbeat moves the
// fence: 0 or less if it is not valid now.
func (h *heldLease) validFor() time.Duration {
	left := h.shared.Left()
	if h.isLost() {
		return 0
	}
	return left
}

// current returns the lease as last written or read.
func (h *heldLease) current() leases.Lease {
	return guarded(&h.mu, func() leases.Lease { return h.lease })
}

// errLost means another owner (or another incarnation) holds the lease now.
var errLost = errors.New("shard: lease lost")

// write runs one store write with the lease as last known. No write moves
// the fence: only heartbeats do. On a conflict it re-reads the row: if this
// incarnation still holds it (another writer, such as an operator's rewind,
// bumped the counter, or our own write landed with its answer lost) it
// adopts the row and tries once more; otherwise the lease is lost.
func (h *heldLease) write(ctx context.Context, do func(context.Context, leases.Lease) (leases.Lease, error)) (leases.Lease, error) {
	h.writing <- struct{}{}
	defer func() { <-h.writing }()
	known := h.current()
	if h.isLost() {
		return known, errLost
	}
	for attempt := 0; ; attempt++ {
		sent := mono()
		cur, err := do(ctx, known)
		if err == nil {
			h.proved(sent)
			h.adopt(cur)
			return cur, nil
		}
		if errors.Is(err, leases.ErrConflict) && attempt == 0 {
			cur, err = h.store.Get(ctx, known.Key) // the row the write met
		}
		if errors.Is(err, leases.ErrNotFound) {
			h.markVanished()
		}
		if err != nil {
			return known, err
		}
		if cur.Recovered != "" && cur.Recovered != known.Recovered && (!cur.Held() || h.withinProof()) {
			// The row vanished and another member recreated it free (or
			// holds it for a moment to write what it knows on it, which it
			// may only while this holder's proof runs): this holder takes it
			// back (Group.recreate).
			h.markVanished()
			return known, errRecoveredByOther
		}
		h.adopt(cur)
		if cur.Owner != known.Owner || cur.Incarnation != known.Incarnation {
			h.markLost()
			return cur, errLost
		}
		known = cur
	}
}

// exclusive runs fn with the lease's write token held: no checkpoint,
// rewind or release of the lease runs meanwhile. fn returns the lease as it
// left the row (adopted when fn succeeds).
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
	guard(&h.mu, func() { h.lease = l })
}

// isLost reports whether the lease is no longer this instance's: taken
// over or released.
func (h *heldLease) isLost() bool { return h.state.Load() != leaseHeld }

// takenOver reports whether another owner took the lease from this
// instance, as opposed to this instance releasing it.
func (h *heldLease) takenOver() bool { return h.state.Load() == leaseLost }

// isReleased reports whether this instance released the lease itself.
func (h *heldLease) isReleased() bool { return h.state.Load() == leaseReleased }

// markLost fences the lease at once (a released lease stays released).
func (h *heldLease) markLost() { h.state.CompareAndSwap(leaseHeld, leaseLost) }

func (h *heldLease) checkpoint(ctx context.Context, cp leases.Checkpoint) error {
	h.mu.Lock()
	// A row recreated at an operator's rewind the worker is stopping for
	// (rewound): what it acknowledged before is read again from there, and
	// a checkpoint now would move the row past the rewind, which nothing
	// writes again (applyRewind has nothing to write).
	rewound, same := h.rewoundByRecreate, h.lease.Checkpoint == cp
	if !rewound {
		h.attempted = cp
	}
	h.mu.Unlock()
	if rewound || same {
		return nil
	}
	_, err := h.write(ctx, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		// Again with the write token held: a recreation at a rewind may
		// have come between the check above and the token.
		if h.rewoundPending() {
			return l, errRewoundByRecreate
		}
		return h.store.Checkpoint(ctx, l, cp)
	})
	if errors.Is(err, errRewoundByRecreate) {
		return nil
	}
	return err
}

func (h *heldLease) applyRewind(ctx context.Context) (leases.Lease, error) {
	h.mu.Lock()
	if h.rewoundByRecreate {
		// Applied already: the row vanished and was recreated at the
		// rewind's position, which the lease holds now. (Only then: a
		// lease whose known row lost its RewindTo to an older answer must
		// still write the rewind, or fail and release for the next holder;
		// seed 1722865 left a rewind pending for ten minutes when an empty
		// target was taken for an applied one.)
		h.rewoundByRecreate, h.rewoundTo = false, leases.Checkpoint{}
		h.attempted = leases.Checkpoint{}
		l := h.lease
		h.mu.Unlock()
		return l, nil
	}
	h.mu.Unlock()
	target := h.current().RewindTo
	l, err := h.write(ctx, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		return h.store.ApplyRewind(ctx, l)
	})
	switch {
	case err == nil:
		target = leases.Checkpoint{} // read again from the rewind's position
	case errors.Is(err, errLost) || errors.Is(err, leases.ErrConflict) || errors.Is(err, leases.ErrNotFound):
		return l, err
	}
	// Applied, or the apply may have landed with its answer lost: should the
	// row vanish before the next read, it is recreated at the rewind's
	// position (resumeAt), never past what the operator asked to read again.
	guard(&h.mu, func() { h.attempted = target })
	return l, err
}

// asOrphan is the lease as an orphan keeps it: the row as last known, with
// the checkpoint last asked for (see resumeAt), from which a vanished row
// is recreated. The conditions of writes on it are the counter, owner and
// incarnation, which it keeps.
func (h *heldLease) asOrphan() leases.Lease {
	l := h.current()
	l.Checkpoint = h.resumeAt()
	return l
}

// resumeAt is where a recreated row starts: the checkpoint last asked for,
// if any since the last rewind, else the one last written.
func (h *heldLease) resumeAt() leases.Checkpoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	// First rewoundTo, set only while rewoundByRecreate: recreated at an
	// operator's rewind, the take's answer lost, the row is there, whatever
	// the lease last knew (seed 99110336: the orphan of a hand-over
	// released it at the checkpoint from before the rewind).
	return cmp.Or(h.rewoundTo, h.attempted, h.lease.Checkpoint)
}

func (h *heldLease) release(ctx context.Context, cp leases.Checkpoint) error {
	if h.vanished.Load() {
		// The row vanished, or was recreated and not yet announced (see
		// Group.announceRecreated): the orphan it leaves is released once
		// that is settled.
		return errVanishedRow
	}
	if h.rewoundPending() {
		cp = leases.Checkpoint{} // released at the rewind's position (see checkpoint)
	}
	_, err := h.write(ctx, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		if l.Checkpoint == cp {
			cp = leases.Checkpoint{}
		}
		return h.store.Release(ctx, l, cp)
	})
	if err == nil {
		h.state.Store(leaseReleased) // no longer ours
	}
	return err
}
