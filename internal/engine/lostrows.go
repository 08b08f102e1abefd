package engine

// Lost rows: a lease row that vanished (deleted, or the table recreated
// empty) is recreated by its holder at once, held, and by anyone else at
// once, free and recovered: nobody but its last holder delivers from a
// recovered row before the recovery wait from a read that returned it.
//
// Here: the waits (recoveryWait, proof, lateBound), the vanished reports
// (reportMissing, reportRecovery), and what the Group keeps of rows with
// no worker of its own on them (lostState): its orphans (presume, ours,
// orphanOf, editOrphan, dropOrphan, forgetOrphan, markUnwaited) and the
// rows it released or read lately (noteRead, noteReleased). What is done
// with them: missing.go (a planned row found missing), orphans.go (retaken
// or released), reconcile.go (re-read).

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/syncx"
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
	g.lost.reportSem <- struct{}{}
	defer func() { <-g.lost.reportSem }()
	if !r.ReportCovers(g.lost.lastReport, g.lost.reported) {
		sent := mono()
		if g.mem.ReportVanished(ctx) != nil {
			return
		}
		g.lost.lastReport, g.lost.reported = sent, true
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

// presume records, after a write of row l as incarnation inc that failed
// without a conflict, that the write may have landed with its answer lost:
// the row would then name this instance with nobody reading it, and every
// other member would wait on it for as long as this incarnation lives. So
// it is an orphan, known as the write would have left it; the next round
// reads it before taking it again or releasing it.
func (g *Group) presume(u unit, l leases.Lease, inc string) {
	g.mu.Lock()
	g.lost.uncertain[u] = mono() + int64(lateBound*g.cfg.Timeout)
	g.lost.orphans[u] = lostrow.Presume(l, g.cfg.Owner, inc, g.lost.orphans[u], g.lost.released[u].lease.Checkpoint)
	g.mu.Unlock()
}

// orphanOf returns the orphan of u held now (zero if none).
func (g *Group) orphanOf(u unit) lostrow.Orphan {
	return syncx.Guarded(&g.mu, func() lostrow.Orphan { return g.lost.orphans[u] })
}

// editOrphan changes orphan o of u as f says, unless it was replaced
// meanwhile.
func (g *Group) editOrphan(u unit, o lostrow.Orphan, f func(*lostrow.Orphan)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if cur, ok := g.lost.orphans[u]; ok && cur.Inc == o.Inc {
		f(&cur)
		g.lost.orphans[u] = cur
	}
}

// dropOrphan forgets orphan o of u, unless it was replaced meanwhile.
func (g *Group) dropOrphan(u unit, o lostrow.Orphan) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if cur, ok := g.lost.orphans[u]; ok && cur.Inc == o.Inc {
		delete(g.lost.orphans, u)
	}
}

// forgetOrphan drops orphan o of u, now someone else's row cur, and keeps
// where it was read to, should it vanish (lostrow.Orphan.Forgotten).
func (g *Group) forgetOrphan(u unit, o lostrow.Orphan, cur leases.Lease) {
	g.dropOrphan(u, o)
	g.noteReleased(u, o.Forgotten(cur))
}

// markUnwaited marks the orphan a take of u that failed with err with no
// answer left (presume), made without the recovery wait: see
// lostrow.Orphan.Unwaited.
func (g *Group) markUnwaited(u unit, err error) {
	if !lostrow.Unanswered(err) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if o, ok := g.lost.orphans[u]; ok {
		o.Unwaited = true
		g.lost.orphans[u] = o
	}
}

const (
	// maxReleased and releasedFor bound Group.released. A row released is
	// normally taken within a few rounds by the member the plan gives it
	// to, which knows the checkpoint from then on.
	maxReleased = 256
	releasedFor = 5 * time.Minute
)

// noteRead records row l of u, read at the first listing, as noteReleased
// does, but only while there is room: it never evicts a row this instance
// released or read to take.
func (g *Group) noteRead(u unit, l leases.Lease) {
	if !syncx.Guarded(&g.mu, func() bool { return len(g.lost.released) >= maxReleased }) {
		g.noteReleased(u, l)
	}
}

// noteReleased records that this instance released the row of u, leaving
// it as l, or read it so (a row it did not hold): either way it knows where
// the shard was read to, as lostrow.Note keeps it.
func (g *Group) noteReleased(u unit, l leases.Lease) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, had := g.lost.released[u]
	l, keep := lostrow.Note(l, r.lease, had)
	if !keep {
		return
	}
	now := time.Now()
	maps.DeleteFunc(g.lost.released, func(_ unit, r releasedRow) bool { return now.Sub(r.at) > releasedFor })
	if len(g.lost.released) >= maxReleased {
		oldest := slices.MinFunc(slices.Collect(maps.Keys(g.lost.released)), func(a, b unit) int {
			return g.lost.released[a].at.Compare(g.lost.released[b].at)
		})
		delete(g.lost.released, oldest)
	}
	g.lost.released[u] = releasedRow{lease: l, at: now}
}
