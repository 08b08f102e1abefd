package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// Scenarios: the membership simulation (mworld, with every check of
// TestMembership) run on a plan written by hand instead of drawn from a
// seed, each with checks of its own. TestMembershipFaults puts one fault
// of the table or of the calls around it on a running fleet;
// TestMembershipBugs reproduces bugs found in the engine, each failing
// while its bug is there.

// scenario returns the plan of a scenario: procs processes started at
// once on shards shards of initial records each, the default protocol
// settings, no per-call fault, a record on every shard every 200ms until
// the faults end at faultEnd.
func scenario(procs, shards, initial int, faultEnd time.Duration) *mplan {
	p := &mplan{planBase: planBase{seed: 1, shards: shards, faultEnd: faultEnd, produce: faultEnd, handlerMaxWork: 20 * time.Millisecond}}
	p.initial = slices.Repeat([]int{initial}, shards)
	p.protocol(engine.DefaultHeartbeat, engine.DefaultTimeout, 0)
	for range procs {
		p.procs = append(p.procs, slotPlan{checkpointEvery: 10, checkpointInterval: time.Second, limit: 100})
	}
	p.putAll = 200 * time.Millisecond
	p.settle = time.Minute
	return p
}

// runScenario runs the scenario p, named after t, and fails t with the
// violations, the plan and the trace.
func runScenario(t *testing.T, p *mplan) *mworld {
	t.Helper()
	p.name = t.Name()
	w := simulate(t, p.label(), func(t *testing.T) *mworld { return newMWorld(t, p) })
	if len(w.chk.violations) > 0 {
		tr := w.firstTrace
		if tr == "" {
			tr = w.chk.trace.String()
		}
		more := ""
		if w.chk.dropped > 0 {
			more = fmt.Sprintf("\n  (and %d more)", w.chk.dropped)
		}
		t.Errorf("%s broke the membership protocol's invariants:\n  %s%s\n\nplan:\n%s\ntrace (last %d lines up to the first violation):\n%s\n\nreplay: %s",
			p.name, strings.Join(w.chk.violations, "\n  "), more, p, traceLines, tr, sreplay(p.name))
	} else if *flagTrace {
		t.Logf("plan:\n%s\ntrace:\n%s", p, w.chk.trace.String())
	}
	return w
}

// sreplay returns the command that runs the scenario named name (a test's
// name) again.
func sreplay(name string) string {
	parts := strings.Split(name, "/")
	for i, s := range parts {
		parts[i] = "^" + s + "$"
	}
	return fmt.Sprintf("go test ./internal/testkit/sim/ -run '%s' -v", strings.Join(parts, "/"))
}

// Helpers of the scenarios' checks; the caller holds chk.mu.

// firstEntry returns the first handler entry on shard id at or after from,
// by a process other than not if not is set.
func (w *mworld) firstEntry(id string, from time.Time, not string) (entryRec, bool) {
	for _, e := range w.entries[id] {
		if !e.at.Before(from) && (not == "" || e.ident != not) {
			return e, true
		}
	}
	return entryRec{}, false
}

// entryBefore returns the last handler entry on shard id before t.
func (w *mworld) entryBefore(id string, t time.Time) (entryRec, bool) {
	var last entryRec
	ok := false
	for _, e := range w.entries[id] {
		if !e.at.Before(t) {
			break
		}
		last, ok = e, true
	}
	return last, ok
}

// silence returns the longest stretch of [from, to) without a handler
// entry on shard id, and when it began.
func (w *mworld) silence(id string, from, to time.Time) (time.Duration, time.Time) {
	var longest time.Duration
	var at time.Time
	prev := from
	for _, e := range w.entries[id] {
		if e.at.Before(from) {
			continue
		}
		if !e.at.Before(to) {
			break
		}
		if d := e.at.Sub(prev); d > longest {
			longest, at = d, prev
		}
		prev = e.at
	}
	if d := to.Sub(prev); d > longest {
		longest, at = d, prev
	}
	return longest, at
}

