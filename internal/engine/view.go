package engine

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// rowBook is what this instance knows of the membership rows: the roster
// version of each row in the header as last read, the version each row had
// when this instance last read it, and how many entries it held. Guarded by
// Group.viewMu.
type rowBook struct {
	header   map[int]int64 // row -> roster version, as the header said
	headerOK bool          // the header was read at least once
	headerAt int64         // when the header was last read (on mono())
	vanished int64         // the header's Vanished count, as last read
	readAt   map[int]int64 // row -> the header's version when last read
	entries  map[int]int   // row -> entries alive (not leaving, not found dead) at the last read
	total    map[int]int   // row -> entries at the last read
	// bump holds the rows whose roster this instance changed and whose
	// header version it has not bumped yet (a bump failed): retried every
	// round until it lands.
	bump map[int]bool
}

func newRowBook() rowBook {
	return rowBook{header: map[int]int64{}, readAt: map[int]int64{}, entries: map[int]int{}, total: map[int]int{}, bump: map[int]bool{}}
}

// watched returns the membership rows this instance times besides its own:
// walking the rows after its own, in ring order, every row with entries up
// to and including the first that has an entry alive (or that the header
// lists and was never read), at most maxWatched of them. Every
// row with entries is so watched by the members of the row before it, and
// the members of a row watch each other through their heartbeats, so every
// member is timed by someone at the cost of one read a round; the rows
// passed on the way, whose members are all dead (a whole row died), are
// read too until their entries are removed.
func (b *rowBook) watched(own int) []int {
	last := own
	for r := range b.header {
		last = max(last, r)
	}
	var rows []int
	for i := 1; i <= last && len(rows) < maxWatched; i++ {
		r := (own + i) % (last + 1)
		total, read := b.total[r]
		if !read {
			if _, listed := b.header[r]; listed {
				return append(rows, r)
			}
			continue
		}
		if total == 0 {
			continue
		}
		rows = append(rows, r)
		if b.entries[r] > 0 {
			return rows
		}
	}
	return rows
}

// maxWatched bounds the rows a member times besides its own: one in steady
// state, more only while rows of dead members lie in between (they are read
// until their entries are removed, three timeouts after they died).
const maxWatched = 8

// due returns the rows to read now: those whose roster version moved since
// this instance read them, the watched rows, and the rows asked for (want,
// which it adds the others to); never own.
func (b *rowBook) due(own int, want map[int]bool) []int {
	for r, v := range b.header {
		if at, ok := b.readAt[r]; !ok || at != v {
			want[r] = true
		}
	}
	for _, w := range b.watched(own) {
		want[w] = true
	}
	delete(want, own) // comes back with every heartbeat
	return slices.Sorted(maps.Keys(want))
}

// complete reports whether every row the header lists has been read once.
func (b *rowBook) complete(own int) bool {
	if !b.headerOK {
		return false
	}
	for r := range b.header {
		if _, ok := b.total[r]; !ok && r != own {
			return false
		}
	}
	return true
}

// refreshView reads the membership header (one small item) and the rows it
// calls for: those whose roster changed, the watched row (for timing), and
// rows named by a lease this instance has to judge. It reports whether the
// view is complete: the header read and every row it lists read once.
func (g *Group) refreshView(ctx context.Context) bool {
	g.flushBumps(ctx)
	own := g.myRow()
	due := guarded(&g.viewMu, func() bool {
		every := headerEvery(len(g.view.live(mono())), len(g.rows.header))
		return every == 0 || !g.rows.headerOK || time.Duration(mono()-g.rows.headerAt) >= every
	})
	// Due every round, but less often in a large fleet (headerEvery).
	if due {
		if h, err := g.mem.Header(ctx); err != nil {
			if ctx.Err() == nil {
				g.log.Warn("kinesislease: reading the membership header failed", "err", err)
			}
		} else if g.noteHeader(h) {
			// Someone found a lease row missing: whoever holds it recreates
			// it from its checkpoint now (reconcile re-reads every held row).
			g.reconcileNow.Store(true)
		}
	}
	g.viewMu.Lock()
	// Rows to read besides: those of incarnations never seen that a lease
	// row names.
	want := maps.Clone(g.view.unknown)
	for id := range g.view.dupes {
		// Another process's entry with this owner id: read its row every
		// round, so that one that stopped heartbeating is seen stale and
		// forgotten (the row may never change roster again).
		want[rowOf(id.inc)] = true
	}
	delete(want, -1) // an incarnation that names no row (rowOf)
	clear(g.view.unknown)
	rows := g.rows.due(own, want)
	// Rows of members whose timeout has run out: read now, own row
	// included (its entries otherwise come back only with the heartbeat).
	suspect, _ := g.view.suspects(mono(), g.timedLocked(own))
	rows = slices.Concat(rows, slices.DeleteFunc(suspect, func(r int) bool { return slices.Contains(rows, r) }))
	g.viewMu.Unlock()
	bounded(ctx, len(rows), func(i int) {
		v := guarded(&g.viewMu, func() int64 { return g.rows.header[rows[i]] })
		if _, err := g.readMembersRow(ctx, rows[i], v); err != nil && ctx.Err() == nil {
			g.log.Warn("kinesislease: reading membership row failed", "row", rows[i], "err", err)
		}
	})
	return guarded(&g.viewMu, func() bool { return g.rows.complete(own) })
}

