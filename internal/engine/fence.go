package engine

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// heartbeatState is the heartbeat loop's own state (and join's, before the
// loop starts): nothing else reads or writes it.
type heartbeatState struct {
	hb     int64 // the last heartbeat value written
	notice int64 // our entry's Notice as last seen
	// needNewInc: fenced; go on as a new incarnation before taking
	// anything. attempted holds the incarnations this instance tried to go
	// on as (ReplaceMember) without an answer: one may have landed. None is
	// ever used again: others may have timed it, found it dead and removed
	// it since; a later attempt replaces whichever entry is there with a
	// brand-new incarnation.
	needNewInc bool
	attempted  map[string]bool
	// earlier reports whether an incarnation is one this process was or
	// tried to write an entry as (Group.ownInc): an entry of one found in
	// its place (a join applied late, after the entry was removed) is its
	// own, replaced by a new incarnation, never another process's.
	earlier func(inc string) bool
	failed  bool // the last heartbeat failed
	// joinConflicts: rows where a join met an entry of this owner (read
	// by readAll whether or not the header lists them).
	joinConflicts map[int]bool
}

// fenceAfter is the fence of a heartbeat sent at sent (mono()): the
// instance delivers until Timeout-FenceMargin after the send, and a taker
// acts only once it has seen the heartbeat unchanged for Timeout, counted
// from a read that returned after the send.
func fenceAfter(sent int64, timeout, margin time.Duration) int64 {
	return sent + int64(timeout-margin)
}

// heartbeatDeadline is how long a heartbeat (or a write of this
// incarnation's entry) may take when sent at now with the fence at fence:
// half the time left before the fence, and never less than half the
// interval. A slow store (a DynamoDB Local on a loaded machine, real
// DynamoDB in a latency spike) has as long as the fence allows, while a
// call that hangs (a lost connection) still leaves room for another
// attempt before the fence. Before, every call had half the interval:
// calls slower than that failed one after the other and fenced an instance
// whose store answered every one of them, well within the fence.
//
// Safety: a heartbeat that counts must have landed before any taker can
// find the previous one Timeout old, which is the fence plus the margin
// (fenceAfter). It is sent before the fence, and answered within the
// deadline: half the interval, which the margin covers, or half of what is
// left, which ends before the fence.
func heartbeatDeadline(now, fence int64, interval time.Duration) time.Duration {
	d := interval / 2
	if fence != fenced && fence > now {
		d = max(d, time.Duration(fence-now)/2)
	}
	return d
}

// entryDeadline is heartbeatDeadline for a write of this incarnation's
// entry sent now.
func (g *Group) entryDeadline() time.Duration {
	return heartbeatDeadline(mono(), g.fence.Load(), g.cfg.Heartbeat)
}

// fencePassed reports whether a heartbeat sent at sent came too late to
// extend the fence: the fence had passed before it was sent (takers may
// have found the incarnation dead already). An incarnation that holds
// nothing yet has no fence to pass.
func fencePassed(fence, sent int64) bool {
	return fence != fenced && sent >= fence
}

// hbAction is what the heartbeat loop does with a heartbeat's result.
type hbAction int

const (
	hbLanded        hbAction = iota // extend the fence
	hbFailed                        // retry in half an interval
	hbNotice                        // someone bumped our Notice: adopt it, heartbeat again
	hbOurAttempt                    // a new incarnation we tried landed unanswered: replace it with a new one
	hbFoundDead                     // others marked this incarnation dead: fence all, go on as a new one
	hbReplaced                      // another incarnation stands in our entry: join again
	hbMisconfigured                 // the store cannot work (a missing table, denied access)
	hbMissing                       // our entry is gone: join again
)

