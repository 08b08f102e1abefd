package membership

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/internal/roster"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

// Refresh reads the membership header (one small item) and the rows it
// calls for: those whose roster changed, the watched row (for timing), and
// rows named by a lease this instance has to judge; first it makes the
// roster bumps the heartbeat loop asked for (bumpLater). It reports whether
// the view is complete: the header read and every row it lists read once.
// The instance's round calls it, and plans nothing before it is complete.
func (me *Member) Refresh(ctx context.Context) bool {
	me.flushBumps(ctx)
	own := me.row()
	due := syncx.Guarded(&me.viewMu, func() bool {
		every := roster.HeaderEvery(len(me.view.Live(fence.Mono())), len(me.rows.Header))
		return every == 0 || !me.rows.HeaderOK || time.Duration(fence.Mono()-me.rows.HeaderAt) >= every
	})
	// Due every round, but less often in a large fleet (roster.HeaderEvery).
	if due {
		sent := fence.Mono()
		if h, err := me.mem.Header(ctx); err != nil {
			if ctx.Err() == nil {
				me.log.WarnContext(ctx, "kinesislease: reading the membership header failed", "err", err)
			}
		} else if me.noteHeader(h, sent) {
			// Someone found a lease row missing: whoever holds it recreates
			// it from its checkpoint now (reconcile re-reads every held row).
			me.host.Reconcile()
		}
	}
	me.viewMu.Lock()
	rows := me.rows.ToRead(me.view, own, fence.Mono())
	me.viewMu.Unlock()
	syncx.Bounded(ctx, storeConcurrency, len(rows), func(i int) {
		v := syncx.Guarded(&me.viewMu, func() int64 { return me.rows.Header[rows[i]] })
		if _, err := me.readMembersRow(ctx, rows[i], v); err != nil && ctx.Err() == nil {
			me.log.WarnContext(ctx, "kinesislease: reading membership row failed", "row", rows[i], "err", err)
		}
	})
	return syncx.Guarded(&me.viewMu, func() bool { return me.rows.Complete(own) })
}

// storeConcurrency bounds the concurrent reads of membership rows of a
// Refresh, as the instance's round bounds its store calls.
const storeConcurrency = 16

// noteHeader records the membership header h as read now, in a read sent
// at sent, and reports whether its Vanished count moved since the header
// was last read. A header of the table this instance's entry is in (a
// read sent after the entry was written) born long enough ago shows the
// table known old (tableOld; see bornOld).
func (me *Member) noteHeader(h leases.MemberHeader, sent int64) (moved bool) {
	if since := me.entrySince.Load(); since != 0 && sent >= since && bornOld(h.Born, time.Now(), me.cfg.Timeout) {
		me.oldSeen.Store(fence.Mono())
	}
	me.viewMu.Lock()
	defer me.viewMu.Unlock()
	moved = me.rows.HeaderOK && h.Vanished != me.rows.Vanished
	me.rows.Header, me.rows.HeaderOK, me.rows.Vanished, me.rows.HeaderAt = h.Rows, true, h.Vanished, fence.Mono()
	return moved
}

// readMembersRow reads membership row r into the view (observe), and records it
// as read at roster version v (the header's, as last read).
func (me *Member) readMembersRow(ctx context.Context, r int, v int64) ([]leases.Member, error) {
	sent := fence.Mono()
	ms, err := me.mem.Members(ctx, r)
	if err != nil {
		return nil, err
	}
	me.observe(r, ms, sent, fence.Mono())
	syncx.Guard(&me.viewMu, func() { me.rows.ReadAt[r] = v })
	return ms, nil
}

