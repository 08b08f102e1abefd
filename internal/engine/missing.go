package engine

// A row the plan gives this instance, found missing by a read (missingRow):
// a new stream's is created free by the first to mark the stream
// (createNew), with the stream's other rows (createAll); any other has
// vanished, or is being created by the stream's marker: it is reported,
// and recreated free and recovered (recover) when lostrow.Decide says so.

import (
	"context"
	"errors"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

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
	st.book.Set(u.Shard, lostrow.Row{Missing: true})
	r := st.row(u.Shard)
	f := lostrow.Facts{Seen: r.Seen, Creating: st.book.Creating(), SawRows: st.book.SawRows(), RecoveryWait: g.recoveryWait(st)}
	if !f.Seen && !f.Creating {
		f.Mark, f.MarkedFor = g.markOf(ctx, st)
		// Read again after the mark: a mark this incarnation just made for
		// another row (createNew, counted creating before it marks) is
		// that of a stream whose rows it is creating, not of one whose
		// rows vanished (TestStoreMissingWhileJoining: two rows read
		// missing in one round, one recreated as vanished).
		f.Creating = st.book.Creating()
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
	st.book.BeginCreating() // before the mark: see missingRow
	defer st.book.EndCreating()
	if k, err := g.mark(ctx, st, true); k != lostrow.MarkOurs {
		if err != nil && ctx.Err() == nil {
			st.log.WarnContext(ctx, "kinesislease: marking a new stream failed", "err", err)
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
			st.log.WarnContext(ctx, "kinesislease: creating lease row failed", "shard", u.Shard, "err", err)
		}
		return
	}
	st.book.Set(u.Shard, lostrow.Row{Lease: l})
	if g.m.SameTable(ctx, mono(), rejoin) && g.takeable(l) && g.recoveryPassed(st, u.Shard, l) {
		g.take(ctx, st, u, l) // ours, or another's creation (or recovery) found
	}
}

// createAll creates, once per stream, every row of a new stream that is
// still missing but that of skip (free, no checkpoint: each starts at the
// subscription's start position), so that the members started with this
// one find them and take them at once instead of waiting for them as for
// rows that vanished.
func (g *Group) createAll(st *streamState, skip string) {
	ids, first := st.book.CreateAll(st.list.Order, skip)
	if !first {
		return
	}
	// In the background, not bounded by a round: at 20,000 shards the
	// creates take seconds. Within the recovery wait of the decision, as
	// a member that is not the creator recovers a missing row only after
	// it; a row left missing then is a missing row like any other
	// (missingRow).
	cctx, cancel := context.WithTimeout(g.run.ctx, g.recoveryWait(st))
	g.run.listers.Go(func() {
		defer cancel()
		syncx.Bounded(cctx, storeConcurrency, len(ids), func(i int) {
			if l, err := g.store.Create(cctx, leases.Key{Stream: st.key, Shard: ids[i]}); err == nil {
				st.book.Set(ids[i], lostrow.Row{Lease: l, Created: true})
			}
		})
		st.book.CreatedAll()
		g.kickRound() // take them now
	})
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
			st.log.WarnContext(ctx, "kinesislease: recreating a vanished lease row failed", "shard", u.Shard, "err", err)
		}
		return false // recreated by another, or read again next round
	}
	st.book.Set(u.Shard, lostrow.Row{Lease: t, ReportDue: from.Blind()})
	g.reportRecovery(ctx, st, u.Shard)
	// Known now as if released: should the row vanish again and come back
	// from the start position by a member that never knew it, this one
	// writes the checkpoint it recreated the row at (recheckReleased; seed
	// 99005019: a member that recovered a row it did not plan, the table
	// dropped since, let a fresh process restart it at the start).
	g.lost.NoteReleased(u, t)
	switch from {
	case lostrow.FromRewind:
		st.log.ErrorContext(ctx, "kinesislease: lease row vanished (deleted, or the table recreated); recreated it free at the operator's last rewind of the shard, which came after the copy of the row this instance knew",
			"shard", u.Shard, "seq", cp.String())
	case lostrow.FromTrimHorizon:
		st.log.WarnContext(ctx, "kinesislease: lease row vanished (deleted, or the table recreated) and nobody here knows a checkpoint of it; recreated it free at TRIM_HORIZON: the shard's records are read again from the oldest",
			"shard", u.Shard)
	case lostrow.FromKnown:
		st.log.ErrorContext(ctx, "kinesislease: lease row vanished (deleted, or the table recreated); recreated it free from the checkpoint this instance last saw",
			"shard", u.Shard, "seq", cp.String())
	default:
		st.log.WarnContext(ctx, "kinesislease: no lease row for this shard (a stream new to the lease table, or a row that vanished and nobody recreated); created it free at the start position",
			"shard", u.Shard, "start", st.book.Start().String())
	}
	return true
}