// heartbeatAction maps a heartbeat's error onto what to do. cur is the
// entry a conflict found.
func heartbeatAction(err error, s *heartbeatState, inc string) (hbAction, leases.Member) {
	var conflict *leases.MemberConflictError
	switch {
	case err == nil:
		return hbLanded, leases.Member{}
	case errors.As(err, &conflict):
		cur := conflict.Current
		switch {
		case cur.Incarnation == inc && cur.Notice != s.notice && !cur.Leaving:
			return hbNotice, cur
		case s.attempted[cur.Incarnation] || (cur.Incarnation != inc && cur.Incarnation != "" && s.earlier != nil && s.earlier(cur.Incarnation)):
			return hbOurAttempt, cur
		case cur.Incarnation == inc && cur.Leaving:
			// Found dead by others, or (needNewInc) our own leaving
			// heartbeat whose answer was lost: either way, on as a new one.
			return hbFoundDead, cur
		case cur.Owner == "":
			return hbMissing, cur // removed, or the table recreated: join again
		}
		return hbReplaced, cur
	case errors.Is(err, leases.ErrMisconfigured):
		return hbMisconfigured, leases.Member{}
	}
	return hbFailed, leases.Member{}
}

// join reads the membership rows it needs (the header and this owner's
// home rows: readAll) and writes this incarnation's first entry. An entry
// of another incarnation of the same owner is waited for (up to
// ShutdownTimeout) to leave, or replaced once seen unchanged for a whole
// Timeout, in its row; otherwise the instance joins one of its home rows
// with room (joinRow). A store that cannot work
// (leases.ErrMisconfigured) before the membership was ever read ends it
// with that error; once read, the table is known to exist and be allowed,
// and a table deleted (or access revoked) while this instance waits is a
// fault to wait out, as it is once running.
func (g *Group) join(ctx context.Context) error {
	wait := max(g.cfg.ShutdownTimeout, 2*g.cfg.Timeout)
	var (
		seen            leases.Member
		seenAt, firstAt time.Time
		changes         []time.Time // changes of its heartbeat seen in the last two timeouts, each between reads less than a timeout apart
		read            bool
	)
	for {
		mine, mineRow, counts, err := g.readAll(ctx)
		read = read || err == nil
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, leases.ErrMisconfigured) && !read:
			return err
		case err != nil:
			g.log.Warn("kinesislease: reading the membership failed; retrying", "err", err)
		case mine.Owner != "":
			// An earlier incarnation of this owner (a restart), or another
			// process with the same owner id.
			now := time.Now()
			// Only its heartbeat shows it alive: a notice bumped by an
			// operator's rewind changes the entry but not that.
			still := mine.Incarnation == seen.Incarnation && mine.Heartbeat == seen.Heartbeat && seen.Owner != ""
			if mine.Leaving || g.hb.attempted[mine.Incarnation] || g.ownInc(mine.Incarnation) || (still && now.Sub(seenAt) >= g.cfg.Timeout) {
				// Left, or dead: its fence has passed; or one of this
				// process's own join attempts, landed with its answer lost
				// (never another process). Take the entry over as a new
				// incarnation (conditional on the entry as just read).
				if g.replaceEntry(ctx, mineRow, mine) {
					return nil
				}
				break
			}
			if !still {
				if firstAt.IsZero() {
					firstAt = now
					g.log.Warn("kinesislease: another process heartbeats with this owner id; waiting for it to leave",
						"incarnation", mine.Incarnation)
				} else if mine.Incarnation == seen.Incarnation && now.Sub(seenAt) < g.cfg.Timeout {
					// It heartbeats: alive. Only a change between two
					// reads less than a timeout apart shows a process
					// heartbeating now, not one that stopped since.
					changes = append(changes, now)
				}
				seen, seenAt = mine, now
			}
			// Another process heartbeats: its entry kept changing, at
			// least three times in the last two timeouts. A dead
			// process's writes applied late change it once or twice, then
			// it stands still and is taken over.
			changes = slices.DeleteFunc(changes, func(c time.Time) bool { return now.Sub(c) >= 2*g.cfg.Timeout })
			if len(changes) >= 3 && now.Sub(firstAt) >= wait {
				return &DuplicateOwnerError{Owner: g.cfg.Owner, Incarnation: mine.Incarnation}
			}
		default:
			done, err := g.joinRow(ctx, counts)
			switch {
			case done:
				return nil
			case errors.Is(err, leases.ErrMisconfigured):
				g.log.Warn("kinesislease: the lease table stopped working while joining; retrying", "err", err)
			case err != nil:
				return err
			}
		}
		if err := backoff.Sleep(ctx, backoff.Jitter(g.cfg.Heartbeat)); err != nil {
			return nil
		}
	}
}

