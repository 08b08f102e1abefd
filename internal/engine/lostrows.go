package engine

// Lost rows: a lease row that vanished (deleted, or the table recreated
// empty) is recreated by its holder at once and by anyone else only after
// lostRowWait; every recreation is announced in the membership header, so
// that no member's wait spans a recreated row it never saw.

import (
	"context"
	"errors"
	"maps"
	"math"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// lostRowWait is how long a row that this instance saw exist must be seen
// missing before anyone but its holder creates it again. Its holder stops
// delivering within the proof bound after the row vanished (its next write
// fails; an idle shard proves its row with a write before it delivers
// again), so once this has passed on the creator's own clock, counted from
// a read that returned after the row vanished, no one still delivers it.
//
// A holder whose shard is idle writes nothing and would not notice: so the
// first member to find a row vanished reports it in the membership header
// (ReportVanished), and every member, seeing the report at its next round,
// re-reads the rows it holds and recreates those that vanished from its own
// checkpoint; the wait covers two rounds for that. So the row is recreated
// from the best checkpoint a live member knows, never from none while one
// does.
func (g *Group) lostRowWait(st *streamState) time.Duration {
	return g.proof(st) + g.cfg.FenceMargin + 2*g.cfg.Heartbeat
}

// rowWaits are the waits of missingRow on a row that vanished, on the
// creator's own clock from a read that returned after the row vanished.
type rowWaits struct {
	// knower: a member that knows the row's checkpoint (lostRowWait).
	knower time.Duration
	// nonKnower: a member that knows none gives those that do the time to
	// recreate it first, even if they began to look a round late or their
	// round took up to a timeout: three heartbeats and a timeout more.
	nonKnower time.Duration
	// announced: a member that knows none, while a live member's entry
	// says it will recreate rows it found missing (Member.Vanished), waits
	// up to twice the lost-row wait more, for a knower whose calls failed
	// often enough that its own wait began again (seed 113170).
	announced time.Duration
}

// rowWaits returns the waits on a vanished row of st.
func (g *Group) rowWaits(st *streamState) rowWaits {
	lost := g.lostRowWait(st)
	non := lost + 3*g.cfg.Heartbeat + g.cfg.Timeout
	return rowWaits{knower: lost, nonKnower: non, announced: non + 2*lost}
}

// proof is how long after its last successful write a holder may deliver
// without proving its row again (see heldLease.deliverable).
func (g *Group) proof(st *streamState) time.Duration {
	return st.cfg.Worker.CheckpointInterval + g.cfg.Timeout
}

// missingRow decides what to do with the row of u that a read sent at sent
// and returned at ret found missing. A row of a stream that nobody read
// when this instance started (no row existed, no other member was alive: a
// new stream) is created free at once. A row it saw exist has vanished (deleted, or the
// table recreated): it is created again, held by this instance and from the
// checkpoint it last saw, only after it has been seen missing for
// lostRowWait, by when its holder, if it was not this instance, has
// stopped delivering or recreated it itself.
func (g *Group) missingRow(ctx context.Context, st *streamState, u unit, sent, ret int64) {
	st.setRow(u.Shard, missingAt(sent, ret))
	r := st.row(u.Shard)
	if !r.seen && st.creatingRows() {
		// Being created (createAll): not a question for every missing
		// row again (each would read three rows and every membership row,
		// 20,000 times over at 20,000 shards: thousands of reads a second
		// on one item, throttled).
		return
	}
	if !r.seen && g.newStream(st) && !g.otherRowExists(ctx, st, u.Shard) {
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
		st.setRow(u.Shard, rowState{lease: l})
		if g.takeable(st, u.Shard, l) {
			g.take(ctx, st, u, l)
		}
		return
	}
	if !r.seen && !st.sawRows() && !g.tableInUse.Load() {
		g.probeEarly(ctx, st)
	}
	if !r.seen && (st.creatingRows() || !st.sawRows() && !g.tableInUse.Load() && !st.allRead()) {
		// Being created (createAll), or unknown: rows of the stream are
		// still unread, and one that exists would make it not new.
		return
	}
	g.reportMissing(ctx, st, u.Shard, r)
	if !r.seen && !st.sawRows() && !g.tableInUse.Load() && time.Duration(mono()-g.joinedAt.Load()) < 2*g.cfg.Heartbeat {
		return // too early to tell a new stream from a table emptied under its fleet
	}
	waits := g.rowWaits(st)
	wait := waits.knower
	cp := r.best()
	missing := st.missingFor(u.Shard, r)
	if cp.IsZero() {
		// This instance knows no checkpoint: give those that do (the
		// holder, an earlier holder with an orphan, whoever released it
		// lately) the time to recreate the row first (see rowWaits).
		wait = waits.nonKnower
		if missing >= wait && missing < waits.announced && g.knowerAlive() {
			return
		}
	}
	if missing < wait {
		return
	}
	key := leases.Key{Stream: u.Stream, Shard: u.Shard}
	if !r.lease.RewindTo.IsZero() {
		cp = r.lease.RewindTo // a rewind pending when this instance last read the row
	}
	cp, rewind, rewound, err := g.pastRewind(ctx, key, r.lease, cp)
	if err != nil {
		return // read again next round
	}
	atTrim := r.seen && cp.IsZero()
	if atTrim {
		// The row existed and nobody knows how far it was read: from the
		// shard's oldest record, never from the start position (at LATEST
		// every record since the row was taken would be skipped:
		// at-least-once means replayed, not lost).
		cp = leases.Checkpoint{Sequence: leases.RewindTrimHorizon}
	}
	inc := g.Incarnation()
	csent := mono()
	cctx, cancel := g.atFence(ctx, inc)
	t, err := g.mem.CreateAs(cctx, key, g.cfg.Owner, inc, cp, rewind)
	cancel()
	if err != nil {
		if !errors.Is(err, leases.ErrConflict) {
			g.pendRecreated(key) // it may have landed: announced all the same
			g.presume(u, leases.Lease{Key: key, Checkpoint: cp, Rewind: rewind}, inc)
			if ctx.Err() == nil {
				st.log.Warn("kinesislease: recreating a vanished lease row failed", "shard", u.Shard, "err", err)
			}
		}
		return
	}
	if !g.announceRecreated(ctx, key) {
		// Nobody may read from a recreated row before every member can
		// know of it: the row is an orphan of this incarnation until the
		// announcement lands (apply holds orphans back until then).
		g.mu.Lock()
		g.orphans[u] = orphan{inc: inc, known: t}
		g.mu.Unlock()
		return
	}
	switch {
	case rewound:
		st.log.Error("kinesislease: lease row vanished (deleted, or the table recreated); recreated it at the operator's last rewind of the shard, which came after the copy of the row this instance knew",
			"shard", u.Shard, "seq", cp.String(), "missing_for", time.Duration(r.missingConfirm-r.missingSince))
	case atTrim:
		st.log.Warn("kinesislease: lease row vanished (deleted, or the table recreated) and nobody knows a checkpoint of it; recreated it at TRIM_HORIZON: the shard's records are read again from the oldest",
			"shard", u.Shard, "missing_for", time.Duration(r.missingConfirm-r.missingSince))
	case r.seen:
		st.log.Error("kinesislease: lease row vanished (deleted, or the table recreated); recreated it from the checkpoint this instance last saw",
			"shard", u.Shard, "seq", cp.String(), "missing_for", time.Duration(r.missingConfirm-r.missingSince))
	default:
		// Never seen: a stream new to a table in use, or rows that vanished
		// before this instance saw them and that no member recreated.
		st.log.Warn("kinesislease: no lease row for this shard (a stream new to the lease table, or a row that vanished and nobody recreated); created it at the start position",
			"shard", u.Shard, "start", st.cfg.Start.String(), "missing_for", time.Duration(r.missingConfirm-r.missingSince))
	}
	g.startTaken(ctx, st, u, leases.Lease{}, t, csent)
}

// countVanished returns how many rows this instance found missing and will
// recreate from a checkpoint it knows: its orphans' (recreated whoever the
// plan gives them to) and those a gives it.
func (g *Group) countVanished(a map[unit]string) int64 {
	g.mu.Lock()
	orphans := make(map[unit]bool, len(g.orphans))
	for u := range g.orphans {
		orphans[u] = true
	}
	g.mu.Unlock()
	var n int64
	for name, st := range g.streams {
		st.rowsMu.Lock()
		for id, r := range st.rows {
			u := unit{Stream: name, Shard: id}
			if r.missing && !r.best().IsZero() && (orphans[u] || a[u] == g.cfg.Owner) {
				n++
			}
		}
		st.rowsMu.Unlock()
	}
	return n
}

// knowerAlive reports whether another member alive in this instance's view
// says it will recreate rows it found missing (Member.Vanished).
func (g *Group) knowerAlive() bool {
	now := mono()
	g.viewMu.Lock()
	defer g.viewMu.Unlock()
	for owner, m := range g.view.latest {
		if owner != g.cfg.Owner && m.Vanished > 0 && !m.Leaving && g.view.alive(owner, m.Incarnation, now) {
			return true
		}
	}
	return false
}

// announceRecreated reports in the membership header that this instance
// recreated a vanished row (ReportRecreated), and reports whether that
// landed. Until it has, nobody reads from the recreated row and this
// instance releases none of its orphans (apply): a member whose two reads
// found the row missing before and after it existed must learn of it at
// its next header read, before it counts the time between as missing
// (streamState.missingFor), or it could create the row again while a
// holder of the recreated row may still deliver, or at the start position
// while this instance knows the checkpoint. A failed announcement is
// retried at the start of every round (flushRecreated).
func (g *Group) announceRecreated(ctx context.Context, key leases.Key) bool {
	g.recSem <- struct{}{}
	defer func() { <-g.recSem }()
	g.recPending[key] = true
	g.recreatedPending.Store(true)
	g.reportRecreatedLocked(ctx)
	return !g.recPending[key]
}

// pendRecreated records that a recreation of key may have landed (its
// CreateAs failed with no answer): it is announced at the next flush, and
// this instance's orphans wait until then. An announcement of a row that
// was not recreated only makes the others' waits on it begin again.
func (g *Group) pendRecreated(key leases.Key) {
	g.recSem <- struct{}{}
	defer func() { <-g.recSem }()
	g.recPending[key] = true
	g.recreatedPending.Store(true)
}

// unannounced reports whether a recreation of key is still to be
// announced.
func (g *Group) unannounced(key leases.Key) bool {
	g.recSem <- struct{}{}
	defer func() { <-g.recSem }()
	return g.recPending[key]
}

// flushRecreated sends the announcements that failed before, if any.
func (g *Group) flushRecreated(ctx context.Context) {
	g.recSem <- struct{}{}
	defer func() { <-g.recSem }()
	g.reportRecreatedLocked(ctx)
}

// reportRecreatedLocked sends every pending announcement; the caller holds
// recSem.
func (g *Group) reportRecreatedLocked(ctx context.Context) {
	for key := range g.recPending {
		if err := g.mem.ReportRecreated(ctx, key); err != nil {
			if ctx.Err() == nil {
				g.log.Warn("kinesislease: announcing a recreated lease row failed; this instance's orphans wait until it lands", "shard", key.Shard, "err", err)
			}
			return
		}
		delete(g.recPending, key)
		g.ownMu.Lock()
		g.ownRecreated[leases.RecreatedBucket(key)]++
		g.ownMu.Unlock()
	}
	g.recreatedPending.Store(len(g.recPending) > 0)
}

// noteRecreated applies the header's Recreated counts h, read by a call
// sent at sent that returned at ret: when another member recreated a row
// of a bucket since the last read, every wait on a missing row of that
// bucket begins again with a read sent after ret (streamState.setRow).
// The round goroutine calls it.
func (g *Group) noteRecreated(h leases.MemberHeader, sent, ret int64) {
	g.ownMu.Lock()
	own := g.ownRecreated
	g.ownRecreated = map[int]int64{}
	g.ownMu.Unlock()
	first := g.exist.checkedAt.Load() == math.MinInt64
	for b := range g.headerRecreated {
		if _, ok := h.Recreated[b]; !ok && b >= 0 && b < leases.RecreatedBuckets {
			g.exist.resetAt[b].Store(ret) // the header lost it (a table recreated)
		}
	}
	if first {
		// Whatever was seen missing before the first header read counts
		// from after it (a round may run on the join's own read).
		for b := range g.exist.resetAt {
			g.exist.resetAt[b].Store(ret)
		}
	} else {
		for b, n := range h.Recreated {
			if b < 0 || b >= leases.RecreatedBuckets {
				continue
			}
			switch d := n - g.headerRecreated[b]; {
			case d < 0:
				// The count went back: the header was recreated with its
				// table, and what was recreated since is unknown.
				g.exist.resetAt[b].Store(ret)
			case d <= own[b]:
				// None but this instance's own.
			case d == 1 && own[b] == 0 && leases.RecreatedBucket(h.RecreatedKey[b]) == b:
				// One recreation, another member's: its row's waits.
				g.exist.resetKey(h.RecreatedKey[b], ret)
			default:
				// Several: every row of the bucket's.
				g.exist.resetAt[b].Store(ret)
			}
		}
	}
	g.headerRecreated = maps.Clone(h.Recreated)
	g.exist.checkedAt.Store(sent)
}

// reportMissing reports the row of id, found missing as r says, in the
// membership header (ReportVanished), so that whoever holds it, released it
// or read it lately re-reads it. One report sent after the row was first
// seen missing covers it: every member re-reads after the report.
func (g *Group) reportMissing(ctx context.Context, st *streamState, id string, r rowState) {
	if r.reported {
		return
	}
	g.reportSem <- struct{}{}
	defer func() { <-g.reportSem }()
	if g.reported && g.lastReport >= r.missingSince {
		st.markReported(id)
		return
	}
	sent := mono()
	if err := g.mem.ReportVanished(ctx); err == nil {
		g.lastReport, g.reported = sent, true
		st.markReported(id)
	}
}
