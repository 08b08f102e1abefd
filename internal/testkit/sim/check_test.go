package sim

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// checker watches handler calls and the writes that land in the lease table
// and reports every broken invariant:
//
//   - (a) one deliverer per shard: a handler is entered only while the
//     entering owner holds the shard's row, never while a handler of another
//     owner on that shard is still running (unless that one was stalled by
//     an injected pause: a lease cannot fence a call already running), and
//     each owner delivers a shard's records in order from where its lease
//     started, without gaps (retries repeat the last record);
//   - (b) a checkpoint (or a release's final checkpoint) lands only from the
//     row's holder, and only over records that were acknowledged: by the
//     writer itself from where its lease started, and by someone before;
//   - (c) a shard's checkpoint never moves backwards (sequence numbers
//     compared as integers, sub-sequences within an aggregate), except by
//     an operator's rewind: each version of the row against the one before
//     it in counter order, from the row's last creation on (a deletion
//     forgets the versions before; a row recreated from an older
//     checkpoint is judged by (h)), so a late write landing on a
//     recreated row whose counter has come back to the one it was
//     conditional on is compared with the recreated row's versions;
//   - every write that landed is seen, in counter order, with the counter
//     bumped by one: nothing reaches the table behind the checker's back;
//   - (h) after a row was deleted (a row deleted, the table recreated) while
//     held, its holder may go on delivering until the row is taken again,
//     and anyone may create it free, but nobody else creates it held,
//     takes it (but a recovered row, to write a checkpoint on it and
//     release it) or delivers it while that holder may still deliver
//     (mayDeliver); the next take starts neither at the start
//     position when a live process knew a checkpoint, nor behind the
//     checkpoint its holder knew when the holder takes it, nor after records
//     not acknowledged (a skip);
//   - (d), at the end: every record of every shard was acknowledged at
//     least once and every checkpoint covers its whole shard.
//
// Its methods are safe for concurrent use; mu also serializes the writes
// of the simulation's stores with the checker's view of them.
type checker struct {
	mu     sync.Mutex
	stream *Ledger
	start  time.Time
	// owner returns the owner of shard id's row now, if the checker can
	// know it exactly (the simulation's memory store); nil means "the
	// newest version the checker has seen" (DynamoDB, where writes are
	// seen when their answers come back).
	owner  func(id string) string
	shards map[string]*shardState
	// pauses holds, per owner, the intervals its process was paused.
	pauses map[string][][2]time.Time
	// cutoffs holds, per owner, the intervals its process was partitioned
	// from the table (see couldAct): it ran, but none of its calls got
	// through.
	cutoffs map[string][][2]time.Time
	// mayDeliver reports whether the process named owner may still deliver
	// shard id by the protocol's rule; nil means it cannot be told (the
	// checks that need it are skipped). alive reports whether the process
	// named owner is alive (nil: every process is).
	mayDeliver func(owner, id string) bool
	alive      func(owner string) bool
	// proof returns the proof bound of the process named owner: how long
	// after its last write of a row that landed it may deliver the row's
	// shard (nil: unknown, no bound).
	proof func(owner string) time.Duration
	// tracksAcquired: the world reports each lease acquired (acquiredBy),
	// so that a tenure whose worker never started is known not to deliver.
	tracksAcquired bool
	// couldAct reports whether the process named owner could act on what
	// it knew between from and to: its fence valid (it reached the table),
	// not paused and not partitioned, for an unbroken stretch long enough to see a row
	// missing and recreate it (nil: every live process could).
	couldAct func(owner string, from, to time.Time) bool

	violations []string
	dropped    int // violations beyond the first 20
	trace      trace
	stats      checkStats
}

type checkStats struct {
	entries, acks, writes, checkpoints, takes int
	// unreachable counts restarts at the start position after a deletion
	// while every live process that knew a checkpoint was cut off from the
	// table (see couldAct).
	unreachable int
	// fills counts takes of a row recreated without a checkpoint whose
	// taker wrote the checkpoint it knew before delivering.
	fills int
	// takeovers counts takes of a lease another owner held; close ones
	// came within closeTakeover of the previous owner's last delivery on
	// the shard, and closest is the least such gap (a fence test measures
	// how close a taker came to a holder still delivering).
	takeovers, closeTakeovers int
	closest                   time.Duration
	// deletions counts rows deleted; restarts the takes of a row recreated
	// after it was deleted, stale the restarts from a checkpoint older than
	// the best one a live process knew (a replay, not a violation unless
	// from the start position or by the holder).
	deletions, restarts, stale int
	// rewindsLost counts restarts past an operator's rewind applied before
	// a deletion while every process that knew of the rewind was dead or
	// cut off from the table since the deletion (see lostRewind).
	rewindsLost int
}

// closeTakeover: a takeover this soon after the previous holder's last
// delivery tests the fence.
const closeTakeover = time.Second

type shardState struct {
	id     string
	acked  []bool
	prefix int // every user record before it was acknowledged (since the last replay an operator asked for)
	// ever and everPrefix are acked and prefix, replays aside: every user
	// record before everPrefix was acknowledged at least once.
	ever       []bool
	everPrefix int
	open       []*handlerCall
	versions   map[int64]version // seen, not yet checked in order
	tokens     map[int64]string  // the token of every version seen, by counter
	last       leases.Lease      // the newest version checked in order
	newest     leases.Lease      // the newest version seen
	tenures    map[string]*tenure
	entered    map[string]time.Time // each owner's last handler entry

	// From the deletion of the row until its next take (afterDelete): its
	// holder then ("" if free), how many records the best checkpoint each
	// live process knew then covers (known, by process), and the holder's
	// own (holderKnown; -1 for none).
	afterDelete bool
	deletedAt   time.Time
	goneHolder  string
	known       map[string]int
	holderKnown int
	// rewindAt: how many records the rewind pending on the row when it
	// was deleted covers (-1 for none): the operator asked to read again
	// from there, so a holder that tried to apply it and lost the answer
	// may restart there, behind its own checkpoint.
	rewindAt int
	// rewound: the last operator's rewind replayed on the row (written on
	// the free row, or applied by its holder), with what it undid and the
	// processes that have read the row since. Should the row vanish while
	// none of them is alive, the request is gone with it: no live process
	// can know of it, and a restart from a checkpoint before it skips
	// nothing anyone alive was asked to replay.
	rewound *rewoundRow
	// lostRewind: the rewind of rewound when the row was deleted while a
	// process that knew of it was alive. Should every one of them be dead,
	// or cut off from the table, from the deletion to the restart (couldAct),
	// nobody who can act knows of it: a restart past it is counted
	// (rewindsLost), its replay given up as deleted() gives up a rewind
	// nobody alive read, not a violation.
	lostRewind *rewoundRow
	// passedRewind: a restart at the lost rewind's position by a process
	// that knew of it, released without delivering, passed its judgment
	// to the next taker (see atRewind): at passedAt.
	passedRewind bool
	passedAt     int
	// pendingKnowers: the processes told the row with the operator's
	// rewind request pendingTo pending (not applied yet): they know of the
	// rewind its holder applies (ApplyRewind) too.
	pendingTo      leases.Checkpoint
	pendingKnowers map[string]bool
	// wrote holds, per process, when its last write of the row that left
	// it held landed (see holderMayDeliver).
	wrote map[string]time.Time
	// operatorAt: the records the checkpoint an operator's rewind wrote on
	// the free row covers, after a deletion and before the next take (-1
	// for none): a restart there is the operator's, whatever was known.
	operatorAt int
	// The last take of the row after a deletion: when, by whom, the
	// holder at the deletion.
	restartedAt            time.Time
	restartedBy, restartOf string
	// pending: that take's start position, judged (h) at the taker's first
	// delivery or write on the row (judgeRestart): a taker that finds the
	// recreated row without a checkpoint may first write the one it knew.
	pending *pendingRestart
}

