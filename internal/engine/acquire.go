package engine

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

// heldInfo is what decide needs of a held lease.
type heldInfo struct {
	stopping bool // its worker is draining already
	active   bool // its shard may be read (not ended, parents done)
}

// actions is what one round does to leases: the outcome of decide.
type actions struct {
	handoffs []unit // held, the plan gives them another member: drain and release
	overCap  []unit // held beyond the cap, the plan gives them nobody: drain and release
	takes    []unit // the plan gives them this instance: read the row, take it if free or dead
	retakes  []unit // orphans the plan gives this instance: take them directly, as the new incarnation
	releases []unit // orphans the plan gives another member or nobody: release them
}

// decide turns the plan a (unit → owner) into actions for self, given the
// leases it holds, its orphans (true: a worker of the orphan still runs, so
// wait for it), whether the plan has stood for two rounds (settled: only
// then are held leases handed over, so that views settling do not move
// leases back and forth), the lease cap (0: none) and the units set aside
// after a failure. It is pure. An orphan never waits for a release before
// it is taken again: the self-fencing livelock of releasing every row one
// at a time after a fence, and then taking each back, cannot happen.
func decide(self string, a map[unit]string, held map[unit]heldInfo, orphans map[unit]bool, settled bool, maxLeases int, failing func(unit) bool) actions {
	var act actions
	over := len(held) - maxLeases
	for u, h := range held {
		if !settled || h.stopping {
			continue
		}
		owner, ok := a[u]
		switch {
		case ok && owner != self:
			act.handoffs = append(act.handoffs, u)
		case !ok && maxLeases > 0 && over > 0 && h.active:
			over--
			act.overCap = append(act.overCap, u)
		}
	}
	for u, running := range orphans {
		switch {
		case running:
			// Its old worker is still stopping: the next round.
		case a[u] == self && !failing(u):
			act.retakes = append(act.retakes, u)
		default:
			act.releases = append(act.releases, u)
		}
	}
	for u, owner := range a {
		_, h := held[u]
		_, o := orphans[u]
		if owner == self && !h && !o && !failing(u) {
			act.takes = append(act.takes, u)
		}
	}
	for _, s := range [][]unit{act.handoffs, act.overCap, act.takes, act.retakes, act.releases} {
		slices.SortFunc(s, cmpUnit)
	}
	return act
}

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
	held := make(map[unit]heldInfo, len(workers))
	for u, w := range workers {
		held[u] = heldInfo{stopping: w.Stopping(), active: g.active(g.streams[u.Stream], u.Shard)}
	}
	act := decide(g.cfg.Owner, a, held, running, g.rs.sameRounds >= 2, g.cfg.MaxLeases, g.failing)
	for _, u := range act.handoffs {
		g.streams[u.Stream].log.Info("kinesislease: handing lease over", "shard", u.Shard, "to", a[u])
		workers[u].StopWithin(g.cfg.ShutdownTimeout)
	}
	for _, u := range act.overCap {
		g.streams[u.Stream].log.Info("kinesislease: releasing a lease beyond the cap", "shard", u.Shard, "max_leases", g.cfg.MaxLeases)
		workers[u].StopWithin(g.cfg.ShutdownTimeout)
	}
	// Rows not read yet first: a round cut by its deadline leaves the
	// ones it read known, and the next reads the others (never the same
	// ones again and again).
	slices.SortStableFunc(act.takes, func(x, y unit) int { return cmpBool(g.unreadRow(y), g.unreadRow(x)) })
	rejoin := g.m.RejoinSent() // before TableOld and the reads: see membership.Member.SameTable
	syncx.Bounded(ctx, storeConcurrency, len(act.retakes), func(i int) { g.retake(ctx, act.retakes[i], orphans[act.retakes[i]]) })
	// The rows to take, a chunk at a time: the reads, then the takes. A row
	// that says nothing of where its shard was read to is taken only once
	// a read sent after the chunk's reads found this instance's entry: it
	// was read from the table the entry is in, not one recreated since,
	// where it may have been created again while its holder still
	// delivers (seed 98129615: a new stream's rows created again just
	// after the table was dropped, and read at once). One read a chunk,
	// and a chunk's takes never wait for the round's other reads (a round
	// cut by its deadline takes what it read).
	for start := 0; start < len(act.takes) && ctx.Err() == nil; start += takeChunk {
		chunk := act.takes[start:min(start+takeChunk, len(act.takes))]
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
	syncx.Bounded(ctx, storeConcurrency, len(act.releases), func(i int) { g.releaseOrphan(ctx, act.releases[i], orphans[act.releases[i]]) })
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
	case r.Created && st.cfg.Stream == st.key && g.m.TableOld():
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
			st.log.Warn("kinesislease: reading lease row failed", "shard", u.Shard, "err", err)
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
