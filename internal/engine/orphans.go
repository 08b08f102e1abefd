package engine

// Orphans: rows that may name this instance (an earlier incarnation's, or
// a take whose answer was lost) with no worker reading them. Each round
// retakes those the plan gives this instance, directly as the current
// incarnation, and releases the others; one whose row vanished is
// recreated free from the checkpoint it knew.

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// presume records, after a write of row l as incarnation inc that failed
// without a conflict, that the write may have landed with its answer lost:
// the row would then name this instance with nobody reading it, and every
// other member would wait on it for as long as this incarnation lives. So
// it is an orphan, known as the write would have left it; the next round
// reads it before taking it again or releasing it.
func (g *Group) presume(u unit, l leases.Lease, inc string) {
	mine := l
	mine.Owner, mine.Incarnation, mine.Counter = g.cfg.Owner, inc, l.Counter+1
	g.mu.Lock()
	g.uncertain[u] = mono() + int64(lateBound*g.cfg.Timeout)
	o := orphan{inc: inc, known: mine, presumed: true}
	if prev, had := g.orphans[u]; had {
		o.unwaited = prev.unwaited
		// What the orphan it replaces knew stays known: that the row
		// vanished (or, by its counter, was recreated since), and the
		// checkpoint to write on it if it came back with none.
		o.vanished = prev.vanished || l.Counter < prev.realCounter()
		if l.Checkpoint.IsZero() {
			o.knew = prev.best()
		}
	}
	if r, ok := g.released[u]; ok && l.Checkpoint.IsZero() && o.knew.IsZero() {
		o.knew = r.lease.Checkpoint // the fill the take would have written (take)
	}
	g.orphans[u] = o
	g.mu.Unlock()
}

// lateBound, in timeouts, is how long after an unanswered write this
// instance reads its row again (recheckUncertain): a write the database
// applies after its caller gave up lands within it. Requests are answered
// within a timeout and retried at most twice by the SDK; a connection
// closed on a timeout takes its unsent bytes with it.
const lateBound = 3

// disproved reports whether cur, read after orphan o's take or creation
// failed with no answer, shows that write has not landed (yet): the row is
// still the version the take was conditional on. Its late copy may still
// land; this instance takes the row itself then (conditional on that
// version, which the late copy is conditional on too, so that at most one
// lands), whether to read it or to release it: otherwise the row could
// name this incarnation with nobody reading it.
func disproved(o orphan, cur leases.Lease) bool {
	// Not a row that names o's incarnation already: o may know a version
	// of its own (a fill of a take that landed), not one its take was
	// conditional on.
	named := cur.Owner == o.known.Owner && cur.Incarnation == o.inc && cur.Owner != ""
	return o.presumed && o.known.Token != "" && cur.Token == o.known.Token && !named
}

// recheckUncertain reads again the rows of unanswered writes of this
// instance once lateBound timeouts have passed since they were sent: a row
// that names this process while it neither reads it nor holds it as an
// orphan (the write landed late) becomes an orphan, taken again or
// released by the next round.
func (g *Group) recheckUncertain(ctx context.Context) {
	now := mono()
	g.mu.Lock()
	due := slices.DeleteFunc(slices.Collect(maps.Keys(g.uncertain)), func(u unit) bool { return now < g.uncertain[u] })
	g.mu.Unlock()
	for _, u := range due {
		st := g.streams[u.Stream]
		if st == nil {
			guard(&g.mu, func() { delete(g.uncertain, u) })
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
			if at := g.uncertain[u]; at <= now {
				delete(g.uncertain, u)
			}
			_, held := g.workers[u]
			_, orphaned := g.orphans[u]
			mine = err == nil && cur.Owner == g.cfg.Owner && g.m.OursLocked(cur.Incarnation)
			if mine && !held && !orphaned {
				g.orphans[u] = orphan{inc: cur.Incarnation, known: cur}
				st.log.Warn("kinesislease: a write of this instance whose answer was lost landed late: the row names it; taking it again or releasing it", "shard", u.Shard)
			}
		})
		if err == nil && !mine {
			g.noteReleased(u, cur) // known as read, as acquire does (seed 94016513)
		}
	}
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