// readAll reads the header and the rows a join of this owner needs into
// the view: its home rows that the header lists (joinRows, in the bands up
// to the highest row listed; see placement.go), the rows its joins met an
// entry of its owner in, and the rows of the incarnations this process was or
// tried to be. It returns this owner's entry if one is found (and its
// row), and how many entries each row read holds. The other rows are read
// by the first round (refreshView), which plans nothing before it read
// them all.
func (g *Group) readAll(ctx context.Context) (mine leases.Member, mineRow int, counts map[int]int, err error) {
	h, err := g.mem.Header(ctx)
	if err != nil {
		return leases.Member{}, 0, nil, err
	}
	g.noteHeader(h)
	rows := map[int]bool{}
	for _, r := range joinRows(g.cfg.Owner, joinTop(h.Rows)) {
		if _, listed := h.Rows[r]; listed {
			rows[r] = true // a row never listed has no entry, unless its bump was lost (below)
		}
	}
	// The rows this instance's joins met an entry of its owner in (the
	// header may not list one: a bump that never landed): read them too, or
	// the join would meet it for ever.
	maps.Copy(rows, g.hb.joinConflicts)
	for _, inc := range guarded(&g.mu, func() []string { return slices.Concat(g.incs, g.tried) }) {
		rows[rowOf(inc)] = true // an attempt of ours may have landed there
	}
	delete(rows, -1) // an incarnation that names no row (rowOf)
	counts = map[int]int{}
	for _, r := range slices.Sorted(maps.Keys(rows)) {
		ms, err := g.readMembersRow(ctx, r, h.Rows[r])
		if err != nil {
			return leases.Member{}, 0, nil, err
		}
		counts[r] = len(ms)
		for _, m := range ms {
			if m.Owner == g.cfg.Owner && (mine.Owner == "" || !m.Leaving) {
				mine, mineRow = m, r
			}
		}
	}
	return mine, mineRow, counts, nil
}

// joinRow writes a new entry for a new incarnation in one of its owner's
// home rows with room (joinCandidate, by counts), and reports whether it
// did. Its fence
// counts from the first attempt's send, since an attempt whose answer was
// lost may have landed then.
func (g *Group) joinRow(ctx context.Context, counts map[int]int) (bool, error) {
candidates:
	for full := 0; ; {
		row, ok := joinCandidate(g.cfg.Owner, counts, -1, full, rand.IntN)
		if !ok {
			return false, errors.New("engine: every membership row is full")
		}
		inc := newIncarnation(row)
		if cur := g.Incarnation(); rowOf(cur) < 0 && !g.ownInc(driver.NewIncarnation(row, cur)) {
			// The first join: the process's own suffix (Incarnation before
			// Run), in the row it joins. Never an id tried before: an
			// attempt whose answer was lost may have landed and been found
			// dead since, and others would take the leases of its second
			// coming at once (seed 91010012).
			inc = driver.NewIncarnation(row, cur)
		}
		g.hb.hb++
		m := g.entry(inc, g.hb.hb, 0)
		first := mono()
		g.tryInc(inc)
		for attempt := 0; attempt < 5; attempt++ {
			// A join's deadline is a whole interval (a heartbeat's is half):
			// it holds nothing yet, and its fence counts from the first
			// attempt's send whatever the answer's delay.
			jctx, cancel := context.WithTimeout(ctx, g.cfg.Heartbeat)
			rows, err := g.mem.Join(jctx, row, m)
			cancel()
			var conflict *leases.MemberConflictError
			switch {
			case err == nil:
				delete(g.hb.attempted, inc) // ours now: not an attempt to replace
				g.become(inc, row, rows, first)
				return true, nil
			case errors.As(err, &conflict) && conflict.Full:
				counts[row] = driver.RowCapacity
				full++
				continue candidates // the next row with room
			case errors.As(err, &conflict):
				// An entry of this owner is in the row (another process of
				// this owner, or an earlier incarnation): read it again.
				putIn(&g.hb.joinConflicts, row, true)
				return false, nil
			case errors.Is(err, leases.ErrMisconfigured):
				return false, err
			case ctx.Err() != nil:
				return false, nil
			default:
				// It may have landed with its answer lost: if the entry
				// turns up later, it is one of ours (heartbeatAction's
				// hbOurAttempt), replaced by a new incarnation, never
				// taken for another process with this owner id.
				putIn(&g.hb.attempted, inc, true)
				g.log.Warn("kinesislease: joining the membership failed; retrying", "row", row, "err", err)
				// The same entry again: if the first landed, this one finds it.
			}
		}
		// Failed five times (joinCandidate picks only a row with room, which
		// a full row's conflict alone fills): read again, later.
		return false, nil
	}
}