// pendingRestart is a take after a deletion whose start is not judged yet.
type pendingRestart struct {
	writer, holder string
	at             time.Duration // the deletion, from the start
	known          int           // the best checkpoint a live process knew at the take
	n              int           // what the take's checkpoint covers
	knowers        string        // the live processes that knew a checkpoint, for the report
	// fresh: the take created the row or found it without a checkpoint,
	// so its start is the taker's own knowledge; a take of a row that
	// another member recreated with a checkpoint starts from that one (the
	// engine never moves a row's checkpoint on from memory, which may
	// predate an operator's rewind).
	fresh bool
	// atRewind: the take started where the operator's rewind lost with
	// the row asked, and its writer knew of that rewind: the replay the
	// operator asked for, whatever checkpoint the writer knew before it
	// (seed 2319825: a fenced holder released its row with a rewind to
	// TRIM_HORIZON pending, the next holder applied it, the table was
	// dropped, and the first recreated the row at the rewind, not at its
	// own checkpoint from before it).
	atRewind bool
}

// noStart reports whether row l says nothing of where its shard was read
// to, as the engine sees it: no checkpoint, or the TRIM_HORIZON of a row
// recovered by a member that knew none (no Rewind id), and no rewind
// pending. Its taker may write the checkpoint it knows before delivering.
func noStart(l leases.Lease) bool {
	return l.RewindTo.IsZero() && (l.Checkpoint.IsZero() || l.Recovered != "" && l.Rewind == "" && l.Checkpoint.Sequence == leases.RewindTrimHorizon)
}

// tenure is one owner's lease on a shard, from its TakeAs (or a rewind it
// applied): where its reading started and how far it got.
type tenure struct {
	start       int // user index it started from
	next        int // the next user record it must deliver
	lastEntered int
	since       time.Time
	// restart, if not -1, is where the owner may also start reading again
	// (its take of a row it recreated from its checkpoint, going on with
	// what it read meanwhile or restarting from the checkpoint).
	restart int
	// ended: the owner's worker for this tenure has finished (the Group
	// reported the lease released, lost or ended); a take of the row after
	// that starts a new tenure, even as the same incarnation.
	ended bool
	// acquired: the Group reported the lease acquired for this tenure (its
	// worker started). A row recreated held only to be released at once
	// (an orphan's, free for the plan's member) is never acquired.
	acquired bool
}

// tenureEnded records that owner's worker on shard id finished.
// holderMayDeliver reports whether holder, the holder of s's row when it
// was deleted, may still deliver records of s: its lease still valid by the
// protocol (mayDeliver), and its worker not finished. A worker that
// reported its lease ended delivers nothing more (enter checks that), once
// its handler calls have returned. The caller holds c.mu.
func (c *checker) holderMayDeliver(s *shardState, holder string) bool {
	if c.mayDeliver == nil || !c.mayDeliver(holder, s.id) {
		return false
	}
	if at, ok := s.wrote[holder]; ok && c.proof != nil && time.Since(at) >= c.proof(holder) {
		// Past its proof bound since its last write of the row that
		// landed: the engine delivers nothing more until it writes the row
		// again, which it cannot while the row is gone.
		return false
	}
	t := s.tenures[holder]
	if t != nil && t.ended {
		return slices.ContainsFunc(s.open, func(h *handlerCall) bool { return h.owner == holder })
	}
	if c.tracksAcquired && t != nil && !t.acquired {
		// No worker ever started on it: nothing to deliver (acquiredBy
		// checks that none starts on a row another holds).
		return false
	}
	return true
}

// acquiredBy records that owner's Group reported the lease of shard id
// acquired: its worker starts. It must hold the row then, by a tenure
// that has not ended. The caller does not hold mu.
func (c *checker) acquiredBy(owner, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.shard(id)
	t := s.tenures[owner]
	if t == nil || t.ended {
		c.violate("(a) %s reported %s acquired with no take of its row since its last tenure ended", owner, id)
		return
	}
	if c.owner != nil {
		// Its take's answer may come back after the row was deleted under
		// it (as in enter): the holder finds it missing at its next write.
		if h := c.owner(id); h != owner && !(s.afterDelete && s.goneHolder == owner) {
			c.violate("(a) %s reported %s acquired while the row is held by %q", owner, id, h)
		}
	}
	t.acquired = true
}

func (c *checker) tenureEnded(owner, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.shard(id).tenures[owner]; t != nil {
		t.ended = true
	}
}

type handlerCall struct {
	owner   string
	shard   *shardState
	idx     int
	tenure  *tenure
	entered time.Time
	closed  bool
}

type version struct {
	op     string
	writer string
	row    leases.Lease
	at     time.Time
}

func newChecker(stream *Ledger) *checker {
	c := &checker{stream: stream, start: time.Now(), shards: map[string]*shardState{}, pauses: map[string][][2]time.Time{}, cutoffs: map[string][][2]time.Time{}}
	c.trace.start = c.start
	return c
}

func (c *checker) shard(id string) *shardState {
	s := c.shards[id]
	if s == nil {
		s = &shardState{id: id, versions: map[int64]version{}, tokens: map[int64]string{}, tenures: map[string]*tenure{}, entered: map[string]time.Time{}, rewindAt: -1, operatorAt: -1}
		c.shards[id] = s
	}
	return s
}

func (c *checker) elapsed() time.Duration { return time.Since(c.start) }

// violate records a broken invariant; the caller holds mu.
func (c *checker) violate(format string, args ...any) {
	msg := fmt.Sprintf("T+%v: ", c.elapsed().Round(time.Millisecond)) + fmt.Sprintf(format, args...)
	c.trace.add("VIOLATION " + msg)
	if len(c.violations) < 20 {
		c.violations = append(c.violations, msg)
	} else {
		c.dropped++
	}
}

// runReturned records that owner's Run returned err; unless the process was
// being stopped, that is a violation: Run returns only when its context ends.
func (c *checker) runReturned(owner string, err error, stopping bool) {
	c.tracef("%s: Run returned %v", owner, err)
	if !stopping {
		c.mu.Lock()
		c.violate("%s: Run returned %v before its context was cancelled", owner, err)
		c.mu.Unlock()
	}
}

