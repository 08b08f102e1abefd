package engine

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/internal/syncx"
)

// abandonAfter: how long shutdown waits, after cancelling the handlers
// at the shutdown timeout, for those that ignore their context.
const abandonAfter = 5 * time.Second

// shutdown drains every worker, bounded by ShutdownTimeout, while the
// heartbeat loop goes on (the leases stay held while the heartbeat
// advances), then releases the orphan rows. It returns within
// ShutdownTimeout + abandonAfter + the releases' deadlines, whatever the
// handlers do: a handler that ignores its cancelled context is abandoned
// (logged at ERROR with its shard; its lease row is released for the next
// holder, which may deliver the abandoned record again).
func (g *Group) shutdown() {
	g.mu.Lock()
	ws := slices.Collect(maps.Values(g.workers))
	for _, w := range ws {
		w.Stop()
	}
	g.mu.Unlock()
	ctx := context.Background()
	if len(ws) > 0 {
		for _, w := range drain(g.log, ws, g.cfg.ShutdownTimeout, abandonAfter) {
			w.Log().Error("kinesislease: a handler ignored its cancelled context past the shutdown timeout; abandoning it and releasing its lease (the record in flight may be delivered again by the next holder)",
				"stream", w.Stream(), "after", g.cfg.ShutdownTimeout+abandonAfter)
			known := w.Lease().Current()
			w.Lease().MarkLost()
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = g.store.Release(rctx, known, known.Checkpoint)
			cancel()
		}
		g.reap(ctx, true)
	}
	g.mu.Lock()
	orphans := g.lost.Orphans()
	maps.DeleteFunc(orphans, func(u unit, _ lostrow.Orphan) bool { return g.workers[u] != nil })
	g.mu.Unlock()
	units := slices.SortedFunc(maps.Keys(orphans), plan.CompareUnits)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	syncx.Bounded(rctx, storeConcurrency, len(units), func(i int) {
		cctx, cancel := context.WithTimeout(rctx, 5*time.Second)
		defer cancel()
		g.releaseOrphan(cctx, units[i], orphans[units[i]])
	})
	g.log.Info("kinesislease: stopped")
}

// drain waits until every worker of ws (asked to stop) is done; once
// timeout has passed it cancels their handlers, and once abandon more has
// passed it gives up on those still running and returns them.
func drain(log *slog.Logger, ws []*worker, timeout, abandon time.Duration) []*worker {
	log.Info("kinesislease: draining", "leases", len(ws))
	all := make(chan struct{})
	go func() {
		for _, w := range ws {
			<-w.Finished()
		}
		close(all)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-all:
		return nil
	case <-t.C:
	}
	log.Warn("kinesislease: shutdown timeout; cancelling handlers", "timeout", timeout)
	for _, w := range ws {
		w.Cancel()
	}
	t.Reset(abandon)
	select {
	case <-all:
		return nil
	case <-t.C:
	}
	// A copy: the goroutine above still ranges over ws.
	return slices.DeleteFunc(slices.Clone(ws), func(w *worker) bool { return syncx.Closed(w.Finished()) })
}