// headerBudget is the read units a second the fleet spends on the
// membership header, which every member reads: a third of DynamoDB's
// per-item limit (3,000), so that the header never throttles.
const headerBudget = 1000

// headerEvery is how long a member waits between two reads of the header,
// in a fleet of members live members whose header lists rows rows: every
// round (0) while the fleet is small, and so that the fleet's reads stay
// within headerBudget as it grows (a strongly consistent read costs a
// unit per 4 KB; the header holds about 9 bytes a row). At the defaults,
// every round up to 1,250 members; every 10 s at 5,000 (a 5.6 KB header:
// two units a read, 1,000 units a second in all). A roster change or a
// vanished report is seen that much later; heartbeats, deaths of the
// members a member times and its own row are not read through it.
func headerEvery(members, rows int) time.Duration {
	units := (16 + 9*rows + 4095) / 4096
	d := time.Duration(float64(members*units) / headerBudget * float64(time.Second))
	if d < time.Second {
		return 0 // every round
	}
	return d
}

// noteHeader records the membership header h as read now, and reports
// whether its Vanished count moved since the header was last read.
func (g *Group) noteHeader(h leases.MemberHeader) (moved bool) {
	g.viewMu.Lock()
	defer g.viewMu.Unlock()
	moved = g.rows.headerOK && h.Vanished != g.rows.vanished
	g.rows.header, g.rows.headerOK, g.rows.vanished, g.rows.headerAt = h.Rows, true, h.Vanished, mono()
	return moved
}

// readMembersRow reads membership row r into the view (observe), and records it
// as read at roster version v (the header's, as last read).
func (g *Group) readMembersRow(ctx context.Context, r int, v int64) ([]leases.Member, error) {
	sent := mono()
	ms, err := g.mem.Members(ctx, r)
	if err != nil {
		return nil, err
	}
	g.observe(r, ms, sent, mono())
	guard(&g.viewMu, func() { g.rows.readAt[r] = v })
	return ms, nil
}

// guard runs f holding mu.
func guard(mu sync.Locker, f func()) {
	mu.Lock()
	defer mu.Unlock()
	f()
}

// guarded returns what f reads holding mu.
func guarded[T any](mu sync.Locker, f func() T) T {
	mu.Lock()
	defer mu.Unlock()
	return f()
}

