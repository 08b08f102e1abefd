package engine

// Re-reads: of the rows this instance holds, a slice each round, all of
// them when an operator asks (reconcile, recheck), a vanished one
// recreated at once (recreate); of the rows it released or read lately,
// when a row was reported vanished (recheckReleased); of the rows of its
// unanswered writes, once a late write would have landed
// (recheckUncertain).

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

// reconcile re-reads held rows: all of them at once when an operator asked
// (our entry's Notice moved), else a slice each round so that every held
// row is re-read once per Reconcile (2,000 held rows at the defaults: 8 or
// 9 reads a round; 20 held rows: one read every 12 rounds). A pending rewind is applied, whatever checkpoints landed
// since it was asked for; a row another owner holds is lost. A row that
// vanished (a write of its worker found it missing) is recreated at once
// from the checkpoint this instance knows.
func (g *Group) reconcile(ctx context.Context) {
	g.mu.Lock()
	ws := maps.Clone(g.workers)
	maps.DeleteFunc(ws, func(_ unit, w *worker) bool { return w.Stopping() })
	all := slices.SortedFunc(maps.Keys(ws), plan.CompareUnits)
	vanished := slices.DeleteFunc(slices.Clone(all), func(u unit) bool { return !ws[u].Lease().Vanished() })
	g.mu.Unlock()
	syncx.Bounded(ctx, storeConcurrency, len(vanished), func(i int) { g.recreate(ctx, vanished[i], ws[vanished[i]]) })

	now := g.sig.reconcileNow.Swap(false)
	if (now || g.sig.recheckAgain.Swap(false)) && !g.recheckReleased(ctx) {
		g.sig.recheckAgain.Store(true) // only those reads again next round
	}
	if now {
		// Every held row, over as many rounds as it takes: a row read
		// stays read, a read that failed is tried again next round, and a
		// new request adds the rows held now.
		for _, u := range all {
			syncx.PutIn(&g.rs.rechecks, u, true)
		}
	}
	var due []unit
	if len(g.rs.rechecks) > 0 {
		maps.DeleteFunc(g.rs.rechecks, func(u unit, _ bool) bool { return ws[u] == nil }) // no longer held here
		due = slices.SortedFunc(maps.Keys(g.rs.rechecks), plan.CompareUnits)
	} else if n := len(all); n > 0 {
		// Round k of every Reconcile/Heartbeat rounds re-reads the rows
		// from k·n/rounds to (k+1)·n/rounds: each held row once per
		// Reconcile, however few (one row a round, whatever the count,
		// re-read a few held rows every few rounds: 0.8 RCU/s where the
		// protocol's cost says held/300).
		rounds := max(int(g.cfg.Reconcile/g.cfg.Heartbeat), 1)
		k := g.rs.reconciled % rounds
		due = append(due, all[k*n/rounds:(k+1)*n/rounds]...)
		g.rs.reconciled++
	}
	// Within the round's deadline, as before: a holder re-reads its rows
	// within the rounds the lost-row wait allows for; what does not fit is
	// read at the next round, not read again from the first.
	read := make([]bool, len(due))
	syncx.Bounded(ctx, storeConcurrency, len(due), func(i int) { read[i] = ctx.Err() == nil && g.recheck(ctx, due[i], ws[due[i]]) })
	for i, u := range due {
		if read[i] {
			delete(g.rs.rechecks, u)
		}
	}
}