// checkSilence fails the scenario if a shard of ids (every shard if nil)
// had no handler entry for longer than bound within [from, to): why says
// what the bound is.
func (w *mworld) checkSilence(ids []string, from, to time.Time, bound time.Duration, why string) {
	if ids == nil {
		ids = w.stream.ShardIDs()
	}
	for _, id := range ids {
		if d, at := w.silence(id, from, to); d > bound {
			w.violate("(k) %s: no record delivered for %v from T+%v (between T+%v and T+%v every shard delivers within %v: %s)",
				id, d.Round(time.Millisecond), w.elapsedAt(at), w.elapsedAt(from), w.elapsedAt(to), bound, why)
		}
	}
}

// checkNoFence fails the scenario if the fence of a process of procs
// passed (as the model computes it) within [from, to): why says why it
// must not have.
func (w *mworld) checkNoFence(procs []*mproc, from, to time.Time, why string) {
	for _, pr := range procs {
		if at, ok := pr.fencedIn(from, to); ok {
			w.violate("(i) %s fenced itself at T+%v (its last answered heartbeat sent at T+%v): %s",
				pr.ident, w.elapsedAt(at), w.elapsedAt(at.Add(-(w.p.timeout - w.p.effMargin))), why)
		}
	}
}

// fencedIn reports whether pr's fence, as the model computes it, had
// passed at some moment of [from, to), and when it passed; the caller
// holds chk.mu.
func (pr *mproc) fencedIn(from, to time.Time) (time.Time, bool) {
	for _, f := range pr.fences {
		if f[0].Before(to) && f[1].After(from) {
			return f[0], true
		}
	}
	if pr.started && pr.fenceAt.Before(to) && (len(pr.fences) == 0 || pr.fences[len(pr.fences)-1][1].Before(pr.fenceAt)) && !pr.fenceAt.Before(from) {
		return pr.fenceAt, true // passed, no heartbeat answered since
	}
	return time.Time{}, false
}

// proc returns the first process of slot.
func (w *mworld) proc(slot int) *mproc {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.slots[slot][0]
}

