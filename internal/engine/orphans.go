package engine

// Orphans: rows that may name this instance (an earlier incarnation's, or
// a take whose answer was lost) with no worker reading them. Each round
// retakes those the plan gives this instance, directly as the current
// incarnation, and releases the others; one whose row vanished is
// recreated free from the checkpoint it knew. The orphans themselves are
// kept in Group.lost (package lostbook).

import (
	"context"
	"errors"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/leases"
)

// retake takes an orphan row directly as the current incarnation: a write
// conditional on the row as this instance last knew it, with a read only
// if that fails. A row found missing is recreated free from what the
// orphan knew (vanishedOrphan) and taken after the recovery wait.
func (g *Group) retake(ctx context.Context, u unit, o lostrow.Orphan) {
	st := g.streams[u.Stream]
	inc := g.Incarnation()
	l, read := o.Known, false
	// Read first if our take's answer was lost (o.Presumed: the row may be
	// ours at that counter, or another's write made the same counter), and
	// on each attempt after the first: the row as it is now says.
	for attempt := 0; ; attempt++ {
		if o.Presumed || attempt > 0 {
			cur, ok := g.rereadOrphan(ctx, st, u, o, attempt == 0)
			if !ok {
				return
			}
			l, read = cur, true
		}
		if (!g.ours(l) || o.Unwaited) && !g.recoveryPassed(st, u.Shard, o.Awaited(l)) {
			if read {
				return // recovered: taken once its last holder has stopped
			}
			continue // known from before: read it
		}
		from := o.RetakeFrom(l, read, g.lost.Orphan(u))
		switch err := g.takeToRead(ctx, st, u, l, from, inc, false); {
		case errors.Is(err, leases.ErrNotFound):
			g.vanishedOrphan(ctx, st, u, o)
		case errors.Is(err, leases.ErrConflict) && attempt == 0:
			continue // read it
		}
		return // taken, or an uncertain take presumed ours (takeAs)
	}
}

// rereadOrphan reads orphan o's row again before retaking it, and reports
// whether to go on with the row it returns: ours, or takeable. A missing
// row is recreated from what o knew (vanishedOrphan); with dropEmpty, an
// orphan that knew no checkpoint is simply dropped then (nothing to save:
// missingRow as for any member). A row someone else holds is forgotten.
func (g *Group) rereadOrphan(ctx context.Context, st *streamState, u unit, o lostrow.Orphan, dropEmpty bool) (leases.Lease, bool) {
	cur, err := g.store.Get(ctx, o.Known.Key)
	switch {
	case errors.Is(err, leases.ErrNotFound) && dropEmpty && o.Best().IsZero():
		g.lost.Drop(u, o)
	case errors.Is(err, leases.ErrNotFound):
		g.vanishedOrphan(ctx, st, u, o)
	}
	if err != nil {
		return leases.Lease{}, false
	}
	st.book.Set(u.Shard, lostrow.Row{Lease: cur})
	if o.LaterRewind(cur, g.ours(cur)) {
		g.lost.Edit(u, o, func(o *lostrow.Orphan) { *o = o.Adopt(cur) })
	}
	if !g.ours(cur) && !g.takeable(cur) && !o.Disproved(cur) {
		g.lost.Forget(u, o, cur) // someone else's: someone took it
		return leases.Lease{}, false
	}
	return cur, true
}

// releaseOrphan frees an orphan row the plan gives another member, keeping
// the checkpoint last written while the lease was trusted (or the one it
// knows, on a row recreated since: lostrow.Orphan.ReleaseFill). A release
// that does not land is followed as lostrow.Orphan.AfterRelease decides: an
// orphan whose row vanished is recreated free from that checkpoint
// (vanishedOrphan), so that the member the plan gives it to does not start
// it at the start position.
func (g *Group) releaseOrphan(ctx context.Context, u unit, o lostrow.Orphan) {
	st := g.streams[u.Stream]
	l := o.Known
	for attempt := 0; ; attempt++ {
		rl, err := g.store.Release(ctx, l, o.ReleaseFill(l))
		if err == nil {
			st.log.InfoContext(ctx, "kinesislease: released a lease lost at a fence", "shard", u.Shard)
			g.lost.Drop(u, o)
			g.lost.NoteReleased(u, rl)
			return
		}
		var cur leases.Lease
		if errors.Is(err, leases.ErrConflict) && attempt == 0 {
			cur, err = g.store.Get(ctx, l.Key) // the row the release met
		}
		switch o.AfterRelease(err, cur, g.ours(cur), g.lost.Orphan(u)) {
		case lostrow.StepRecover:
			g.vanishedOrphan(ctx, st, u, o)
		case lostrow.StepInvalidate:
			g.invalidate(ctx, st, u, o, cur)
		case lostrow.StepRepair:
			g.repairFree(ctx, st, u, o, cur)
		case lostrow.StepForget:
			g.lost.Forget(u, o, cur)
		case lostrow.StepAgain:
			l = cur
			continue
		}
		return
	}
}

// invalidate takes row l, the version a take of this instance whose
// answer was lost was conditional on, and releases it: that take's late
// copy can no longer land. If the release fails, the row is an orphan
// known as taken, released next round.
func (g *Group) invalidate(ctx context.Context, st *streamState, u unit, o lostrow.Orphan, l leases.Lease) {
	// Taken with what o knows (lostrow.Orphan.InvalidateFrom). A take that
	// fails: taken by another (the late copy cannot land), or presumed
	// ours again.
	if _, _, released := g.takeRelease(ctx, u, o, o.InvalidateFrom(l), lostrow.Orphan{Vanished: o.Vanished, Knew: o.Best()}); released {
		st.log.InfoContext(ctx, "kinesislease: released a row a take of this instance whose answer was lost had not reached", "shard", u.Shard)
	}
}

// repairFree writes the checkpoint orphan o knows on its free row l,
// recreated with none: a take that writes it, then a release. If the
// release fails, the row is an orphan known with that checkpoint, released
// (with it) next round. A take that fails: someone took it first (the
// next round sees it again), or presumed ours (takeAs).
func (g *Group) repairFree(ctx context.Context, st *streamState, u unit, o lostrow.Orphan, l leases.Lease) {
	if f, taken, _ := g.takeRelease(ctx, u, o, o.Filled(l), lostrow.Orphan{Presumed: true, Vanished: true}); taken {
		st.log.WarnContext(ctx, "kinesislease: a lease row recreated without a checkpoint; wrote the checkpoint this instance knew on it", "shard", u.Shard, "seq", f.Checkpoint.String())
	}
}

// vanishedOrphan handles an orphan whose row a call found missing: it
// reports the row and recreates it free and recovered, at once, from the
// orphan's checkpoint (recover), for whoever the plan gives it to. An
// orphan that knew none is dropped: any member recreates the row as well.
func (g *Group) vanishedOrphan(ctx context.Context, st *streamState, u unit, o lostrow.Orphan) {
	g.lost.Edit(u, o, func(o *lostrow.Orphan) { o.Vanished = true }) // found missing
	st.book.Know(u.Shard, o.KnownRow())
	st.book.Set(u.Shard, lostrow.Row{Missing: true})
	g.reportMissing(ctx, st, u.Shard, st.row(u.Shard))
	if o.Best().IsZero() || g.recover(ctx, st, u, o.Known, o.Best(), true) {
		g.lost.Drop(u, o)
	}
}