// recheck re-reads the row of u, held by w; it reports whether the read
// succeeded.
func (g *Group) recheck(ctx context.Context, u unit, w *worker) bool {
	st := g.streams[u.Stream]
	l, err := g.store.Get(ctx, w.Lease().Current().Key)
	switch {
	case lostrow.Vanished(l, err):
		// Vanished, and perhaps recreated free by another member: its
		// holder takes it back at once.
		w.Lease().SetVanished(true)
		g.recreate(ctx, u, w)
	case err != nil:
		if ctx.Err() == nil {
			st.log.WarnContext(ctx, "kinesislease: re-reading a held row failed", "shard", u.Shard, "err", err)
		}
		return false
	case l.Owner != g.cfg.Owner || l.Incarnation != w.Lease().Current().Incarnation:
		st.log.WarnContext(ctx, "kinesislease: lease lost", "shard", u.Shard, "new_owner", l.Owner)
		w.Lease().MarkLost()
		w.Kill()
	case l.RewindTo.Sequence != "" && !w.Stopping():
		// Applied whatever the counter: checkpoints that landed between the
		// request and this read do not hide it.
		w.Lease().Adopt(l)
		st.log.InfoContext(ctx, "kinesislease: rewinding", "shard", u.Shard, "from", l.Checkpoint.Sequence, "to", l.RewindTo.Sequence)
		w.Rewind()
	}
	return true
}

