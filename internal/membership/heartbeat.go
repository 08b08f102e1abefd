package membership

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/internal/heartbeat"
	"github.com/kinesislease/kinesislease/internal/roster"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

// entryDeadline is fence.HeartbeatDeadline for a write of this incarnation's
// entry sent now.
func (me *Member) entryDeadline() time.Duration {
	return fence.HeartbeatDeadline(fence.Mono(), me.fence.Load(), me.cfg.Heartbeat)
}

// Heartbeats is the heartbeat loop: a heartbeat every interval (half an
// interval after a failure, so that two failures in a row do not fence),
// whatever the rest of the instance is doing, until ctx ends. It returns a
// *DuplicateOwnerError when another process heartbeats with its owner id.
// It starts once Join returned, and runs through the instance's drain.
func (me *Member) Heartbeats(ctx context.Context) error {
	for {
		wait := backoff.Jitter(me.cfg.Heartbeat)
		if me.hb.Failed {
			wait = me.cfg.Heartbeat / 2
		}
		if backoff.Sleep(ctx, wait) != nil {
			return nil
		}
		if err := me.beat(ctx); err != nil {
			return err
		}
	}
}

// beat is one turn of the heartbeat loop: a heartbeat, what its result
// calls for, and the fence's bookkeeping.
func (me *Member) beat(ctx context.Context) error {
	err := me.heartbeat(ctx)
	act, cur := heartbeat.Decide(err, &me.hb, me.Incarnation())
	me.hb.Failed = act != heartbeat.Landed
	switch act {
	case heartbeat.Landed:
		me.storeErr.Store(nil)
	case heartbeat.Notice:
		// Someone bumped our notice (an operator's rewind): look at the held
		// rows now, and heartbeat with the notice as it is.
		me.hb.Notice = cur.Notice
		me.host.Reconcile()
		me.host.Kick() // now, not at the next round: a rewind waits a heartbeat at most
		err = me.heartbeat(ctx)
		me.hb.Failed = err != nil
	case heartbeat.FoundDead:
		// Someone found this incarnation dead and marked it leaving: it may
		// never come back (a taker may act on that view for a while). All is
		// lost; go on as a new incarnation.
		me.fenceAll("another member found this incarnation dead")
		me.fence.Store(fence.Fenced)
		fallthrough
	case heartbeat.OurAttempt:
		// Our entry is one of the new incarnations we tried (its answer was
		// lost): never go on as it; replace it with yet another.
		me.hb.Failed = !me.reincarnate(ctx, cur)
		return nil
	case heartbeat.Replaced:
		// Another incarnation of this owner stands in our entry: another
		// process with this owner id, or an earlier process's join or
		// replacement applied late (seed 95011353: a predecessor's join
		// landed 11 s late on a recreated table). Our fence cannot move:
		// stop delivering, and join again as a starting process does. An
		// entry that keeps heartbeating is another process (join returns
		// a *DuplicateOwnerError after its wait); one that stands still for
		// a timeout is dead and taken over as a new incarnation.
		me.fenceAll("another incarnation stands in this instance's membership entry")
		me.fence.Store(fence.Fenced)
		old := me.Incarnation()
		if err := me.Join(ctx); err != nil {
			return err
		}
		me.hb.NeedNewInc, me.hb.Attempted, me.hb.Notice, me.hb.Failed = false, nil, 0, false
		me.markDead(leases.Member{Owner: me.cfg.Owner, Incarnation: old})
		return nil
	case heartbeat.Missing:
		// Our entry was removed (found stale for three timeouts: our fence
		// passed long ago) or the table was recreated empty: write it
		// again, as the same incarnation if it may go on.
		me.rejoin(ctx)
		return nil
	case heartbeat.Misconfigured:
		// Running, the table went missing or access was withdrawn: fence
		// (the fence passes on its own), report, and keep trying.
		me.storeErr.Store(&err)
		me.log.ErrorContext(ctx, "kinesislease: the lease store cannot be written; delivery stops at the fence and resumes once it works again", "err", err)
	default:
		if ctx.Err() == nil {
			me.log.WarnContext(ctx, "kinesislease: heartbeat failed", "err", err)
			me.storeErr.Store(&err)
		}
	}
	if err == nil && me.hb.NeedNewInc {
		me.hb.Failed = !me.reincarnate(ctx, leases.Member{})
	}
	if !me.hb.Failed && !me.hb.NeedNewInc && !me.fence.Passed() && me.fencedSince.Swap(0) != 0 {
		me.log.InfoContext(ctx, "kinesislease: heartbeat current again; taking leases afresh", "incarnation", me.Incarnation())
	}
	if me.fence.Passed() && me.fence.Load() != fence.Fenced {
		// Heartbeats failed past the fence (or the incarnation adopted
		// unanswered had none answered in time): others may find it dead,
		// so it is over, whatever it holds.
		me.fenceAll("heartbeats failed past the fence")
	}
	return nil
}