// retake takes an orphan row directly as the current incarnation: a write
// conditional on the row as this instance last knew it, with a read only
// if that fails. A row found missing is recreated free from what the
// orphan knew (vanishedOrphan) and taken after the recovery wait.
func (g *Group) retake(ctx context.Context, u unit, o orphan) {
	st := g.streams[u.Stream]
	inc := g.Incarnation()
	l, read := o.known, false
	// Read first if our take's answer was lost (o.presumed: the row may be
	// ours at that counter, or another's write made the same counter), and
	// on each attempt after the first: the row as it is now says.
	for attempt := 0; ; attempt++ {
		if o.presumed || attempt > 0 {
			cur, ok := g.rereadOrphan(ctx, st, u, o, attempt == 0)
			if !ok {
				return
			}
			l, read = cur, true
		}
		w := l // an orphan of a take that did not wait: of the recovery it took
		if o.unwaited {
			w.Recovered = cmp.Or(w.Recovered, o.known.Recovered)
		}
		if (!g.ours(l) || o.unwaited) && !g.recoveryPassed(st, u.Shard, w) {
			if read {
				return // recovered: taken once its last holder has stopped
			}
			continue // known from before: read it
		}
		from := l
		switch {
		case !read:
			// Known, not read: the take keeps the row's checkpoint (known's
			// is where this instance read to, which a rewind may have
			// moved since).
			from.Checkpoint = leases.Checkpoint{}
		case g.recreated(u, o, l):
			// The row vanished and is back with no checkpoint, recreated
			// by a member that never knew one while this instance could
			// not write: carry on from the checkpoint this instance knows,
			// not from the start position, written by the take itself. (A
			// row back with a checkpoint, even an older one, is taken from
			// it: see take.)
			from = o.filled(from)
		}
		switch err := g.takeToRead(ctx, st, u, l, from, inc, false); {
		case errors.Is(err, leases.ErrNotFound):
			g.vanishedOrphan(ctx, st, u, o)
		case errors.Is(err, leases.ErrConflict) && attempt == 0:
			continue // read it
		}
		return // taken, or an uncertain take presumed ours (takeAs)
	}
}

// rereadOrphan reads orphan o's row again before retaking it, and reports
// whether to go on with the row it returns: ours, or takeable. A missing
// row is recreated from what o knew (vanishedOrphan); with dropEmpty, an
// orphan that knew no checkpoint is simply dropped then (nothing to save:
// missingRow as for any member). A row someone else holds is forgotten.
func (g *Group) rereadOrphan(ctx context.Context, st *streamState, u unit, o orphan, dropEmpty bool) (leases.Lease, bool) {
	cur, err := g.store.Get(ctx, o.known.Key)
	switch {
	case errors.Is(err, leases.ErrNotFound) && dropEmpty && o.best().IsZero():
		g.dropOrphan(u, o)
	case errors.Is(err, leases.ErrNotFound):
		g.vanishedOrphan(ctx, st, u, o)
	}
	if err != nil {
		return leases.Lease{}, false
	}
	st.setRow(u.Shard, rowState{lease: cur})
	if cur.Rewind != "" && !g.ours(cur) && (o.known.Rewind == "" || driver.RewindAfter(cur.Rewind, o.known.Rewind)) {
		g.adoptRewind(u, o, cur)
	}
	if !g.ours(cur) && !g.takeable(cur) && !disproved(o, cur) {
		g.forgetOrphan(u, o, cur) // someone else's: someone took it
		return leases.Lease{}, false
	}
	return cur, true
}

// recreated reports whether the row of orphan o of u, read as l, was
// recreated since this instance knew it by a member that knew no checkpoint
// (or an older copy) while o knows one, so that o's is to be written on it:
// l says nothing of where the shard was read to, or was recovered from a
// copy older than o's (lostrow.Outdated); and this instance found the row
// missing, the row's counter went back (counters only grow, and restart at
// 1 on a recreation), or the row has no checkpoint where o knew one.
func (g *Group) recreated(u unit, o orphan, l leases.Lease) bool {
	if o.best().IsZero() || !lostrow.NoStart(l) && !lostrow.Outdated(l, o.known) {
		return false
	}
	// A checkpoint is never cleared while a row lives.
	if o.vanished || l.Counter < o.realCounter() || lostrow.NoStart(l) {
		return true
	}
	cur := guarded(&g.mu, func() orphan { return g.orphans[u] })
	return cur.inc == o.inc && cur.vanished // false if none
}

// editOrphan changes orphan o of u as f says, unless it was replaced
// meanwhile.
func (g *Group) editOrphan(u unit, o orphan, f func(*orphan)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if cur, ok := g.orphans[u]; ok && cur.inc == o.inc {
		f(&cur)
		g.orphans[u] = cur
	}
}