// recreate writes the row of u again after it vanished, held by this
// incarnation and from the checkpoint it last wrote, in one write
// (CreateAs), and lets its worker deliver again: never a silent restart
// from the start position. The worker stopped delivering when its write
// found the row missing. A row another member recreated meanwhile, free
// and recovered, it takes at once: nobody else may read it before the
// recovery wait, which this instance, the holder, need not wait for.
func (g *Group) recreate(ctx context.Context, u unit, w *worker) {
	if w.Lease().IsLost() {
		return // a fence ended it since the round began: the orphan is recreated (vanishedOrphan)
	}
	st := g.streams[u.Stream]
	// With the lease's write token held, so that no checkpoint of the
	// worker meets the row half recreated.
	var sent int64
	var atRewind bool
	err := w.Lease().Exclusive(func(known leases.Lease) (leases.Lease, error) {
		// An operator's rewind the worker was about to apply: the row comes
		// back at its position, the rewind applied by the recreation
		// (lease.Held.ApplyRewind then has nothing to write), never past it
		// nor written back over the recreated row later (seed 1606534:
		// recreated at the worker's checkpoint, then released at the
		// rewind's, the checkpoint moved backwards). lostrow.Point counts a
		// rewind pending on known as applied, and returns the shard's last
		// rewind instead when it came after known was read. Seen is false:
		// with no checkpoint known, the row comes back at the start
		// position, as the worker would have read from it.
		best := w.Lease().ResumeAt() // before LastRewind, as the worker asked it then
		rec, err := g.mem.LastRewind(ctx, known.Key)
		if err != nil {
			return leases.Lease{}, err // retried next round; not lost
		}
		cp, rewind, origin := lostrow.Point(known, best, false, rec)
		atRewind = !known.RewindTo.IsZero() || origin == lostrow.FromRewind
		msg := "kinesislease: lease row vanished (table recreated or row deleted); recreating it from this instance's checkpoint"
		if origin == lostrow.FromRewind {
			// An operator's rewind that landed after this instance's last
			// write, and went with the row: the row comes back at its
			// position, as if the worker had applied it.
			msg = "kinesislease: lease row vanished (table recreated or row deleted); recreating it at the operator's rewind that came after this instance's last write"
		}
		st.log.Error(msg, "shard", u.Shard, "seq", cp.String())
		// Bounded by the fence, as every take is: a fence that passes while
		// this round runs (the worker killed, its lease lost) must not be
		// followed by a row taken as the incarnation it ended (seed
		// 1612551: the round's CreateAs, held then, landed 0.3 s after the
		// fence, and a member took the row from the incarnation's leaving
		// entry while the row's write still counted as a take within its
		// lease). Free and recovered, then taken: a copy of the creation applied
		// late (after the row it made was deleted again) leaves a row
		// nobody reads before the recovery wait, not one naming this
		// incarnation with an old checkpoint (seeds 40002590, 60012559).
		cctx, cancel := g.atFence(ctx, known.Incarnation)
		err = g.markToCreate(cctx, st)
		var cur leases.Lease
		if err == nil {
			cur, err = g.mem.CreateAs(cctx, known.Key, "", "", cp, rewind)
		}
		cancel()
		readSent := mono()
		if errors.Is(err, leases.ErrConflict) {
			// The row exists: an earlier attempt of ours (a creation, or
			// a take whose answer was lost), or another member's
			// recreation. Read which.
			cur, err = g.store.Get(ctx, known.Key)
		}
		if err != nil {
			return leases.Lease{}, err // retried next round; not lost
		}
		// What to do with it (the row this instance created is free: not
		// ours, not held).
		act, rewound := lostrow.Reclaim(cur, known, cp, rewind, w.Lease().WithinProof())
		switch act {
		case lostrow.BackLater:
			return leases.Lease{}, errRecoveryHeld
		case lostrow.BackLost:
			return leases.Lease{}, leases.ErrConflict // taken: not ours any more
		case lostrow.BackOn:
			// A rewind pending on it is applied as any other (recheck), not
			// as one the recreation applied.
			sent, atRewind = readSent, false
			cur.Recovered = ""
			return cur, nil
		}
		// Taken at once by this instance, its holder, writing its own
		// checkpoint (BackTake) or writing it on the row it holds already
		// (BackFill); nobody else reads it before the recovery wait.
		sent = mono()
		cctx, cancel = g.atFence(ctx, known.Incarnation)
		defer cancel()
		if rewound {
			cp, atRewind = leases.Checkpoint{}, true
		}
		if atRewind {
			// Written below: the worker reads again from there (with no
			// cp, the operator's rewind of the recovered row).
			w.Lease().RewoundAt(cmp.Or(cp, cur.Checkpoint))
		}
		if act == lostrow.BackFill {
			cur.Recovered = "" // the holder does not wait (see leases.Lease.Recovered)
			return g.store.Checkpoint(cctx, cur, cp)
		}
		cur.Checkpoint = cmp.Or(cp, cur.Checkpoint) // cp written by the take itself (leases.Membership.TakeAs)
		t, err := g.mem.TakeAs(cctx, cur, known.Owner, known.Incarnation)
		if errors.Is(err, leases.ErrConflict) && w.Lease().WithinProof() {
			return leases.Lease{}, errRecoveryHeld // written meanwhile (a repair): read again next round
		}
		t.Recovered = "" // the holder does not wait (see leases.Lease.Recovered)
		return t, err
	})
	if lostrow.Unanswered(err) && !errors.Is(err, errRecoveryHeld) {
		// A write that may land late, naming this incarnation, after the
		// worker has stopped: read again after the late-write bound
		// (recheckUncertain).
		g.lost.SetUncertain(u, mono()+int64(lateBound*g.cfg.Timeout))
	}
	switch {
	case err == nil:
		w.Lease().Recreated(sent, atRewind)
		if w.Lease().RewoundPending() && !w.Stopping() {
			// The worker never read the request (it came with the record,
			// or the lease took it from a conflicting write's read), or
			// stopped since for it: stop it as for a rewind (applied
			// already by the recreation), and read again from the rewind's
			// position. Until it does, it writes no checkpoint.
			w.Rewind()
		}
	case errors.Is(err, leases.ErrConflict):
		// Recreated and taken by another member (after the recovery wait):
		// not ours any more.
		st.log.WarnContext(ctx, "kinesislease: lease lost: the vanished row was recreated and taken by another member", "shard", u.Shard)
		w.Lease().MarkLost()
		w.Kill()
	case ctx.Err() == nil:
		st.log.WarnContext(ctx, "kinesislease: recreating the lease row failed; retrying", "shard", u.Shard, "err", err)
	}
}

// errRecoveryHeld: the holder's vanished row is recovered and held, for a
// moment, by a member writing the checkpoint it knows on it (recreate).
var errRecoveryHeld = errors.New("kinesislease: the recovered lease row is held for a moment by a member writing its checkpoint on it")