func (c *checker) tracef(format string, args ...any) {
	c.trace.addf(format, args...)
}

// paused records that owner's process is paused from..to.
func (c *checker) paused(owner string, from, to time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pauses[owner] = append(c.pauses[owner], [2]time.Time{from, to})
}

// partitioned records that owner's process is partitioned from..to.
func (c *checker) partitioned(owner string, from, to time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cutoffs[owner] = append(c.cutoffs[owner], [2]time.Time{from, to})
}

// unbroken reports whether from..to holds a stretch of at least need that
// none of the intervals bad overlaps (couldAct's test).
func unbroken(bad [][2]time.Time, from, to time.Time, need time.Duration) bool {
	slices.SortFunc(bad, func(a, b [2]time.Time) int { return a[0].Compare(b[0]) })
	at := from // the start of the current stretch with nothing in the way
	for _, iv := range bad {
		end := iv[0]
		if to.Before(end) {
			end = to
		}
		if end.Sub(at) >= need {
			return true
		}
		if iv[1].After(at) {
			at = iv[1]
		}
		if !at.Before(to) {
			return false
		}
	}
	return to.Sub(at) >= need
}

// pausedSince reports whether owner's process was paused at some point
// between from and now.
func (c *checker) pausedSince(owner string, from time.Time) bool {
	now := time.Now()
	for _, p := range c.pauses[owner] {
		if p[0].Before(now) && p[1].After(from) {
			return true
		}
	}
	return false
}

// enter records that owner's handler was entered with r and checks (a).
func (c *checker) enter(owner string, r *kltype.Record) *handlerCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.entries++
	s := c.shard(r.ShardID)
	idx, ok := c.stream.UserIndex(r.ShardID, r.SequenceNumber, r.SubSequence)
	if !ok {
		c.violate("%s: handler got a record that is not in shard %s: %s/%d", owner, r.ShardID, r.SequenceNumber, r.SubSequence)
		idx = -1
	}
	holder := s.newest.Owner
	if c.owner != nil {
		holder = c.owner(r.ShardID)
	}
	if holder != owner && !(s.afterDelete && s.goneHolder == owner) {
		c.violate("(a) %s entered its handler on %s record #%d (%s/%d) while the row is held by %q",
			owner, r.ShardID, idx, r.SequenceNumber, r.SubSequence, holder)
	}
	if s.afterDelete && s.goneHolder != "" && s.goneHolder != owner && c.holderMayDeliver(s, s.goneHolder) {
		c.violate("(h) %s delivered %s record #%d, whose row was deleted at T+%v, while its holder %s may still deliver",
			owner, r.ShardID, idx, s.deletedAt.Sub(c.start).Round(time.Millisecond), s.goneHolder)
	}
	for _, o := range s.open {
		if o.owner != owner && !c.pausedSince(o.owner, o.entered) {
			c.violate("(a) %s entered its handler on %s record #%d while %s's handler on record #%d (entered at T+%v) is still running",
				owner, r.ShardID, idx, o.owner, o.idx, o.entered.Sub(c.start).Round(time.Millisecond))
		}
	}
	if s.pending != nil {
		c.judgeRestart(s)
	}
	t := s.tenures[owner]
	switch {
	case t == nil:
		c.violate("(a) %s delivered %s record #%d without having taken the lease", owner, r.ShardID, idx)
	case t.ended:
		c.violate("(a) %s delivered %s record #%d after its worker reported the lease released, lost or ended", owner, r.ShardID, idx)
	case idx == t.restart && idx != t.next:
		t.start, t.next, t.restart = idx, idx, -1
	case idx != t.next && idx != t.lastEntered:
		c.violate("(a) %s delivered %s record #%d out of order: its lease started at #%d, it acknowledged up to #%d, last delivered #%d",
			owner, r.ShardID, idx, t.start, t.next-1, t.lastEntered)
	}
	if t != nil {
		t.lastEntered = idx
	}
	s.entered[owner] = time.Now()
	h := &handlerCall{owner: owner, shard: s, idx: idx, tenure: t, entered: time.Now()}
	s.open = append(s.open, h)
	return h
}

// exit records that a handler call returned; acked if it returned nil.
func (c *checker) exit(h *handlerCall, acked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exitLocked(h, acked)
}

func (c *checker) exitLocked(h *handlerCall, acked bool) {
	if h.closed {
		return
	}
	h.closed = true
	s := h.shard
	s.open = slices.DeleteFunc(s.open, func(o *handlerCall) bool { return o == h })
	if !acked || h.idx < 0 {
		return
	}
	c.stats.acks++
	for len(s.acked) <= h.idx {
		s.acked = append(s.acked, false)
	}
	s.acked[h.idx] = true
	for s.prefix < len(s.acked) && s.acked[s.prefix] {
		s.prefix++
	}
	for len(s.ever) <= h.idx {
		s.ever = append(s.ever, false)
	}
	s.ever[h.idx] = true
	for s.everPrefix < len(s.ever) && s.ever[s.everPrefix] {
		s.everPrefix++
	}
	if t := h.tenure; t != nil && h.idx == t.next {
		t.next++
	}
}

// crashed closes the handler calls of a process that died: whatever they
// were doing died with it.
func (c *checker) crashed(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.shards {
		for _, h := range slices.Clone(s.open) {
			if h.owner == owner {
				c.exitLocked(h, false)
			}
		}
	}
}

