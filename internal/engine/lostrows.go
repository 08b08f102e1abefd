package engine

// Lost rows: a lease row that vanished (deleted, or the table recreated
// empty) is recreated by its holder at once, held, and by anyone else at
// once, free and recovered: nobody but its last holder delivers from a
// recovered row before the recovery wait from a read that returned it.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/leases"
)

// recoveryWait is how long after a read that returned a recovered row
// (leases.Lease.Recovered: recreated free after it vanished) anyone but
// its last holder waits before delivering from it. That holder delivers
// only within the proof bound of its last write that landed, which was
// before the row vanished, before the recreation, before the read; the
// fence margin covers clocks that run at slightly different rates. The
// bound is the longest of this instance's and of any member's entry it
// read (leases.Member.Proof): instances with different checkpoint
// intervals (a rolling change) wait for the longest.
func (g *Group) recoveryWait(st *streamState) time.Duration {
	return max(g.proof(st), g.m.FleetProof()) + g.cfg.FenceMargin
}

// proof is how long after its last successful write a holder may deliver
// without proving its row again (see lease.Held.Deliverable).
func (g *Group) proof(st *streamState) time.Duration {
	return st.cfg.Worker.CheckpointInterval + g.cfg.Timeout
}

// reportMissing reports the row of id, found missing as r says, in the
// membership header (ReportVanished), so that whoever holds it, released it
// or read it lately re-reads it. One report sent after the row was first
// seen missing covers it: every member re-reads after the report.
func (g *Group) reportMissing(ctx context.Context, st *streamState, id string, r lostrow.Row) {
	if r.Reported {
		return
	}
	g.lost.reportSem <- struct{}{}
	defer func() { <-g.lost.reportSem }()
	if !r.ReportCovers(g.lost.lastReport, g.lost.reported) {
		sent := mono()
		if g.mem.ReportVanished(ctx) != nil {
			return
		}
		g.lost.lastReport, g.lost.reported = sent, true
	}
	st.markReported(id)
}

// reportRecovery reports the row of id again, once this instance recovered
// it knowing no checkpoint of it (lostrow.From.Blind), and counts the
// recovery wait from that report: a member that knows where the shard was
// read to re-reads the row on it and writes its checkpoint on the free row
// (recheckReleased) before anyone reads from the start. The report sent
// when the row was first found missing does not cover this: a knower may
// have recovered the row on it, and the row vanished again unseen by the
// reporter (seed 96101881). It reports whether no report is due.
func (g *Group) reportRecovery(ctx context.Context, st *streamState, id string) bool {
	if !st.row(id).ReportDue {
		return true
	}
	sent := mono()
	if g.mem.ReportVanished(ctx) != nil {
		return false
	}
	st.editRow(id, func(r *lostrow.Row) { r.ReportDue, r.RecoveredAt = false, max(r.RecoveredAt, sent) })
	return true
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
	tok := st.markToken(id, l)
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
		st.log.Warn("kinesislease: a lease row that looks new was taken before: it vanished and a late write created it again; it is made a recovered row, read after the recovery wait", "shard", u.Shard)
	}
	st.noteRecovery(u.Shard, lostrow.LateMark(l))
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
			g.noteReleased(u, rl)
		} else {
			g.mu.Lock()
			g.lost.orphans[u] = lostrow.Orphan{Inc: t.Incarnation, Known: t, Presumed: true, Vanished: true, Unwaited: true}
			g.mu.Unlock()
		}
	case lostrow.UndoOrphan:
		g.mu.Lock()
		if o, ok := g.lost.orphans[u]; ok {
			o.Unwaited, o.Known.Recovered = true, lostrow.LateMark(l)
			g.lost.orphans[u] = o
		}
		g.mu.Unlock()
	case lostrow.UndoTakeRelease:
		// Reported only if this made the row recovered: a take that
		// failed because another member took the row (two taking a new
		// row at once, the other's mark first) is no vanished row.
		_, late, _ = g.takeRelease(ctx, u, lostrow.Orphan{}, g.lateFill(ctx, st, u, l), lostrow.Orphan{Presumed: true, Vanished: true})
	}
	if late {
		st.setRow(u.Shard, lostrow.Row{Lease: l, ReportDue: true})
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