// replaceEntry takes over the entry cur of an earlier incarnation of this
// owner in row, as a new incarnation in the same row, and reports whether
// it did. A store that stopped working is waited out, as join does.
func (g *Group) replaceEntry(ctx context.Context, row int, cur leases.Member) bool {
	inc, rows, sent, err := g.replaceAs(ctx, row, cur, 0)
	if err != nil {
		if errors.Is(err, leases.ErrMisconfigured) {
			g.log.Warn("kinesislease: the lease table stopped working while joining; retrying", "err", err)
			return false
		}
		if !errors.Is(err, leases.ErrConflict) {
			// It may land, late: an entry of inc found later is ours (an
			// attempt to replace), never another process with this owner
			// id (seeds 1268, 2290).
			putIn(&g.hb.attempted, inc, true)
		}
		if ctx.Err() == nil {
			g.log.Warn("kinesislease: replacing the membership entry of an earlier incarnation failed; retrying", "err", err)
		}
		return false
	}
	g.become(inc, row, rows, sent, cur)
	g.log.Info("kinesislease: replaced the membership entry of an earlier incarnation", "incarnation", cur.Incarnation)
	return true
}

// replaceAs writes the entry of a new incarnation in row in place of cur,
// with notice and a heartbeat past cur's, within entryDeadline. It returns
// the new incarnation, the row as the answer shows it, and when the write
// was sent.
func (g *Group) replaceAs(ctx context.Context, row int, cur leases.Member, notice int64) (inc string, rows []leases.Member, sent int64, err error) {
	inc = newIncarnation(row)
	g.tryInc(inc)
	g.hb.hb = max(g.hb.hb, cur.Heartbeat) + 1
	next := g.entry(inc, g.hb.hb, notice)
	sent = mono()
	rctx, cancel := context.WithTimeout(ctx, g.entryDeadline())
	defer cancel()
	rows, err = g.mem.ReplaceMember(rctx, row, cur, next)
	return inc, rows, sent, err
}

// heartbeats is the heartbeat loop: a heartbeat every interval (half an
// interval after a failure, so that two failures in a row do not fence),
// whatever the rest of the instance is doing, until ctx ends. It returns a
// *DuplicateOwnerError when another process heartbeats with its owner id.
func (g *Group) heartbeats(ctx context.Context) error {
	for {
		wait := backoff.Jitter(g.cfg.Heartbeat)
		if g.hb.failed {
			wait = g.cfg.Heartbeat / 2
		}
		if backoff.Sleep(ctx, wait) != nil {
			return nil
		}
		if err := g.beat(ctx); err != nil {
			return err
		}
	}
}

