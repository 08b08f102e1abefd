package engine

// Taking a row: whether a row read may be taken (takeable,
// recoveryPassed); the take itself, a write that lands before the fence or
// not at all (takeAs, atFence); for a row as Create made it, the mark that
// shows the take the row's first (markFirstTake), and the undoing of one
// that was not (notFirstTake, lateFill); and a take followed by a release,
// to write on an orphan's row (takeRelease).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/leases"
)

// takeable reports whether row l, just read, may be taken by this instance.
func (g *Group) takeable(l leases.Lease) bool {
	switch {
	case l.Checkpoint.Sequence == leases.ShardEnd && l.RewindTo.IsZero():
		return false
	case !l.Held(), l.Owner == g.cfg.Owner && l.Incarnation == g.Incarnation():
		return true // free, or ours from before a fence or a take whose answer was lost
	}
	return !g.m.Alive(l.Owner, l.Incarnation, mono())
}

// recoveryPassed reports whether row l of shard id, just read, may be read
// by this instance as far as a recovery goes: it is not recovered
// (leases.Lease.Recovered), or this instance saw its recovery for the
// recovery wait. Its last holder may deliver until then.
func (g *Group) recoveryPassed(st *streamState, id string, l leases.Lease) bool {
	return l.Recovered == "" || time.Duration(mono()-st.book.RecoveredSince(id, l.Recovered)) >= g.recoveryWait(st)
}

// atFence returns ctx bounded by the fence as it stands now: a take sent
// under it either lands before the fence or is cancelled (and if it landed
// unanswered, the row is an orphan, taken again or released).
func (g *Group) atFence(ctx context.Context, inc string) (context.Context, context.CancelFunc) {
	if g.m.Fenced() || g.Incarnation() != inc {
		// Fenced: nothing may be taken until the next incarnation. Or the
		// write is made as an incarnation this process no longer is (a
		// round begun before a fence, its reads slow): others may have
		// found that one dead, so nothing may land as it.
		return context.WithTimeout(ctx, 0)
	}
	return context.WithTimeout(ctx, max(g.m.Fence().Left(), 0))
}

// takeAs takes row l as incarnation inc, by a write that must land before
// the fence (atFence). An answer that does not say the take failed (an
// error other than ErrConflict or ErrNotFound) leaves the row presumed
// ours: it may have landed unanswered. A take to read from a row as Create
// made it marks the row taken beside it (markFirstTake, sent at the same
// time): unless the mark shows it the first, the take is undone
// (notFirstTake).
func (g *Group) takeAs(ctx context.Context, u unit, l leases.Lease, inc string, toRead bool) (leases.Lease, error) {
	tctx, cancel := g.atFence(ctx, inc)
	defer cancel()
	st := g.streams[u.Stream]
	if err := g.ensureMarked(tctx, st); err != nil {
		return leases.Lease{}, err
	}
	var marked chan error
	if toRead && lostrow.AsCreated(l) {
		marked = make(chan error, 1)
		go func() { marked <- g.markFirstTake(tctx, st, u.Shard, l) }()
	}
	t, err := g.mem.TakeAs(tctx, l, g.cfg.Owner, inc)
	if lostrow.Unanswered(err) {
		g.lost.Presume(u, l, g.cfg.Owner, inc, mono()+int64(lateBound*g.cfg.Timeout))
	}
	if marked != nil {
		if merr := <-marked; merr != nil {
			return leases.Lease{}, g.notFirstTake(ctx, st, u, l, t, err, merr)
		}
	}
	return t, err
}

// markFirstTake marks row l, as Create made it (lostrow.AsCreated), taken
// (MarkTaken), for a take of it to read from it. It returns nil when the
// mark is this take's: the row's first take. A mark another made means the
// row was taken before: a Create that DynamoDB applied late, after the row
// was taken and then deleted, made it again (seed 93032236: a holder cut
// off from the table still delivered, and the member that found the row
// "new" took it at once); the error then matches ErrConflict. The mark's
// token is kept for the row version (lostrow.Row.MarkTok): a mark sent
// again by this instance, its answer lost, finds its own.
func (g *Group) markFirstTake(ctx context.Context, st *streamState, id string, l leases.Lease) error {
	tok := st.book.MarkToken(id, l)
	got, err := g.mem.MarkTaken(ctx, l.Key, tok)
	if err == nil && got != tok {
		err = fmt.Errorf("kinesislease: lease row %s: created again after it was taken: %w", l.Key, leases.ErrConflict)
	}
	return err
}

