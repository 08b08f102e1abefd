package engine

// The table's id and rows that never existed. Every creation of a lease row
// is recorded apart from the row, in an item a deletion of the row leaves in
// place (leases.Membership.CreateNew), and the table carries an id
// (TableID) that goes with it when it is recreated empty. On a table whose
// id this instance trusts, a missing row whose shard has no creation
// recorded never existed (a stream new to a table in use, subscribed at
// start or at runtime): it is created and taken at once, not after the
// lost-row waits, which are for rows that vanished.
//
// An id is trusted when it was there when this instance joined, or when
// this instance wrote it. It is written only by a member that has been in
// the membership for the longest lost-row wait (rowWaits.announced) since
// it joined, while no member it knows announces rows it will recreate and
// it has none itself: by then every row of an earlier table (one recreated
// empty under its fleet) that a live member knew has been recreated, and
// recorded, or nobody alive knows it. A member whose own entry vanished (a
// table recreated?) trusts no id until it has waited as long again.

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// tableTrust is the table id this instance trusts, if any, and since when
// it may write one.
type tableTrust struct {
	mu      sync.Mutex
	id      string // trusted; "" for none
	since   int64  // mono() of the join or rejoin the wait counts from
	started bool
	// recorded are shards whose CreateNew found a creation recorded: they
	// existed, and are not tried again.
	recorded map[leases.Key]bool
}

// wasCreated reports whether key's shard is known to have had a row.
func (t *tableTrust) wasCreated(key leases.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recorded[key]
}

// created records that key's shard had a row.
func (t *tableTrust) created(key leases.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.recorded == nil {
		t.recorded = map[leases.Key]bool{}
	}
	t.recorded[key] = true
}

// joined records the id read at a join ("" for none).
func (t *tableTrust) joined(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.id = id
	if !t.started {
		t.since, t.started = mono(), true
	}
}

// distrust forgets the trusted id: the table may have been recreated. The
// wait before this instance may write one begins again.
func (t *tableTrust) distrust() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.id, t.since, t.started, t.recorded = "", mono(), true, nil
}

// trusted returns the trusted id, "" for none.
func (t *tableTrust) trusted() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.id
}

// ensureTableID writes the table's id once this instance may (see the
// file's comment) and trusts no id yet.
func (g *Group) ensureTableID(ctx context.Context) {
	g.table.mu.Lock()
	ready := g.table.id == "" && g.table.started
	since := g.table.since
	g.table.mu.Unlock()
	if !ready || g.vanishedKnown.Load() > 0 || g.knowerAlive() {
		return
	}
	for _, st := range g.streams {
		if time.Duration(mono()-since) < g.rowWaits(st).announced {
			return
		}
	}
	g.mu.Lock()
	orphans := len(g.orphans)
	g.mu.Unlock()
	if orphans > 0 {
		return
	}
	id, err := g.mem.SetTableID(ctx, rand.Text())
	if err != nil {
		return // again next round
	}
	g.table.mu.Lock()
	if g.table.since == since {
		g.table.id = id
	}
	g.table.mu.Unlock()
}

// createNew creates and takes the missing row of u at once if its shard
// has no creation recorded on a table whose id this instance trusts, and
// reports whether it dealt with the row that way (false: the row existed,
// or nothing can be told: the lost-row rules apply). The id is read again
// after the creation: the same id then means the creation landed on the
// trusted table (ids never come back), where the shard's row never existed.
func (g *Group) createNew(ctx context.Context, st *streamState, u unit) bool {
	trusted := g.table.trusted()
	if trusted == "" {
		return false
	}
	key := leases.Key{Stream: st.key, Shard: u.Shard}
	if g.table.wasCreated(key) {
		return false
	}
	l, err := g.mem.CreateNew(ctx, key)
	if errors.Is(err, leases.ErrConflict) {
		g.table.created(key)
		return false // created before: it existed, and vanished (or exists now)
	}
	if err != nil {
		return false
	}
	id, err := g.mem.TableID(ctx)
	if err != nil || id != trusted {
		// The table was recreated (or cannot be read): the row, created
		// free, is left to the lost-row rules of every member.
		if err == nil {
			g.table.distrust()
		}
		return true
	}
	st.setRow(u.Shard, rowState{lease: l})
	st.log.Info("kinesislease: lease row created: its shard never had one on this table", "shard", u.Shard, "start", st.cfg.Start.String())
	if g.takeable(st, u.Shard, l) {
		g.take(ctx, st, u, l)
	}
	return true
}