// observe records a membership row as read (see roster.View.Observe).
func (me *Member) observe(r int, rows []leases.Member, sent, ret int64) {
	inc := me.Incarnation()
	me.viewMu.Lock()
	defer me.viewMu.Unlock()
	live, now := 0, fence.Mono()
	for _, m := range rows {
		// Before alive, which makes an incarnation it looks up known (a
		// row holds one entry an owner: alive on one never makes another
		// known).
		if m.Owner != me.cfg.Owner && !m.Leaving && m.Young && me.view.Obs[roster.ID{Owner: m.Owner, Inc: m.Incarnation}] == nil {
			me.joinSeen.Store(ret) // one joining
		}
		if !m.Leaving && (m.Owner == me.cfg.Owner || me.view.Alive(m.Owner, m.Incarnation, now)) {
			live++
		}
		if p := int64(m.Proof); p > me.fleetProof.Load() {
			me.fleetProof.Store(p) // only this goroutine's callers, under viewMu, write it
		}
	}
	me.rows.Entries[r] = live
	me.rows.Total[r] = len(rows)
	own := slices.ContainsFunc(rows, func(m leases.Member) bool { return m.Owner == me.cfg.Owner && m.Incarnation == inc })
	if since := me.entrySince.Load(); since != 0 && (sent >= since || own && sent >= me.rejoinSent.Load()) {
		// A read of the table this instance's entry is in (sent after it
		// was written, or an answer that shows it, sent after the entry
		// was last written again as the same incarnation: one sent before
		// may show it in the table it vanished with): an entry of another
		// member that has stood for longer than a timeout shows that the
		// table was not recreated for as long (tableOld).
		if slices.ContainsFunc(rows, func(m leases.Member) bool { return m.Owner != me.cfg.Owner && !m.Leaving && !m.Young }) {
			me.oldSeen.Store(ret)
		}
	}
	if moved := me.view.Observe(r, rows, inc, sent, ret); len(moved) > 0 {
		me.noteEnded(moved) // a member ended a shard: its children are in the shard lists now
	}
}

