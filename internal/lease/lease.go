// Package lease is a shard's lease as the instance that holds it under
// the membership protocol sees it (Held): the fenced single-writer of the
// row's checkpoint, release and rewind, which delivers only while the
// instance's fence (fence.Fence) has not passed and its last write
// proves the row. It decides nothing about rows it does not hold: the
// engine takes, recreates and releases rows, and a shard's worker
// checkpoints and releases through its Held.
package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesislease/kinesislease/internal/balance"
	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

// Held is a lease this instance holds under the membership protocol.
// It may deliver while the instance's fence (shared) has not passed and the
// lease is not lost. Every store write on it goes through write, one at a
// time, so checkpoints, rewinds and the release never race on the counter.
// Its methods may be called from any goroutine.
type Held struct {
	store leases.Store
	// writing holds a token while a write is in progress: writes go one at
	// a time. A channel rather than mu, which is never held across a store
	// call: a goroutine waiting on a sync.Mutex blocks a testing/synctest
	// bubble's clock, so a slow store call would hang a simulation.
	writing chan struct{}
	mu      sync.Mutex // guards lease, attempted, pendingRewind, rewoundByRecreate and rewoundTo
	lease   leases.Lease
	// pendingRewind is the position of an operator's rewind an answer or a
	// read showed pending on the row (RewindTo), until this lease applies
	// it: a recreation of the row starts there (ResumeAt), whatever was
	// checkpointed or attempted before, and whatever a later read of the
	// row as another left it shows (seed 95880482: a holder paused after
	// a checkpoint's answer showed the rewind, its ApplyRewind meeting the
	// row another had taken and rewound, kept its own checkpoint from
	// before the rewind and recreated the row there after the table was
	// dropped).
	pendingRewind leases.Checkpoint
	// attempted is the checkpoint last asked for (every record before it
	// acknowledged), whether or not its write landed or was answered: a
	// row recreated after it vanished starts there, not at the last
	// checkpoint whose answer came back.
	attempted leases.Checkpoint
	// rewoundByRecreate: the row vanished while the worker was stopping
	// to apply an operator's rewind, and was recreated at the rewind's
	// position (the engine's recreate): ApplyRewind has nothing left to
	// write.
	rewoundByRecreate bool
	// rewoundTo is that rewind's position, where a recreation of the row
	// whose take's answer was lost left it (ResumeAt); set only while
	// rewoundByRecreate, zero if unknown.
	rewoundTo leases.Checkpoint
	// state is leaseHeld, leaseLost (another owner took the lease, or it was
	// fenced) or leaseReleased (this instance released it itself): an
	// atomic, as Valid runs on every delivery and takes no lock. It never
	// goes back to leaseHeld.
	state atomic.Int32
	// shared is the instance's fence of the membership protocol: the
	// fence.Mono() after which none of its leases may deliver.
	shared *fence.Fence
	// vanished is set when a write found the row gone (a table recreated, a
	// row deleted): the engine recreates it from the checkpoint it knows
	// (Recreated).
	vanished atomic.Bool
	// back wakes the worker waiting for the row to be recreated.
	back syncx.Signal

	// proofSent is fence.Mono() when the last successful write of the
	// row was sent. A holder delivers only within proof of it (see
	// Deliverable): a row deleted behind its back is noticed at the next
	// write, and an idle shard proves its row with a write (Touch) before
	// it delivers again.
	// 0 proof: no such bound.
	proofSent atomic.Int64
	proof     time.Duration
	// onVanish, if set, is told when a write finds the row missing (the
	// engine recreates it at once).
	onVanish func()
	// meter measures the shard's throughput, from the row's as taken
	// (its last holder's measure): the checkpoints and the release write
	// it on the row (leases.Lease.Throughput).
	meter *balance.Meter
}

// Meter returns the shard's throughput meter (nil if none).
func (h *Held) Meter() *balance.Meter { return h.meter }

// measured returns l with the throughput as measured now, if measured.
func (h *Held) measured(l leases.Lease) leases.Lease {
	if h.meter != nil {
		l.Throughput = h.meter.Rate(time.Now())
	}
	return l
}

// The states of a Held.
const (
	leaseHeld int32 = iota
	leaseLost
	leaseReleased
)

// MarkVanished records that a write found the row missing, and tells
// Config.OnVanish.
func (h *Held) MarkVanished() {
	h.vanished.Store(true)
	if h.onVanish != nil {
		h.onVanish()
	}
}