// heartbeat advances this incarnation's heartbeat. Its deadline is
// entryDeadline: the SDK's own retries fit inside it, and the library
// does not retry (the next turn does).
func (me *Member) heartbeat(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, me.entryDeadline())
	defer cancel()
	// Every attempt writes a new value: an attempt whose answer was lost
	// may have landed, and a next attempt writing the same value would move
	// the holder's fence while takers see no change.
	me.hb.Beat++
	inc := me.Incarnation()
	m := me.entry(inc, me.hb.Beat, me.hb.Notice)
	m.Young = time.Duration(fence.Mono()-me.entrySince.Load()) < me.cfg.Timeout
	// A fenced incarnation says so: its leases may be taken at once. Only
	// the old incarnation: once the instance goes on as a new one, that one
	// holds what it takes afresh.
	m.Leaving = me.hb.NeedNewInc
	sentAt := time.Now()
	sent := fence.MonoAt(sentAt)
	rows, err := me.mem.Heartbeat(hctx, roster.RowOf(inc), m)
	if err != nil {
		return err
	}
	if !m.Leaving {
		// A leaving heartbeat moves no fence: that incarnation is over, and
		// nothing may be taken or delivered as it (takers may take its rows
		// at once).
		me.extendFence(sentAt)
	}
	me.observe(roster.RowOf(inc), rows, sent, fence.Mono())
	return nil
}

// extendFence moves the fence to a heartbeat sent at sentAt. The fence is
// sticky: if it had passed before the heartbeat was sent (a pause, failed
// heartbeats, the machine suspended: see fence), others may have taken every lease already, so each is lost
// before the fence moves; the instance reads again only what it takes
// afresh, as a new incarnation.
func (me *Member) extendFence(sentAt time.Time) {
	sent := fence.MonoAt(sentAt)
	if fence.PassedBefore(me.fence.Load(), sent) || (me.fence.Load() != fence.Fenced && me.fence.PassedAt(sent, sentAt.UnixNano())) {
		me.fenceAll("the fence passed before this heartbeat was sent")
	}
	me.fence.Store(fence.After(sent, me.cfg.Timeout, me.cfg.FenceMargin))
}

// fenceAll stops every worker at once: no lease of this incarnation may be
// trusted any more. Each row becomes an orphan, kept with the checkpoint
// last written, to be taken again directly by the next incarnation.
func (me *Member) fenceAll(why string) {
	me.mu.Lock()
	defer me.mu.Unlock()
	if n := me.host.FenceWorkers(); n > 0 {
		me.log.Warn("kinesislease: fenced: every lease is lost", "why", why, "leases", n)
	}
	// Past a fence this incarnation is over: takers may have read it
	// leaving or dead in any membership row they read since. The instance
	// goes on as a new incarnation, so that no taker's view of the old one
	// can ever apply to a row it takes afresh.
	me.hb.NeedNewInc = true
	me.fencedSince.CompareAndSwap(0, fence.Mono())
}

// reincarnate replaces this instance's membership entry with one of a new
// incarnation in the same row (after a fence), and reports whether it did.
// cur is the entry as last found, if known: the current incarnation's, or
// one of the attempts whose answer was lost. Every attempt is a brand-new
// incarnation.
func (me *Member) reincarnate(ctx context.Context, cur leases.Member) bool {
	old := me.Incarnation()
	if cur.Owner == "" {
		cur = syncx.Guarded(&me.viewMu, func() leases.Member { return me.view.Latest[me.cfg.Owner] })
	}
	if cur.Incarnation != old && !me.hb.Attempted[cur.Incarnation] && !me.ownInc(cur.Incarnation) {
		return false // not seen yet: the next heartbeat (leaving) shows it
	}
	row := roster.RowOf(old)
	inc, rows, sent, err := me.replaceAs(ctx, row, cur, cur.Notice)
	if err != nil {
		syncx.PutIn(&me.hb.Attempted, inc, true) // it may land, late: never to go on as
		var conflict *leases.MemberConflictError
		if errors.As(err, &conflict) && (conflict.Current.Incarnation == old || me.hb.Attempted[conflict.Current.Incarnation]) {
			syncx.Guard(&me.viewMu, func() { me.view.Latest[me.cfg.Owner] = conflict.Current }) // the next attempt replaces what is there
		}
		if ctx.Err() == nil {
			me.log.WarnContext(ctx, "kinesislease: starting a new incarnation after a fence failed; retrying", "err", err)
		}
		return false
	}
	me.log.InfoContext(ctx, "kinesislease: new incarnation after a fence", "from", old, "incarnation", inc)
	me.markDead(cur)
	if cur.Incarnation != old {
		me.markDead(leases.Member{Owner: me.cfg.Owner, Incarnation: old})
	}
	me.hb.Notice, me.hb.NeedNewInc, me.hb.Attempted = cur.Notice, false, nil
	me.become(inc, row, rows, sent) // started already: it is running
	return true
}