// beat is one turn of the heartbeat loop: a heartbeat, what its result
// calls for, and the fence's bookkeeping.
func (g *Group) beat(ctx context.Context) error {
	err := g.heartbeat(ctx)
	act, cur := heartbeatAction(err, &g.hb, g.Incarnation())
	g.hb.failed = act != hbLanded
	switch act {
	case hbLanded:
		g.storeErr.Store(nil)
	case hbNotice:
		// Someone bumped our notice (an operator's rewind): look at the held
		// rows now, and heartbeat with the notice as it is.
		g.hb.notice = cur.Notice
		g.reconcileNow.Store(true)
		g.kickRound() // now, not at the next round: a rewind waits a heartbeat at most
		err = g.heartbeat(ctx)
		g.hb.failed = err != nil
	case hbFoundDead:
		// Someone found this incarnation dead and marked it leaving: it may
		// never come back (a taker may act on that view for a while). All is
		// lost; go on as a new incarnation.
		g.fenceAll("another member found this incarnation dead")
		g.fence.Store(fenced)
		fallthrough
	case hbOurAttempt:
		// Our entry is one of the new incarnations we tried (its answer was
		// lost): never go on as it; replace it with yet another.
		g.hb.failed = !g.reincarnate(ctx, cur)
		return nil
	case hbReplaced:
		// Another incarnation of this owner stands in our entry: another
		// process with this owner id, or an earlier process's join or
		// replacement applied late (seed 95011353: a predecessor's join
		// landed 11 s late on a recreated table). Our fence cannot move:
		// stop delivering, and join again as a starting process does. An
		// entry that keeps heartbeating is another process (join returns
		// a *DuplicateOwnerError after its wait); one that stands still for
		// a timeout is dead and taken over as a new incarnation.
		g.fenceAll("another incarnation stands in this instance's membership entry")
		g.fence.Store(fenced)
		old := g.Incarnation()
		if err := g.join(ctx); err != nil {
			return err
		}
		g.hb.needNewInc, g.hb.attempted, g.hb.notice, g.hb.failed = false, nil, 0, false
		g.markDead(leases.Member{Owner: g.cfg.Owner, Incarnation: old})
		return nil
	case hbMissing:
		// Our entry was removed (found stale for three timeouts: our fence
		// passed long ago) or the table was recreated empty: write it
		// again, as the same incarnation if it may go on.
		g.rejoin(ctx)
		return nil
	case hbMisconfigured:
		// Running, the table went missing or access was withdrawn: fence
		// (the fence passes on its own), report, and keep trying.
		g.storeErr.Store(&err)
		g.log.Error("kinesislease: the lease store cannot be written; delivery stops at the fence and resumes once it works again", "err", err)
	default:
		if ctx.Err() == nil {
			g.log.Warn("kinesislease: heartbeat failed", "err", err)
			g.storeErr.Store(&err)
		}
	}
	if err == nil && g.hb.needNewInc {
		g.hb.failed = !g.reincarnate(ctx, leases.Member{})
	}
	if !g.hb.failed && !g.hb.needNewInc && !g.fence.passed() && g.fencedSince.Swap(0) != 0 {
		g.log.Info("kinesislease: heartbeat current again; taking leases afresh", "incarnation", g.Incarnation())
	}
	if g.fence.passed() && g.fence.Load() != fenced {
		// Heartbeats failed past the fence (or the incarnation adopted
		// unanswered had none answered in time): others may find it dead,
		// so it is over, whatever it holds.
		g.fenceAll("heartbeats failed past the fence")
	}
	return nil
}

// heartbeat advances this incarnation's heartbeat. Its deadline is
// entryDeadline: the SDK's own retries fit inside it, and the library
// does not retry (the next turn does).
func (g *Group) heartbeat(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, g.entryDeadline())
	defer cancel()
	// Every attempt writes a new value: an attempt whose answer was lost
	// may have landed, and a next attempt writing the same value would move
	// the holder's fence while takers see no change.
	g.hb.hb++
	inc := g.Incarnation()
	m := g.entry(inc, g.hb.hb, g.hb.notice)
	m.Young = time.Duration(mono()-g.entrySince.Load()) < g.cfg.Timeout
	// A fenced incarnation says so: its leases may be taken at once. Only
	// the old incarnation: once the instance goes on as a new one, that one
	// holds what it takes afresh.
	m.Leaving = g.hb.needNewInc
	sentAt := time.Now()
	sent := int64(sentAt.Sub(epoch))
	rows, err := g.mem.Heartbeat(hctx, rowOf(inc), m)
	if err != nil {
		return err
	}
	if !m.Leaving {
		// A leaving heartbeat moves no fence: that incarnation is over, and
		// nothing may be taken or delivered as it (takers may take its rows
		// at once).
		g.extendFence(sentAt)
	}
	g.observe(rowOf(inc), rows, sent, mono())
	return nil
}