// proved moves the proof of the row to a successful write sent at sent.
func (h *Held) proved(sent int64) {
	if sent > h.proofSent.Load() {
		h.proofSent.Store(sent)
	}
}

// Recreated says the engine wrote the row again after it vanished, with a
// write sent at sent (fence.Mono()), at an operator's rewind if
// atRewind: the worker may deliver again, and is woken.
func (h *Held) Recreated(sent int64, atRewind bool) {
	if atRewind {
		h.RewoundAt(leases.Checkpoint{}) // the lease holds the recreated row
	}
	h.proved(sent)
	h.vanished.Store(false)
	h.back.Broadcast()
}

// RewoundAt records that the row was recreated at an operator's rewind
// (see rewoundByRecreate).
func (h *Held) RewoundAt(to leases.Checkpoint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rewoundByRecreate = true
	h.attempted = leases.Checkpoint{}     // the row is at the rewind's position: resume there
	h.rewoundTo = cmp.Or(to, h.rewoundTo) // an unknown position keeps the known one
}

// RewoundPending reports whether the row was recreated at an operator's
// rewind that the worker has not applied yet.
func (h *Held) RewoundPending() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rewoundByRecreate
}

// Vanished reports whether the row was found missing and not recreated
// since (see Recreated).
func (h *Held) Vanished() bool { return h.vanished.Load() }

// SetVanished records whether the row is missing, telling no one: the
// caller recreates it (MarkVanished tells Config.OnVanish).
func (h *Held) SetVanished(v bool) { h.vanished.Store(v) }

// Moved returns a channel that the next move of the instance's fence
// closes, and one that the next Recreated closes. A waiter takes them
// before it checks Deliverable, then waits on them (see syncx.Signal).
func (h *Held) Moved() (fence, recreated <-chan struct{}) {
	return h.shared.Moved(), h.back.Wait()
}

// errVanishedRow: a release not written, the holder's row vanished (see
// Held.Release).
var errVanishedRow = errors.New("kinesislease: the lease row vanished; released once it is back")

// errRecoveredByOther: a write not made, the holder's row vanished and
// recreated free by another member (see Held.write). It matches
// leases.ErrNotFound.
var errRecoveredByOther = fmt.Errorf("kinesislease: the lease row vanished and was recreated by another member: %w", leases.ErrNotFound)

// errRewoundByRecreate: a checkpoint not written, the row recreated at an
// operator's rewind meanwhile (see Held.Checkpoint).
var errRewoundByRecreate = errors.New("kinesislease: the row was recreated at an operator's rewind")

// Config is what a Held is made of.
type Config struct {
	// Store writes the row. Touch needs it to be a leases.Membership.
	Store leases.Store
	// Lease is the row as the write that took it left it.
	Lease leases.Lease
	// Fence is the instance's fence, shared by every lease it holds.
	Fence *fence.Fence
	// Sent is when the write that took the row was sent
	// (fence.Mono()).
	Sent int64
	// Proof bounds how long after its last successful write the lease
	// may deliver (see Deliverable); 0: no such bound.
	Proof time.Duration
	// OnVanish, if set, is told when a write finds the row missing.
	OnVanish func()
}

// New returns cfg.Lease held under the membership protocol: valid while
// the instance's fence has not passed and the lease is not lost.
func New(cfg Config) *Held {
	h := &Held{store: cfg.Store, lease: cfg.Lease, writing: make(chan struct{}, 1), shared: cfg.Fence, proof: cfg.Proof, onVanish: cfg.OnVanish,
		pendingRewind: cfg.Lease.RewindTo, meter: balance.NewMeter(cfg.Lease.Throughput, time.Now())}
	h.proofSent.Store(cfg.Sent)
	return h
}

// Deliverable reports whether a record may be handed to a handler now: the
// lease is valid, its row was not found missing, and its last successful
// write was sent within the proof bound. proven is false when only that
// bound stands in the way: a touch may restore it.
func (h *Held) Deliverable() (ok, proven bool) {
	if !h.Valid() || h.vanished.Load() {
		return false, true
	}
	if h.proof > 0 && fence.Mono()-h.proofSent.Load() >= int64(h.proof) {
		return false, false
	}
	return true, true
}

// WithinProof reports whether the lease's last successful write was sent
// within the proof bound: a member that did not wait for a recovery of its
// row may hold the row only until then (the engine's recreate).
func (h *Held) WithinProof() bool {
	return h.proof > 0 && fence.Mono()-h.proofSent.Load() < int64(h.proof)
}

