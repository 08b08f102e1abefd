// Package membership is the membership protocol of the lease table: an
// instance's join, its heartbeat loop and its fence, its incarnations,
// and its view of the other members (who is alive, who to time, who
// joined), read from the membership header and rows (docs/lease-protocol.md,
// "Membership, heartbeats and the fence" and "Duplicates").
//
// A Member is one instance's side of it. Its heartbeat loop (Heartbeats)
// alone writes the instance's entry and moves its fence, on its own
// schedule; the instance's round reads the others through Refresh and
// asks Live, Alive and the rest. What the entry publishes of the instance
// (its streams, listing, counts) and what a fence does to its workers come
// from the instance through Host. Its pure parts are below it: the view and
// where an entry goes in internal/roster, what a heartbeat's answer calls
// for in internal/heartbeat, the fence in internal/fence.
package membership

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/internal/heartbeat"
	"github.com/kinesislease/kinesislease/internal/roster"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// DuplicateOwnerError: another process heartbeats with this instance's
// owner id and does not leave.
type DuplicateOwnerError struct {
	Owner       string
	Incarnation string // the other process's
}

// Error says whose owner id is taken, and by which incarnation.
func (e *DuplicateOwnerError) Error() string {
	return fmt.Sprintf("owner %q: another process (incarnation %s) keeps heartbeating with it in the lease table; give each instance its own owner id", e.Owner, e.Incarnation)
}

// Host is what a Member needs of the instance it is the membership of.
// Its methods are called from the heartbeat loop, Join and the Member's
// reads of the membership (Refresh, SameTable), never holding a lock of
// the Member but FenceWorkers (its incarnation lock) and EndedMoved (its
// view's).
type Host interface {
	// Published returns what the instance's entry publishes of it: its
	// Ended, Held, Streams and Listing (the Member fills in the rest).
	Published() leases.Member
	// FenceWorkers stops every worker at once, each row it read becoming
	// an orphan, and returns how many it stopped. It is called holding
	// the lock under which the incarnation changes (see Locked).
	FenceWorkers() int
	// Kick runs a round of the instance now.
	Kick()
	// Reconcile has the instance re-read every row it holds, and the rows
	// it released or read lately, at its next round.
	Reconcile()
	// EndedMoved tells the instance that a member's Ended count moved (a
	// shard ended: its children are in the shard lists now). It is called
	// holding the view's lock: it must not call the Member.
	EndedMoved()
	// HeldStreams returns the keys of the streams the instance holds a row
	// of, or an orphan of.
	HeldStreams() map[string]bool
	// MarkStream marks the stream keyed key as this incarnation, whatever
	// the instance knows of its mark (nil if it no longer subscribes it).
	MarkStream(ctx context.Context, key string) error
	// ForgetMarks forgets every stream mark the instance knows.
	ForgetMarks()
}

// Config configures a Member. Every duration is set (the engine's
// defaults apply before).
type Config struct {
	Owner string            // this instance's owner id
	Store leases.Membership // the lease table's membership rows
	Log   *slog.Logger      // already carrying the owner
	// Heartbeat is the interval between heartbeats (jittered ±10%).
	Heartbeat time.Duration
	// Timeout: a member whose heartbeat is seen unchanged this long on this
	// instance's clock is dead.
	Timeout time.Duration
	// FenceMargin: this instance delivers only while its last successful
	// heartbeat was sent less than Timeout-FenceMargin ago.
	FenceMargin time.Duration
	// ShutdownTimeout bounds the drain on shutdown; a duplicate owner is
	// waited for the longer of it and two timeouts.
	ShutdownTimeout time.Duration
	Host            Host // the instance
}

