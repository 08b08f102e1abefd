package engine

// A row taken to be read (take, takeToRead): one worker reads it
// (startWorker) until the worker ends, and the round then reports and
// forgets it (reap).

import (
	"context"
	"log/slog"
	"time"

	"github.com/kinesislease/kinesislease/internal/lease"
	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/observe"
	"github.com/kinesislease/kinesislease/internal/shard"
	"github.com/kinesislease/kinesislease/internal/shardlist"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// take takes row l for this incarnation and starts reading it.
func (g *Group) take(ctx context.Context, st *streamState, u unit, l leases.Lease) {
	inc := g.Incarnation()
	// A row recreated with no checkpoint, or recovered from a copy older
	// than one this instance knows, carries on from the checkpoint it
	// knows, written by the take itself (lostrow.Fill).
	knew := st.row(u.Shard).Knew
	released, o := g.lost.Known(u)
	from, filled := lostrow.Fill(l, knew, released, o)
	if err := g.takeToRead(ctx, st, u, l, from, inc, filled); lostrow.Unanswered(err) && ctx.Err() == nil {
		st.log.WarnContext(ctx, "kinesislease: taking lease failed", "shard", u.Shard, "err", err)
	}
}

// takeToRead takes row l, read or known, as incarnation inc, with what the
// take writes on it (from: l, or l with a checkpoint filled), and starts a
// worker on the row taken: a pending rewind first. filled: from's
// checkpoint is one this instance knew, written on a row recreated without
// one (logged). It returns takeAs's error.
func (g *Group) takeToRead(ctx context.Context, st *streamState, u unit, l, from leases.Lease, inc string, filled bool) error {
	sent := mono()
	t, err := g.takeAs(ctx, u, from, inc, true)
	if err != nil {
		return err
	}
	if filled {
		st.log.WarnContext(ctx, "kinesislease: a lease row recreated without a checkpoint; took it with the checkpoint this instance knew", "shard", u.Shard, "seq", from.Checkpoint.String())
	}
	// Taken past the recovery wait, if recovered: the worker's first write
	// clears the mark (see leases.Lease.Recovered).
	t.Recovered = ""
	h := lease.New(lease.Config{Store: g.store, Lease: t, Fence: g.m.Fence(), Sent: sent, Proof: g.proof(st), OnVanish: g.kickRound})
	if t.RewindTo.Sequence != "" {
		if t, err = h.ApplyRewind(ctx); err != nil {
			st.log.WarnContext(ctx, "kinesislease: applying a pending rewind failed", "shard", u.Shard, "err", err)
			// The take landed: the row names this incarnation, which holds
			// it with no worker, as an orphan.
			g.lost.Put(u, lostrow.Orphan{Inc: h.Current().Incarnation, Known: h.AsOrphan()})
			return nil
		}
		st.log.InfoContext(ctx, "kinesislease: rewind applied", "shard", u.Shard, "seq", t.Checkpoint.Sequence)
	}
	st.book.Set(u.Shard, lostrow.Row{Lease: t})
	// Announced before the worker reads: a record is never handled before
	// the acquisition that it belongs to is logged and its hook has run
	// (the chaos run's tally dated a tenure from its report line and took
	// the new worker's first records, 1 ms earlier, for the old one's).
	g.startWorker(ctx, st, u, h, t.Incarnation, func() {
		prev := ""
		if l.Owner != "" && l.Owner != g.cfg.Owner {
			prev = l.Owner
			st.log.InfoContext(ctx, "kinesislease: lease taken over", "shard", u.Shard, "from", l.Owner, resumeAttr(st, t.Checkpoint))
		} else {
			st.log.InfoContext(ctx, "kinesislease: lease acquired", "shard", u.Shard, resumeAttr(st, t.Checkpoint))
		}
		observe.Emit(g.h, g.cfg.Events, observe.LeaseAcquired, kltype.LeaseInfo{Stream: st.cfg.Stream, ShardID: u.Shard, Owner: g.cfg.Owner, Checkpoint: t.Checkpoint, From: prev})
	})
	return nil
}

// startWorker starts reading u, held by h, from its checkpoint, unless the
// incarnation h was taken as is over (then the row is an orphan). announce,
// if not nil, runs once the worker is registered and before it reads a
// record.
func (g *Group) startWorker(ctx context.Context, st *streamState, u unit, h *lease.Held, inc string, announce func()) {
	start := shardlist.StartAt(st.book.Start(), st.list.Shards, u.Shard, h.Current().Checkpoint)
	w := shard.New(ctx, shard.Config{
		Settings: &st.cfg.Worker, Log: st.log, Client: st.cfg.Client, Stream: st.cfg.Stream, Shard: u.Shard, Start: start,
		Lease: h, HashRange: shard.HashRangeOf(st.list.Shards[u.Shard]), Hooks: &g.h.Worker,
	})
	started := false
	g.m.Locked(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.m.IncarnationLocked() != inc || g.workers[u] != nil || g.m.Fence().Passed() || g.m.Fenced() {
			// Fenced or reincarnated while taking: the row names inc but
			// may not be read; the next round takes it afresh, or releases
			// it.
			g.lost.Put(u, lostrow.Orphan{Inc: inc, Known: h.Current()})
			return
		}
		g.workers[u] = w
		g.lost.Delete(u)
		started = true
	})
	if !started {
		return
	}
	if announce != nil {
		announce()
	}
	go func() {
		w.Run()
		// Reaped at once: a rewound worker reads on from its new position,
		// a released row is free for the plan's member, without waiting a
		// round.
		g.kickRound()
	}()
}