// Touch proves the row still exists and is ours, with a write that changes
// nothing but the counter and token: its checkpoint written again, or, for
// a row with none yet, a TakeAs by its own holder (the store of a lease
// held under the membership protocol is a leases.Membership: the engine's
// Group requires its store to be one).
func (h *Held) Touch(ctx context.Context) error {
	_, err := h.write(ctx, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		if !l.Checkpoint.IsZero() {
			return h.store.Checkpoint(ctx, l, l.Checkpoint)
		}
		return h.store.(leases.Membership).TakeAs(ctx, l, l.Owner, l.Incarnation)
	})
	return err
}

// Valid reports whether records may be handed to handlers: the instance's
// fence has not passed and the lease is not lost.
func (h *Held) Valid() bool {
	// The shared fence first: MarkLost happens before a sticky fence moves
	// on, so reading them the other way round could pair a lease not yet
	// marked lost with the new fence.
	return !h.shared.Passed() && !h.IsLost()
}

// ValidFor returns how long the lease stays valid if no heartbeat moves the
// fence: 0 or less if it is not valid now.
func (h *Held) ValidFor() time.Duration {
	left := h.shared.Left()
	if h.IsLost() {
		return 0
	}
	return left
}

// Current returns the lease as last written or read.
func (h *Held) Current() leases.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// ErrLost means another owner (or another incarnation) holds the lease now.
var ErrLost = errors.New("shard: lease lost")

// write runs one store write with the lease as last known. No write moves
// the fence: only heartbeats do. On a conflict it re-reads the row: if this
// incarnation still holds it (another writer, such as an operator's rewind,
// bumped the counter, or our own write landed with its answer lost) it
// adopts the row and tries once more; otherwise the lease is lost.
func (h *Held) write(ctx context.Context, do func(context.Context, leases.Lease) (leases.Lease, error)) (leases.Lease, error) {
	h.writing <- struct{}{}
	defer func() { <-h.writing }()
	known := h.Current()
	if h.IsLost() {
		return known, ErrLost
	}
	for attempt := 0; ; attempt++ {
		sent := fence.Mono()
		cur, err := do(ctx, known)
		if err == nil {
			h.proved(sent)
			h.Adopt(cur)
			return cur, nil
		}
		if errors.Is(err, leases.ErrConflict) && attempt == 0 {
			cur, err = h.store.Get(ctx, known.Key) // the row the write met
		}
		if errors.Is(err, leases.ErrNotFound) {
			h.MarkVanished()
		}
		if err != nil {
			return known, err
		}
		if cur.Recovered != "" && cur.Recovered != known.Recovered && (!cur.Held() || h.WithinProof()) {
			// The row vanished and another member recreated it free (or
			// holds it for a moment to write what it knows on it, which it
			// may only while this holder's proof runs): this holder takes it
			// back (the engine's recreate).
			h.MarkVanished()
			return known, errRecoveredByOther
		}
		h.Adopt(cur)
		if cur.Owner != known.Owner || cur.Incarnation != known.Incarnation {
			h.MarkLost()
			return cur, ErrLost
		}
		known = cur
	}
}

// Exclusive runs fn with the lease's write token held: no checkpoint,
// rewind or release of the lease runs meanwhile. fn returns the lease as it
// left the row (adopted when fn succeeds).
func (h *Held) Exclusive(fn func(known leases.Lease) (leases.Lease, error)) error {
	h.writing <- struct{}{}
	defer func() { <-h.writing }()
	l, err := fn(h.Current())
	if err == nil {
		h.Adopt(l)
	}
	return err
}

// Adopt makes l, read again from the store and still ours, the lease as
// last known.
func (h *Held) Adopt(l leases.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lease = l
	if !l.RewindTo.IsZero() {
		h.pendingRewind = l.RewindTo
	}
}

// IsLost reports whether the lease is no longer this instance's: taken
// over or released.
func (h *Held) IsLost() bool { return h.state.Load() != leaseHeld }

// TakenOver reports whether another owner took the lease from this
// instance, as opposed to this instance releasing it.
func (h *Held) TakenOver() bool { return h.state.Load() == leaseLost }

// IsReleased reports whether this instance released the lease itself.
func (h *Held) IsReleased() bool { return h.state.Load() == leaseReleased }

// MarkLost fences the lease at once (a released lease stays released).
func (h *Held) MarkLost() { h.state.CompareAndSwap(leaseHeld, leaseLost) }

