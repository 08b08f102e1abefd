package membership

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/internal/roster"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// Join reads the membership rows it needs (the header and this owner's
// home rows: readAll) and writes this incarnation's first entry. An entry
// of another incarnation of the same owner is waited for (up to
// ShutdownTimeout) to leave, or replaced once seen unchanged for a whole
// Timeout, in its row; otherwise the instance joins one of its home rows
// with room (joinRow). A store that cannot work
// (leases.ErrMisconfigured) before the membership was ever read ends it
// with that error; once read, the table is known to exist and be allowed,
// and a table deleted (or access revoked) while this instance waits is a
// fault to wait out, as it is once running. It returns a
// *DuplicateOwnerError when another process keeps heartbeating with this
// owner id, and nil once joined or when ctx ends.
func (me *Member) Join(ctx context.Context) error {
	wait := max(me.cfg.ShutdownTimeout, 2*me.cfg.Timeout)
	var (
		seen            leases.Member
		seenAt, firstAt time.Time
		changes         []time.Time // changes of its heartbeat seen in the last two timeouts, each between reads less than a timeout apart
		read            bool
	)
	for {
		mine, mineRow, counts, err := me.readAll(ctx)
		read = read || err == nil
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, leases.ErrMisconfigured) && !read:
			return err
		case err != nil:
			me.log.WarnContext(ctx, "kinesislease: reading the membership failed; retrying", "err", err)
		case mine.Owner != "":
			// An earlier incarnation of this owner (a restart), or another
			// process with the same owner id.
			now := time.Now()
			// Only its heartbeat shows it alive: a notice bumped by an
			// operator's rewind changes the entry but not that.
			still := mine.Incarnation == seen.Incarnation && mine.Heartbeat == seen.Heartbeat && seen.Owner != ""
			if mine.Leaving || me.hb.Attempted[mine.Incarnation] || me.ownInc(mine.Incarnation) || (still && now.Sub(seenAt) >= me.cfg.Timeout) {
				// Left, or dead: its fence has passed; or one of this
				// process's own join attempts, landed with its answer lost
				// (never another process). Take the entry over as a new
				// incarnation (conditional on the entry as just read).
				if me.replaceEntry(ctx, mineRow, mine) {
					return nil
				}
				break
			}
			if !still {
				if firstAt.IsZero() {
					firstAt = now
					me.log.WarnContext(ctx, "kinesislease: another process heartbeats with this owner id; waiting for it to leave",
						"incarnation", mine.Incarnation)
				} else if mine.Incarnation == seen.Incarnation && now.Sub(seenAt) < me.cfg.Timeout {
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
			changes = slices.DeleteFunc(changes, func(c time.Time) bool { return now.Sub(c) >= 2*me.cfg.Timeout })
			if len(changes) >= 3 && now.Sub(firstAt) >= wait {
				return &DuplicateOwnerError{Owner: me.cfg.Owner, Incarnation: mine.Incarnation}
			}
		default:
			done, err := me.joinRow(ctx, counts)
			switch {
			case done:
				return nil
			case errors.Is(err, leases.ErrMisconfigured):
				me.log.WarnContext(ctx, "kinesislease: the lease table stopped working while joining; retrying", "err", err)
			case err != nil:
				return err
			}
		}
		if err := backoff.Sleep(ctx, backoff.Jitter(me.cfg.Heartbeat)); err != nil {
			return nil
		}
	}
}