// extendFence moves the fence to a heartbeat sent at sentAt. The fence is
// sticky: if it had passed before the heartbeat was sent (a pause, failed
// heartbeats, the machine suspended: see fence), others may have taken every lease already, so each is lost
// before the fence moves; the instance reads again only what it takes
// afresh, as a new incarnation.
func (g *Group) extendFence(sentAt time.Time) {
	sent := int64(sentAt.Sub(epoch))
	if fencePassed(g.fence.Load(), sent) || (g.fence.Load() != fenced && g.fence.passedAt(sent, sentAt.UnixNano())) {
		g.fenceAll("the fence passed before this heartbeat was sent")
	}
	g.fence.Store(fenceAfter(sent, g.cfg.Timeout, g.cfg.FenceMargin))
}

// fenceAll stops every worker at once: no lease of this incarnation may be
// trusted any more. Each row becomes an orphan, kept with the checkpoint
// last written, to be taken again directly by the next incarnation.
func (g *Group) fenceAll(why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for u, w := range g.workers {
		if w.lease.isLost() {
			continue
		}
		n++
		w.lease.markLost()
		w.kill()
		g.orphans[u] = orphan{inc: w.lease.current().Incarnation, known: w.lease.asOrphan(), vanished: w.lease.vanished.Load()}
	}
	if n > 0 {
		g.log.Warn("kinesislease: fenced: every lease is lost", "why", why, "leases", n)
	}
	// Past a fence this incarnation is over: takers may have read it
	// leaving or dead in any membership row they read since. The instance
	// goes on as a new incarnation, so that no taker's view of the old one
	// can ever apply to a row it takes afresh.
	g.hb.needNewInc = true
	g.fencedSince.CompareAndSwap(0, mono())
}

// maxIncs bounds Group.incs. Rows of older incarnations of this process
// are taken by whichever member the plan gives them to, once it finds that
// incarnation dead (it is, past a fence); only a row naming the current
// incarnation would wait on this process for as long as it lives.
const maxIncs = 16

// ownInc reports whether inc is an incarnation this process was, or tried
// to write an entry as.
func (g *Group) ownInc(inc string) bool {
	return guarded(&g.mu, func() bool { return slices.Contains(g.incs, inc) || slices.Contains(g.tried, inc) })
}

// maxTried bounds Group.tried.
const maxTried = 64

// tryInc records that this process is about to write an entry as inc.
func (g *Group) tryInc(inc string) {
	guard(&g.mu, func() { remember(&g.tried, inc, maxTried) })
}

// remember adds inc to the list *l of at most n, dropping the oldest,
// unless it holds inc already.
func remember(l *[]string, inc string, n int) {
	if slices.Contains(*l, inc) {
		return
	}
	if len(*l) == n {
		*l = slices.Delete(*l, 0, 1)
	}
	*l = append(*l, inc)
}

// become makes inc, whose entry a write sent at sent put in row (rows:
// the row as its answer showed it), this instance's incarnation, with its
// fence counted from that send; the incarnation and its fence change
// together under g.mu. The entries dead (the one replaced) are marked
// dead once the row is observed, and the next round bumps the row's
// roster (bumpLater).
func (g *Group) become(inc string, row int, rows []leases.Member, sent int64, dead ...leases.Member) {
	g.mu.Lock()
	g.inc = inc
	g.entrySince.Store(mono())
	remember(&g.incs, inc, maxIncs)
	g.fence.Store(fenceAfter(sent, g.cfg.Timeout, g.cfg.FenceMargin))
	g.mu.Unlock()
	g.observe(row, rows, sent, mono())
	for _, m := range dead {
		g.markDead(m)
	}
	g.started.Store(true)
	g.bumpLater(row)
}