// rejoin writes this instance's entry again after it vanished (removed
// as stale, or the table recreated empty): as the same incarnation in the
// same row when it may go on, having first marked every stream it holds
// a row of (markHeld), else as a new incarnation (every lease lost) in a
// row with room. The rows it held, released or read lately are read
// again (recheckReleased).
func (me *Member) rejoin(ctx context.Context) {
	me.host.Reconcile()
	inc := me.Incarnation()
	row := roster.RowOf(inc)
	if !me.hb.NeedNewInc && me.markHeld(ctx) {
		me.hb.Beat++
		m := me.entry(inc, me.hb.Beat, me.hb.Notice) // young again: new to this table, maybe
		// The table is new from now as far as tableOld goes, before the
		// write's send: a round that finds this entry in the table from
		// then on must not take it for the entry it knew (seed 96123701).
		now := fence.Mono()
		me.entrySince.Store(now)
		me.rejoinSent.Store(now)
		jctx, cancel := context.WithTimeout(ctx, me.entryDeadline())
		sentAt := time.Now()
		sent := fence.MonoAt(sentAt)
		rows, err := me.mem.Join(jctx, row, m)
		cancel()
		if err == nil {
			me.entrySince.Store(fence.Mono())
			me.host.ForgetMarks() // this incarnation's marks may have gone with the table
			me.hb.Failed = false
			me.extendFence(sentAt)
			me.observe(row, rows, sent, fence.Mono())
			me.bumpLater(row)
			me.log.WarnContext(ctx, "kinesislease: this instance's membership entry had vanished (table recreated?); wrote it again", "row", row)
			return
		}
		var conflict *leases.MemberConflictError
		if !errors.As(err, &conflict) {
			return // the next turn tries again
		}
	}
	// A new incarnation, in a row with room.
	me.fenceAll("this instance's membership entry vanished and cannot be written again as it was")
	me.fence.Store(fence.Fenced)
	counts := syncx.Guarded(&me.viewMu, func() map[int]int { return maps.Clone(me.rows.Total) })
	mctx, cancel := context.WithTimeout(ctx, me.entryDeadline())
	if ms, err := me.mem.Members(mctx, row); err == nil {
		counts[row] = len(ms)
	}
	cancel()
	if ok, err := me.joinRow(ctx, counts); ok {
		me.hb.NeedNewInc, me.hb.Attempted, me.hb.Notice, me.hb.Failed = false, nil, 0, false
		me.markDead(leases.Member{Owner: me.cfg.Owner, Incarnation: inc})
		me.log.InfoContext(ctx, "kinesislease: new incarnation after the membership entry vanished", "from", inc, "incarnation", me.Incarnation())
	} else if err != nil {
		me.log.ErrorContext(ctx, "kinesislease: joining the membership again failed", "err", err)
	}
}

// markHeld marks every stream this instance holds a row of (or has an
// orphan of), whatever it knows of their marks (Host.MarkStream), before
// it writes its vanished entry again as the same incarnation: the table
// may have been recreated under it, with its rows and the streams' marks,
// and its fence moves on with that entry. A member that finds a row of
// such a stream missing then finds the mark (once it counts the table
// old, past a timeout after the recreation, the entry has landed or the
// fence has passed): it recovers the row, never takes the stream for new
// while this instance may deliver from it. It reports whether every mark
// landed.
func (me *Member) markHeld(ctx context.Context) bool {
	keys := me.host.HeldStreams()
	mctx, cancel := context.WithTimeout(ctx, me.entryDeadline())
	defer cancel()
	for key := range keys {
		if me.host.MarkStream(mctx, key) != nil {
			return false
		}
	}
	return true
}

// entry is this instance's membership entry as inc, at heartbeat hb with
// notice: what it publishes of itself (Host.Published; young: a join's).
func (me *Member) entry(inc string, hb, notice int64) leases.Member {
	m := me.host.Published()
	m.Owner, m.Incarnation, m.Heartbeat, m.Notice = me.cfg.Owner, inc, hb, notice
	m.Proof, m.Young = time.Duration(me.ownProof.Load()), true
	return m
}