// readAll reads the header and the rows a join of this owner needs into
// the view: its home rows that the header lists (roster.JoinRows, in the bands up
// to the highest row listed; see internal/roster's placement.go), the rows its joins met an
// entry of its owner in, and the rows of the incarnations this process was or
// tried to be. It returns this owner's entry if one is found (and its
// row), and how many entries each row read holds. The other rows are read
// by the first round (Refresh), which plans nothing before it read
// them all.
func (me *Member) readAll(ctx context.Context) (mine leases.Member, mineRow int, counts map[int]int, err error) {
	sent := fence.Mono()
	h, err := me.mem.Header(ctx)
	if err != nil {
		return leases.Member{}, 0, nil, err
	}
	me.noteHeader(h, sent)
	rows := map[int]bool{}
	for _, r := range roster.JoinRows(me.cfg.Owner, roster.JoinTop(h.Rows)) {
		if _, listed := h.Rows[r]; listed {
			rows[r] = true // a row never listed has no entry, unless its bump was lost (below)
		}
	}
	// The rows this instance's joins met an entry of its owner in (the
	// header may not list one: a bump that never landed): read them too, or
	// the join would meet it for ever.
	maps.Copy(rows, me.hb.JoinConflicts)
	for _, inc := range syncx.Guarded(&me.mu, func() []string { return slices.Concat(me.incs, me.tried) }) {
		rows[roster.RowOf(inc)] = true // an attempt of ours may have landed there
	}
	delete(rows, -1) // an incarnation that names no row (roster.RowOf)
	counts = map[int]int{}
	for _, r := range slices.Sorted(maps.Keys(rows)) {
		ms, err := me.readMembersRow(ctx, r, h.Rows[r])
		if err != nil {
			return leases.Member{}, 0, nil, err
		}
		counts[r] = len(ms)
		for _, m := range ms {
			if m.Owner == me.cfg.Owner && (mine.Owner == "" || !m.Leaving) {
				mine, mineRow = m, r
			}
		}
	}
	return mine, mineRow, counts, nil
}

// joinRow writes a new entry for a new incarnation in one of its owner's
// home rows with room (roster.JoinCandidate, by counts), and reports whether it
// did. Its fence
// counts from the first attempt's send, since an attempt whose answer was
// lost may have landed then.
func (me *Member) joinRow(ctx context.Context, counts map[int]int) (bool, error) {
candidates:
	for full := 0; ; {
		row, ok := roster.JoinCandidate(me.cfg.Owner, counts, -1, full, rand.IntN)
		if !ok {
			return false, errors.New("engine: every membership row is full")
		}
		inc := newIncarnation(row)
		if cur := me.Incarnation(); roster.RowOf(cur) < 0 && !me.ownInc(driver.NewIncarnation(row, cur)) {
			// The first join: the process's own suffix (Incarnation before
			// Run), in the row it joins. Never an id tried before: an
			// attempt whose answer was lost may have landed and been found
			// dead since, and others would take the leases of its second
			// coming at once (seed 91010012).
			inc = driver.NewIncarnation(row, cur)
		}
		me.hb.Beat++
		m := me.entry(inc, me.hb.Beat, 0)
		first := fence.Mono()
		me.tryInc(inc)
		for attempt := 0; attempt < 5; attempt++ {
			// A join's deadline is a whole interval (a heartbeat's is half):
			// it holds nothing yet, and its fence counts from the first
			// attempt's send whatever the answer's delay.
			jctx, cancel := context.WithTimeout(ctx, me.cfg.Heartbeat)
			rows, err := me.mem.Join(jctx, row, m)
			cancel()
			var conflict *leases.MemberConflictError
			switch {
			case err == nil:
				delete(me.hb.Attempted, inc) // ours now: not an attempt to replace
				me.become(inc, row, rows, first)
				return true, nil
			case errors.As(err, &conflict) && conflict.Full:
				counts[row] = driver.RowCapacity
				full++
				continue candidates // the next row with room
			case errors.As(err, &conflict):
				// An entry of this owner is in the row (another process of
				// this owner, or an earlier incarnation): read it again.
				syncx.PutIn(&me.hb.JoinConflicts, row, true)
				return false, nil
			case errors.Is(err, leases.ErrMisconfigured):
				return false, err
			case ctx.Err() != nil:
				return false, nil
			default:
				// It may have landed with its answer lost: if the entry
				// turns up later, it is one of ours (heartbeat.Decide's
				// heartbeat.OurAttempt), replaced by a new incarnation, never
				// taken for another process with this owner id.
				syncx.PutIn(&me.hb.Attempted, inc, true)
				me.log.WarnContext(ctx, "kinesislease: joining the membership failed; retrying", "row", row, "err", err)
				// The same entry again: if the first landed, this one finds it.
			}
		}
		// Failed five times (roster.JoinCandidate picks only a row with room, which
		// a full row's conflict alone fills): read again, later.
		return false, nil
	}
}