// Member is one instance's side of the membership protocol. Three kinds of
// goroutine share it: the heartbeat loop (Heartbeats, and Join before it),
// which alone writes the instance's entry and moves its fence; the
// instance's round, which reads the other members (Refresh) and writes
// their entries (AnnounceDead, RemoveStale); and anyone reading the fence
// or the view.
type Member struct {
	cfg  Config
	mem  leases.Membership
	host Host
	log  *slog.Logger

	// mu guards inc, incs and tried. A change of incarnation and the
	// fencing of every worker (Host.FenceWorkers) happen under it, and so
	// does a new worker's check of the incarnation it took its row as
	// (Locked), so that no worker of an incarnation that is over ever
	// starts.
	mu  sync.Mutex
	inc string
	// incs are the latest incarnations this process has been (inc among
	// them), at most maxIncs: a row naming one is this process's own,
	// whatever it knows of it (see Ours). Another process with the same
	// owner id (a restart) is not this one: its rows wait to be found dead.
	incs []string
	// tried are the incarnations this process wrote an entry as (a join,
	// a new incarnation after a fence), at most maxTried: an entry of one
	// that turns up in a membership row (an attempt applied late, after
	// its answer was lost) is this process's own, never another process
	// with the same owner id (see Duplicates).
	tried []string

	fence fence.Fence // Mono() after which nothing may be delivered
	// fencedSince is Mono() when this instance found itself fenced; 0 when
	// it is not. Written by the heartbeat loop.
	fencedSince atomic.Int64

	hb heartbeat.State // the heartbeat loop's own

	viewMu sync.Mutex // guards view, rows, dupSince and endedMoves
	view   *roster.View
	rows   roster.Book
	// dupSince: since when another process with this owner id is seen.
	dupSince map[roster.ID]int64
	// endedMoves: when (Mono) each member's Ended count was last seen
	// moving (EndedMoves).
	endedMoves map[string]int64

	// ownProof is the longest proof bound of this instance's streams
	// (published in its entry, leases.Member.Proof), and fleetProof the
	// longest any entry it read published; both in nanoseconds.
	ownProof, fleetProof atomic.Int64
	storeErr             atomic.Pointer[error] // why the last heartbeat failed, nil once one landed
	started              atomic.Bool           // the first heartbeat landed

	// entrySince is Mono() when the current incarnation's entry was
	// written (its join, or the replacement that began it): it is young
	// (leases.Member.Young) for a timeout from then. oldSeen is Mono() when
	// this instance last read an entry of another member that is not young,
	// in a read of the table as it has been since entrySince (see TableOld).
	entrySince atomic.Int64
	oldSeen    atomic.Int64
	// rejoinSent is Mono() when this instance last began writing its entry
	// again as the same incarnation (rejoin), before the write's send: an
	// answer sent before then that shows the entry may be of the table it
	// vanished with, and a read of the entry after then does not show that
	// the table was not recreated (see SameTable).
	rejoinSent atomic.Int64
	// joinSeen is Mono() when this instance last saw a member it did not
	// know with an entry younger than a timeout: one joining.
	joinSeen atomic.Int64
	check    *syncx.Shared // the reads of SameTable
}

// New returns the Member of an instance that has not joined yet: fenced,
// its incarnation a random suffix alone (see Incarnation).
func New(cfg Config) *Member {
	me := &Member{
		cfg: cfg, mem: cfg.Store, host: cfg.Host, log: cfg.Log, inc: rand.Text()[:10],
		view: roster.NewView(cfg.Owner, cfg.Timeout), rows: roster.NewBook(), dupSince: map[roster.ID]int64{},
		check: syncx.NewShared(),
	}
	me.fence.Store(fence.Fenced)
	me.hb.Earlier = me.ownInc
	return me
}

// newIncarnation returns a new incarnation in row.
func newIncarnation(row int) string { return driver.NewIncarnation(row, rand.Text()[:10]) }

// row returns the membership row this instance heartbeats in.
func (me *Member) row() int { return roster.RowOf(me.Incarnation()) }