// recheckReleased re-reads the rows this instance released or read lately,
// when someone reported a row vanished (lostrow.Recheck): one that is
// missing becomes an orphan known as it was, so that it is recreated from
// its checkpoint (free and recovered) rather than from the start position
// by a member that never knew where it was read to; so does one recreated
// by such a member with no checkpoint, which this instance then writes on
// it (releaseOrphan's repairFree, or retake's fill). It reports whether
// every read got an answer.
func (g *Group) recheckReleased(ctx context.Context) bool {
	g.mu.Lock()
	rel := g.lost.ToRecheck(func(u unit) bool { return g.workers[u] != nil })
	g.mu.Unlock()
	units := slices.SortedFunc(maps.Keys(rel), plan.CompareUnits)
	var failed atomic.Bool
	syncx.Bounded(ctx, storeConcurrency, len(units), func(i int) {
		u := units[i]
		l, err := g.store.Get(ctx, rel[u].Lease.Key)
		missing := errors.Is(err, leases.ErrNotFound)
		switch lostrow.Recheck(l, rel[u].Lease, err, g.ours(l)) {
		case lostrow.FoundLost:
			g.m.Locked(func() {
				g.mu.Lock()
				defer g.mu.Unlock()
				// Unless held or an orphan: known by its checkpoint only:
				// the row may have named another member (a row read, not
				// released), and a write as that holder could meet the row
				// it recreated, its counter restarted. As a free row, it
				// is never written as anyone's: released is a conflict,
				// then a read.
				known, knew := rel[u].Lease, leases.Checkpoint{}
				if r := rel[u].Lease; !missing && lostrow.NoStart(l) && l.Counter == r.Counter && l.Token == r.Token {
					// The very version the copy was made of, recreated with
					// nothing (seed 95903527: a version this instance never
					// had, its own checkpoint on it, was taken as it and left
					// empty): known as the version read, which a retake or
					// release conditional on it meets, with what it knew.
					known, knew = l, lostrow.Orphan{Known: rel[u].Lease}.Best()
					known.Checkpoint = leases.Checkpoint{} // a blind recovery's TRIM_HORIZON says nothing: Best is knew
				}
				known.Owner, known.Incarnation = "", ""
				g.lost.FoundLost(u, lostrow.Orphan{Inc: g.m.IncarnationLocked(), Known: known, Knew: knew, Vanished: true}, g.workers[u] != nil, missing)
			})
		case lostrow.FoundFailed:
			failed.Store(true)
		case lostrow.FoundNewer:
			g.lost.Renew(u, l) // what it knows now (the time it was noted stays)
		}
	})
	return !failed.Load()
}

// recheckUncertain reads again the rows of unanswered writes of this
// instance once lateBound timeouts have passed since they were sent: a row
// that names this process while it neither reads it nor holds it as an
// orphan (the write landed late) becomes an orphan, taken again or
// released by the next round.
func (g *Group) recheckUncertain(ctx context.Context) {
	now := mono()
	for _, u := range g.lost.DueUncertain(now) {
		st := g.streams[u.Stream]
		if st == nil {
			g.lost.DropUncertain(u)
			continue
		}
		cur, err := g.store.Get(ctx, leases.Key{Stream: st.key, Shard: u.Shard})
		if err != nil && !errors.Is(err, leases.ErrNotFound) {
			continue // again next round
		}
		var mine bool
		g.m.Locked(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			_, held := g.workers[u]
			mine = err == nil && cur.Owner == g.cfg.Owner && g.m.OursLocked(cur.Incarnation)
			var o *lostrow.Orphan // made an orphan unless it is one
			if mine && !held {
				o = &lostrow.Orphan{Inc: cur.Incarnation, Known: cur}
			}
			if g.lost.Settle(u, now, o) {
				st.log.WarnContext(ctx, "kinesislease: a write of this instance whose answer was lost landed late: the row names it; taking it again or releasing it", "shard", u.Shard)
			}
		})
		if err == nil && !mine {
			g.lost.NoteReleased(u, cur) // known as read, as acquire does (seed 94016513)
		}
	}
}