// applied records a write that landed (whatever its caller sees): writer
// called op on the row as it knew it (before) and the row became after.
// The simulation calls it with mu held, as the write lands; the DynamoDB
// test when the write's answer (or a read-back) tells it landed.
func (c *checker) applied(op, writer string, before, after leases.Lease) {
	c.stats.writes++
	restartVersion := false
	if after.Owner != "" && (op == "Checkpoint" || op == "TakeAs" || op == "CreateAs" || op == "ApplyRewind") {
		s := c.shard(after.Key.Shard)
		if s.wrote == nil {
			s.wrote = map[string]time.Time{}
		}
		s.wrote[writer] = time.Now() // a write that landed, naming a holder: its proof (an upper bound of its send)
	}
	s := c.shard(after.Key.Shard)
	c.tracef("%s %s %s -> counter %d owner %q cp %s rewind %q", writer, op, after.Key.Shard, after.Counter,
		after.Owner, after.Checkpoint, after.RewindTo)
	if op != "Create" && op != "CreateAs" && after.Counter != before.Counter+1 {
		c.violate("%s %s %s: counter %d -> %d, want +1", writer, op, after.Key.Shard, before.Counter, after.Counter)
	}
	if p := s.pending; p != nil && !(writer == p.writer && (op == "Checkpoint" || op == "Release" || op == "TakeAs")) {
		if t := s.tenures[p.writer]; (op == "TakeAs" || op == "CreateAs") && t != nil && t.lastEntered == -1 && t.next == t.start {
			// Taken from a taker that never delivered (its take's answer
			// lost, then its incarnation over): the restart is this one's.
			s.pending, s.afterDelete, s.goneHolder = nil, true, p.holder
		} else {
			// Any other write: the taker's start stands as taken. (The
			// taker's own take again, its fill's answer lost, is still
			// before it delivered.)
			c.judgeRestart(s)
		}
	}
	seen := false
	if tok, ok := s.tokens[after.Counter]; ok {
		if tok != after.Token {
			c.violate("%s %s %s: a second write produced counter %d", writer, op, after.Key.Shard, after.Counter)
			return
		}
		seen = true // already observed by a read (the DynamoDB test's poller)
	}
	if after.Counter > s.newest.Counter {
		s.newest = after
	}
	if op == "CreateAs" && !after.Held() {
		// Recreated free and recovered: nobody delivers from it, and its
		// takers are judged by their takes.
		op = "Create"
	}
	// fresh: the writer's take finds no checkpoint to start from (it
	// creates the row, or takes one recreated without any).
	fresh := op == "CreateAs" || noStart(before)
	if op == "CreateAs" {
		// A row created held by its writer: a creation, then a take.
		if s.afterDelete && s.goneHolder != "" && writer != s.goneHolder && c.holderMayDeliver(s, s.goneHolder) {
			c.violate("(h) %s created the row of %s, deleted at T+%v, while its holder %s may still deliver",
				writer, s.id, s.deletedAt.Sub(c.start).Round(time.Millisecond), s.goneHolder)
		}
		op = "TakeAs"
	}
	if t := s.tenures[writer]; op == "TakeAs" && before.Owner == writer && before.Incarnation == after.Incarnation && t != nil && !t.ended && !s.afterDelete &&
		after.Checkpoint == before.Checkpoint {
		// The holder proving its row (a shard idle whose row has no
		// checkpoint yet): a write of the same tenure, from the same place,
		// or a take as the same incarnation whose first answer was lost
		// (no worker ran). A take that writes a checkpoint is a take (a
		// fill, judged below).
		op = "Prove"
	}
	switch op {
	case "Prove":
		if after.Checkpoint != before.Checkpoint {
			c.checkCovered(s, writer, op, after.Checkpoint)
		}
	case "TakeAs":
		c.stats.takes++
		if after.Checkpoint != before.Checkpoint {
			// The take wrote the checkpoint its taker knew (a row recreated
			// without one): only over records acknowledged, never ahead of
			// an operator's rewind.
			n, err := c.covered(s.id, after.Checkpoint)
			switch {
			case err != nil:
				c.violate("%s took %s with checkpoint %s: %v", writer, s.id, after.Checkpoint, err)
			case n > s.everPrefix:
				c.violate("(h) %s took %s with a checkpoint covering %d records; only the first %d were ever acknowledged: records skipped", writer, s.id, n, s.everPrefix)
			case n > s.prefix && !c.rewindKnowersLost(s):
				c.violate("(h) %s took %s with a checkpoint covering %d records, ahead of the operator's rewind to #%d: the records it asked to replay are skipped", writer, s.id, n, s.prefix)
			}
			c.stats.fills++
			if p := s.pending; p != nil && p.writer == writer && err == nil {
				p.n = n // the taker's earlier take, not delivered from, starts here now
			}
			if before.Recovered != "" {
				// A recovered row gets what its taker knows, which may be
				// behind what the recoverer knew (a rewind lost with the
				// table, the holder's own position): a restart, judged
				// above and by (h), not a move (c).
				restartVersion = true
			}
		}
		if prev := before.Owner; prev != "" && prev != writer {
			c.stats.takeovers++
			if last, ok := s.entered[prev]; ok {
				gap := time.Since(last)
				if gap < closeTakeover {
					c.stats.closeTakeovers++
				}
				if c.stats.closest == 0 || gap < c.stats.closest {
					c.stats.closest = gap
				}
			}
		}
		asCreated := before.Counter == 1 && !before.Held() && before.Recovered == ""
		if s.afterDelete && writer != s.goneHolder && (after.Recovered != "" || asCreated) && s.goneHolder != "" && c.holderMayDeliver(s, s.goneHolder) {
			// A take of a recovered row while its holder at the deletion
			// may still deliver: the taker delivers nothing before that
			// holder has stopped (enter checks it); it writes the
			// checkpoint it knows and releases the row (the engine's
			// repairFree). So does a take of a row a Create applied late
			// made again, by a member that knows it was taken before: it
			// releases it recovered (recoverLate, seed 93032236). The
			// restart is judged at the next take.
			c.setTenure(s, writer, after.Checkpoint)
			break
		}
		if t := s.tenures[writer]; s.afterDelete && writer == s.goneHolder && t != nil && !t.ended {
			// The holder takes the row it recreated, or another member
			// recovered: it goes on from where it is, or restarts from the
			// checkpoint. (A holder whose worker has finished starts a new
			// tenure, below.) The checkpoint its take writes on a recovered
			// row is its own, which may be behind what the recoverer knew
			// (records it had acknowledged before another took the shard
			// from an older checkpoint): a restart, judged by (h), not a
			// move of the row's checkpoint (c).
			if before.Recovered != "" && after.Checkpoint != before.Checkpoint {
				restartVersion = true
			}
			if n, err := c.covered(s.id, after.Checkpoint); err == nil && s.rewindAt >= 0 && n == s.rewindAt && n < t.start {
				// Recreated at the operator's rewind that was pending on
				// the row it held when the row was deleted, and taken back:
				// the rewind applied, as by ApplyRewind (seed 99011324).
				c.setTenure(s, writer, after.Checkpoint)
				c.rewind(s, after.Counter, after.Checkpoint, writer)
				break
			}
			if n, err := c.covered(s.id, after.Checkpoint); err == nil && n == s.operatorAt && after.Checkpoint == before.Checkpoint {
				// Taken back where an operator's rewind of the recreated
				// free row put it: the engine's holder reads again from
				// there, the rewind applied (recreate: lostrow.Point
				// returns the shard's last rewind, the lease is marked
				// rewound), never going on from where it was. Its
				// tenure starts there (seed 94102999: its release there,
				// before it delivered, was judged against the tenure it
				// had before the deletion). The operator's Rewind replayed
				// the shard; the restart is judged below.
				c.setTenure(s, writer, after.Checkpoint)
			} else if err == nil {
				t.restart = n
			}
		} else {
			c.setTenure(s, writer, after.Checkpoint)
		}
		if s.afterDelete {
			c.restarted(s, writer, after, fresh)
		}
	case "Create":
		// A free row: whoever takes it is judged by (h) at the take.
	case "ApplyRewind":
		c.judgeRestart(s) // as of before the rewind (seed 2206527)
		c.setTenure(s, writer, after.Checkpoint)
		c.rewind(s, after.Counter, after.Checkpoint, writer)
		if s.pendingTo == before.RewindTo {
			for who := range s.pendingKnowers {
				s.rewound.knowers[who] = true // read the request (seed 2319825)
			}
		}
		s.pendingTo, s.pendingKnowers = leases.Checkpoint{}, nil
	case "Rewind":
		// A take after a deletion is judged against the acknowledgements
		// of its time, not against a later rewind's (seed 2206527: a
		// holder's restart at its own checkpoint, judged at the next
		// deletion after a rewind of the free row, counted as skipping the
		// rewind it came before).
		c.judgeRestart(s)
		switch {
		case !before.Held() && !s.afterDelete:
			c.rewind(s, after.Counter, after.Checkpoint, "")
		case !before.Held():
			// The operator rewound the row recreated after a deletion: its
			// next taker starts where the operator said. Should the row go
			// again before anyone read it, the rewind goes with it (seed
			// 92025045: a table dropped 8 s after such a rewind).
			if n, err := c.covered(s.id, after.Checkpoint); err == nil {
				u := &rewoundRow{counter: after.Counter, at: n, prefix: s.prefix, acked: slices.Clone(s.acked), knowers: map[string]bool{}, prev: s.rewound}
				c.replay(s, after.Checkpoint)
				s.operatorAt, s.rewound = n, u
			}
		}
	case "Checkpoint", "Release":
		if before.Owner != writer {
			c.violate("(b) %s wrote %s on %s as %q", writer, op, after.Key.Shard, before.Owner)
		}
		if p, t := s.pending, s.tenures[writer]; p != nil && p.writer == writer && p.holder == writer && t != nil && t.restart != -1 && t.lastEntered != -1 {
			// The holder at the deletion, which delivered in its tenure,
			// took the row another member recreated and writes its own
			// checkpoint on it: it goes on in its tenure, as after
			// recreating the row itself. (One that never delivered writes
			// what it knows: a fill, below.)
			if n, err := c.covered(s.id, after.Checkpoint); err == nil {
				p.n = n
			}
			c.judgeRestart(s)
			c.stats.checkpoints++
			c.checkCovered(s, writer, op, after.Checkpoint)
			break
		}
		if t := s.tenures[writer]; after.Checkpoint != before.Checkpoint && t != nil &&
			((noStart(before) && t.start == 0 && t.lastEntered == -1 && t.next == t.start) ||
				(s.pending != nil && s.pending.writer == writer)) { // pending: no delivery since the take
			// The taker of a row recreated without a checkpoint writes the
			// one it knew before delivering (the
			// engine's fillCheckpoint, or the release of an orphan whose
			// fill was not written): its tenure starts there. (A holder
			// that takes the row it held when it was deleted, without
			// having delivered since, goes on in its tenure: its fill is
			// one too.) Records skipped so are ones that were
			// acknowledged, and none an operator asked to replay.
			n, err := c.covered(s.id, after.Checkpoint)
			switch {
			case err != nil:
				c.violate("%s filled %s with checkpoint %s: %v", writer, s.id, after.Checkpoint, err)
			case n > s.everPrefix:
				c.violate("(h) %s filled %s with a checkpoint covering %d records; only the first %d were ever acknowledged: records skipped", writer, s.id, n, s.everPrefix)
			case n > s.prefix:
				c.violate("(h) %s filled %s with a checkpoint covering %d records, ahead of the operator's rewind to #%d: the records it asked to replay are skipped", writer, s.id, n, s.prefix)
			}
			t.start, t.next = n, n
			if p := s.pending; p != nil && p.writer == writer {
				p.n = n
			}
			c.stats.checkpoints++
			c.stats.fills++
			c.judgeRestart(s)
			break
		}
		if p := s.pending; p != nil && op == "Release" && p.writer == writer && after.Checkpoint == before.Checkpoint {
			if t := s.tenures[writer]; t != nil && t.lastEntered == -1 && t.next == t.start {
				// The taker released the row it recreated without
				// delivering from it (a member that is not its holder
				// recreates a vanished row free): nobody read from the
				// row's checkpoint yet, so the restart is judged where its
				// next taker starts, which may know better.
				s.pending, s.afterDelete, s.goneHolder = nil, true, p.holder
				s.passedRewind, s.passedAt = p.atRewind, p.n
				break
			}
		}
		c.judgeRestart(s)
		if after.Checkpoint != before.Checkpoint {
			c.stats.checkpoints++
			c.checkCovered(s, writer, op, after.Checkpoint)
		}
	}
	if seen {
		return
	}
	s.tokens[after.Counter] = after.Token
	if restartVersion {
		op = "Restart"
	}
	s.versions[after.Counter] = version{op: op, writer: writer, row: after, at: time.Now()}
	c.inOrder(s)
}