// markDead records that an incarnation is known dead.
func (g *Group) markDead(m leases.Member) {
	guard(&g.viewMu, func() { g.view.markDead(m.Owner, m.Incarnation, mono()) })
}

// reincarnate replaces this instance's membership entry with one of a new
// incarnation in the same row (after a fence), and reports whether it did.
// cur is the entry as last found, if known: the current incarnation's, or
// one of the attempts whose answer was lost. Every attempt is a brand-new
// incarnation.
func (g *Group) reincarnate(ctx context.Context, cur leases.Member) bool {
	old := g.Incarnation()
	if cur.Owner == "" {
		cur = guarded(&g.viewMu, func() leases.Member { return g.view.latest[g.cfg.Owner] })
	}
	if cur.Incarnation != old && !g.hb.attempted[cur.Incarnation] && !g.ownInc(cur.Incarnation) {
		return false // not seen yet: the next heartbeat (leaving) shows it
	}
	row := rowOf(old)
	inc, rows, sent, err := g.replaceAs(ctx, row, cur, cur.Notice)
	if err != nil {
		putIn(&g.hb.attempted, inc, true) // it may land, late: never to go on as
		var conflict *leases.MemberConflictError
		if errors.As(err, &conflict) && (conflict.Current.Incarnation == old || g.hb.attempted[conflict.Current.Incarnation]) {
			guard(&g.viewMu, func() { g.view.latest[g.cfg.Owner] = conflict.Current }) // the next attempt replaces what is there
		}
		if ctx.Err() == nil {
			g.log.Warn("kinesislease: starting a new incarnation after a fence failed; retrying", "err", err)
		}
		return false
	}
	g.log.Info("kinesislease: new incarnation after a fence", "from", old, "incarnation", inc)
	g.markDead(cur)
	if cur.Incarnation != old {
		g.markDead(leases.Member{Owner: g.cfg.Owner, Incarnation: old})
	}
	g.hb.notice, g.hb.needNewInc, g.hb.attempted = cur.Notice, false, nil
	g.become(inc, row, rows, sent) // started already: it is running
	return true
}

// leave removes this incarnation's membership entry, after the leases are
// released.
func (g *Group) leave() {
	if !g.started.Load() {
		return
	}
	me := guarded(&g.viewMu, func() leases.Member { return g.view.latest[g.cfg.Owner] })
	if me.Incarnation == "" {
		return
	}
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	row := rowOf(me.Incarnation)
	_, err := g.mem.ReplaceMember(rctx, row, me, leases.Member{})
	var conflict *leases.MemberConflictError
	if errors.As(err, &conflict) && conflict.Current.Incarnation == me.Incarnation {
		// Our view was stale (a heartbeat's answer lost): remove the entry
		// as it is.
		_, err = g.mem.ReplaceMember(rctx, row, conflict.Current, leases.Member{})
	}
	if err == nil {
		g.rosterChanged(rctx, row)
	} else {
		g.log.Warn("kinesislease: removing the membership entry failed; the next incarnation waits for it to go stale", "err", err)
	}
}