// rosterChanged bumps row's roster version in the header after this
// instance changed its roster (joined, left, marked a member dead, removed
// one), so that the others re-read it; a bump that fails is retried every
// round.
func (me *Member) rosterChanged(ctx context.Context, row int) {
	if err := me.mem.BumpRow(ctx, row); err != nil {
		syncx.Guard(&me.viewMu, func() { me.rows.Bump[row] = true })
		if ctx.Err() == nil {
			me.log.WarnContext(ctx, "kinesislease: announcing a membership change failed; retrying", "row", row, "err", err)
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
func (me *Member) bumpLater(row int) {
	syncx.Guard(&me.viewMu, func() { me.rows.Bump[row] = true })
	me.host.Kick()
}

// flushBumps makes the roster bumps asked for by bumpLater, and retries
// those that failed.
func (me *Member) flushBumps(ctx context.Context) {
	me.viewMu.Lock()
	rows := slices.Sorted(maps.Keys(me.rows.Bump))
	clear(me.rows.Bump)
	me.viewMu.Unlock()
	for _, r := range rows {
		me.rosterChanged(ctx, r)
	}
}

// Duplicates returns a *DuplicateOwnerError once another process has been
// heartbeating with this instance's owner id in another row for longer
// than the wait Join allows; it logs the first sight at ERROR.
func (me *Member) Duplicates() error {
	own := syncx.Guarded(&me.mu, func() []string { return slices.Concat(me.incs, me.tried) })
	me.viewMu.Lock()
	defer me.viewMu.Unlock()
	wait := max(me.cfg.ShutdownTimeout, 2*me.cfg.Timeout)
	for id, m := range me.view.Dupes {
		o := me.view.Obs[id]
		switch {
		// An earlier incarnation of this process, its entry not yet
		// replaced in its row, or an entry it tried to write whose answer
		// was lost: not another process. Nor is an entry gone or leaving,
		// or one not heartbeating (a dead process's leftover entry).
		case slices.Contains(own, id.Inc), o == nil || o.Absent || m.Leaving, o.Stale() >= me.cfg.Timeout:
			delete(me.view.Dupes, id)
		case me.dupSince[id] == 0:
			me.dupSince[id] = fence.Mono()
			me.log.Error("kinesislease: another process heartbeats with this owner id; give each instance its own owner id", "incarnation", id.Inc)
		case time.Duration(fence.Mono()-me.dupSince[id]) >= wait:
			return &DuplicateOwnerError{Owner: me.cfg.Owner, Incarnation: id.Inc}
		}
	}
	return nil
}

// noteEnded records that the Ended counts of owners moved (an observe of a
// membership row; the caller holds viewMu), and tells the host.
func (me *Member) noteEnded(owners []string) {
	now := fence.Mono()
	for _, o := range owners {
		syncx.PutIn(&me.endedMoves, o, now)
	}
	me.host.EndedMoved()
}

// EndedMoves returns when (Mono) each member's Ended count was last seen
// moving, as of now, forgetting the moves older than keep.
func (me *Member) EndedMoves(now int64, keep time.Duration) map[string]int64 {
	me.viewMu.Lock()
	defer me.viewMu.Unlock()
	maps.DeleteFunc(me.endedMoves, func(_ string, at int64) bool { return time.Duration(now-at) > keep })
	return maps.Clone(me.endedMoves)
}

// NextSuspect returns the earliest instant (Mono) at which the timeout of
// a member this instance times runs out (0: none): the instance's next
// round is due then, to find it dead at once.
func (me *Member) NextSuspect() int64 {
	own := me.row()
	me.viewMu.Lock()
	defer me.viewMu.Unlock()
	_, next := me.view.Suspects(fence.Mono(), me.rows.Timed(own))
	return next
}

// Prune forgets the incarnations absent for long (roster.View.Prune).
func (me *Member) Prune() { syncx.Guard(&me.viewMu, func() { me.view.Prune(fence.Mono()) }) }

// Alive reports whether incarnation inc of owner may still hold leases at
// now (roster.View.Alive): a row it names may be taken only once it is not.
func (me *Member) Alive(owner, inc string, now int64) bool {
	return syncx.Guarded(&me.viewMu, func() bool { return me.view.Alive(owner, inc, now) })
}

// Live returns the latest entry of every owner the plan spreads the
// shards over at now, sorted by owner: this instance's (its Owner alone
// if none was read) and every other owner's whose latest entry is an
// incarnation seen alive.
func (me *Member) Live(now int64) []leases.Member {
	me.viewMu.Lock()
	defer me.viewMu.Unlock()
	var live []leases.Member
	for _, o := range me.view.Live(now) {
		m := me.view.Latest[o]
		m.Owner = o
		live = append(live, m)
	}
	return live
}

// Latest returns the entry of owner as last read, and whether one was.
func (me *Member) Latest(owner string) (leases.Member, bool) {
	me.viewMu.Lock()
	defer me.viewMu.Unlock()
	m, ok := me.view.Latest[owner]
	return m, ok
}

// AnnounceDead marks the entry of every member this instance just found
// dead as leaving (a write conditional on the heartbeat it saw unchanged for
// the timeout), so that the other members act on the death at their next
// read instead of each waiting out its own timeout: the failover is the
// first detector's, not the last's. The dead member's fence has passed; if
// it was only paused, it has lost every lease and its next heartbeat rejoins
// it with none.
func (me *Member) AnnounceDead(ctx context.Context) {
	me.viewMu.Lock()
	dead := me.view.Dead() // none marked leaving: each is announced (rewriteEntries)
	for _, m := range dead {
		me.view.Obs[roster.ID{Owner: m.Owner, Inc: m.Incarnation}].Announced = true // tried once: the others try too, the row decides
	}
	me.viewMu.Unlock()
	me.rewriteEntries(ctx, dead, "kinesislease: member dead; its leases are free to take", func(m leases.Member) leases.Member {
		m.Leaving = true
		return m
	})
}

// RemoveStale removes entries seen unchanged for three timeouts, so the
// membership rows hold the live fleet and leave room for new members. Any
// member that timed them does it (those of their row and of the row before
// it); the writes are conditional, so a race is harmless.
//
// The removal of an entry already marked leaving is not announced in the
// header: every member left it out of its plan when it was marked (that
// mark was announced), so no other member needs to read the row again for
// it; the members that time the row read it anyway, and the others see
// the removal at the row's next roster change (a join into the room it
// left). Announcing it cost every member of the fleet a read per dead
// member.
func (me *Member) RemoveStale(ctx context.Context) {
	stale := syncx.Guarded(&me.viewMu, func() []leases.Member { return me.view.StaleEntries() })
	me.rewriteEntries(ctx, stale, "kinesislease: removed a dead member's entry", func(leases.Member) leases.Member { return leases.Member{} })
}

// rewriteEntries replaces each entry m of ms by next(m), a write
// conditional on m unchanged, logs msg for each one written, and announces
// the change of its row (rosterChanged) unless m was marked leaving
// already (see RemoveStale).
func (me *Member) rewriteEntries(ctx context.Context, ms []leases.Member, msg string, next func(leases.Member) leases.Member) {
	for _, m := range ms {
		if r := roster.RowOf(m.Incarnation); r >= 0 {
			if _, err := me.mem.ReplaceMember(ctx, r, m, next(m)); err == nil {
				me.log.Info(msg, "member", m.Owner, "incarnation", m.Incarnation)
				if !m.Leaving {
					me.rosterChanged(ctx, r)
				}
			}
		}
	}
}