// reap forgets finished workers and reports their lease events. A worker
// that applied a rewind reads on from the new checkpoint, or, when the group
// is stopping, releases the lease there.
func (g *Group) reap(ctx context.Context, stopping bool) {
	g.mu.Lock()
	done := map[unit]*worker{}
	for u, w := range g.workers {
		if syncx.Closed(w.Finished()) {
			done[u] = w
			delete(g.workers, u)
		}
	}
	g.mu.Unlock()
	for u, w := range done {
		st := g.streams[u.Stream]
		info := kltype.LeaseInfo{Stream: st.cfg.Stream, ShardID: u.Shard, Owner: g.cfg.Owner, Checkpoint: w.Lease().Current().Checkpoint}
		st.book.Set(u.Shard, lostrow.Row{Lease: w.Lease().Current(), Seen: true})
		if w.Err() == nil {
			syncx.Guard(&g.healthMu, func() { delete(st.failed, u.Shard) })
		}
		switch {
		case w.Err() != nil:
			g.fail(st, u.Shard, w.Err())
		case w.Rewound() && stopping:
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := w.Lease().Release(rctx, leases.Checkpoint{}); err == nil {
				observe.Emit(g.h, g.cfg.Events, observe.LeaseReleased, info)
			}
			cancel()
		case w.Rewound():
			g.startWorker(ctx, st, u, w.Lease(), w.Lease().Current().Incarnation, nil)
		case w.Ended():
			st.log.InfoContext(ctx, "kinesislease: shard ended", "shard", u.Shard)
			st.list.Resync()
			g.sig.ended.Add(1)
			observe.Emit(g.h, g.cfg.Events, observe.ShardEnded, info)
		case w.Lease().TakenOver():
			// Where this instance read it to stays known: should the row
			// come back recreated with no checkpoint, it is written there
			// (take), not an older one noted before this hold.
			g.lost.NoteReleased(u, w.Lease().AsOrphan())
			observe.Emit(g.h, g.cfg.Events, observe.LeaseLost, info)
		default:
			if w.Lease().IsReleased() {
				g.lost.NoteReleased(u, w.Lease().Current())
			} else {
				// The release failed (a store error): the row may still name
				// this incarnation. Release it again until it lands.
				g.lost.Put(u, lostrow.Orphan{Inc: w.Lease().Current().Incarnation, Known: w.Lease().AsOrphan(), Vanished: w.Lease().Vanished()})
			}
			observe.Emit(g.h, g.cfg.Events, observe.LeaseReleased, info)
		}
	}
}

// resumeAttr is where a worker taking a row at cp reads from, for its log
// line: seq, the checkpoint; or start, the subscription's start position,
// for a row with none (never an empty seq).
func resumeAttr(st *streamState, cp leases.Checkpoint) slog.Attr {
	if cp.IsZero() {
		return slog.String("start", st.book.Start().String())
	}
	return slog.String("seq", cp.String())
}