// releaseOrphan frees an orphan row the plan gives another member, keeping
// the checkpoint last written while the lease was trusted. An orphan whose
// row vanished is recreated free from that checkpoint (vanishedOrphan),
// so that the member the plan gives it to does not start it at the start
// position.
func (g *Group) releaseOrphan(ctx context.Context, u unit, o orphan) {
	st := g.streams[u.Stream]
	l := o.known
	for attempt := 0; ; attempt++ {
		// Released with no checkpoint, keeping the row's: the last one
		// written. A row of ours recreated since this instance knew it
		// (our take's fill not written yet, or its answer lost) gets the
		// one this instance knows: the write is conditional on our version
		// of the row, whose checkpoint is none or that one.
		var cp leases.Checkpoint
		if l.RewindTo.IsZero() && (lostrow.NoStart(l) || o.vanished) {
			cp = o.best()
		}
		rl, err := g.store.Release(ctx, l, cp)
		if err == nil {
			st.log.Info("kinesislease: released a lease lost at a fence", "shard", u.Shard)
			g.dropOrphan(u, o)
			g.noteReleased(u, rl)
			return
		}
		var cur leases.Lease
		if errors.Is(err, leases.ErrConflict) && attempt == 0 {
			cur, err = g.store.Get(ctx, l.Key) // the row the release met
		}
		switch {
		case errors.Is(err, leases.ErrNotFound):
			g.vanishedOrphan(ctx, st, u, o)
		case err != nil:
			// Failed, or met a row again: next round.
		case disproved(o, cur):
			// Our take has not landed, and may still: take the row
			// ourselves first, then release it.
			g.invalidate(ctx, st, u, o, cur)
		case !g.ours(cur) && !cur.Held() && g.recreated(u, o, cur):
			// Recreated free with no checkpoint by a member that knew
			// none, while this instance could not write: put the one
			// it knows on the row for whoever the plan gives it to.
			g.repairFree(ctx, st, u, o, cur)
		case !g.ours(cur):
			g.forgetOrphan(u, o, cur) // someone took it, or our release's answer was lost
		default:
			l = cur // ours still, perhaps under a later incarnation: release that
			continue
		}
		return
	}
}

// invalidate takes row l, the version a take of this instance whose
// answer was lost was conditional on, and releases it: that take's late
// copy can no longer land. If the release fails, the row is an orphan
// known as taken, released next round.
func (g *Group) invalidate(ctx context.Context, st *streamState, u unit, o orphan, l leases.Lease) {
	from := l
	if l.RewindTo.IsZero() && (l.Checkpoint.IsZero() || o.vanished) && !o.best().IsZero() {
		// Taken with what o knows, as releaseOrphan releases: a row back
		// with no checkpoint (recreated by a member that knew none) gets
		// the one this instance knows, never left with none for the plan's
		// member. Written by the take itself: should its answer be lost
		// too, the orphan it leaves knows it (presume), and never releases
		// the row with the older checkpoint it was recreated at over the
		// late take's (seed 98123718).
		from = o.filled(from)
	}
	// A take that fails: taken by another (the late copy cannot land), or
	// presumed ours again.
	if _, _, released := g.takeRelease(ctx, u, o, from, orphan{vanished: o.vanished, knew: o.best()}); released {
		st.log.Info("kinesislease: released a row a take of this instance whose answer was lost had not reached", "shard", u.Shard)
	}
}

// repairFree writes the checkpoint orphan o knows on its free row l,
// recreated with none: a take that writes it, then a release. If the
// release fails, the row is an orphan known with that checkpoint, released
// (with it) next round. A take that fails: someone took it first (the
// next round sees it again), or presumed ours (takeAs).
func (g *Group) repairFree(ctx context.Context, st *streamState, u unit, o orphan, l leases.Lease) {
	if f, taken, _ := g.takeRelease(ctx, u, o, o.filled(l), orphan{presumed: true, vanished: true}); taken {
		st.log.Warn("kinesislease: a lease row recreated without a checkpoint; wrote the checkpoint this instance knew on it", "shard", u.Shard, "seq", f.Checkpoint.String())
	}
}

// takeRelease takes row from, a version of the row of orphan o of u, as
// the current incarnation, then releases it as taken (its checkpoint the
// one the take wrote). A take that fails leaves o, marked unwaited if its
// answer was lost (markUnwaited); a release that fails leaves the orphan
// left, known as taken and unwaited (the take made no recovery wait),
// released next round. It returns the row taken, and whether the take
// and the release landed.
func (g *Group) takeRelease(ctx context.Context, u unit, o orphan, from leases.Lease, left orphan) (leases.Lease, bool, bool) {
	inc := g.Incarnation()
	if asCreated(from) && !from.Checkpoint.IsZero() {
		// Known with a checkpoint: read before, so created again by a
		// Create applied late (markFirstTake). Released recovered, to be
		// read by nobody before the recovery wait, counted here from now
		// (retake, should the release fail).
		from.Recovered = lateMark(from)
		g.streams[u.Stream].noteRecovery(u.Shard, from.Recovered)
	}
	t, err := g.takeAs(ctx, u, from, inc, false)
	if err != nil {
		g.markUnwaited(u, err)
		return t, false, false
	}
	t.Recovered = cmp.Or(t.Recovered, from.Recovered)
	rl, err := g.store.Release(ctx, t, leases.Checkpoint{})
	if err != nil {
		left.inc, left.known, left.unwaited = inc, t, true
		guard(&g.mu, func() { g.orphans[u] = left })
		return t, true, false
	}
	g.dropOrphan(u, o)
	g.noteReleased(u, rl)
	return t, true, true
}