// TestMembershipFaults puts one fault of the table, or of the calls around
// it, on a running fleet (virtual time, the default protocol settings
// unless said otherwise), with every check of TestMembership and the
// scenario's own:
//
//   - row-deleted: a held row is deleted; its holder goes on delivering
//     and recreates it from its own checkpoint (no delivery stops for
//     longer than 2s), and holds the row again within a checkpoint
//     interval, 2 rounds and a second (4.75s);
//   - table-recreated: every lease row and membership row is gone at once
//     under 3 processes; every shard is read again from the best
//     checkpoint a live process knew (not one replayed from an older one),
//     no delivery stops for longer than 2 timeouts;
//   - table-missing: the same, the table missing for 3s first (every call
//     failing as on a missing DynamoDB table): no Run returns, and every
//     shard delivers again within 2 timeouts after the table is back;
//   - member-row-throttled: one membership row throttled for 2 timeouts
//     for everyone: only the members heartbeating in it may fence; the
//     shards of the others go on (no silence over 2s), and every shard
//     delivers again within 2 timeouts after the throttling ends;
//   - store-latency: every store call takes 5-50ms, the whole run: no
//     process fences, no shard is silent for over 2s once the fleet is up;
//   - slow-listshards: every ListShards call takes 3-6s for 30s, covering
//     the periodic listing of every process: no process fences (heartbeats
//     run on their own schedule), no shard is silent for over 2s, and every
//     shard delivers within 2 timeouts after the period.
//
// go test ./internal/testkit/sim/ -run 'TestMembershipFaults/^NAME$' -v
// runs one; -simtrace prints its trace.
func TestMembershipFaults(t *testing.T) {
	t.Parallel()
	T := engine.DefaultTimeout
	R := engine.DefaultHeartbeat + engine.DefaultHeartbeat/10
	t.Run("row-deleted", func(t *testing.T) {
		t.Parallel()
		p := scenario(2, 4, 20, 30*time.Second)
		del := 15 * time.Second
		p.events = []mevent{{at: del, kind: mDeleteRow, slot: -1, shard: 0}}
		bound := time.Second + 2*R + time.Second
		p.check = func(w *mworld) {
			w.checkSilence(nil, w.at(10*time.Second), w.at(p.faultEnd), 2*time.Second, "the holder of a deleted row goes on delivering")
			n := 0
			for _, id := range w.stream.ShardIDs() {
				s := w.chk.shard(id)
				switch {
				case s.afterDelete:
					w.violate("(k) the row of %s, deleted at T+%v, was never taken again", id, w.elapsedAt(s.deletedAt))
				case s.restartedAt.IsZero():
				case s.restartedBy != s.restartOf:
					n++
					w.violate("(k) the row of %s, deleted while %s held it, was taken again by %s", id, s.restartOf, s.restartedBy)
				case s.restartedAt.Sub(w.at(del)) > bound:
					n++
					w.violate("(k) the row of %s, deleted at T+%v, was taken again by its holder only at T+%v; bound %v (a checkpoint interval, 2 rounds and a second)",
						id, del, w.elapsedAt(s.restartedAt), bound)
				default:
					n++
				}
			}
			if n == 0 {
				w.violate("(k) no row was deleted: the scenario tests nothing")
			}
		}
		runScenario(t, p)
	})
	t.Run("table-recreated", func(t *testing.T) {
		t.Parallel()
		p := scenario(3, 6, 20, 30*time.Second)
		p.events = []mevent{{at: 15 * time.Second, kind: mDropTable, slot: -1}}
		p.check = func(w *mworld) {
			w.checkSilence(nil, w.at(10*time.Second), w.at(p.faultEnd), 2*T, "after the table is recreated every shard goes on")
			w.checkNoStaleRestart()
		}
		runScenario(t, p)
	})
	t.Run("table-missing", func(t *testing.T) {
		t.Parallel()
		p := scenario(3, 6, 20, 30*time.Second)
		gap := 3 * time.Second
		p.events = []mevent{{at: 15 * time.Second, kind: mDropTable, slot: -1, dur: gap}}
		// Once the table is back, each holder joins again (a round), finds
		// its rows missing (a round), and recreates them from its
		// checkpoint after the lost-row wait (engine lostRowWait: the
		// checkpoint interval, a timeout, the fence margin and two
		// heartbeats), counting only reads a header read followed (a
		// round), and delivers (a round).
		bound := time.Second + T + p.effMargin + 2*engine.DefaultHeartbeat + 4*R
		p.check = func(w *mworld) {
			back := w.at(15*time.Second + gap)
			for _, id := range w.stream.ShardIDs() {
				if e, ok := w.firstEntry(id, back, ""); !ok || e.at.Sub(back) > bound {
					w.violate("(k) %s: no record delivered within %v after the table was back at T+%v (the lost-row wait and 4 rounds)", id, bound, w.elapsedAt(back))
				}
			}
			w.checkNoStaleRestart()
		}
		runScenario(t, p)
	})
	t.Run("member-row-throttled", func(t *testing.T) {
		t.Parallel()
		// More members than a membership row holds: the first rows fill
		// up, RowCapacity each, and the others heartbeat in the next.
		p := scenario(driver.RowCapacity+2, 12, 20, 40*time.Second)
		row := 0
		from, dur := 15*time.Second, 2*T
		p.events = []mevent{{at: from, kind: mThrottleRow, slot: -1, row: row, dur: dur}}
		p.check = func(w *mworld) {
			var others []*mproc
			var otherShards []string
			for i := range p.procs {
				pr := w.proc(i)
				if procRow(pr) == row {
					continue
				}
				others = append(others, pr)
				for _, id := range w.stream.ShardIDs() {
					if e, ok := w.entryBefore(id, w.at(from)); ok && e.ident == pr.ident {
						otherShards = append(otherShards, id)
					}
				}
			}
			fenced := 0
			for i := range p.procs {
				if pr := w.proc(i); procRow(pr) == row {
					if _, ok := pr.fencedIn(w.at(from), w.at(from+dur+T)); ok {
						fenced++
					}
				}
			}
			if fenced == 0 {
				w.violate("(k) no member heartbeating in the throttled %s fenced: the throttling did not reach them", driver.MemberKey(row))
			}
			why := fmt.Sprintf("only %s was throttled, and they heartbeat in another row", driver.MemberKey(row))
			w.checkNoFence(others, w.at(from), w.at(from+dur+2*T), why)
			w.checkSilence(otherShards, w.at(from), w.at(from+dur), 2*time.Second, "held by members heartbeating in another row than the throttled one")
			end := w.at(from + dur)
			for _, id := range w.stream.ShardIDs() {
				if e, ok := w.firstEntry(id, end, ""); !ok || e.at.Sub(end) > 2*T {
					w.violate("(k) %s: no record delivered within 2 timeouts after the throttling ended at T+%v", id, w.elapsedAt(end))
				}
			}
		}
		runScenario(t, p)
	})
	t.Run("store-latency", func(t *testing.T) {
		t.Parallel()
		p := scenario(3, 8, 20, 40*time.Second)
		p.latency = [2]time.Duration{5 * time.Millisecond, 50 * time.Millisecond}
		p.check = func(w *mworld) {
			var all []*mproc
			for i := range p.procs {
				all = append(all, w.proc(i))
			}
			w.checkNoFence(all, w.start, w.at(p.faultEnd), "store calls take 5-50ms, far below the fence")
			w.checkSilence(nil, w.at(10*time.Second), w.at(p.faultEnd), 2*time.Second, "store calls take 5-50ms")
		}
		runScenario(t, p)
	})
	t.Run("slow-listshards", func(t *testing.T) {
		t.Parallel()
		p := scenario(3, 8, 20, 100*time.Second)
		from, dur := 50*time.Second, 30*time.Second // the listing every minute falls in it
		p.events = []mevent{{at: from, kind: mSlowList, slot: -1, dur: dur, delay: 3 * time.Second}}
		p.maxListDelay = 6 * time.Second
		p.check = func(w *mworld) {
			var all []*mproc
			for i := range p.procs {
				all = append(all, w.proc(i))
			}
			w.checkNoFence(all, w.at(from), w.at(from+dur+p.maxListDelay), "a slow ListShards must not delay a heartbeat")
			w.checkSilence(nil, w.at(from), w.at(from+dur), 2*time.Second, "a slow ListShards must not stop reading")
			end := w.at(from + dur + p.maxListDelay)
			for _, id := range w.stream.ShardIDs() {
				if e, ok := w.firstEntry(id, end, ""); !ok || e.at.Sub(end) > 2*T {
					w.violate("(k) %s: no record delivered within 2 timeouts after the slow listing ended at T+%v", id, w.elapsedAt(end))
				}
			}
		}
		runScenario(t, p)
	})
}