// observe records a membership row as read (see memberView.observe).
func (g *Group) observe(r int, rows []leases.Member, sent, ret int64) {
	inc := g.Incarnation()
	g.viewMu.Lock()
	defer g.viewMu.Unlock()
	live, now := 0, mono()
	for _, m := range rows {
		// Before alive, which makes an incarnation it looks up known (a
		// row holds one entry an owner: alive on one never makes another
		// known).
		if m.Owner != g.cfg.Owner && !m.Leaving && m.Young && g.view.obs[memberID{m.Owner, m.Incarnation}] == nil {
			g.joinSeen.Store(ret) // one joining
		}
		if !m.Leaving && (m.Owner == g.cfg.Owner || g.view.alive(m.Owner, m.Incarnation, now)) {
			live++
		}
		if p := int64(m.Proof); p > g.fleetProof.Load() {
			g.fleetProof.Store(p) // only this goroutine's callers, under viewMu, write it
		}
	}
	g.rows.entries[r] = live
	g.rows.total[r] = len(rows)
	own := slices.ContainsFunc(rows, func(m leases.Member) bool { return m.Owner == g.cfg.Owner && m.Incarnation == inc })
	if since := g.entrySince.Load(); since != 0 && (sent >= since || own && sent >= g.rejoinSent.Load()) {
		// A read of the table this instance's entry is in (sent after it
		// was written, or an answer that shows it, sent after the entry
		// was last written again as the same incarnation: one sent before
		// may show it in the table it vanished with): an entry of another
		// member that has stood for longer than a timeout shows that the
		// table was not recreated for as long (tableOld).
		if slices.ContainsFunc(rows, func(m leases.Member) bool { return m.Owner != g.cfg.Owner && !m.Leaving && !m.Young }) {
			g.oldSeen.Store(ret)
		}
	}
	if moved := g.view.observe(r, rows, inc, sent, ret); len(moved) > 0 {
		g.noteEnded(moved) // a member ended a shard: its children are in the shard lists now
	}
}

// rosterChanged bumps row's roster version in the header after this
// instance changed its roster (joined, left, marked a member dead, removed
// one), so that the others re-read it; a bump that fails is retried every
// round.
func (g *Group) rosterChanged(ctx context.Context, row int) {
	if err := g.mem.BumpRow(ctx, row); err != nil {
		guard(&g.viewMu, func() { g.rows.bump[row] = true })
		if ctx.Err() == nil {
			g.log.Warn("kinesislease: announcing a membership change failed; retrying", "row", row, "err", err)
		}
	}
}

// bumpLater has the next round bump row's roster version in the header
// (rosterChanged), and kicks that round. The heartbeat loop calls it after
// it changed its own entry (a join, a new incarnation after a fence, an
// entry written again): a header write there would have no deadline that
// ends before the new fence, and a slow header (throttled: the SDK's three
// attempts take seconds) would let that fence pass before the next
// heartbeat, fence again, and so on while the header stays slow.
func (g *Group) bumpLater(row int) {
	guard(&g.viewMu, func() { g.rows.bump[row] = true })
	g.kickRound()
}

// flushBumps makes the roster bumps asked for by bumpLater, and retries
// those that failed.
func (g *Group) flushBumps(ctx context.Context) {
	g.viewMu.Lock()
	rows := slices.Sorted(maps.Keys(g.rows.bump))
	clear(g.rows.bump)
	g.viewMu.Unlock()
	for _, r := range rows {
		g.rosterChanged(ctx, r)
	}
}

// duplicates returns a *DuplicateOwnerError once another process has been
// heartbeating with this instance's owner id in another row for longer
// than the wait join allows; it logs the first sight at ERROR.
func (g *Group) duplicates() error {
	own := guarded(&g.mu, func() []string { return slices.Concat(g.incs, g.tried) })
	g.viewMu.Lock()
	defer g.viewMu.Unlock()
	wait := max(g.cfg.ShutdownTimeout, 2*g.cfg.Timeout)
	for id, m := range g.view.dupes {
		o := g.view.obs[id]
		switch {
		// An earlier incarnation of this process, its entry not yet
		// replaced in its row, or an entry it tried to write whose answer
		// was lost: not another process. Nor is an entry gone or leaving,
		// or one not heartbeating (a dead process's leftover entry).
		case slices.Contains(own, id.inc), o == nil || o.absent || m.Leaving, o.stale() >= g.cfg.Timeout:
			delete(g.view.dupes, id)
		case g.dupSince[id] == 0:
			g.dupSince[id] = mono()
			g.log.Error("kinesislease: another process heartbeats with this owner id; give each instance its own owner id", "incarnation", id.inc)
		case time.Duration(mono()-g.dupSince[id]) >= wait:
			return &DuplicateOwnerError{Owner: g.cfg.Owner, Incarnation: id.inc}
		}
	}
	return nil
}

// timedLocked returns whether this instance times the members of a row: its
// own row's (their heartbeats come back with its own) and the watched
// rows'. The caller holds viewMu.
func (g *Group) timedLocked(own int) func(row int) bool {
	watched := g.rows.watched(own)
	return func(row int) bool { return row == own || slices.Contains(watched, row) }
}