// replaceEntry takes over the entry cur of an earlier incarnation of this
// owner in row, as a new incarnation in the same row, and reports whether
// it did. A store that stopped working is waited out, as join does.
func (me *Member) replaceEntry(ctx context.Context, row int, cur leases.Member) bool {
	inc, rows, sent, err := me.replaceAs(ctx, row, cur, 0)
	if err != nil {
		if errors.Is(err, leases.ErrMisconfigured) {
			me.log.WarnContext(ctx, "kinesislease: the lease table stopped working while joining; retrying", "err", err)
			return false
		}
		if !errors.Is(err, leases.ErrConflict) {
			// It may land, late: an entry of inc found later is ours (an
			// attempt to replace), never another process with this owner
			// id (seeds 1268, 2290).
			syncx.PutIn(&me.hb.Attempted, inc, true)
		}
		if ctx.Err() == nil {
			me.log.WarnContext(ctx, "kinesislease: replacing the membership entry of an earlier incarnation failed; retrying", "err", err)
		}
		return false
	}
	me.become(inc, row, rows, sent, cur)
	me.log.InfoContext(ctx, "kinesislease: replaced the membership entry of an earlier incarnation", "incarnation", cur.Incarnation)
	return true
}

// replaceAs writes the entry of a new incarnation in row in place of cur,
// with notice and a heartbeat past cur's, within entryDeadline. It returns
// the new incarnation, the row as the answer shows it, and when the write
// was sent.
func (me *Member) replaceAs(ctx context.Context, row int, cur leases.Member, notice int64) (inc string, rows []leases.Member, sent int64, err error) {
	inc = newIncarnation(row)
	me.tryInc(inc)
	me.hb.Beat = max(me.hb.Beat, cur.Heartbeat) + 1
	next := me.entry(inc, me.hb.Beat, notice)
	sent = fence.Mono()
	rctx, cancel := context.WithTimeout(ctx, me.entryDeadline())
	defer cancel()
	rows, err = me.mem.ReplaceMember(rctx, row, cur, next)
	return inc, rows, sent, err
}

// maxIncs bounds Member.incs. Rows of older incarnations of this process
// are taken by whichever member the plan gives them to, once it finds that
// incarnation dead (it is, past a fence); only a row naming the current
// incarnation would wait on this process for as long as it lives.
const maxIncs = 16

// ownInc reports whether inc is an incarnation this process was, or tried
// to write an entry as.
func (me *Member) ownInc(inc string) bool {
	return syncx.Guarded(&me.mu, func() bool { return slices.Contains(me.incs, inc) || slices.Contains(me.tried, inc) })
}

// maxTried bounds Member.tried.
const maxTried = 64

// tryInc records that this process is about to write an entry as inc.
func (me *Member) tryInc(inc string) {
	syncx.Guard(&me.mu, func() { remember(&me.tried, inc, maxTried) })
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
// together under me.mu. The entries dead (the one replaced) are marked
// dead once the row is observed, and the next round bumps the row's
// roster (bumpLater).
func (me *Member) become(inc string, row int, rows []leases.Member, sent int64, dead ...leases.Member) {
	me.mu.Lock()
	me.inc = inc
	me.entrySince.Store(fence.Mono())
	remember(&me.incs, inc, maxIncs)
	me.fence.Store(fence.After(sent, me.cfg.Timeout, me.cfg.FenceMargin))
	me.mu.Unlock()
	me.observe(row, rows, sent, fence.Mono())
	for _, m := range dead {
		me.markDead(m)
	}
	me.started.Store(true)
	me.bumpLater(row)
}

// markDead records that an incarnation is known dead.
func (me *Member) markDead(m leases.Member) {
	syncx.Guard(&me.viewMu, func() { me.view.MarkDead(m.Owner, m.Incarnation, fence.Mono()) })
}

// Leave removes this incarnation's membership entry, once the instance
// released its leases and the heartbeat loop ended.
func (me *Member) Leave() {
	if !me.started.Load() {
		return
	}
	own := syncx.Guarded(&me.viewMu, func() leases.Member { return me.view.Latest[me.cfg.Owner] })
	if own.Incarnation == "" {
		return
	}
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	row := roster.RowOf(own.Incarnation)
	_, err := me.mem.ReplaceMember(rctx, row, own, leases.Member{})
	var conflict *leases.MemberConflictError
	if errors.As(err, &conflict) && conflict.Current.Incarnation == own.Incarnation {
		// Our view was stale (a heartbeat's answer lost): remove the entry
		// as it is.
		_, err = me.mem.ReplaceMember(rctx, row, conflict.Current, leases.Member{})
	}
	if err == nil {
		me.rosterChanged(rctx, row)
	} else {
		me.log.Warn("kinesislease: removing the membership entry failed; the next incarnation waits for it to go stale", "err", err)
	}
}