// observed records a version of a row that a read returned, whoever wrote
// it: the DynamoDB test polls the table, so that a write whose answer was
// lost does not leave a gap in the counter order that (c) checks.
func (c *checker) observed(row leases.Lease) {
	s := c.shard(row.Key.Shard)
	if tok, ok := s.tokens[row.Counter]; ok {
		if tok != row.Token {
			c.violate("%s: two versions with counter %d", row.Key.Shard, row.Counter)
		}
		return
	}
	if row.Counter <= s.last.Counter {
		return // older than what was checked in order: overwritten since
	}
	s.tokens[row.Counter] = row.Token
	if row.Counter > s.newest.Counter {
		s.newest = row
	}
	s.versions[row.Counter] = version{op: "?", writer: "?", row: row, at: time.Now()}
	c.inOrder(s)
}

// deleted records that shard id's row was deleted (or the table emptied):
// holder is the checker's name of its holder then ("" if free), known how
// many records the best checkpoint each live process knew then covers, by
// process (capped by what the row's covered). The caller holds mu.
func (c *checker) deleted(id, holder string, known map[string]int) {
	s := c.shard(id)
	if p := s.pending; p != nil {
		if t := s.tenures[p.writer]; t != nil && t.lastEntered == -1 && t.next == t.start {
			// Its taker read nothing from the row before it was deleted
			// again (a take of a row recreated without a checkpoint whose
			// fill failed, say: seed 4002962): no restart happened, and the
			// taker still knows what it knew.
			c.tracef("%s took %s and read nothing from it before it was deleted again: no restart to judge", p.writer, s.id)
			s.pending = nil
		}
	}
	c.judgeRestart(s)
	c.stats.deletions++
	holderKnown, ok := known[holder]
	if !ok || holder == "" {
		holderKnown = -1
	}
	c.tracef("row of %s deleted (holder %q; the best checkpoint a live process knows covers %d records, the holder's %d)",
		id, holder, maxKnown(known, nil), holderKnown)
	if !s.afterDelete {
		s.lostRewind = nil // of an earlier deletion
	}
	if u := s.rewound; u != nil {
		alive := func(u *rewoundRow) bool {
			for name := range u.knowers {
				if c.alive == nil || c.alive(name) {
					return true
				}
			}
			return false
		}
		// The rewinds that went with the row while no process alive had
		// read them, the last one first, then the one whose replay it cut
		// short, and so on (seed 95866307: a rewind applied by a process
		// since restarted, its replay cut short by a second rewind of the
		// free row that nobody read, the table dropped; the one live
		// process knew a copy from before both).
		for ; u != nil && !alive(u); u = u.prev {
			for i := range s.acked {
				s.acked[i] = s.acked[i] || (i < len(u.acked) && u.acked[i])
			}
			s.prefix = max(s.prefix, u.prefix)
			for s.prefix < len(s.acked) && s.acked[s.prefix] {
				s.prefix++
			}
			c.tracef("the operator's rewind of %s went with its row while no process that read it was alive", id)
		}
		if u == nil {
			// Every one of them gone.
		} else if !s.afterDelete || s.lostRewind == nil {
			// Lost with the row; also when the row was recreated after an
			// earlier deletion and not taken since (seed 98126424: a rewind
			// asked of a recovered row, its knowers cut off or dead since
			// the table was dropped, was not counted as lost).
			s.lostRewind = u
		}
		s.rewound = nil
	}
	rewindAt := -1
	if !s.newest.RewindTo.IsZero() {
		if n, err := c.covered(id, s.newest.RewindTo); err == nil {
			rewindAt = n
		}
	}
	s.versions, s.tokens = map[int64]version{}, map[int64]string{}
	s.last, s.newest = leases.Lease{}, leases.Lease{}
	s.operatorAt = -1
	if !s.afterDelete {
		s.goneHolder, s.known, s.holderKnown, s.rewindAt = holder, map[string]int{}, holderKnown, rewindAt
	} else if holder != "" {
		// Deleted again before anyone took it: a holder recreating it has not
		// taken it yet, and is still the one that may deliver.
		s.goneHolder, s.holderKnown = holder, holderKnown
	}
	for name, n := range known {
		if k, ok := s.known[name]; !ok || n > k {
			s.known[name] = n
		}
	}
	s.afterDelete, s.deletedAt = true, time.Now()
	s.pendingTo, s.pendingKnowers = leases.Checkpoint{}, nil
}