// notFirstTake undoes a take of row l, as Create made it, whose mark
// (markFirstTake) did not show it the row's first: merr, another's mark or
// a mark that failed, as lostrow.NotFirst decides. Nothing is read from the
// row before the recovery wait, counted from now (in case the row is a
// late Create's): a take that landed (t) is released recovered, one
// unanswered leaves an orphan that waits it (retake), and a row taken
// before that this take did not take is made a recovered row. A row taken
// before, made recovered here, is reported. It returns the error of the
// take.
func (g *Group) notFirstTake(ctx context.Context, st *streamState, u unit, l, t leases.Lease, err, merr error) error {
	late := errors.Is(merr, leases.ErrConflict)
	if late {
		st.log.WarnContext(ctx, "kinesislease: a lease row that looks new was taken before: it vanished and a late write created it again; it is made a recovered row, read after the recovery wait", "shard", u.Shard)
	}
	st.book.NoteRecovery(u.Shard, lostrow.LateMark(l))
	switch lostrow.NotFirst(err, merr) {
	case lostrow.UndoRelease:
		var cp leases.Checkpoint // the take's fill stays, if it wrote one
		if t.Checkpoint.IsZero() {
			// Written by the release (which cannot write the rewind id: a
			// row at an operator's rewind without it is outdated for
			// those who know a copy read after the rewind, who write it).
			cp = g.lateFill(ctx, st, u, t).Checkpoint
		}
		t.Recovered = lostrow.LateMark(l)
		if rl, rerr := g.store.Release(ctx, t, cp); rerr == nil {
			g.lost.NoteReleased(u, rl)
		} else {
			g.lost.Put(u, lostrow.Orphan{Inc: t.Incarnation, Known: t, Presumed: true, Vanished: true, Unwaited: true})
		}
	case lostrow.UndoOrphan:
		g.lost.Update(u, func(o *lostrow.Orphan) { o.Unwaited, o.Known.Recovered = true, lostrow.LateMark(l) })
	case lostrow.UndoTakeRelease:
		// Reported only if this made the row recovered: a take that
		// failed because another member took the row (two taking a new
		// row at once, the other's mark first) is no vanished row.
		_, late, _ = g.takeRelease(ctx, u, lostrow.Orphan{}, g.lateFill(ctx, st, u, l), lostrow.Orphan{Presumed: true, Vanished: true})
	}
	if late {
		st.book.Set(u.Shard, lostrow.Row{Lease: l, ReportDue: true})
		g.reportRecovery(ctx, st, u.Shard)
	}
	return cmp.Or(err, merr)
}

// lateFill returns row l, as Create made it but read before (a late
// Create's), as a recovered row (lostrow.LateFill), reading the shard's
// last operator's rewind if l has no checkpoint.
func (g *Group) lateFill(ctx context.Context, st *streamState, u unit, l leases.Lease) leases.Lease {
	var rec leases.RewindRecord
	if l.Checkpoint.IsZero() {
		rec, _ = g.mem.LastRewind(ctx, l.Key) // none known if it fails
	}
	return lostrow.LateFill(l, st.row(u.Shard), rec)
}

// takeRelease takes row from, a version of the row of orphan o of u, as
// the current incarnation, then releases it as taken (its checkpoint the
// one the take wrote). A take that fails leaves o, marked unwaited if its
// answer was lost (lostbook.Book.MarkUnwaited); a release that fails leaves the orphan
// left, known as taken and unwaited (the take made no recovery wait),
// released next round. It returns the row taken, and whether the take
// and the release landed.
func (g *Group) takeRelease(ctx context.Context, u unit, o lostrow.Orphan, from leases.Lease, left lostrow.Orphan) (leases.Lease, bool, bool) {
	inc := g.Incarnation()
	if lostrow.LateCreated(from) {
		// Released recovered, the recovery wait counted here from now
		// (retake, should the release fail).
		from.Recovered = lostrow.LateMark(from)
		g.streams[u.Stream].book.NoteRecovery(u.Shard, from.Recovered)
	}
	t, err := g.takeAs(ctx, u, from, inc, false)
	if err != nil {
		g.lost.MarkUnwaited(u, err)
		return t, false, false
	}
	t.Recovered = cmp.Or(t.Recovered, from.Recovered)
	rl, err := g.store.Release(ctx, t, leases.Checkpoint{})
	if err != nil {
		left.Inc, left.Known, left.Unwaited = inc, t, true
		g.lost.Put(u, left)
		return t, true, false
	}
	g.lost.Drop(u, o)
	g.lost.NoteReleased(u, rl)
	return t, true, true
}
