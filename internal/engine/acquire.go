package engine

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

func cmpBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case x:
		return 1
	}
	return -1
}

// apply carries out the plan: hand-offs and releases beyond the cap drain
// in their workers; takes, direct retakes of orphans and releases of the
// others run concurrently, at most storeConcurrency store calls at once.
func (g *Group) apply(ctx context.Context, a map[unit]string) {
	g.mu.Lock()
	workers, orphans := maps.Clone(g.workers), g.lost.Orphans()
	g.mu.Unlock()
	running := make(map[unit]bool, len(orphans))
	for u := range orphans {
		running[u] = workers[u] != nil
	}
	held := make(map[unit]plan.Held, len(workers))
	for u, w := range workers {
		held[u] = plan.Held{Stopping: w.Stopping(), Active: g.active(g.streams[u.Stream], u.Shard)}
	}
	a = g.rs.balance.Hold(mono(), a, held, func(u unit) leases.Lease { return g.streams[u.Stream].row(u.Shard).Lease })
	act := plan.Decide(g.cfg.Owner, a, held, running, g.rs.sameRounds >= 2, g.cfg.MaxLeases, g.failing)
	for _, u := range act.Handoffs {
		g.streams[u.Stream].log.InfoContext(ctx, "kinesislease: handing lease over", "shard", u.Shard, "to", a[u])
		workers[u].StopWithin(g.cfg.ShutdownTimeout)
	}
	for _, u := range act.OverCap {
		g.streams[u.Stream].log.InfoContext(ctx, "kinesislease: releasing a lease beyond the cap", "shard", u.Shard, "max_leases", g.cfg.MaxLeases)
		workers[u].StopWithin(g.cfg.ShutdownTimeout)
	}
	// Rows not read yet first: a round cut by its deadline leaves the
	// ones it read known, and the next reads the others (never the same
	// ones again and again).
	slices.SortStableFunc(act.Takes, func(x, y unit) int { return cmpBool(g.unreadRow(y), g.unreadRow(x)) })
	rejoin := g.m.RejoinSent() // before TableOld and the reads: see membership.Member.SameTable
	syncx.Bounded(ctx, storeConcurrency, len(act.Retakes), func(i int) { g.retake(ctx, act.Retakes[i], orphans[act.Retakes[i]]) })
	// The rows to take, a chunk at a time: the reads, then the takes. A row
	// that says nothing of where its shard was read to is taken only once
	// a read sent after the chunk's reads found this instance's entry: it
	// was read from the table the entry is in, not one recreated since,
	// where it may have been created again while its holder still
	// delivers (seed 98129615: a new stream's rows created again just
	// after the table was dropped, and read at once). One read a chunk,
	// and a chunk's takes never wait for the round's other reads (a round
	// cut by its deadline takes what it read).
	for start := 0; start < len(act.Takes) && ctx.Err() == nil; start += takeChunk {
		chunk := act.Takes[start:min(start+takeChunk, len(act.Takes))]
		fresh, ok := make([]leases.Lease, len(chunk)), make([]bool, len(chunk))
		syncx.Bounded(ctx, storeConcurrency, len(chunk), func(i int) { fresh[i], ok[i] = g.acquire(ctx, chunk[i]) })
		if slices.Contains(ok, true) && g.m.SameTable(ctx, mono(), rejoin) {
			syncx.Bounded(ctx, storeConcurrency, len(chunk), func(i int) {
				if ok[i] {
					g.take(ctx, g.streams[chunk[i].Stream], chunk[i], fresh[i])
				}
			})
		}
	}
	syncx.Bounded(ctx, storeConcurrency, len(act.Releases), func(i int) { g.releaseOrphan(ctx, act.Releases[i], orphans[act.Releases[i]]) })
}

// takeChunk is how many rows apply reads before it takes those it may.
const takeChunk = 16 * storeConcurrency

// acquire reads the row of u and takes it if it is free, held by a dead
// incarnation, or still names this incarnation. A row that says nothing of
// where its shard was read to (lostrow.NoStart) is taken only in a table
// known old, and by its caller after it checked the table
// (membership.Member.SameTable): acquire returns it then.
func (g *Group) acquire(ctx context.Context, u unit) (leases.Lease, bool) {
	st := g.streams[u.Stream]
	switch r := st.row(u.Shard); {
	case !r.Seen && (st.book.Creating() || r.Missing && !g.m.TableOld()):
		// Being created (createAll), or found missing in a table not
		// known old (whether the stream is new is unknown): a later round
		// reads it.
		return leases.Lease{}, false
	case r.Created && g.m.TableOld():
		// Created free by this instance and untouched since: taken as
		// created (a take conditional on the row as created, so a row
		// changed since fails it), with no read first. Read next time.
		st.book.Set(u.Shard, lostrow.Row{Lease: r.Lease})
		return r.Lease, true
	}
	l, err := g.store.Get(ctx, leases.Key{Stream: u.Stream, Shard: u.Shard})
	if errors.Is(err, leases.ErrNotFound) {
		g.missingRow(ctx, st, u)
		return leases.Lease{}, false
	}
	if err != nil {
		if ctx.Err() == nil {
			st.log.WarnContext(ctx, "kinesislease: reading lease row failed", "shard", u.Shard, "err", err)
		}
		return leases.Lease{}, false
	}
	st.book.Set(u.Shard, lostrow.Row{Lease: l})
	if !g.ours(l) {
		g.lost.NoteReleased(u, l)
	}
	if !g.takeable(l) || !g.reportRecovery(ctx, st, u.Shard) || !g.recoveryPassed(st, u.Shard, l) {
		return leases.Lease{}, false
	}
	if lostrow.NoStart(l) {
		// It may have been created in a table recreated since this
		// instance's entry was written, its holders still delivering: in a
		// table known old, apply takes it after SameTable.
		return l, g.m.TableOld()
	}
	g.take(ctx, st, u, l)
	return leases.Lease{}, false
}