// maxKnown returns the most records a checkpoint known by a process of
// known covers, counting only the processes alive says are (nil: all); -1
// if none.
func maxKnown(known map[string]int, alive func(string) bool) int {
	best := -1
	for name, n := range known {
		if alive == nil || alive(name) {
			best = max(best, n)
		}
	}
	return best
}

// rewindKnowersLost reports whether no process that knew of s's rewind
// lost with its row (lostRewind) is alive and could act since the
// deletion: each is dead, or was cut off from the table for all of the
// time it needs to see the row missing and recreate it (couldAct).
func (c *checker) rewindKnowersLost(s *shardState) bool {
	u := s.lostRewind
	if u == nil {
		return false
	}
	for name := range u.knowers {
		if (c.alive == nil || c.alive(name)) && (c.couldAct == nil || c.couldAct(name, s.deletedAt, time.Now())) {
			return false
		}
	}
	return true
}

// restarted checks (h) for the first take of s after its row was deleted:
// writer took it at after's checkpoint, creating it or finding it without
// one (fresh).
func (c *checker) restarted(s *shardState, writer string, after leases.Lease, fresh bool) {
	s.afterDelete = false
	c.stats.restarts++
	holder := s.goneHolder
	s.restartedAt, s.restartedBy, s.restartOf = time.Now(), writer, holder
	s.goneHolder = ""
	n, err := c.covered(s.id, after.Checkpoint)
	if err != nil {
		return // reported by setTenure
	}
	at := s.deletedAt.Sub(c.start).Round(time.Millisecond)
	known := maxKnown(s.known, c.alive) // the processes that knew it and are still alive
	if holder != "" && writer != holder && c.holderMayDeliver(s, holder) {
		c.violate("(h) %s took %s, whose row was deleted at T+%v, while its holder %s may still deliver", writer, s.id, at, holder)
	}
	c.judgeRestart(s)
	if n, err := c.covered(s.id, after.Checkpoint); err == nil && s.rewindAt >= 0 && n == s.rewindAt && !noStart(after) {
		// At the operator's rewind that was pending on the row when it was
		// deleted: the replay the operator asked for, whoever recreated the
		// row there and whoever takes it (seed 98320166: a member that had
		// read the rewind recreated the row at it, and the holder, which
		// had not, took it). Not a row that says nothing of where its
		// shard was read (noStart), which covers as few records as a
		// rewind to TRIM_HORIZON: its taker knew nothing, and a knower
		// writes its checkpoint on it (seed 95815645: the table dropped
		// with the rewind pending, read by nobody; a member new to the
		// table created the row with none, took it and released it, and
		// the holder cut off from the table, which never read the rewind,
		// filled it with its checkpoint).
		c.tracef("%s restarted %s at the operator's rewind pending on its row when it was deleted at T+%v", writer, s.id, at)
		c.rewind(s, after.Counter, after.Checkpoint, writer)
		return
	}
	// A knower cut off from the table (its fence passed, or paused) for all
	// of the time since the deletion but less than the time it needs to
	// see the row missing and recreate it had no way to act: nobody can
	// tell it from a dead one. Such restarts are counted (unreachable), not
	// violations; the others are.
	var knowers []string
	reach := -1
	for name, k := range s.known {
		if k > 0 && (c.alive == nil || c.alive(name)) {
			if c.couldAct == nil || c.couldAct(name, s.deletedAt, time.Now()) {
				knowers = append(knowers, fmt.Sprintf("%s knew %d", name, k))
				reach = max(reach, k)
			}
		}
	}
	slices.Sort(knowers)
	if n == 0 && known > 0 && reach <= 0 {
		c.stats.unreachable++
		c.tracef("%s restarted %s at the start position: every live process that knew a checkpoint (best %d) was cut off from the table since the deletion at T+%v", writer, s.id, known, at)
	}
	known = max(reach, 0)
	atRewind := (s.lostRewind != nil && s.lostRewind.knowers[writer] && n == s.lostRewind.at) ||
		(s.passedRewind && n == s.passedAt)
	s.passedRewind = false
	s.pending = &pendingRestart{writer: writer, holder: holder, at: at, known: known, n: n, knowers: strings.Join(knowers, ", "), fresh: fresh, atRewind: atRewind}
}