// checkNoStaleRestart fails the scenario if a row recreated after the
// table was emptied was taken from an older checkpoint than the best one
// a live process knew.
func (w *mworld) checkNoStaleRestart() {
	if n := w.chk.stats.stale; n > 0 {
		w.violate("(h) %d rows recreated after the table was emptied were read again from an older checkpoint than the best one a live process knew (see the trace: \"behind the best known\")", n)
	}
	if w.chk.stats.restarts < w.p.shards {
		w.violate("(k) only %d of %d rows were taken again after the table was emptied", w.chk.stats.restarts, w.p.shards)
	}
}

// TestMembershipBugs reproduces bugs of the engine's Group, each as a
// scenario that fails while the bug is there:
//
//   - self-fence-livelock: one Group, 150 shards, every store call taking
//     2ms, heartbeat 40ms, timeout 200ms. Every shard must deliver within
//     2s (10 timeouts). With the round doing its store calls before the
//     next heartbeat, the first reads and takes outlast the fence; the rows
//     taken, then released one at a time after the fence, are taken again
//     after the next one: nothing is ever delivered.
//   - deleted-row-two-readers: the rows of one member are deleted while it
//     reads them, and a second member joins: the joiner must not create or
//     take a deleted row while its holder may still deliver ((h)); it does,
//     from no checkpoint, and both read the shard.
//   - rewind-after-checkpoint: an operator's rewind of a held row, the
//     holder's notice bumped once the holder wrote a checkpoint on the row
//     after the request (the checkpoint conflicts, re-reads the row and
//     lands): the rewind must be applied within 2 rounds and a second of
//     the notice. The holder compares the row's counter with the one it
//     knows, which its checkpoint moved: it never applies it.
//   - notice-delays-failover: a member crashes; 8s later (timeout 10s,
//     heartbeat 1s) an operator rewinds one of its shards and bumps its
//     notice: its shards must be read by the other member within the
//     timeout, 2 rounds and a second after the crash. The bumped entry looks
//     alive again to the others, and the failover waits a whole timeout
//     from the bump.
func TestMembershipBugs(t *testing.T) {
	t.Parallel()
	t.Run("self-fence-livelock", func(t *testing.T) {
		t.Parallel()
		p := scenario(1, 150, 2, 3*time.Second)
		p.protocol(40*time.Millisecond, 200*time.Millisecond, 0)
		p.latency = [2]time.Duration{2 * time.Millisecond, 2 * time.Millisecond}
		p.putAll = 0
		p.settle = 5 * time.Second
		bound := 2 * time.Second
		p.check = func(w *mworld) {
			var late []string
			delivered := 0
			for _, id := range w.stream.ShardIDs() {
				if e, ok := w.firstEntry(id, w.start, ""); !ok || e.at.Sub(w.start) > bound {
					late = append(late, id)
				}
				delivered += len(w.entries[id])
			}
			if len(late) > 0 {
				w.violate("(k) %d of %d shards delivered nothing within %v of the start (%d handler calls in all, %v of virtual time); first: %s",
					len(late), p.shards, bound, delivered, time.Since(w.start).Round(time.Millisecond), late[0])
			}
		}
		runScenario(t, p)
	})
	t.Run("deleted-row-two-readers", func(t *testing.T) {
		t.Parallel()
		p := scenario(2, 4, 20, 30*time.Second)
		p.procs[1].start = 15 * time.Second
		for i := range p.shards {
			p.events = append(p.events, mevent{at: 15*time.Second - 10*time.Millisecond, kind: mDeleteRow, slot: -1, shard: i})
		}
		runScenario(t, p)
	})
	t.Run("rewind-after-checkpoint", func(t *testing.T) {
		t.Parallel()
		p := scenario(1, 2, 50, 30*time.Second)
		p.events = []mevent{{at: 15 * time.Second, kind: mRewind, slot: -1, shard: 0, back: 20, afterCheckpoint: true}}
		R := p.round()
		bound := 2*R + time.Second
		p.check = func(w *mworld) {
			if len(w.rewinds) != 1 || w.rewinds[0].notified.IsZero() {
				w.violate("(k) the rewind was not requested from a holder, or its notice not bumped: the scenario tests nothing")
				return
			}
			req := w.rewinds[0]
			switch {
			case req.applied.IsZero():
				w.violate("(j) the rewind of %s requested at T+%v (notice bumped at T+%v) was never applied", req.id, w.elapsedAt(req.at), w.elapsedAt(req.notified))
			case req.applied.Sub(req.notified) > bound:
				w.violate("(j) the rewind of %s was applied %v after the notice; bound %v (2 rounds and a second)", req.id, req.applied.Sub(req.notified), bound)
			}
		}
		runScenario(t, p)
	})
	t.Run("notice-delays-failover", func(t *testing.T) {
		t.Parallel()
		p := scenario(2, 4, 20, 40*time.Second)
		p.protocol(time.Second, 10*time.Second, 0)
		crash := 15 * time.Second
		p.events = []mevent{
			{at: crash, kind: mCrash, slot: 0},
			{at: crash + 8*time.Second, kind: mRewind, slot: 0, back: 5},
		}
		bound := p.timeout + 2*p.round() + time.Second
		p.check = func(w *mworld) {
			dead := w.proc(0).ident
			n := 0
			for _, id := range w.stream.ShardIDs() {
				if e, ok := w.entryBefore(id, w.at(crash)); !ok || e.ident != dead {
					continue
				}
				n++
				if e, ok := w.firstEntry(id, w.at(crash), dead); !ok || e.at.Sub(w.at(crash)) > bound {
					got := "never"
					if ok {
						got = e.at.Sub(w.at(crash)).Round(time.Millisecond).String() + " after the crash"
					}
					w.violate("(k) %s, read by %s until its crash at T+%v, was read again %s; bound %v (the timeout, 2 rounds and a second)",
						id, dead, crash, got, bound)
				}
			}
			if n == 0 {
				w.violate("(k) the crashed process read no shard: the scenario tests nothing")
			}
		}
		runScenario(t, p)
	})
}
