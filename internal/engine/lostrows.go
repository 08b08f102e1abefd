package engine

// Lost rows: a lease row that vanished (deleted, or the table recreated
// empty) is recreated by its holder at once, held, and by anyone else at
// once, free and recovered: nobody but its last holder delivers from a
// recovered row before the recovery wait from a read that returned it.
//
// Here: the waits (recoveryWait, proof, lateBound), the vanished reports
// (reportMissing, reportRecovery), and whether a row names this process
// (ours). What the Group keeps of rows with no worker of its own on them,
// its orphans and the rows it released or read lately, is kept by
// package lostbook (Group.lost). What is done with them: missing.go (a
// planned row found missing), orphans.go (retaken or released),
// reconcile.go (re-read).

import (
	"context"
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

// lateBound, in timeouts, is how long after an unanswered write this
// instance reads its row again (recheckUncertain): a write the database
// applies after its caller gave up lands within it. Requests are answered
// within a timeout and retried at most twice by the SDK; a connection
// closed on a timeout takes its unsent bytes with it.
const lateBound = 3

// reportMissing reports the row of id, found missing as r says, in the
// membership header (ReportVanished), so that whoever holds it, released it
// or read it lately re-reads it. One report sent after the row was first
// seen missing covers it: every member re-reads after the report.
func (g *Group) reportMissing(ctx context.Context, st *streamState, id string, r lostrow.Row) {
	if r.Reported {
		return
	}
	last, reported := g.lost.LockReport()
	defer g.lost.UnlockReport()
	if !r.ReportCovers(last, reported) {
		sent := mono()
		if g.mem.ReportVanished(ctx) != nil {
			return
		}
		g.lost.ReportSent(sent)
	}
	st.book.MarkReported(id)
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
	st.book.Edit(id, func(r *lostrow.Row) { r.ReportDue, r.RecoveredAt = false, max(r.RecoveredAt, sent) })
	return true
}

// ours reports whether row l names this process, as one of its recent
// incarnations: the current one (a take whose answer was lost) or an
// earlier one (a row not taken again since a fence). Nobody else takes a
// row of the current incarnation while it lives, so this process must read
// it or release it.
func (g *Group) ours(l leases.Lease) bool {
	if l.Owner != g.cfg.Owner || l.Incarnation == "" {
		return false
	}
	return g.m.Ours(l.Incarnation)
}