// judgeRestart checks (h) for s's pending take after a deletion, if any:
// where its taker started.
func (c *checker) judgeRestart(s *shardState) {
	p := s.pending
	if p == nil {
		return
	}
	s.pending = nil
	writer, holder, at, known, n := p.writer, p.holder, p.at, p.known, p.n
	if n == s.operatorAt {
		s.operatorAt = -1
		// Where the operator put it: the records before it that were ever
		// acknowledged are not asked again, even those an earlier rewind,
		// lost with the table before they were read again, had asked
		// (seed 95503628: a rewind's replay unfinished when the table was
		// dropped, then a rewind of the recovered row past it).
		for i := 0; i < n && i < len(s.ever); i++ {
			for len(s.acked) <= i {
				s.acked = append(s.acked, false)
			}
			s.acked[i] = s.acked[i] || s.ever[i]
		}
		for s.prefix < len(s.acked) && s.acked[s.prefix] {
			s.prefix++
		}
		c.tracef("%s restarted %s where an operator's rewind after the deletion put it", writer, s.id)
		return
	}
	if p.atRewind {
		s.lostRewind = nil
		c.stats.stale++
		c.tracef("%s restarted %s where the operator's rewind it knew of, lost with the row, asked (covering %d; the best checkpoint a live process knew covers %d): replayed", writer, s.id, n, known)
		return
	}
	switch {
	case n == 0 && known > 0:
		c.violate("(h) %s restarted %s at the start position after its row was deleted at T+%v, although a live process knew a checkpoint covering %d records (%s): acknowledged records are replayed from the start",
			writer, s.id, at, known, p.knowers)
	case writer == holder && p.fresh && n < s.holderKnown && n != s.rewindAt:
		c.violate("(h) %s, the holder of %s when its row was deleted at T+%v, restarted it at a checkpoint covering %d records, behind its own covering %d",
			writer, s.id, at, n, s.holderKnown)
	case n > s.everPrefix:
		c.violate("(h) %s restarted %s after its row was deleted at T+%v at a checkpoint covering %d records; only the first %d were ever acknowledged: records skipped",
			writer, s.id, at, n, s.everPrefix)
	case n > s.prefix && c.rewindKnowersLost(s):
		u := s.lostRewind
		for i := range s.acked {
			s.acked[i] = s.acked[i] || (i < len(u.acked) && u.acked[i])
		}
		// Past every rewind lost with its knowers (seed 2122569: two, the
		// table dropped): what was ever acknowledged before n counts again.
		for i := 0; i < n && i < len(s.ever); i++ {
			for len(s.acked) <= i {
				s.acked = append(s.acked, false)
			}
			s.acked[i] = s.acked[i] || s.ever[i]
		}
		s.prefix = max(s.prefix, u.prefix)
		for s.prefix < len(s.acked) && s.acked[s.prefix] {
			s.prefix++
		}
		c.stats.rewindsLost++
		c.tracef("%s restarted %s past the operator's rewind applied before the deletion at T+%v: every process that knew of it was dead or cut off from the table since", writer, s.id, at)
	case n > s.prefix:
		c.violate("(h) %s restarted %s after its row was deleted at T+%v at a checkpoint covering %d records, ahead of the operator's rewind to #%d applied before: the records it asked to replay are skipped",
			writer, s.id, at, n, s.prefix)
	}
	s.lostRewind = nil
	if n < known {
		c.stats.stale++
		c.tracef("%s restarted %s at a checkpoint covering %d records, behind the best a live process knows (%d): those are replayed", writer, s.id, n, known)
	}
}

func (c *checker) setTenure(s *shardState, owner string, cp leases.Checkpoint) {
	n, err := c.covered(s.id, cp)
	if err != nil {
		c.violate("%s took %s at checkpoint %s: %v", owner, s.id, cp, err)
	}
	// A worker that goes on (a rewind it applied, a take of its own row)
	// stays acquired: only a tenure after an ended one starts unacquired.
	acquired := false
	if old := s.tenures[owner]; old != nil && !old.ended {
		acquired = old.acquired
	}
	s.tenures[owner] = &tenure{start: n, next: n, lastEntered: -1, since: time.Now(), restart: -1, acquired: acquired}
}

// replay records that an operator's rewind moved s's checkpoint back to
// cp: every record from there must be acknowledged again.
// rewoundRow is an operator's rewind replayed on a row: the row's counter
// after it, the acknowledgements it undid, and who read the row since.
type rewoundRow struct {
	counter int64
	at      int // what the rewind's checkpoint covers (-1 if unknown)
	prefix  int
	acked   []bool
	knowers map[string]bool
	// told: the processes told the row since the rewind (see learned).
	told map[string]bool
	// prev: the rewind before it, whose replay it cut short (nil if none,
	// or merged into this one).
	prev *rewoundRow
}

// learned records that process who was told row l. The caller holds mu.
// It returns the checkpoint who now knows the row at, and whether that
// supersedes what who knew of it before, as it does in the engine, which
// knows a row as it last read it: the first version who is told after an
// operator's rewind, or with the rewind's request pending (its holder
// replays from the request's checkpoint). Seed 99903827: a member that
// checkpointed 19 records, then read the rewind to TRIM_HORIZON (applied,
// or only asked), was counted as knowing 19 when the row was deleted.
func (c *checker) learned(who string, l leases.Lease) (cp leases.Checkpoint, supersedes bool) {
	s := c.shard(l.Key.Shard)
	cp = l.Checkpoint
	if u := s.rewound; u != nil && (!s.afterDelete || s.operatorAt >= 0) && l.Counter >= u.counter {
		u.knowers[who] = true
		if u.told == nil {
			u.told = map[string]bool{}
		}
		supersedes = !u.told[who]
		u.told[who] = true
	}
	if !l.RewindTo.IsZero() && !s.afterDelete {
		if s.pendingTo != l.RewindTo || s.pendingKnowers == nil {
			s.pendingTo, s.pendingKnowers = l.RewindTo, map[string]bool{}
		}
		cp, supersedes = l.RewindTo, supersedes || !s.pendingKnowers[who]
		s.pendingKnowers[who] = true
	}
	return cp, supersedes
}

// rewind replays s from cp, an operator's rewind that left the row at
// counter (by applier, its holder, or "" if written on the free row),
// keeping what it undid (see rewound).
func (c *checker) rewind(s *shardState, counter int64, cp leases.Checkpoint, applier string) {
	u := &rewoundRow{counter: counter, at: -1, prefix: s.prefix, acked: slices.Clone(s.acked), knowers: map[string]bool{}}
	if n, err := c.covered(s.id, cp); err == nil {
		u.at = n
	}
	if applier != "" {
		u.knowers[applier] = true
	}
	if s.rewound != nil && len(s.rewound.knowers) == 0 {
		u.prefix, u.acked, u.prev = s.rewound.prefix, s.rewound.acked, s.rewound.prev // undo both
	} else {
		u.prev = s.rewound
	}
	c.replay(s, cp)
	s.rewound = u
}

func (c *checker) replay(s *shardState, cp leases.Checkpoint) {
	n, err := c.covered(s.id, cp)
	if err != nil {
		c.violate("rewind of %s to %s: %v", s.id, cp, err)
		return
	}
	for i := n; i < len(s.acked); i++ {
		s.acked[i] = false
	}
	s.prefix = min(s.prefix, n)
}

// checkCovered checks (b) for a checkpoint cp that writer wrote on s.
func (c *checker) checkCovered(s *shardState, writer, op string, cp leases.Checkpoint) {
	n, err := c.covered(s.id, cp)
	if err != nil {
		c.violate("(b) %s %s %s: checkpoint %s: %v", writer, op, s.id, cp, err)
		return
	}
	t := s.tenures[writer]
	switch {
	case t == nil:
		c.violate("(b) %s wrote checkpoint %s on %s (covering %d records) without a lease of its own", writer, cp, s.id, n)
	case n < t.start || n > t.next:
		c.violate("(b) %s wrote checkpoint %s on %s covering %d records; its lease started at #%d and it acknowledged up to #%d",
			writer, cp, s.id, n, t.start, t.next-1)
	}
	if n > s.prefix {
		c.violate("(b) %s wrote checkpoint %s on %s covering %d records; only the first %d were acknowledged", writer, cp, s.id, n, s.prefix)
	}
}