// vanishedOrphan handles an orphan whose row a call found missing: it
// reports the row and recreates it free and recovered, at once, from the
// orphan's checkpoint (recover), for whoever the plan gives it to. An
// orphan that knew none is dropped: any member recreates the row as well.
func (g *Group) vanishedOrphan(ctx context.Context, st *streamState, u unit, o orphan) {
	g.editOrphan(u, o, func(o *orphan) { o.vanished = true }) // found missing
	st.know(u.Shard, o.knownRow())
	st.setRow(u.Shard, rowState{missing: true})
	g.reportMissing(ctx, st, u.Shard, st.row(u.Shard))
	if o.best().IsZero() || g.recover(ctx, st, u, o.known, o.best(), true) {
		g.dropOrphan(u, o)
	}
}

// forgetOrphan drops orphan o of u, now someone else's row cur, and keeps
// where it was read to, should it vanish: cur's checkpoint, or, if cur has
// none (recreated, not yet written), the one o knew, newer than any this
// instance noted before it held the row.
func (g *Group) forgetOrphan(u unit, o orphan, cur leases.Lease) {
	g.dropOrphan(u, o)
	if cur.Checkpoint.IsZero() && !o.best().IsZero() {
		cur = o.knownRow()
		cur.Counter, cur.RewindTo = o.realCounter(), leases.Checkpoint{}
	}
	g.noteReleased(u, cur)
}

// dropOrphan forgets orphan o of u, unless it was replaced meanwhile.
func (g *Group) dropOrphan(u unit, o orphan) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if cur, ok := g.orphans[u]; ok && cur.inc == o.inc {
		delete(g.orphans, u)
	}
}

// markUnwaited marks the orphan a take of u that failed with err with no
// answer left (presume), made without the recovery wait: see
// orphan.unwaited.
func (g *Group) markUnwaited(u unit, err error) {
	if !failedUnanswered(err) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if o, ok := g.orphans[u]; ok {
		o.unwaited = true
		g.orphans[u] = o
	}
}

// failedUnanswered reports whether err is a store call's failure that
// tells nothing of the row: neither a conflict nor a missing row.
func failedUnanswered(err error) bool {
	return err != nil && !errors.Is(err, leases.ErrConflict) && !errors.Is(err, leases.ErrNotFound)
}

// realCounter is the counter of a version of the row that existed: known's,
// or, for a presumed orphan, the one before the take whose answer was lost.
func (o orphan) realCounter() int64 {
	if o.presumed {
		return o.known.Counter - 1
	}
	return o.known.Counter
}

// knownRow is the row as o knows it, with the best checkpoint it knows.
func (o orphan) knownRow() leases.Lease {
	k := o.known
	k.Checkpoint = o.best()
	return k
}

// filled returns row l with the checkpoint o knows and the operator's
// rewind it follows, for a take to write (leases.Membership.TakeAs).
func (o orphan) filled(l leases.Lease) leases.Lease {
	l.Checkpoint, l.Rewind = o.best(), cmp.Or(o.bestRewind(), l.Rewind)
	return l
}

// bestRewind is the operator's rewind that best() follows, if known: the
// known row's (written with the checkpoint by a fill: see
// leases.Membership.TakeAs).
func (o orphan) bestRewind() string {
	if o.known.RewindTo.IsZero() && o.known.Checkpoint.IsZero() {
		return ""
	}
	return o.known.Rewind
}

// best is the checkpoint o knows the row was read to: the position of a
// rewind pending on known (see resumeOf), known's checkpoint, or the one an
// orphan it replaced knew when known has none.
func (o orphan) best() leases.Checkpoint {
	if !o.known.RewindTo.IsZero() {
		return o.known.RewindTo
	}
	if o.known.Checkpoint.IsZero() {
		return o.knew
	}
	return o.known.Checkpoint
}

// adoptRewind makes what orphan o of u knows the position of the
// operator's rewind that row cur, read since, carries and o's copy does
// not: should the row vanish, it comes back there, never past what the
// operator asked to read again (seed 98915512: an orphan's copy from
// before a rewind of the free row recreated it past the rewind after the
// table was dropped).
func (g *Group) adoptRewind(u unit, o orphan, cur leases.Lease) {
	r := resumeOf(cur)
	g.editOrphan(u, o, func(o *orphan) {
		o.known.Checkpoint, o.known.RewindTo, o.known.Rewind, o.knew = r.Checkpoint, leases.Checkpoint{}, r.Rewind, leases.Checkpoint{}
	})
}
