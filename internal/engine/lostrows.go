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

// missingRow decides what to do with the row of u, which the plan gives
// this instance and a read found missing (lostrow.Decide). A row of a
// stream without a mark, in a table known old (a new stream: see
// marks.go), is created free at once by the first to mark the stream. Any
// other has vanished (deleted, or the table recreated), or is being
// created by the stream's marker: it is reported (so that its holder and
// those who know its checkpoint read it again), and recreated free and
// recovered (recover) once this instance saw it exist or knew the mark
// for the recovery wait, to be read after the recovery wait.
func (g *Group) missingRow(ctx context.Context, st *streamState, u unit) {
	rejoin := g.m.RejoinSent() // before markOf: see createNew
	st.setRow(u.Shard, lostrow.Row{Missing: true})
	r := st.row(u.Shard)
	f := lostrow.Facts{Seen: r.Seen, Creating: st.creatingRows(), SawRows: st.sawRows(), RecoveryWait: g.recoveryWait(st)}
	if !f.Seen && !f.Creating {
		f.Mark, f.MarkedFor = g.markOf(ctx, st)
	}
	switch lostrow.Decide(f) {
	case lostrow.CreateNew:
		g.createNew(ctx, st, u, rejoin)
	case lostrow.Report:
		g.reportMissing(ctx, st, u.Shard, r)
	case lostrow.Recover:
		g.reportMissing(ctx, st, u.Shard, r)
		g.recover(ctx, st, u, r.Lease, r.Best(), r.Seen) // taken after the recovery wait (acquire)
	}
}

// createNew marks st, a new stream; if the mark is this instance's (the
// first), it creates the row of u free, starts creating the stream's other
// rows (createAll), and takes it, once its own entry is still found, not
// written again since before markOf (rejoin: the rejoinSent then): the
// table the stream was judged new in was not recreated before the row was
// created (seed 98129615: the table dropped after the judgement, the
// stream's rows were created again in the new one and read beside their
// holders).
func (g *Group) createNew(ctx context.Context, st *streamState, u unit, rejoin int64) {
	if k, err := g.mark(ctx, st, true); k != lostrow.MarkOurs {
		if err != nil && ctx.Err() == nil {
			st.log.Warn("kinesislease: marking a new stream failed", "err", err)
		}
		return // another marked it first: it creates the rows
	}
	g.createAll(st, u.Shard)
	key := leases.Key{Stream: u.Stream, Shard: u.Shard}
	l, err := g.store.Create(ctx, key)
	if errors.Is(err, leases.ErrConflict) {
		l, err = g.store.Get(ctx, key)
	}
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, leases.ErrNotFound) {
			st.log.Warn("kinesislease: creating lease row failed", "shard", u.Shard, "err", err)
		}
		return
	}
	st.setRow(u.Shard, lostrow.Row{Lease: l})
	if g.m.SameTable(ctx, mono(), rejoin) && g.takeable(l) && g.recoveryPassed(st, u.Shard, l) {
		g.take(ctx, st, u, l) // ours, or another's creation (or recovery) found
	}
}

// recover creates the vanished row of u again, free and recovered
// (CreateAs with no owner: leases.Lease.Recovered), at once: nobody
// delivers from it before the recovery wait (see recoveryWait) but its
// last holder, who takes it at once. It comes back from cp, the best
// checkpoint this instance knows (known is the copy of the row it knows),
// or at the operator's last rewind if that came after known; at
// TRIM_HORIZON if this instance saw the row exist (seen) but knows no
// checkpoint of it, never at LATEST; at the subscription's start position
// only if it never saw the row. A member that knows a better checkpoint
// writes it on the free row (repairFree) before anyone delivers. It
// reports whether it created the row.
func (g *Group) recover(ctx context.Context, st *streamState, u unit, known leases.Lease, cp leases.Checkpoint, seen bool) bool {
	key := leases.Key{Stream: u.Stream, Shard: u.Shard}
	rec, err := g.mem.LastRewind(ctx, key)
	if err != nil {
		return false // read again next round
	}
	cp, rewind, from := lostrow.Point(known, cp, seen, rec)
	if g.markToCreate(ctx, st) != nil {
		return false
	}
	t, err := g.mem.CreateAs(ctx, key, "", "", cp, rewind)
	if err != nil {
		if !errors.Is(err, leases.ErrConflict) && ctx.Err() == nil {
			st.log.Warn("kinesislease: recreating a vanished lease row failed", "shard", u.Shard, "err", err)
		}
		return false // recreated by another, or read again next round
	}
	st.setRow(u.Shard, lostrow.Row{Lease: t, ReportDue: from.Blind()})
	g.reportRecovery(ctx, st, u.Shard)
	// Known now as if released: should the row vanish again and come back
	// from the start position by a member that never knew it, this one
	// writes the checkpoint it recreated the row at (recheckReleased; seed
	// 99005019: a member that recovered a row it did not plan, the table
	// dropped since, let a fresh process restart it at the start).
	g.noteReleased(u, t)
	switch from {
	case lostrow.FromRewind:
		st.log.Error("kinesislease: lease row vanished (deleted, or the table recreated); recreated it free at the operator's last rewind of the shard, which came after the copy of the row this instance knew",
			"shard", u.Shard, "seq", cp.String())
	case lostrow.FromTrimHorizon:
		st.log.Warn("kinesislease: lease row vanished (deleted, or the table recreated) and nobody here knows a checkpoint of it; recreated it free at TRIM_HORIZON: the shard's records are read again from the oldest",
			"shard", u.Shard)
	case lostrow.FromKnown:
		st.log.Error("kinesislease: lease row vanished (deleted, or the table recreated); recreated it free from the checkpoint this instance last saw",
			"shard", u.Shard, "seq", cp.String())
	default:
		st.log.Warn("kinesislease: no lease row for this shard (a stream new to the lease table, or a row that vanished and nobody recreated); created it free at the start position",
			"shard", u.Shard, "start", st.cfg.Start.String())
	}
	return true
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