// rejoin writes this instance's entry again after it vanished (removed
// as stale, or the table recreated empty): as the same incarnation in the
// same row when it may go on, having first marked every stream it holds
// a row of (markHeld), else as a new incarnation (every lease lost) in a
// row with room. The rows it held, released or read lately are read
// again (recheckReleased).
func (g *Group) rejoin(ctx context.Context) {
	g.reconcileNow.Store(true)
	inc := g.Incarnation()
	row := rowOf(inc)
	if !g.hb.needNewInc && g.markHeld(ctx) {
		g.hb.hb++
		m := g.entry(inc, g.hb.hb, g.hb.notice) // young again: new to this table, maybe
		// The table is new from now as far as tableOld goes, before the
		// write's send: a round that finds this entry in the table from
		// then on must not take it for the entry it knew (seed 96123701).
		now := mono()
		g.entrySince.Store(now)
		g.rejoinSent.Store(now)
		jctx, cancel := context.WithTimeout(ctx, g.entryDeadline())
		sentAt := time.Now()
		sent := int64(sentAt.Sub(epoch))
		rows, err := g.mem.Join(jctx, row, m)
		cancel()
		if err == nil {
			g.entrySince.Store(mono())
			g.forgetMarks() // this incarnation's marks may have gone with the table
			g.hb.failed = false
			g.extendFence(sentAt)
			g.observe(row, rows, sent, mono())
			g.bumpLater(row)
			g.log.Warn("kinesislease: this instance's membership entry had vanished (table recreated?); wrote it again", "row", row)
			return
		}
		var conflict *leases.MemberConflictError
		if !errors.As(err, &conflict) {
			return // the next turn tries again
		}
	}
	// A new incarnation, in a row with room.
	g.fenceAll("this instance's membership entry vanished and cannot be written again as it was")
	g.fence.Store(fenced)
	counts := guarded(&g.viewMu, func() map[int]int { return maps.Clone(g.rows.total) })
	mctx, cancel := context.WithTimeout(ctx, g.entryDeadline())
	if ms, err := g.mem.Members(mctx, row); err == nil {
		counts[row] = len(ms)
	}
	cancel()
	if ok, err := g.joinRow(ctx, counts); ok {
		g.hb.needNewInc, g.hb.attempted, g.hb.notice, g.hb.failed = false, nil, 0, false
		g.markDead(leases.Member{Owner: g.cfg.Owner, Incarnation: inc})
		g.log.Info("kinesislease: new incarnation after the membership entry vanished", "from", inc, "incarnation", g.Incarnation())
	} else if err != nil {
		g.log.Error("kinesislease: joining the membership again failed", "err", err)
	}
}

// markHeld marks every stream this instance holds a row of (or has an
// orphan of), whatever it knows of their marks, before it writes its
// vanished entry again as the same incarnation: the table may have been
// recreated under it, with its rows and the streams' marks, and its fence
// moves on with that entry. A member that finds a row of such a stream
// missing then finds the mark (once it counts the table old, past a
// timeout after the recreation, the entry has landed or the fence has
// passed): it recovers the row, never takes the stream for new while this
// instance may deliver from it. It reports whether every mark landed.
func (g *Group) markHeld(ctx context.Context) bool {
	keys := map[string]bool{}
	g.mu.Lock()
	for u := range g.workers {
		keys[u.Stream] = true
	}
	for u := range g.orphans {
		keys[u.Stream] = true
	}
	g.mu.Unlock()
	mctx, cancel := context.WithTimeout(ctx, g.entryDeadline())
	defer cancel()
	for key := range keys {
		st := guarded(g.streamsMu.RLocker(), func() *streamState { return g.streams[key] })
		if st != nil && g.markToCreate(mctx, st) != nil {
			return false
		}
	}
	return true
}

// entry is this instance's membership entry as inc, at heartbeat hb with
// notice: what it publishes of itself (young: a join's).
func (g *Group) entry(inc string, hb, notice int64) leases.Member {
	return leases.Member{Owner: g.cfg.Owner, Incarnation: inc, Heartbeat: hb, Notice: notice, Ended: g.ended.Load(), Held: g.heldCount(),
		Streams: g.streamsDigest(), Proof: time.Duration(g.ownProof.Load()), Listing: g.listingDigest(), Young: true}
}

// heldCount returns how many rows this instance holds: workers running,
// and orphans (rows that may name it, or that vanished and it will
// recreate).
func (g *Group) heldCount() int64 {
	return guarded(&g.mu, func() int64 { return int64(len(g.workers) + len(g.orphans)) })
}