// Incarnation returns this process's current incarnation id: before Join
// has joined the membership, the process's random suffix alone (its first
// incarnation is that suffix in the row it joins, "row.suffix").
func (me *Member) Incarnation() string {
	return syncx.Guarded(&me.mu, func() string { return me.inc })
}

// Ours reports whether inc is one of this process's recent incarnations:
// the current one or an earlier one.
func (me *Member) Ours(inc string) bool {
	return syncx.Guarded(&me.mu, func() bool { return slices.Contains(me.incs, inc) })
}

// Locked runs f holding the lock under which the incarnation changes and
// every worker is fenced (Host.FenceWorkers): what f checks of the
// incarnation (IncarnationLocked, OursLocked) and of the fence, and what it
// does then (start a worker), cannot interleave with a fence or a new
// incarnation. f may call no other method of the Member.
func (me *Member) Locked(f func()) { syncx.Guard(&me.mu, f) }

// IncarnationLocked is Incarnation for a caller of Locked.
func (me *Member) IncarnationLocked() string { return me.inc }

// OursLocked is Ours for a caller of Locked.
func (me *Member) OursLocked(inc string) bool { return slices.Contains(me.incs, inc) }

// Fence returns the instance's fence: every lease it holds reads it.
func (me *Member) Fence() *fence.Fence { return &me.fence }

// Fenced reports whether the instance found itself fenced and has not
// come back yet (a new incarnation, or its heartbeats current again):
// nothing may be taken meanwhile.
func (me *Member) Fenced() bool { return me.fencedSince.Load() != 0 }

// StoreErr returns why the last heartbeat failed, if the store failed it
// (nil once one landed).
func (me *Member) StoreErr() error {
	if e := me.storeErr.Load(); e != nil {
		return *e
	}
	return nil
}

// SetProof sets the proof bound the instance's entry publishes
// (leases.Member.Proof): the longest of its streams'.
func (me *Member) SetProof(d time.Duration) { me.ownProof.Store(int64(d)) }

// FleetProof returns the longest proof bound any entry this instance read
// published.
func (me *Member) FleetProof() time.Duration { return time.Duration(me.fleetProof.Load()) }

// EntrySince returns Mono() when the current incarnation's entry was
// written (0 before the join).
func (me *Member) EntrySince() int64 { return me.entrySince.Load() }

// JoinSeen returns Mono() when this instance last saw a member join (an
// entry it did not know, younger than a timeout); 0 if never.
func (me *Member) JoinSeen() int64 { return me.joinSeen.Load() }

// LastJoin returns Mono() of the last join this instance saw, its own
// included: the later of JoinSeen and EntrySince.
func (me *Member) LastJoin() int64 {
	if seen := me.JoinSeen(); seen != 0 {
		return max(seen, me.EntrySince())
	}
	return me.EntrySince()
}

// SettledAt returns Mono() when the table may be known old (TableOld: at
// the latest when the entry has stood a timeout) and the joins settled
// (SettleBeats heartbeats after LastJoin); 0 before the instance joined.
func (me *Member) SettledAt() int64 {
	since := me.EntrySince()
	if since == 0 {
		return 0
	}
	at := me.LastJoin() + int64(SettleBeats*me.cfg.Heartbeat)
	if !me.TableOld() {
		at = max(at, since+int64(me.cfg.Timeout))
	}
	return at
}

// SettleBeats is how many heartbeats a new stream's creator waits after the
// last join it saw (LastJoin) before it creates the stream's rows: a fleet
// started together is all there by then (the first record 2.55 s after Run
// at the defaults, on a table known old), and one started over a few
// seconds, a member every 2 s or less, keeps the creator waiting until its
// last member joined.
const SettleBeats = 2

// RejoinSent returns Mono() when this instance last began writing its
// entry again as the same incarnation after it vanished (0 if never): a
// caller reads it before it judges the table old, and hands it to
// SameTable.
func (me *Member) RejoinSent() int64 { return me.rejoinSent.Load() }