// settle skips, on every shard, the counters no write or read showed (a
// version overwritten before anyone saw it): (c) then compares the
// versions around the gap. The DynamoDB test calls it at the end.
func (c *checker) settle() {
	for _, s := range c.shards {
		for len(s.versions) > 0 {
			next := int64(-1)
			for n := range s.versions {
				if next < 0 || n < next {
					next = n
				}
			}
			s.last.Counter = next - 1
			c.inOrder(s)
		}
	}
}

// inOrder checks (c) over the versions seen, in counter order.
func (c *checker) inOrder(s *shardState) {
	for {
		v, ok := s.versions[s.last.Counter+1]
		if !ok {
			return
		}
		delete(s.versions, v.row.Counter)
		prev := s.last
		s.last = v.row
		if v.op == "ApplyRewind" || (v.op == "Rewind" && !prev.Held()) || v.op == "Restart" {
			continue // an operator moved the checkpoint, or a holder took back its recovered row (applied)
		}
		if cmp, err := compareCheckpoints(prev.Checkpoint, v.row.Checkpoint); err != nil {
			c.violate("(c) %s %s %s: %v", v.writer, v.op, s.id, err)
		} else if cmp > 0 {
			life := "" // the row's life: the checker compares versions from its last creation on
			if !s.deletedAt.IsZero() {
				life = fmt.Sprintf("; the row was last deleted at T+%v and recreated since (counters restart at 1: a write conditional on a counter of its earlier life lands on the new one)",
					s.deletedAt.Sub(c.start).Round(time.Millisecond))
			}
			c.violate("(c) %s %s %s: checkpoint moved backwards from %s to %s (counter %d -> %d) without an operator's rewind in between%s",
				v.writer, v.op, s.id, prev.Checkpoint, v.row.Checkpoint, prev.Counter, v.row.Counter, life)
		}
	}
}

// covered returns how many user records of shard id cp covers.
func (c *checker) covered(id string, cp leases.Checkpoint) (int, error) {
	switch seq := cp.Sequence; {
	case seq == leases.RewindTrimHorizon:
		return 0, nil
	case strings.HasPrefix(seq, leases.AtSequencePrefix):
		i, ok := c.stream.UserIndex(id, strings.TrimPrefix(seq, leases.AtSequencePrefix), 0)
		if !ok {
			return 0, fmt.Errorf("no record %s", seq)
		}
		return i, nil
	case seq == leases.RewindLatest || strings.HasPrefix(seq, leases.AtTimestampPrefix):
		return 0, fmt.Errorf("the simulation does not rewind to %s", seq)
	}
	return c.stream.Covered(id, cp.Sequence, cp.SubSequence)
}

// compareCheckpoints orders two checkpoints by what they cover: sequence
// numbers as integers, then sub-sequences (0 meaning the whole record);
// nothing and TRIM_HORIZON first, SHARD_END last.
func compareCheckpoints(a, b leases.Checkpoint) (int, error) {
	ka, err := checkpointKey(a)
	if err != nil {
		return 0, err
	}
	kb, err := checkpointKey(b)
	if err != nil {
		return 0, err
	}
	if ka.rank != kb.rank || ka.rank != 1 {
		return ka.rank - kb.rank, nil
	}
	if d := ka.seq.Cmp(kb.seq); d != 0 {
		return d, nil
	}
	switch {
	case ka.sub < kb.sub:
		return -1, nil
	case ka.sub > kb.sub:
		return 1, nil
	}
	return 0, nil
}

type cpKey struct {
	rank int // 0 nothing done, 1 a sequence number, 2 SHARD_END
	seq  *big.Int
	sub  int64 // -1 before seq, k: k user records of it, MaxInt64: all of it
}

func checkpointKey(cp leases.Checkpoint) (cpKey, error) {
	seq := cp.Sequence
	k := cpKey{rank: 1, sub: math.MaxInt64}
	switch {
	case seq == "" || seq == leases.RewindTrimHorizon:
		return cpKey{rank: 0}, nil
	case seq == leases.ShardEnd:
		return cpKey{rank: 2}, nil
	case strings.HasPrefix(seq, leases.AtSequencePrefix):
		seq, k.sub = strings.TrimPrefix(seq, leases.AtSequencePrefix), -1
	case cp.SubSequence > 0:
		k.sub = cp.SubSequence
	}
	n, ok := parseSequence(seq)
	if !ok {
		return k, fmt.Errorf("checkpoint %q is not a sequence number", cp)
	}
	k.seq = n
	return k, nil
}

// final checks (d) and that every write that landed was seen; rows are the
// rows as the store holds them at the end.
func (c *checker) final(rows map[string]leases.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.stream.ShardIDs() {
		s := c.shard(id)
		c.judgeRestart(s)
		n := c.stream.UserRecords(id)
		if s.prefix < n {
			c.violate("(d) shard %s: record #%d of %d was never acknowledged", id, s.prefix, n)
		}
		row, ok := rows[id]
		if !ok {
			c.violate("shard %s has no row", id)
			continue
		}
		if cov, err := c.covered(id, row.Checkpoint); err != nil || cov != n {
			c.violate("(d) shard %s: final checkpoint %s covers %d of %d records (%v)", id, row.Checkpoint, cov, n, err)
		}
		if row.Counter != s.last.Counter {
			c.violate("shard %s: the row is at counter %d but the checker saw writes up to %d in order (missing: a write behind the checker's back)",
				id, row.Counter, s.last.Counter)
		}
		if len(s.open) > 0 {
			c.violate("shard %s: %d handler calls still open at the end", id, len(s.open))
		}
	}
}

// trace keeps the last lines of what happened, for a failure's report.
type trace struct {
	mu    sync.Mutex
	start time.Time
	lines []string
	next  int
	full  bool
}

const traceLines = 600

func (t *trace) addf(format string, args ...any) { t.add(fmt.Sprintf(format, args...)) }

func (t *trace) add(line string) {
	line = fmt.Sprintf("T+%-9v %s", time.Since(t.start).Round(time.Millisecond), line)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) < traceLines {
		t.lines = append(t.lines, line)
		return
	}
	t.lines[t.next] = line
	t.next = (t.next + 1) % traceLines
	t.full = true
}

func (t *trace) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Concat(t.lines[t.next:], t.lines[:t.next])
	if !t.full {
		out = t.lines
	}
	return strings.Join(out, "\n")
}

// parseSequence parses a Kinesis sequence number, a decimal integer of up
// to 128 bits.
func parseSequence(seq string) (*big.Int, bool) {
	n, ok := new(big.Int).SetString(seq, 10)
	return n, ok && n.Sign() >= 0
}