// Checkpoint writes cp, every record before it acknowledged, as the row's
// checkpoint, unless the row already has it or was recreated at an
// operator's rewind the worker has not applied yet (then it writes
// nothing). ErrLost: another owner holds the lease.
func (h *Held) Checkpoint(ctx context.Context, cp leases.Checkpoint) error {
	h.mu.Lock()
	// A row recreated at an operator's rewind the worker is stopping for
	// (rewound): what it acknowledged before is read again from there, and
	// a checkpoint now would move the row past the rewind, which nothing
	// writes again (ApplyRewind has nothing to write).
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
		if h.RewoundPending() {
			return l, errRewoundByRecreate
		}
		return h.store.Checkpoint(ctx, h.measured(l), cp)
	})
	if errors.Is(err, errRewoundByRecreate) {
		return nil
	}
	return err
}

// ApplyRewind moves the row's checkpoint to the operator's pending rewind
// (leases.Store.ApplyRewind), keeping the lease, and returns the row as it
// left it; a row recreated at the rewind has it applied already, and is
// not written. After an error other than ErrLost, a conflict or a missing
// row, the rewind may have landed unanswered: a recreation of the row
// starts at the rewind's position (ResumeAt).
func (h *Held) ApplyRewind(ctx context.Context) (leases.Lease, error) {
	h.mu.Lock()
	if h.rewoundByRecreate {
		// Applied already: the row vanished and was recreated at the
		// rewind's position, which the lease holds now. (Only then: a
		// lease whose known row lost its RewindTo to an older answer must
		// still write the rewind, or fail and release for the next holder;
		// seed 1722865 left a rewind pending for ten minutes when an empty
		// target was taken for an applied one.)
		h.rewoundByRecreate, h.rewoundTo = false, leases.Checkpoint{}
		h.attempted, h.pendingRewind = leases.Checkpoint{}, leases.Checkpoint{}
		l := h.lease
		h.mu.Unlock()
		return l, nil
	}
	h.mu.Unlock()
	target := h.Current().RewindTo
	l, err := h.write(ctx, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		return h.store.ApplyRewind(ctx, l)
	})
	switch {
	case err == nil:
		target = leases.Checkpoint{} // read again from the rewind's position
	case errors.Is(err, ErrLost) || errors.Is(err, leases.ErrConflict) || errors.Is(err, leases.ErrNotFound):
		return l, err
	}
	// Applied, or the apply may have landed with its answer lost: should the
	// row vanish before the next read, it is recreated at the rewind's
	// position (ResumeAt), never past what the operator asked to read again.
	h.mu.Lock()
	h.attempted = target
	if err == nil {
		h.pendingRewind = leases.Checkpoint{} // applied: what comes after it is read after it
	}
	h.mu.Unlock()
	return l, err
}

// AsOrphan is the lease as an orphan keeps it: the row as last known, with
// the checkpoint last asked for (see ResumeAt), from which a vanished row
// is recreated. The conditions of writes on it are the counter, owner and
// incarnation, which it keeps.
func (h *Held) AsOrphan() leases.Lease {
	l := h.Current()
	l.Checkpoint = h.ResumeAt()
	return l
}

// ResumeAt is where a recreated row starts: the checkpoint last asked for,
// if any since the last rewind, else the one last written.
func (h *Held) ResumeAt() leases.Checkpoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	// First rewoundTo, set only while rewoundByRecreate: recreated at an
	// operator's rewind, the take's answer lost, the row is there, whatever
	// the lease last knew (seed 99110336: the orphan of a hand-over
	// released it at the checkpoint from before the rewind).
	return cmp.Or(h.rewoundTo, h.pendingRewind, h.attempted, h.lease.Checkpoint)
}

// Release lets the row go with final checkpoint cp (none if cp is zero or
// the row has it already; none either if the row was recreated at a rewind
// not applied yet). Once it lands the lease is released (IsReleased); a
// row found vanished is not written (errVanishedRow), its orphan released
// once it is back.
func (h *Held) Release(ctx context.Context, cp leases.Checkpoint) error {
	if h.vanished.Load() {
		// The row vanished, or was recreated and not yet announced (see
		// the engine's announceRecreated): the orphan it leaves is released
		// once that is settled.
		return errVanishedRow
	}
	if h.RewoundPending() {
		cp = leases.Checkpoint{} // released at the rewind's position (see Checkpoint)
	}
	_, err := h.write(ctx, func(ctx context.Context, l leases.Lease) (leases.Lease, error) {
		if l.Checkpoint == cp {
			cp = leases.Checkpoint{}
		}
		return h.store.Release(ctx, h.measured(l), cp)
	})
	if err == nil {
		h.state.Store(leaseReleased) // no longer ours
	}
	return err
}
