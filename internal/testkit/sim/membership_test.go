package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/observe"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// The simulation of the membership protocol (engine.Group): a simulated
// Kinesis stream, one shared memory table seen by every process through its
// own FaultStore, the checker of check_test.go, and the faults the
// membership protocol must survive. Its seeds are chosen with -seed, -seeds,
// -seedbase, -simtrace, KINESISLEASE_SIM_SEEDS and
// KINESISLEASE_SIM_SEED_BASE; without them it runs membershipCISeeds seeds
// (membershipRaceSeeds under the race detector, which makes a seed about
// five times slower: 150 seeds took 43s of make test's time on two cores,
// 50 take about 15s; the plain go test ./... without -race still runs 300).
//
// KINESISLEASE_SIM_SEEDS=300 runs the full set.
const (
	membershipCISeeds   = 300
	membershipRaceSeeds = 50
)

// membershipReports is how many failing seeds TestMembership reports with
// their plan and trace; the others get a line each.
const membershipReports = 5

// ---------------------------------------------------------------------------
// The plan of a seed.

// mplan is what a seed of TestMembership decides up front. Per-call faults
// are drawn during the run from the same seed (mproc.rng).
type mplan struct {
	planBase

	// The protocol's settings, the same for the whole fleet: Heartbeat,
	// Timeout and FenceMargin as configured (0: the default), and the
	// margin the Group uses (see engine.NewGroup).
	hb, timeout, margin, effMargin time.Duration

	procs []slotPlan

	memDelayP, memErrP, memLostP float64 // on the membership rows

	// lateP: the share of writes during faults that land late (see
	// Decision.Late), $KINESISLEASE_SIM_LATE (default defaultLateP);
	// each lands Heartbeat/2 plus up to 2 Timeouts after it was sent, at
	// most lateMax, its caller timing out meanwhile. 0 in a scenario's
	// plan unless it sets it.
	lateP   float64
	lateMax time.Duration

	events []mevent
	load   *loadPlan // a load seed's (see drawLoad); nil: by count

	// The longest delay of a ListShards call in a slow-listing period
	// (mSlowList): a call in flight when faults stop delays liveness by as
	// much.
	maxListDelay time.Duration

	// A scenario's settings (TestMembershipFaults, TestMembershipBugs);
	// zero in a seed's plan.
	name      string           // the scenario's name; "" for a seed
	latency   [2]time.Duration // every store call of every process takes from [0] to [1], the whole run
	putAll    time.Duration    // a record on every shard this often, until produce
	settle    time.Duration    // how long the checks wait for liveness past their bounds (0: 10 minutes)
	reconcile time.Duration    // the Groups' Reconcile (0: the default)
	// check runs the scenario's own checks once every process has shut down
	// (chk.mu held).
	check func(w *mworld)
	// decide, if set, decides a store call of pr itself (ok), instead of
	// the plan's faults: a scenario's faults on chosen calls (late writes,
	// say). It is called without chk.mu held.
	decide func(pr *mproc, op string, key leases.Key) (d Decision, ok bool)
}

type mkind int

const (
	mPause       mkind = iota + 1 // the whole process stalls
	mPartition                    // the process's store calls fail without reaching the store (Kinesis still answers)
	mCrash                        // the process dies
	mStop                         // graceful shutdown (a leave, unless a restart follows)
	mRestart                      // a new process in the slot: a new incarnation of the same owner, or a fresh owner
	mThrottle                     // every process's calls on the membership rows (table: on every row) are throttled
	mLost                         // heartbeats land and their answers are lost (one slot, or every slot)
	mDeleteRow                    // a lease row is deleted: shard's, or the next one held if that one is free
	mDropTable                    // every lease row and membership row gone at once (the table recreated), after the table was missing for dur
	mThrottleRow                  // one membership row (row) throttled for every process: its calls fail, the other rows' succeed
	mLatency                      // every store call of the slot (or of every slot) takes 5-50ms
	mSlowList                     // every ListShards call of the slot (or of every slot) takes delay to 2*delay
	mRewind                       // an operator rewinds shard's row by back records (a request to its holder, whose notice is bumped)
)

func (k mkind) String() string {
	return [...]string{"", "pause", "partition", "crash", "stop", "restart", "throttle-all", "lost-answers",
		"delete-row", "drop-table", "throttle-member-row", "store-latency", "slow-listshards", "rewind"}[k]
}

type mevent struct {
	at        time.Duration
	kind      mkind
	slot      int // -1: every slot (mThrottle, mLost, mLatency, mSlowList)
	dur       time.Duration
	sameOwner bool // restart: a new incarnation of the slot's owner
	table     bool // throttle: every row of the table, not only the membership rows

	shard int           // mDeleteRow, mRewind: the shard's index
	row   int           // mThrottleRow: the membership row
	delay time.Duration // mSlowList: the least delay of a call
	back  int           // mRewind: how many records back from the row's checkpoint (0: to TRIM_HORIZON)
	// mRewind: the holder's notice is bumped only once a write of the
	// holder (a checkpoint) landed on the row after the request: the
	// holder learns of the request from a row it wrote since.
	afterCheckpoint bool
}

func (e mevent) String() string {
	s := fmt.Sprintf("T+%v %s", e.at, e.kind)
	who := fmt.Sprintf("slot %d", e.slot)
	if e.slot < 0 {
		who = "every slot"
	}
	switch e.kind {
	case mPause, mPartition:
		s += fmt.Sprintf(" %s for %v", who, e.dur)
	case mThrottle:
		what := "membership rows"
		if e.table {
			what = "every row"
		}
		s += fmt.Sprintf(" %s for %v (%s)", who, e.dur, what)
	case mLost:
		s += fmt.Sprintf(" %s for %v", who, e.dur)
	case mDeleteRow:
		s += fmt.Sprintf(" shardId-%012d (or the next held row)", e.shard)
	case mDropTable:
		s += fmt.Sprintf(" (missing for %v first)", e.dur)
	case mThrottleRow:
		s += fmt.Sprintf(" %s for %v", driver.MemberKey(e.row), e.dur)
	case mLatency:
		s += fmt.Sprintf(" %s for %v", who, e.dur)
	case mSlowList:
		s += fmt.Sprintf(" %s for %v (each call %v to %v)", who, e.dur, e.delay, 2*e.delay)
	case mRewind:
		s += fmt.Sprintf(" shardId-%012d by %d records (notice after the holder's next write: %v)", e.shard, e.back, e.afterCheckpoint)
		if e.slot >= 0 {
			s += fmt.Sprintf(", or the next one held by slot %d", e.slot)
		}
	case mRestart:
		if e.sameOwner {
			s += fmt.Sprintf(" %s (same owner, new incarnation)", who)
		} else {
			s += fmt.Sprintf(" %s (fresh owner)", who)
		}
	default:
		s += " " + who
	}
	return s
}

// within reports whether the event's period covers el (time since start).
func (e mevent) within(el time.Duration) bool { return el >= e.at && el < e.at+e.dur }

// newMPlan draws the plan of seed.
func newMPlan(seed uint64) *mplan {
	r := rand.New(rand.NewPCG(seed, 0x3e3be5))
	p := &mplan{planBase: planBase{seed: seed}}
	p.drawShape(r)

	// The protocol's settings: the defaults (Heartbeat 1.25s, Timeout 5s)
	// on half the seeds, scaled or with other ratios on the others.
	settings := [][2]time.Duration{
		{engine.DefaultHeartbeat, engine.DefaultTimeout}, {engine.DefaultHeartbeat, engine.DefaultTimeout},
		{engine.DefaultHeartbeat, engine.DefaultTimeout}, {engine.DefaultHeartbeat, engine.DefaultTimeout},
		{time.Second, 4 * time.Second}, {1500 * time.Millisecond, 6 * time.Second},
		{engine.DefaultHeartbeat, 7500 * time.Millisecond}, {2 * time.Second, 6 * time.Second},
	}[r.IntN(8)]
	var margin time.Duration
	if r.IntN(3) == 0 {
		margin = settings[1]/6 + time.Duration(r.Int64N(int64(settings[1]/6)))
	}
	p.protocol(settings[0], settings[1], margin)

	n := 2 + r.IntN(3)
	for i := range n {
		p.procs = append(p.procs, drawSlot(r, i, 25*time.Second)) // a start later than 0: a join
	}
	p.drawPace(r)
	p.drawLoad()
	for i := range p.procs {
		p.procs[i].limit = p.keepUp(p.procs[i].limit)
	}

	rate := rater(r)
	p.drawStoreRates(rate)
	p.storeMaxDelay = 250*time.Millisecond + time.Duration(r.Int64N(int64(p.timeout/2)))
	p.memDelayP = rate(0.3)
	p.memErrP = rate(0.1)
	p.memLostP = rate(0.1)
	p.drawCallRates(rate)
	p.handlerMaxWork = min(p.effMargin/3, 500*time.Millisecond)
	p.lateP = simLateP // drawn per call, from a generator of its own: the plan's draws stay as they were

	T := p.timeout
	for slot := range p.procs {
		t := p.procs[slot].start + time.Duration(r.Int64N(int64(10*time.Second)))
		for t < p.faultEnd {
			e := mevent{at: t, slot: slot}
			switch k := r.IntN(10); {
			case k < 3:
				e.kind = mPause
				if r.IntN(3) == 0 {
					e.dur = time.Duration(r.Int64N(int64(T / 2))) // shorter than the fence
				} else {
					e.dur = T + T/10 + time.Duration(r.Int64N(int64(T*3/2))) // longer than the timeout
				}
			case k < 5:
				e.kind = mPartition
				e.dur = T/4 + time.Duration(r.Int64N(int64(5*T/2)))
			case k < 6:
				e.kind = mLost
				e.dur = p.hb/2 + time.Duration(r.Int64N(int64(2*T)))
			case k < 8:
				e.kind = mCrash
			default:
				e.kind = mStop
			}
			if e.at+e.dur >= p.faultEnd {
				break
			}
			p.events = append(p.events, e)
			t = e.at + e.dur
			switch e.kind {
			case mLost:
				// Often followed by heartbeats that do not land: a holder
				// whose heartbeat landed unanswered, then was answered, then
				// failed.
				if r.IntN(2) == 0 {
					f := mevent{at: t + time.Duration(r.Int64N(int64(2*p.hb))), kind: mPartition, slot: slot,
						dur: T/2 + time.Duration(r.Int64N(int64(3*T/2)))}
					if f.at+f.dur < p.faultEnd {
						p.events = append(p.events, f)
						t = f.at + f.dur
					}
				}
			case mCrash, mStop:
				up, ok := p.restartAt(r, t, e.at, T, slot, len(p.procs))
				if !ok {
					break // stays down: a leave
				}
				t = up
				p.events = append(p.events, mevent{at: t, kind: mRestart, slot: slot, sameOwner: r.IntN(2) == 0})
			}
			t += time.Duration(r.Int64N(int64(20 * time.Second)))
		}
	}
	// Fleet-wide periods: throttling of the membership rows for every
	// process at once (shorter and longer than the fence), heartbeats of
	// every process landing unanswered.
	if r.IntN(2) == 0 {
		for range 1 + r.IntN(2) {
			e := mevent{kind: mThrottle, slot: -1, dur: p.hb/2 + time.Duration(r.Int64N(int64(2*T))), table: r.IntN(3) == 0}
			e.at = 5*time.Second + time.Duration(r.Int64N(int64(p.faultEnd-e.dur-5*time.Second)))
			p.events = append(p.events, e)
		}
	}
	if r.IntN(3) == 0 {
		e := mevent{kind: mLost, slot: -1, dur: p.hb + time.Duration(r.Int64N(int64(T)))}
		e.at = 5*time.Second + time.Duration(r.Int64N(int64(p.faultEnd-e.dur-5*time.Second)))
		p.events = append(p.events, e)
	}
	p.drawTableFaults(r)
	p.stress(seed)
	p.exclude()
	slices.SortStableFunc(p.events, func(a, b mevent) int { return int(a.at - b.at) })
	return p
}

// protocol sets the protocol's settings: the heartbeat interval, the
// timeout and the fence margin as configured (0: the default), and the
// margin the Group makes of them (see engine.NewGroup).
func (p *mplan) protocol(hb, timeout, margin time.Duration) {
	p.hb, p.timeout, p.margin = hb, timeout, margin
	p.lateMax = hb/2 + 2*timeout
	p.effMargin = p.margin
	if p.effMargin <= 0 {
		p.effMargin = p.timeout / 6
	}
	p.effMargin = max(p.effMargin, p.hb/2+p.hb/10) // as engine.NewGroup
}

// drawTableFaults draws the faults of the table and of the calls around
// it: rows deleted while held, the table recreated empty (missing for a
// while first, sometimes), one membership row throttled for longer than the
// timeout, slow store calls, slow ListShards calls, operator rewinds.
func (p *mplan) drawTableFaults(r *rand.Rand) {
	T := p.timeout
	// add places e (its duration capped) within the faults' period.
	add := func(e mevent) {
		e.dur = min(e.dur, p.faultEnd-10*time.Second)
		e.at = 5*time.Second + time.Duration(r.Int64N(int64(p.faultEnd-e.dur-6*time.Second)))
		p.events = append(p.events, e)
	}
	if r.IntN(3) == 0 {
		for range 1 + r.IntN(3) {
			add(mevent{kind: mDeleteRow, slot: -1, shard: r.IntN(p.shards)})
		}
	}
	if r.IntN(6) == 0 {
		e := mevent{kind: mDropTable, slot: -1}
		if r.IntN(2) == 0 {
			e.dur = time.Duration(r.Int64N(int64(T)))
		}
		add(e)
	}
	if r.IntN(4) == 0 {
		// The rows in use: members pack the lowest rows, RowCapacity each.
		rows := max(1, (len(p.procs)+driver.RowCapacity-1)/driver.RowCapacity)
		add(mevent{kind: mThrottleRow, slot: -1, row: r.IntN(rows), dur: T + T/10 + time.Duration(r.Int64N(int64(T)))})
	}
	if r.IntN(4) == 0 {
		e := mevent{kind: mLatency, slot: -1, dur: 5*time.Second + time.Duration(r.Int64N(int64(20*time.Second)))}
		if r.IntN(2) == 0 {
			e.slot = r.IntN(len(p.procs))
		}
		add(e)
	}
	if r.IntN(5) == 0 {
		e := mevent{kind: mSlowList, slot: -1, dur: 10*time.Second + time.Duration(r.Int64N(int64(30*time.Second))),
			delay: time.Second + time.Duration(r.Int64N(int64(3*time.Second)))}
		if r.IntN(2) == 0 {
			e.slot = r.IntN(len(p.procs))
		}
		p.maxListDelay = max(p.maxListDelay, 2*e.delay)
		add(e)
	}
	if r.IntN(4) == 0 {
		for range 1 + r.IntN(2) {
			add(mevent{kind: mRewind, slot: -1, shard: r.IntN(p.shards), back: r.IntN(30), afterCheckpoint: r.IntN(2) == 0})
		}
	}
}

// excluded is the set of event kinds $KINESISLEASE_SIM_EXCLUDE leaves out
// of every seed's plan (a comma-separated list of their names, as the plans
// print them: delete-row, drop-table, throttle-member-row, store-latency,
// slow-listshards, rewind, throttle-all, lost-answers, pause, partition), to
// tell which kind of fault a failure needs. The plans are drawn as without
// it, then the excluded events dropped.
var excluded = func() map[string]bool {
	m := map[string]bool{}
	if os.Getenv("KINESISLEASE_SIM_LOSTROWS") == "" {
		// Known open (issue 19): with rows deleted or the table dropped
		// among all the other faults, about one seed in 5,000 still
		// breaks an invariant (see SEEDS.md).
		// The scenarios of TestMembershipFaults and the DynamoDB-Local
		// profiles test the same faults one at a time in every run.
		// KINESISLEASE_SIM_LOSTROWS=1 puts these faults back in every seed.
		m["delete-row"], m["drop-table"] = true, true
	}
	for _, name := range strings.Split(os.Getenv("KINESISLEASE_SIM_EXCLUDE"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			m[name] = true
		}
	}
	return m
}()

// defaultLateP is the share of writes during faults that land late in a
// seed's plan when $KINESISLEASE_SIM_LATE is not set.
const defaultLateP = 0.02

// simLateP is the share of writes during faults that land late in every
// seed's plan (see mplan.lateP): $KINESISLEASE_SIM_LATE, a number from 0
// (none) to 1, else defaultLateP; simLateErr says why the variable is
// not one (TestMembership fails then).
var simLateP, simLateErr = func() (float64, error) {
	v := os.Getenv("KINESISLEASE_SIM_LATE")
	if v == "" {
		return defaultLateP, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1 {
		return 0, fmt.Errorf("KINESISLEASE_SIM_LATE=%q: want a number from 0 to 1", v)
	}
	return f, nil
}()

// exclude drops the events of the kinds excluded.
func (p *mplan) exclude() {
	if len(excluded) == 0 {
		return
	}
	p.events = slices.DeleteFunc(p.events, func(e mevent) bool { return excluded[e.kind.String()] })
	if !slices.ContainsFunc(p.events, func(e mevent) bool { return e.kind == mSlowList }) {
		p.maxListDelay = 0
	}
}

// stress turns a third of the plans into fence tests: a record every few
// tens of milliseconds on every shard, readers that keep up, slow answers,
// and partitions from the table while Kinesis still answers, some right
// after a period of unanswered heartbeats, so that a holder delivers right
// up to its fence while the others act at the first moment they may.
func (p *mplan) stress(seed uint64) {
	r, ok := p.stressed(seed, 0xfe4ce)
	if !ok {
		return
	}
	for i := range p.procs {
		p.procs[i].stressSlot()
	}
	p.stressPace(r)
	T := p.timeout
	for slot := range p.procs {
		for range 1 + r.IntN(3) {
			lost := mevent{kind: mLost, slot: slot, dur: p.hb/2 + time.Duration(r.Int64N(int64(2*p.hb)))}
			part := mevent{kind: mPartition, slot: slot, dur: T/2 + time.Duration(r.Int64N(int64(2*T)))}
			if r.IntN(2) == 0 {
				lost.dur = 0 // a partition alone
			}
			total := lost.dur + 2*p.hb + part.dur
			if total >= p.faultEnd {
				continue
			}
			lost.at = time.Duration(r.Int64N(int64(p.faultEnd - total)))
			part.at = lost.at + lost.dur + time.Duration(r.Int64N(int64(2*p.hb)))
			if lost.dur > 0 {
				p.events = append(p.events, lost)
			}
			p.events = append(p.events, part)
		}
	}
}

func (p *mplan) String() string {
	var b strings.Builder
	if p.name != "" {
		fmt.Fprintf(&b, "scenario %s: ", p.name)
	}
	fmt.Fprintf(&b, "seed %d: %d shards (initial records %v, aggregates %.0f%%), heartbeat %v, timeout %v, fence margin %v (configured %v), %d slots\n",
		p.seed, p.shards, p.initial, p.aggP*100, p.hb, p.timeout, p.effMargin, p.margin, len(p.procs))
	for i, pp := range p.procs {
		fmt.Fprintf(&b, "  slot %d: start T+%v checkpoint every %d/%v limit %d ignores-cancel %v\n",
			i, pp.start, pp.checkpointEvery, pp.checkpointInterval, pp.limit, pp.ignoresCancel)
	}
	fmt.Fprintf(&b, "  faults until T+%v: store delay %.2f (max %v) error %.2f lost %.2f response delay %.2f; membership rows delay %.2f error %.2f lost %.2f; writes landing late %.3f (up to %v after); kinesis delay %.2f error %.2f; handler error %.2f slow %.2f (max %v)\n",
		p.faultEnd, p.storeDelayP, p.storeMaxDelay, p.storeErrP, p.storeLostP, p.storeRespDelayP, p.memDelayP, p.memErrP, p.memLostP,
		p.lateP, p.lateMax, p.kinDelayP, p.kinErrP, p.handlerErrP, p.handlerSlowP, p.handlerMaxWork)
	if p.latency[1] > 0 || p.putAll > 0 {
		fmt.Fprintf(&b, "  every store call takes %v to %v; a record on every shard every %v\n", p.latency[0], p.latency[1], p.putAll)
	}
	if p.load != nil {
		b.WriteString(p.load.String())
	}
	writeTail(&b, &p.planBase, p.events)
	return b.String()
}

// round is the longest interval between two rounds of a Group after
// faults: the heartbeat interval and its 10% jitter.
func (p *mplan) round() time.Duration { return p.hb + p.hb/10 }

// Bounds of liveness, from the moment faults stop (every per-call fault,
// pause, partition and fleet-wide period is over; crashed processes stay
// dead, restarts have happened):
//
//   - inFlight: calls sent before faults stopped end by then: a store call's
//     request and response delays (2 × storeMaxDelay), a write landing late
//     (lateMax, when the plan has them), a Kinesis call's
//     delay and the reader's longest backoff after a failure (5s), a
//     handler at work (handlerMaxWork) or retrying (up to the retry
//     policy's 1s), a ListShards call of a slow-listing period
//     (maxListDelay).
//   - failover: a dead holder is seen dead after its heartbeat stood still
//     for Timeout on the taker's clock: the taker's next round sees the last
//     value, a read sent Timeout later confirms it (a round's granularity),
//     the member the plan gives the shard to takes it in its next round,
//     and a planned handoff in progress drains (a handler at work) and is
//     taken a round later: Timeout + 4 rounds + handler time. Its reader
//     starts (GetShardIterator, a GetRecords within IdleInterval).
//   - join: a process restarted with the same owner id waits for its
//     previous incarnation's entry (left behind by a crash) to stand still
//     for Timeout, trying again every round: Timeout + 2 rounds.
//   - fairness, a few rounds after the failover (or the last join, if
//     later): by then every member has seen every dead member dead
//     (Timeout + 2 rounds) and every live one alive, so their plans agree;
//     the plan is stable for two rounds before a holder hands over, drains
//     and releases, and the member it goes to takes it in its next round:
//     4 rounds + handler time, plus a round of slack.
//   - lost rows, when the plan deletes rows or drops the table: a row that
//     vanished is recreated by a member that knows no checkpoint for it
//     only after engine's lost-row wait (the longest checkpoint interval,
//     a Timeout, the fence margin, two heartbeats) and the extra wait of
//     one that knows none (three heartbeats and a Timeout), counted from
//     a read a round after the row vanished; the failover bound is at
//     least that, plus 3 rounds (one for a header read after the last
//     read that counts) and handler time.
//
// With the defaults (Heartbeat 1.25s, Timeout 5s, handlers of up to 278ms):
// calls in flight 7.8s + 2 × the store's longest delay, then failover 13s,
// join 7.75s, fair shares 21.1s.
// lostRowFailover is the failover bound of a shard whose row is missing
// (see bounds).
func (p *mplan) lostRowFailover() time.Duration {
	cp := time.Duration(0)
	for _, s := range p.procs {
		cp = max(cp, s.checkpointInterval)
	}
	// 4 rounds: a read a round after the row vanished, the read after the
	// next header read (a wait counts only reads a header read followed),
	// the creation, the first delivery.
	return cp + 2*p.timeout + p.effMargin + 5*p.hb + 4*p.round() + p.handlerMaxWork + time.Second
}

func (p *mplan) bounds() (inFlight, failover, join, fair time.Duration) {
	R := p.round()
	H := p.handlerMaxWork + time.Second
	inFlight = 2*p.storeMaxDelay + 1500*time.Millisecond + 5*time.Second + H + p.maxListDelay
	if p.lateP > 0 {
		// A write sent before faults stopped may land up to lateMax later
		// (a dead member's heartbeat, say, showing it alive again).
		inFlight += p.lateMax
	}
	failover = p.timeout + 4*R + H + 1200*time.Millisecond
	for _, e := range p.events {
		if e.kind == mDeleteRow || e.kind == mDropTable {
			failover = max(failover, p.lostRowFailover())
			break
		}
	}
	join = p.timeout + 2*R
	fair = 5*R + H
	return inFlight, failover, join, fair
}

// ---------------------------------------------------------------------------
// The world of a seed.

// msummary gathers what the seeds of TestMembership measured.
type msummary struct {
	mu                                      sync.Mutex
	seeds, failed                           int
	virtual                                 time.Duration
	worstFailover, worstFair                time.Duration
	worstFailoverSeed, worstFairSeed        uint64
	worstFailoverShare, worstFairShare      float64 // of the bound
	entries, takes, takeovers, releases     int
	checkpoints, hbLanded, hbUnchanged      int
	lostHB, lostOther, injected, throttled  int
	closest                                 time.Duration
	crashes, restartsSame, restartsFresh    int
	stops, leaves, joins, pauses, longPause int
	partitions, throttles, lostPeriods      int
	deletes, drops, rowThrottles, slowStore int
	slowListing, rewinds, restarts, stale   int
	unreachable, rewindsLost                int
	slowCalls, slowLists, late              int
	overBound                               []uint64
	load                                    loadSummary
}

// TestMembership runs the membership protocol (engine.Group) under a seeded
// schedule of faults in a testing/synctest bubble: several instances on one
// stream and one lease table, with delays, failures and lost answers on the
// lease rows and the membership rows, fleet-wide periods of throttling on
// the membership rows and of heartbeats landing unanswered, partitions
// from the table, pauses longer than the timeout, crashes and restarts (new
// incarnations of the same owner and fresh owners), joins and leaves,
// Kinesis throttling and errors, and the faults of the table and of the
// calls around it (drawTableFaults: held rows deleted, the table recreated
// empty, sometimes missing for a while first, one membership row throttled
// for longer than the timeout, store calls of 5-50ms, ListShards calls of
// seconds, operator rewinds bumping the holder's notice), checking at every
// handler call and every write:
//
//   - the checker's invariants (check_test.go), with each process named by
//     its owner and incarnation: one deliverer per shard (a handler is
//     entered only while the row names the entering process, never while
//     another process's handler on the shard runs), in order from where
//     its lease started; checkpoints only by the holder, over acknowledged
//     records; checkpoints never backwards; every write seen in counter
//     order; every record acknowledged and covered by the checkpoint at
//     the end;
//   - (f) the fence: a process delivers only while its lease is valid by
//     the protocol's own rule (its last answered heartbeat was sent less
//     than Timeout - FenceMargin ago, and no heartbeat was sent after such
//     a fence passed since it took the lease), and nobody takes a row from
//     a live process whose lease is valid so (mproc.valid);
//   - (h) after a row is deleted, nobody but its holder creates or takes it
//     while the holder's lease is valid so, and its next take starts
//     neither at the start position while a live process knew a
//     checkpoint, nor (by the holder) behind the holder's own checkpoint,
//     nor past what was acknowledged (see checker.restarted);
//   - (j) every rewind request whose holder was told (its notice bumped)
//     is applied by the time shares are fair after faults;
//   - (u) no shard's row names a live incarnation (current, able to act)
//     that does not read it for longer than 3 timeouts plus the latest a
//     write lands late (see watchUnread): a shard unread for ever;
//   - (o) Run returns ErrDuplicateOwner only while another live process
//     has its owner id (never, in this simulation);
//   - (g) after faults stop, every shard is read again within the failover
//     bound and every process has joined within the join bound (see
//     mplan.bounds), shares become fair (every shard held by one live
//     process as the table says, max-min <= 1) within a few rounds after
//     that, and every process stopped gracefully releases its leases and
//     removes its membership entry; Run returns only when its context is
//     cancelled. A third of the seeds balance by load (load_test.go:
//     skewed load, mixed capacities and caps): their shares are fair by
//     load instead (loadFair), within the bound plus loadExtra.
//
// go test ./internal/testkit/sim/ -run 'TestMembership$' -seed=N -v replays
// seed N (and writes its whole trace to a file if it fails);
// KINESISLEASE_SIM_SEEDS=30000 (or -seeds) runs more seeds, with -timeout 0
// beyond about 30,000 (30,000 take about 6 minutes on two busy cores); the
// summary it logs names the worst failover and fair-share times.
// KINESISLEASE_SIM_EXCLUDE=delete-row,drop-table (see excluded) leaves
// those kinds of events out of every plan. KINESISLEASE_SIM_LATE (see
// simLateP; default 0.02) is the share of writes during faults that land
// late (Decision.Late).
//
// The plain test command runs membershipCISeeds seeds (membershipRaceSeeds
// with -race); run 30,000 (KINESISLEASE_SIM_SEEDS=30000) before changing
// internal/engine/group.go.
// Interleavings of goroutines are not fixed by the seed, so a failure may
// need a few replays.
func TestMembership(t *testing.T) {
	t.Parallel() // beside TestDynamoMembership, which mostly waits
	testutil.Slow(t)
	if simLateErr != nil {
		t.Fatal(simLateErr)
	}
	for name := range excluded {
		switch name {
		case "crash", "stop", "restart", "":
			t.Fatalf("KINESISLEASE_SIM_EXCLUDE: %q cannot be left out (a slot's restarts follow its crashes and stops)", name)
		}
		if !slices.ContainsFunc([]mkind{mPause, mPartition, mThrottle, mLost, mDeleteRow, mDropTable, mThrottleRow, mLatency, mSlowList, mRewind},
			func(k mkind) bool { return k.String() == name }) {
			t.Fatalf("KINESISLEASE_SIM_EXCLUDE: no event kind %q", name)
		}
	}
	sum := &msummary{}
	// Batches of parallel seeds, one batch after the other: a seed's check
	// for goroutines left behind reads the stacks of every goroutine of the
	// test binary, and tens of thousands of seeds waiting for their turn
	// would make it quadratic.
	ci := membershipCISeeds
	if raceEnabled {
		ci = membershipRaceSeeds
	}
	runSeeds(t, seedList(t, ci), 256, func(t *testing.T, seed uint64) { runMSeed(t, seed, sum) })
	t.Logf("membership: %d seeds (%d failed), %v of virtual time; worst failover %v after faults stopped (seed %d), worst fair shares %v after faults stopped (seed %d); "+
		"at most %.0f%% and %.0f%% of their bounds; "+
		"%d handler calls, %d takes (%d takeovers, closest %v after the previous holder's last delivery), %d releases, %d checkpoints; "+
		"%d heartbeats landed (%d with an unchanged value)",
		sum.seeds, sum.failed, sum.virtual.Round(time.Second), sum.worstFailover.Round(time.Millisecond), sum.worstFailoverSeed,
		sum.worstFair.Round(time.Millisecond), sum.worstFairSeed, 100*sum.worstFailoverShare, 100*sum.worstFairShare,
		sum.entries, sum.takes, sum.takeovers, sum.closest.Round(time.Millisecond), sum.releases, sum.checkpoints, sum.hbLanded, sum.hbUnchanged)
	t.Logf("membership faults: %d injected failures, %d throttled calls, %d answers lost (%d of heartbeats), %d writes landed late; %d crashes, %d restarts (%d same owner, %d fresh owner), %d stops (%d leaves), %d joins, "+
		"%d pauses (%d longer than the timeout), %d partitions, %d fleet-wide throttling periods, %d lost-answer periods",
		sum.injected, sum.throttled, sum.lostHB+sum.lostOther, sum.lostHB, sum.late, sum.crashes, sum.restartsSame+sum.restartsFresh, sum.restartsSame, sum.restartsFresh,
		sum.stops, sum.leaves, sum.joins, sum.pauses, sum.longPause, sum.partitions, sum.throttles, sum.lostPeriods)
	t.Logf("membership table faults: %d row deletions, %d tables recreated, %d membership rows throttled alone, %d periods of slow store calls (%d calls), %d of slow ListShards (%d calls), %d rewinds; "+
		"%d takes of a recreated row (%d from a checkpoint older than the best a live process knew; %d at the start position while every live process that knew one was cut off from the table; "+
		"%d past an operator's rewind whose every knower was dead or cut off since the deletion)",
		sum.deletes, sum.drops, sum.rowThrottles, sum.slowStore, sum.slowCalls, sum.slowListing, sum.slowLists, sum.rewinds, sum.restarts, sum.stale, sum.unreachable, sum.rewindsLost)
	if s := sum.load.String(); s != "" {
		t.Logf("%s", s)
	}
	if len(sum.overBound) > 0 {
		slices.Sort(sum.overBound)
		t.Logf("seeds over a liveness bound: %v", sum.overBound)
	}
}

func runMSeed(t *testing.T, seed uint64, sum *msummary) {
	p := newMPlan(seed)
	w := simulate(t, p.label(), func(t *testing.T) *mworld { return newMWorld(t, p) })
	sum.mu.Lock()
	defer sum.mu.Unlock()
	sum.seeds++
	sum.virtual += w.elapsed
	if w.failover > sum.worstFailover {
		sum.worstFailover, sum.worstFailoverSeed = w.failover, seed
	}
	if w.fairAt > sum.worstFair {
		sum.worstFair, sum.worstFairSeed = w.fairAt, seed
	}
	sum.worstFailoverShare = max(sum.worstFailoverShare, w.failoverShare)
	sum.worstFairShare = max(sum.worstFairShare, w.fairShare)
	sum.load.add(w)
	if w.overBound {
		sum.overBound = append(sum.overBound, seed)
	}
	st := w.chk.stats
	sum.entries += st.entries
	sum.takes += st.takes
	sum.takeovers += st.takeovers
	sum.checkpoints += st.checkpoints
	if st.closest > 0 && (sum.closest == 0 || st.closest < sum.closest) {
		sum.closest = st.closest
	}
	ws := &w.stats
	sum.releases += ws.releases
	sum.hbLanded += ws.hbLanded
	sum.hbUnchanged += ws.hbUnchanged
	sum.lostHB += ws.lostHB
	sum.lostOther += ws.lostOther
	sum.injected += ws.injected
	sum.throttled += ws.throttled
	sum.slowCalls += ws.slowCalls
	sum.slowLists += ws.slowLists
	sum.late += ws.late
	sum.restarts += st.restarts
	sum.stale += st.stale
	sum.unreachable += st.unreachable
	sum.rewindsLost += st.rewindsLost
	for _, pp := range p.procs {
		if pp.start > 0 {
			sum.joins++
		}
	}
	stopped := map[int]bool{}
	for _, e := range p.events {
		switch e.kind {
		case mCrash:
			sum.crashes++
			stopped[e.slot] = true
		case mStop:
			sum.stops++
			stopped[e.slot] = true
		case mRestart:
			stopped[e.slot] = false
			if e.sameOwner {
				sum.restartsSame++
			} else {
				sum.restartsFresh++
				sum.joins++
			}
		case mPause:
			sum.pauses++
			if e.dur > p.timeout {
				sum.longPause++
			}
		case mPartition:
			sum.partitions++
		case mThrottle:
			sum.throttles++
		case mLost:
			sum.lostPeriods++
		case mDeleteRow:
			sum.deletes++
		case mDropTable:
			sum.drops++
		case mThrottleRow:
			sum.rowThrottles++
		case mLatency:
			sum.slowStore++
		case mSlowList:
			sum.slowListing++
		case mRewind:
			sum.rewinds++
		}
	}
	for _, down := range stopped {
		if down {
			sum.leaves++
		}
	}
	if len(w.chk.violations) > 0 {
		sum.failed++
		if sum.failed > membershipReports && len(w.full) == 0 {
			// Enough traces: the others are summarized.
			t.Errorf("seed %d broke the membership protocol's invariants: %s (and %d more); replay: %s",
				seed, w.chk.violations[0], len(w.chk.violations)-1, mreplay(seed))
			return
		}
		tr := w.firstTrace
		if tr == "" {
			tr = w.chk.trace.String()
		}
		if len(w.full) > 0 {
			f, err := os.CreateTemp("", fmt.Sprintf("membership-seed-%d-*.trace", seed))
			if err == nil {
				fmt.Fprintf(f, "plan:\n%s\n", p)
				for _, l := range w.full {
					fmt.Fprintln(f, l)
				}
				f.Close()
				tr = "(the whole trace is in " + f.Name() + ")"
			}
		}
		t.Errorf("seed %d broke the membership protocol's invariants:\n  %s\n\nplan:\n%s\ntrace (last %d lines up to the first violation):\n%s\n\nreplay: %s",
			seed, strings.Join(w.chk.violations, "\n  "), p, traceLines, tr, mreplay(seed))
	} else if *flagTrace {
		t.Logf("plan:\n%s\ntrace:\n%s", p, w.chk.trace.String())
	}
}

// label is the pprof label of the goroutines of the plan's bubble.
func (p *mplan) label() string {
	if p.name != "" {
		return "scenario-" + p.name
	}
	return "membership-" + strconv.FormatUint(p.seed, 10)
}

// mreplay returns the command that replays seed. The seed fixes the plan
// and every injected fault; the interleaving of goroutines, Go's map order
// and the library's own jitter and incarnation ids are not seeded, so a
// failure may need a few runs of its seed to show again.
func mreplay(seed uint64) string {
	return fmt.Sprintf("go test ./internal/testkit/sim/ -run 'TestMembership$' -seed=%d -v   (if it passes, run it again: interleavings are not seeded; with -seed the whole trace goes to a file)", seed)
}

// mworld is one seed's simulation of the membership protocol.
type mworld struct {
	simBase
	p *mplan

	mu    sync.Mutex
	slots [][]*mproc
	stats mstats

	// Under chk.mu.
	byInc      map[string]*mproc // every incarnation (owner/incarnation) of every process
	faultsOver bool
	readAgain  map[string]time.Time // each shard's first handler call after faults stopped
	firstTrace string               // the trace when the first violation was found
	seq        int64                // orders the model's events (takes, fences) within one instant
	lastEntry  map[string]time.Time // when each incarnation's membership entry last changed
	rewinds    []*rewindReq         // the operator's rewind requests
	// In a scenario: every handler entry on each shard, in order.
	entries map[string][]entryRec
	// unread: per shard, since when its row names a live incarnation,
	// current and able to act, that does not read it (see watchUnread).
	unread map[string]*unreadRec

	full []string // with -seed: every trace line (see drainTrace)

	bg                   sync.WaitGroup
	producing            sync.WaitGroup
	elapsed              time.Duration
	failover, fairAt     time.Duration
	failoverShare        float64 // failover / its bound
	fairShare            float64 // fairAt / its bound
	overBound            bool
	inFlight, foBound    time.Duration
	final                atomic.Bool // the final graceful shutdown has begun: no supervisor restarts
	load                 *loadRun    // a load seed's load producer and fair shares by load; nil by count
	joinBound, fairBound time.Duration
}

// unreadRec is a stretch of time a shard's row names an incarnation that
// does not read it (watchUnread).
type unreadRec struct {
	since    time.Time
	inc      string // the row's owner/incarnation
	reported bool
}

type mstats struct {
	releases, hbLanded, hbUnchanged int
	lostHB, lostOther, injected     int
	throttled, slowCalls, slowLists int
	late                            int // writes that landed late (Decision.Late)
}

// entryRec is a handler entry: when, and by which process.
type entryRec struct {
	at    time.Time
	ident string
}

// rewindReq is an operator's rewind request on a held row: the row as the
// request left it, when it was made and when the holder's notice was
// bumped (zero if it was not: the entry was gone or of another
// incarnation), and when a holder applied it (zero if not yet).
type rewindReq struct {
	id                    string
	row                   leases.Lease
	at, notified, applied time.Time
}

// mproc is one process: a Group with its owner id, and its own view of the
// table and of Kinesis. The Group goes on as a new incarnation after a
// fence; the simulation knows every incarnation of the process (byInc) and
// names the process by its first.
type mproc struct {
	w         *mworld
	slot, gen int
	owner     string
	inc       string // the incarnation it started with
	ident     string // owner/inc: the checker's name of the process
	cfg       slotPlan
	procState
	running atomic.Bool // Run was called

	group  *engine.Group
	cancel context.CancelFunc
	done   chan struct{}
	err    error

	draws draws

	// The protocol's fence, as the simulation computes it from the answers
	// the process got (under chk.mu): see valid.
	started   bool
	joinedAt  time.Time // its first heartbeat was answered
	fenceAt   time.Time // its last answered heartbeat's send + Timeout - margin
	lastSent  time.Time // that heartbeat's send
	lostAllAt time.Time // a heartbeat was sent after the fence had passed: every lease lost then
	lostAll   int64     // and that event's place among the model's events (mworld.seq)
	entryInc  string    // the incarnation of its last entry written (a join or a replacement answered)
	ten       map[string]*mtenure
	returned  bool // Run returned
	// unansweredJoins are the entries the process tried to join as and got
	// no answer for (under chk.mu): one may land late, after the process
	// joined elsewhere or left, where nothing of it removes it.
	unansweredJoins map[leases.Member]bool
	// fences are the periods the process's fence had passed, as the model
	// computes it: from its fence to the send of the next heartbeat that was
	// answered.
	fences [][2]time.Time
	// knows holds, per shard, how many records the best checkpoint the
	// process read or wrote covers.
	knows map[string]int
	// heldEver: the shards the process took at some point.
	heldEver map[string]bool
	// takesInFlight counts, per shard, the TakeAs and CreateAs calls whose
	// caller waits for their answer: a take landing with none (late, its
	// caller gone) is never believed.
	takesInFlight map[string]int
}

// mtenure is one lease of a process as the model sees it: when its TakeAs
// landed, and whether the process was told so before its fence passed
// (else the Group treats the row as an orphan and delivers nothing).
type mtenure struct {
	landed   time.Time
	seq      int64 // the landing's place among the model's events (mworld.seq)
	believed bool
	pending  bool // landed, not answered yet: believed if answered in time
}

func newMWorld(t *testing.T, p *mplan) *mworld {
	w := &mworld{p: p, byInc: map[string]*mproc{}, readAgain: map[string]time.Time{}, lastEntry: map[string]time.Time{}, unread: map[string]*unreadRec{}}
	w.plan, w.what, w.replay, w.onViolation = p, "membership ", mreplay, w.snap
	if p.name != "" {
		w.what = "scenario " + p.name + " "
		w.replay = func(uint64) string { return sreplay(p.name) }
		w.entries = map[string][]entryRec{}
	}
	w.slots = make([][]*mproc, len(p.procs))
	w.init(t, &p.planBase, func(l leases.Lease) string { return w.name(l.Owner, l.Incarnation) })
	w.chk.alive = func(name string) bool { // called with chk.mu held
		q := w.byInc[name]
		return q != nil && !q.dead.Load() && !q.returned
	}
	w.chk.couldAct = func(name string, from, to time.Time) bool { // called with chk.mu held
		q := w.byInc[name]
		if q == nil || !q.started {
			return false
		}
		// What a knower needs, its fence valid, not paused and not
		// partitioned throughout:
		// to notice the row gone (two rounds), see it missing for the
		// engine's lost-row wait, and write it (two slow calls).
		cp := time.Duration(0)
		for _, s := range w.p.procs {
			cp = max(cp, s.checkpointInterval)
		}
		need := cp + w.p.timeout + w.p.effMargin + 2*w.p.hb + 3*w.p.round() + 2*w.p.storeMaxDelay
		bad := [][2]time.Time{{time.Time{}, q.joinedAt}}
		bad = append(bad, q.fences...)
		if !to.Before(q.fenceAt) {
			bad = append(bad, [2]time.Time{q.fenceAt, to})
		}
		bad = append(bad, w.chk.pauses[name]...)
		// Partitioned: its fence may still be valid for a while, but no
		// call of it reaches the table, so it cannot see the row missing
		// or recreate it (seed 103990: a knower's wait ended 0.26 s into a
		// partition, 2.7 s before its fence passed).
		bad = append(bad, w.chk.cutoffs[name]...)
		return unbroken(bad, from, to, need)
	}
	w.chk.tracksAcquired = true
	w.chk.mayDeliver = func(name, id string) bool { // called with chk.mu held
		q := w.byInc[name]
		if q == nil || q.dead.Load() || q.returned {
			return false
		}
		ok, _ := q.valid(id, time.Now(), false)
		return ok
	}
	w.chk.proof = func(name string) time.Duration { // called with chk.mu held
		q := w.byInc[name]
		if q == nil {
			return time.Duration(1<<63 - 1)
		}
		return q.cfg.checkpointInterval + w.p.timeout
	}
	w.inFlight, w.foBound, w.joinBound, w.fairBound = p.bounds()
	return w
}

// ident names a process in the checker: its owner and incarnation.
func ident(owner, inc string) string {
	if owner == "" {
		return ""
	}
	return owner + "/" + inc
}

// procOf returns the process whose incarnation inc of owner is, or nil;
// the caller holds chk.mu.
func (w *mworld) procOf(owner, inc string) *mproc { return w.byInc[ident(owner, inc)] }

// name returns the checker's name of the holder owner/inc: its process's
// ident (a process keeps its name across the incarnations it goes through);
// the caller holds chk.mu.
func (w *mworld) name(owner, inc string) string {
	if pr := w.procOf(owner, inc); pr != nil {
		return pr.ident
	}
	return ident(owner, inc)
}

// identified returns l with Owner replaced by the holder's name, as the
// checker compares holders; the caller holds chk.mu.
func (w *mworld) identified(l leases.Lease) leases.Lease {
	l.Owner = w.name(l.Owner, l.Incarnation)
	return l
}

// snap keeps the trace as it was at the first violation (the trace keeps
// only its last lines, and the run goes on for minutes); the caller holds
// chk.mu.
func (w *mworld) snap() {
	if w.firstTrace == "" && len(w.chk.violations) > 0 {
		w.firstTrace = w.chk.trace.String()
	}
}

func (w *mworld) run() {
	p := w.p
	faultEnd := w.at(p.faultEnd)

	finished, stopWatchdog := w.watchdog(p.faultEnd + time.Hour)
	defer stopWatchdog()

	if *flagSeed != 0 {
		w.hangTrace = func() string {
			w.drainTrace()
			f, err := os.CreateTemp("", fmt.Sprintf("membership-seed-%d-*.trace", w.p.seed))
			if err != nil {
				return ""
			}
			defer f.Close()
			fmt.Fprintf(f, "plan:\n%s\n", w.p)
			for _, l := range w.full {
				fmt.Fprintln(f, l)
			}
			return f.Name()
		}
		go func() {
			for {
				select {
				case <-finished:
					w.drainTrace()
					return
				case <-time.After(50 * time.Millisecond):
					w.drainTrace()
				}
			}
		}()
	}

	switch {
	case p.putEvery > 0 && p.load != nil:
		w.producing.Go(w.weightedProducer(p.putEvery, p.produce))
	case p.putEvery > 0:
		w.producing.Go(w.producer(p.putEvery, p.produce))
	}
	w.startLoad()
	if p.putAll > 0 {
		w.producing.Go(func() {
			for time.Now().Add(p.putAll).Before(w.at(p.produce)) {
				time.Sleep(p.putAll)
				for i := range p.shards {
					w.put(i)
				}
			}
		})
	}

	w.bg.Go(w.watchUnread)
	var steps []step
	for slot, pp := range p.procs {
		steps = append(steps, step{pp.start, func() { w.startProc(slot, false) }})
	}
	for _, e := range p.events {
		steps = append(steps, step{e.at, func() { w.apply(e) }})
	}
	runSchedule(w.start, steps)
	time.Sleep(time.Until(faultEnd))
	w.producing.Wait()
	// A same-owner restart waits for the previous process to exit: liveness
	// is measured from the last start, if it came after the faults.
	w.waitStarted()
	faultEnd = later(faultEnd, time.Now())
	if w.load != nil {
		w.load.faultsEnded = faultEnd
	}
	w.chk.mu.Lock()
	w.faultsOver = true
	w.chk.mu.Unlock()
	// A probe record on every shard: every shard has something to read
	// after faults stop.
	for i := range p.shards {
		w.put(i)
	}
	w.chk.tracef("faults stop; a probe record put on every shard")

	R := p.round()
	// A shard with no row when faults stop (its stream's rows never
	// created, the first member having died first; or a row deleted) is
	// created only after the lost-row wait (see bounds).
	for _, id := range w.stream.ShardIDs() {
		if _, err := w.mem.Get(context.Background(), leases.Key{Stream: streamName, Shard: id}); errors.Is(err, leases.ErrNotFound) {
			w.foBound = max(w.foBound, p.lostRowFailover())
			w.chk.tracef("shard %s has no row as faults stop: the failover bound is the lost-row wait's, %v", id, w.foBound)
			break
		}
	}
	readBound := w.inFlight + w.foBound
	joinBound := w.inFlight + w.joinBound
	settle := 10 * time.Minute
	if p.settle > 0 {
		settle = p.settle
	}
	deadline := faultEnd.Add(readBound + joinBound + w.fairBound + p.loadExtra() + settle)
	var readAll, joined, settled time.Time
	var fair, done bool
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		w.chk.mu.Lock()
		if readAll.IsZero() && len(w.readAgain) == p.shards {
			for _, at := range w.readAgain {
				readAll = later(readAll, at)
			}
		}
		if joined.IsZero() {
			joined = w.joinedAll()
		}
		rewinding := w.rewindsPending()
		w.chk.mu.Unlock()
		fair = w.sharesFair()
		done = w.delivered() && !rewinding // a rewind notified late: give its holder the time to apply it
		if !fair {
			settled = time.Time{}
		} else if settled.IsZero() {
			settled = time.Now()
		}
		stable := fair && time.Since(settled) >= 3*R
		if !readAll.IsZero() && !joined.IsZero() && (stable || w.loadJudged(faultEnd, max(readBound, joinBound)+w.fairBound)) {
			if stable {
				w.loadSettled(settled) // a load seed: its load stops, its records are to be delivered
			}
			if done {
				break
			}
		}
	}
	w.haltLoad()
	w.loadDescribe()
	w.chk.mu.Lock()
	if readAll.IsZero() {
		var unread []string
		for _, id := range w.stream.ShardIDs() {
			if _, ok := w.readAgain[id]; !ok {
				unread = append(unread, id)
			}
		}
		w.violate("(g) %v after faults stopped, shards %v were not read again: %s", time.Since(faultEnd), unread, w.assignment())
	} else {
		w.failover = readAll.Sub(faultEnd)
		w.failoverShare = float64(w.failover) / float64(readBound)
	}
	if w.failover > readBound {
		w.overBound = true
		w.violate("(g) every shard was read again only %v after faults stopped; bound %v (calls in flight %v + failover %v): %s",
			w.failover, readBound, w.inFlight, w.foBound, w.readAgainString())
	}
	if joined.IsZero() {
		w.violate("(g) %v after faults stopped, processes have not joined: %s", time.Since(faultEnd), w.assignment())
	} else if d := joined.Sub(faultEnd); d > joinBound {
		w.overBound = true
		w.violate("(g) every process had joined only %v after faults stopped; bound %v", d, joinBound)
	}
	if !done {
		w.violate("(d) %v after faults stopped, records are still unacknowledged or checkpoints behind: %s", time.Since(faultEnd), w.progress())
	}
	if w.loadChecked(max(readBound, joinBound) + w.fairBound) {
		// A load seed judged when its shares became fair by load (or not
		// within its bound, see loadJudged), its load stopped since.
	} else if !fair || time.Since(settled) < 3*R {
		w.violate("(g) %v after faults stopped, shares are not fair (or not stable for 3 rounds): %s%s", time.Since(faultEnd), w.assignment(), w.loadNote())
	} else {
		w.fairAt = max(0, settled.Sub(faultEnd))
		w.chk.tracef("fair shares %v after faults stopped, every shard read again %v after, every process joined %v after: %s",
			w.fairAt, w.failover, joined.Sub(faultEnd), w.assignment())
		fairBound := max(readBound, joinBound) + w.fairBound
		w.fairShare = float64(w.fairAt) / float64(fairBound)
		if w.fairAt > fairBound {
			w.overBound = true
			w.violate("(g) shares became fair %v after faults stopped; bound %v (failover or join %v + %v): %s",
				w.fairAt, fairBound, max(readBound, joinBound), w.fairBound, w.assignment())
		}
	}
	w.checkRewinds(readBound)
	w.chk.mu.Unlock()

	// Graceful shutdown of every live process: each releases its leases
	// with its final checkpoint and removes its membership entry.
	w.final.Store(true)
	live := w.live()
	for _, pr := range live {
		w.stop(pr, false)
	}
	w.bg.Wait()
	w.chk.mu.Lock()
	rows := w.finalRows(func(l leases.Lease) string { return w.name(l.Owner, l.Incarnation) }, w.identified)
	hdr, _ := w.mem.Header(context.Background())
	for row := range hdr.Rows {
		ms, _ := w.mem.Members(context.Background(), row)
		for _, m := range ms {
			for _, pr := range live {
				if w.procOf(m.Owner, m.Incarnation) == pr && !pr.unansweredJoins[m] {
					w.violate("membership row %d still has the entry of %s after it shut down gracefully: %+v", row, pr.ident, m)
				}
			}
		}
	}
	w.chk.mu.Unlock()
	w.chk.final(rows)
	w.chk.mu.Lock()
	if p.check != nil {
		// The scenario's own violations first: they name what it tests.
		before := w.chk.violations
		w.chk.violations = nil
		p.check(w)
		w.chk.violations = append(w.chk.violations, before...)
		if n := len(w.chk.violations) - 20; n > 0 {
			w.chk.violations = w.chk.violations[:20]
			w.chk.dropped += n
		}
	}
	w.snap()
	w.chk.mu.Unlock()
	w.elapsed = time.Since(w.start)

	stopWatchdog()
	w.checkLeftovers(w.p.label())
}

// drainTrace moves the lines of the checker's trace (a ring of the last
// traceLines lines) into w.full, so that a replayed seed keeps all of them.
func (w *mworld) drainTrace() {
	t := &w.chk.trace
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.full {
		w.full = append(w.full, "(trace lines lost: the ring overflowed)")
		w.full = append(w.full, t.lines[t.next:]...)
		w.full = append(w.full, t.lines[:t.next]...)
	} else {
		w.full = append(w.full, t.lines...)
	}
	t.lines, t.next, t.full = t.lines[:0], 0, false
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// live returns the processes running now (not dead, not stopping).
func (w *mworld) live() []*mproc {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*mproc
	for _, gens := range w.slots {
		for _, pr := range gens {
			if !pr.dead.Load() && !pr.stopping.Load() && !pr.ended() {
				out = append(out, pr)
			}
		}
	}
	return out
}

// fair reports whether every shard is held by exactly one live process, as
// the table says too, with at most ceil(S/L) each and within one of each
// other.
func (w *mworld) fair() bool {
	live := w.live()
	holdings := make([][]string, len(live))
	w.chk.mu.Lock()
	defer w.chk.mu.Unlock()
	for i, pr := range live {
		holdings[i] = pr.group.Held(streamName)
	}
	held, ok := fairSplit(w.p.shards, holdings)
	if !ok {
		return false
	}
	for id, i := range held {
		l, err := w.row(id)
		if err != nil || w.procOf(l.Owner, l.Incarnation) != live[i] {
			return false
		}
	}
	return true
}

func (w *mworld) assignment() string {
	var parts []string
	for _, pr := range w.live() {
		parts = append(parts, fmt.Sprintf("%s holds %v", pr.ident, pr.group.Held(streamName)))
	}
	for _, id := range w.stream.ShardIDs() {
		l, _ := w.row(id)
		parts = append(parts, fmt.Sprintf("row %s: %q", id, ident(l.Owner, l.Incarnation)))
	}
	return strings.Join(parts, "; ")
}

// readAgainString describes when each shard was read again; the caller
// holds chk.mu.
func (w *mworld) joinedAll() time.Time {
	var at time.Time
	for _, pr := range w.live() {
		if !pr.started {
			return time.Time{}
		}
		at = later(at, pr.joinedAt)
	}
	return at
}

func (w *mworld) readAgainString() string {
	var parts []string
	for _, id := range w.stream.ShardIDs() {
		parts = append(parts, fmt.Sprintf("%s at T+%v", id, w.elapsedAt(w.readAgain[id])))
	}
	return strings.Join(parts, ", ")
}

// progress describes delivery; the caller holds chk.mu.
func (w *mworld) progress() string {
	return w.simBase.progress("row", func(l leases.Lease) string { return ident(l.Owner, l.Incarnation) })
}

// startProc starts a new process in slot: a fresh owner, or a new
// incarnation of the slot's last owner.
//
// A new incarnation of the same owner runs once the previous process has
// exited (as a restarted service does; a crashed one has exited at once):
// until then it is the slot's current process, which the slot's events
// reach, but its Run has not started.
func (w *mworld) startProc(slot int, sameOwner bool) {
	w.mu.Lock()
	gen := len(w.slots[slot])
	owner := fmt.Sprintf("i%d.g%d", slot, gen)
	var prev *mproc
	if gen > 0 {
		prev = w.slots[slot][gen-1]
	}
	if !sameOwner || prev == nil || prev.dead.Load() {
		prev = nil // nothing to wait for
	}
	if sameOwner && gen > 0 {
		owner = w.slots[slot][gen-1].owner
	}
	pr := &mproc{w: w, slot: slot, gen: gen, owner: owner, cfg: w.p.procs[slot],
		done: make(chan struct{}), ten: map[string]*mtenure{}, knows: map[string]int{}, heldEver: map[string]bool{}, takesInFlight: map[string]int{}}
	w.slots[slot] = append(w.slots[slot], pr)
	w.mu.Unlock()

	hooks := pr.storeHooks(pr.decideStore, pr.apply)
	hooks.ApplyMembers = pr.applyMembers
	hooks.Late = pr.lateLanding
	fs := NewFaultStore(w.mem, hooks)
	cfg := engine.GroupConfig{
		Owner:  pr.owner,
		Store:  &modelStore{FaultStore: fs, pr: pr},
		Client: Client(w.kinesis, pr.kinesisHooks(pr.decideKinesis)),
		Streams: []engine.StreamConfig{{
			Stream: streamName,
			Start:  kltype.TrimHorizon,
			Worker: simWorker(pr.handle, pr.cfg),
		}},
		Heartbeat:       w.p.hb,
		Timeout:         w.p.timeout,
		FenceMargin:     w.p.margin,
		Reconcile:       w.p.reconcile,
		ShutdownTimeout: 5 * time.Second,
	}
	w.p.load.configure(&cfg, slot)
	// The process is named by its ident, known once NewGroup has made the
	// incarnation.
	cfg.Logger = slog.New(&traceHandler{tr: &w.chk.trace, name: func() string { return pr.ident }})
	cfg.Events = func(e observe.LeaseEvent) {
		w.chk.tracef("%s: event %s %s", pr.ident, e.Type, e.ShardID)
		switch e.Type {
		case observe.LeaseAcquired:
			w.chk.acquiredBy(pr.ident, e.ShardID)
		case observe.LeaseReleased, observe.LeaseLost, observe.ShardEnded:
			w.chk.tenureEnded(pr.ident, e.ShardID)
		}
	}
	g, err := engine.NewGroup(cfg)
	if err != nil {
		// startProc runs on the supervisor's goroutine too: no Fatal.
		w.chk.mu.Lock()
		w.violate("NewGroup of slot %d: %v", slot, err)
		w.chk.mu.Unlock()
		pr.dead.Store(true)
		close(pr.done)
		return
	}
	pr.group = g
	pr.inc = g.Incarnation()
	pr.ident = ident(pr.owner, pr.inc) // before Run: the logger and the hooks name the process by it
	w.chk.mu.Lock()
	w.byInc[pr.ident] = pr
	w.chk.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	pr.cancel = cancel
	if prev != nil {
		w.chk.tracef("%s will start (slot %d) once %s has exited", pr.ident, slot, prev.ident)
	} else {
		w.chk.tracef("%s starts (slot %d)", pr.ident, slot)
	}
	w.bg.Go(func() {
		defer close(pr.done)
		if prev != nil {
			<-prev.done
			w.chk.tracef("%s starts (slot %d)", pr.ident, slot)
		}
		pr.running.Store(true)
		pr.err = pr.group.Run(ctx)
		w.chk.mu.Lock()
		pr.returned = true
		w.chk.mu.Unlock()
		// A process that starts while the table is missing never joins: Run
		// returns the store's ErrMisconfigured, the start-up check of a
		// configuration that cannot work (its supervisor restarts it).
		w.chk.mu.Lock()
		joined := pr.started
		w.chk.mu.Unlock()
		misconfigured := !joined && errors.Is(pr.err, leases.ErrMisconfigured)
		w.chk.mu.Lock()
		w.checkDuplicateOwner(pr) // (o) first: it names what Run's return means
		w.snap()
		w.chk.mu.Unlock()
		w.chk.runReturned(pr.ident, pr.err, pr.stopping.Load() || misconfigured)
		if misconfigured && !pr.stopping.Load() && !w.final.Load() {
			// Its supervisor starts it again a little later, as the same
			// owner (a crash loop while the table is missing).
			w.bg.Go(func() {
				time.Sleep(2 * time.Second)
				if !w.final.Load() && w.current(slot) == pr {
					w.chk.tracef("supervisor: %s exited with the table missing; restarting slot %d", pr.ident, slot)
					w.startProc(slot, true)
				}
			})
		}
	})
}

func (w *mworld) current(slot int) *mproc { return current(&w.mu, w.slots, slot) }

// unreadBound is how long a shard's row may name a live incarnation that
// does not read it (watchUnread): 3 timeouts and the latest a write lands
// late (lateMax). The row is an orphan of that incarnation (a take whose
// answer was lost, a lease lost at a fence), which every round retakes or
// releases; a late write may make one again after its caller gave up.
func (p *mplan) unreadBound() time.Duration { return 3*p.timeout + p.lateMax }

// watchUnread checks (u), every second until the final shutdown begins: no
// shard's row names a live incarnation (its process running, not stopping,
// the incarnation its Group's current one) that does not read it (its
// Group does not hold it: no worker with a valid lease) for longer than
// unreadBound, counted only while that process can act (not paused, not
// partitioned from the table, its fence valid by the model): every other
// member waits on such a row for as long as the incarnation lives, so the
// shard would be read by nobody for ever.
func (w *mworld) watchUnread() {
	bound := w.p.unreadBound()
	for !w.final.Load() {
		time.Sleep(time.Second)
		w.chk.mu.Lock()
		now := time.Now()
		for _, id := range w.stream.ShardIDs() {
			l, err := w.row(id)
			var q *mproc
			if err == nil && l.Held() {
				q = w.procOf(l.Owner, l.Incarnation)
			}
			acting := q != nil && q.running.Load() && !q.dead.Load() && !q.returned && !q.stopping.Load() &&
				now.UnixNano() >= q.pausedUntil.Load() && !q.partitioned() && q.started && now.Before(q.fenceAt) &&
				q.group.Incarnation() == l.Incarnation
			if !acting || slices.Contains(q.group.Held(streamName), id) {
				delete(w.unread, id)
				continue
			}
			key := ident(l.Owner, l.Incarnation)
			u := w.unread[id]
			if u == nil || u.inc != key {
				w.unread[id] = &unreadRec{since: now, inc: key}
				continue
			}
			if d := now.Sub(u.since); d > bound && !u.reported {
				u.reported = true
				w.violate("(u) shard %s unread: its row (counter %d) has named %s, alive, current and able to act, which does not read it, for %v since T+%v; bound %v (3 timeouts and the latest a write lands late): nobody else takes it while that incarnation lives",
					id, l.Counter, q.ident+" as incarnation "+l.Incarnation, d.Round(time.Millisecond), w.elapsedAt(u.since), bound)
			}
		}
		w.chk.mu.Unlock()
	}
}

// checkDuplicateOwner checks (o) once pr's Run returned: an
// engine.DuplicateOwnerError (ErrDuplicateOwner) says another process runs
// with pr's owner id, and the simulation never runs two at once (a
// same-owner restart waits for the previous process to exit). It is
// spurious unless another process of that owner is alive (not dead, Run
// not returned) as Run returns. The caller holds chk.mu.
func (w *mworld) checkDuplicateOwner(pr *mproc) {
	var dup *engine.DuplicateOwnerError
	if !errors.As(pr.err, &dup) {
		return
	}
	key := ident(dup.Owner, dup.Incarnation)
	other := w.byInc[key]
	var twin *mproc
	w.mu.Lock()
	for _, gens := range w.slots {
		for _, q := range gens {
			if q != pr && q.owner == pr.owner && q.running.Load() && !q.dead.Load() && !q.returned {
				twin = q
			}
		}
	}
	w.mu.Unlock()
	var named string
	switch {
	case other == nil:
		named = "no process of this simulation"
	case other == pr:
		named = "one of its own incarnations (a join or replacement attempt of its own that landed late or unanswered)"
	default:
		named = fmt.Sprintf("of %s (dead %v, Run returned %v)", other.ident, other.dead.Load(), other.returned)
	}
	w.chk.tracef("%s: ErrDuplicateOwner names incarnation %s, %s; its entry last written at T+%v", pr.ident, key, named, w.elapsedAt(w.lastEntry[key]))
	if twin != nil {
		return // a live twin: the error is right
	}
	w.violate("(o) %s: Run returned a spurious ErrDuplicateOwner naming incarnation %s: no other live process has owner id %q (the named incarnation is %s; its entry last written at T+%v, %v before)",
		pr.ident, dup.Incarnation, pr.owner, named, w.elapsedAt(w.lastEntry[key]), time.Since(w.lastEntry[key]).Round(time.Millisecond))
}

// apply runs a planned event.
func (w *mworld) apply(e mevent) {
	w.chk.tracef("event: %v", e)
	switch e.kind {
	case mThrottle, mLost, mThrottleRow, mLatency, mSlowList:
		return // decided per call (mproc.decideStore, mproc.decideKinesis)
	case mRestart:
		if cur := w.current(e.slot); cur != nil && !cur.dead.Load() && !cur.stopping.Load() && !cur.ended() {
			// The slot is up already: its crash or stop found the process
			// gone, and the supervisor restarted it (a process that exited
			// with the table missing). A second process would wait on this
			// one for ever.
			w.chk.tracef("restart of slot %d skipped: %s runs", e.slot, cur.ident)
			return
		}
		w.startProc(e.slot, e.sameOwner)
		return
	case mDeleteRow:
		w.deleteRow(e.shard)
		return
	case mDropTable:
		w.dropTable(e.dur)
		return
	case mRewind:
		w.bg.Go(func() { w.rewind(e) })
		return
	}
	pr := w.current(e.slot)
	if pr == nil || pr.dead.Load() || pr.stopping.Load() || pr.ended() {
		return
	}
	switch e.kind {
	case mPause:
		pr.pause(w.chk, pr.ident, e.dur)
	case mPartition:
		now := time.Now()
		w.chk.partitioned(pr.ident, now, now.Add(e.dur))
		pr.partition(e.dur)
	case mCrash:
		w.stop(pr, true)
	case mStop:
		w.stop(pr, false)
	}
}

// shardID is the id of shard i.
func shardID(i int) string { return fmt.Sprintf("shardId-%012d", i) }

// deleteRow deletes the row of shard i, or, if that row is free or missing,
// of the next shard whose row is held.
func (w *mworld) deleteRow(i int) {
	w.chk.mu.Lock()
	defer w.chk.mu.Unlock()
	for k := range w.p.shards {
		id := shardID((i + k) % w.p.shards)
		if l, err := w.row(id); err == nil && l.Held() {
			w.deleteLocked(id)
			return
		}
	}
	w.deleteLocked(shardID(i))
}

// deleteLocked deletes the row of shard id, telling the checker who held
// it and what the live processes knew of its checkpoint; the caller holds
// chk.mu.
func (w *mworld) deleteLocked(id string) {
	l, err := w.row(id)
	if err != nil {
		w.chk.tracef("operator: the row of %s does not exist; nothing to delete", id)
		return
	}
	holder := ""
	if l.Held() {
		holder = w.name(l.Owner, l.Incarnation)
	}
	known := w.knowledge(id, l)
	w.mem.DeleteRow(l.Key)
	w.chk.deleted(id, holder, known)
}

// knowledge returns, for each live process, how many records the best
// checkpoint of shard id it knows covers, capped by what row l's checkpoint
// covers (an operator may have rewound it); the caller holds chk.mu.
func (w *mworld) knowledge(id string, l leases.Lease) map[string]int {
	row, _ := w.chk.covered(id, l.Checkpoint)
	known := map[string]int{}
	for _, pr := range w.byInc {
		if pr.dead.Load() || pr.returned {
			continue
		}
		// What a process knew while it held the shard: every holder, idle
		// or fenced, re-reads its rows when a member reports one vanished,
		// and recreates them from its checkpoint. A process that only read
		// the row (and never held it) does not vouch for it: the engine
		// does not ask every member for what it read once.
		if n, ok := pr.knows[id]; ok && pr.heldEver[id] {
			known[pr.ident] = min(n, row)
		}
	}
	return known
}

// dropTable empties the table (every lease row and membership row gone at
// once), after it was missing for gap if gap > 0.
func (w *mworld) dropTable(gap time.Duration) {
	w.chk.mu.Lock()
	for i := range w.p.shards {
		w.deleteLocked(shardID(i))
	}
	if gap > 0 {
		w.mem.SetMissing(true)
		w.chk.tracef("operator: the table is missing")
	} else {
		w.mem.Drop()
		w.chk.tracef("operator: the table is empty")
	}
	w.chk.mu.Unlock()
	if gap > 0 {
		w.bg.Go(func() {
			time.Sleep(gap)
			w.chk.mu.Lock()
			w.mem.SetMissing(false)
			w.chk.tracef("operator: the table exists again, empty")
			w.chk.mu.Unlock()
		})
	}
}

// rewind is an operator's rewind of shard e.shard: back records before its
// checkpoint (TRIM_HORIZON if there are not that many), at once on a free
// row, else a request to its holder, whose membership entry's Notice is
// bumped (after the holder's next write on the row, with
// e.afterCheckpoint), as the kinesislease command does.
func (w *mworld) rewind(e mevent) {
	id := shardID(e.shard)
	w.chk.mu.Lock()
	if e.slot >= 0 {
		// The first shard from e.shard held by the slot's process.
		pr := w.current(e.slot)
		for k := range w.p.shards {
			if l, err := w.row(shardID((e.shard + k) % w.p.shards)); err == nil && l.Held() && w.procOf(l.Owner, l.Incarnation) == pr {
				id = l.Key.Shard
				break
			}
		}
	}
	l, err := w.row(id)
	if err != nil {
		w.chk.mu.Unlock()
		w.chk.tracef("operator: rewind %s: %v", id, err)
		return
	}
	cp := leases.Checkpoint{Sequence: leases.RewindTrimHorizon}
	if n, err := w.chk.covered(id, l.Checkpoint); err == nil && e.back > 0 && n-e.back > 0 {
		if seq, ok := w.stream.RecordAt(id, n-e.back); ok {
			cp = leases.RewindAtSequence(seq)
		}
	}
	got, err := w.mem.Rewind(context.Background(), l, cp)
	if err != nil {
		w.chk.mu.Unlock()
		w.chk.tracef("operator: rewind %s to %s: %v", id, cp, err)
		return
	}
	w.chk.applied("Rewind", "operator", w.identified(l), w.identified(got))
	if !got.Held() {
		w.chk.mu.Unlock()
		return // applied at once
	}
	req := &rewindReq{id: id, row: got, at: time.Now()}
	w.rewinds = append(w.rewinds, req)
	w.chk.mu.Unlock()
	if e.afterCheckpoint {
		// Wait for the holder's next write on the row (a checkpoint, which
		// conflicts with the request, reads the row again and lands).
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
			if l, err := w.mem.Get(context.Background(), got.Key); err != nil || l.Counter != got.Counter {
				break
			}
		}
	}
	w.notify(req, got.Owner, got.Incarnation)
}

// notify bumps the Notice of the membership entry of incarnation inc of
// owner, as the kinesislease command does after a rewind request.
func (w *mworld) notify(req *rewindReq, owner, inc string) {
	w.chk.mu.Lock()
	defer w.chk.mu.Unlock()
	row, ok := driver.IncarnationRow(inc)
	if !ok {
		w.chk.tracef("operator: %s names no membership row: no notice", w.name(owner, inc))
		return
	}
	ms, err := w.mem.Members(context.Background(), row)
	if err != nil {
		w.chk.tracef("operator: notice to %s: %v", w.name(owner, inc), err)
		return
	}
	i := slices.IndexFunc(ms, func(m leases.Member) bool { return m.Owner == owner && m.Incarnation == inc })
	if i < 0 {
		w.chk.tracef("operator: no membership entry of %s: no notice (the next holder applies the rewind)", ident(owner, inc))
		return
	}
	next := ms[i]
	next.Notice++
	if _, err := w.mem.ReplaceMember(context.Background(), row, ms[i], next); err != nil {
		w.chk.tracef("operator: notice to %s: %v", w.name(owner, inc), err)
		return
	}
	w.lastEntry[ident(owner, inc)] = time.Now()
	if req != nil {
		req.notified = time.Now()
	}
	w.chk.tracef("operator: notice of %s bumped to %d", w.name(owner, inc), next.Notice)
}

// rewindsPending reports whether a rewind whose holder was told is not
// applied yet (see checkRewinds); the caller holds chk.mu.
func (w *mworld) rewindsPending() bool {
	for _, req := range w.rewinds {
		if req.notified.IsZero() || !req.applied.IsZero() {
			continue
		}
		if l, err := w.row(req.id); err == nil && l.RewindTo == req.row.RewindTo {
			return true
		}
	}
	return false
}

// checkRewinds checks that every rewind request whose holder was told
// (its notice bumped) was applied, unless its row was deleted or rewound
// again since: within bound after faults stopped, at the latest; the
// caller holds chk.mu.
func (w *mworld) checkRewinds(bound time.Duration) {
	for _, req := range w.rewinds {
		if req.notified.IsZero() || !req.applied.IsZero() {
			continue
		}
		l, err := w.row(req.id)
		if err != nil || l.RewindTo != req.row.RewindTo {
			continue // the row was deleted, or rewound again
		}
		w.violate("(j) the rewind of %s to %s requested from %s at T+%v (notice bumped at T+%v) is still pending %v after faults stopped (row at counter %d, %q): its holder never applied it",
			req.id, req.row.RewindTo, w.name(req.row.Owner, req.row.Incarnation), w.elapsedAt(req.at), w.elapsedAt(req.notified),
			bound, l.Counter, w.name(l.Owner, l.Incarnation))
	}
}

// stop crashes pr or shuts it down gracefully (see simBase.stopProc).
func (w *mworld) stop(pr *mproc, crash bool) {
	w.stopProc(&w.bg, &pr.procState, pr.ident, crash, pr.cancel, pr.done, func() error { return pr.err }, pr.faulty,
		5*time.Second+4*w.p.timeout+time.Minute, func(l leases.Lease) bool { return w.procOf(l.Owner, l.Incarnation) == pr })
}

// ---------------------------------------------------------------------------
// One process's faults and the model of its fence.

// rng returns a generator for one decision of pr (see draws.next), named
// by its slot and generation, not its owner: a same-owner restart draws its
// own faults.
func (pr *mproc) rng(parts ...string) *rand.Rand {
	return pr.draws.next(pr.w.p.seed, fmt.Sprintf("%d.%d", pr.slot, pr.gen), parts...)
}

// waitStarted waits until the Run of every process started (a same-owner
// restart waits for its previous process to exit).
func (w *mworld) waitStarted() {
	for {
		w.mu.Lock()
		var waiting []*mproc
		for _, gens := range w.slots {
			for _, pr := range gens {
				if !pr.running.Load() && !pr.ended() {
					waiting = append(waiting, pr)
				}
			}
		}
		w.mu.Unlock()
		if len(waiting) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ended reports whether pr's Run returned (a violation unless it was
// stopped).
func (pr *mproc) ended() bool {
	select {
	case <-pr.done:
		return true
	default:
		return false
	}
}

func (pr *mproc) faulty() bool { return time.Now().Before(pr.w.at(pr.w.p.faultEnd)) }

func isMemberOp(op string) bool {
	switch op {
	case "Heartbeat", "Members", "ReplaceMember", "Join", "Header", "BumpRow", "ReportVanished":
		return true
	}
	return false
}

func isMemberWrite(op string) bool { return op != "Get" && op != "Members" && op != "Header" }

func (pr *mproc) count(f func(s *mstats)) {
	pr.w.mu.Lock()
	f(&pr.w.stats)
	pr.w.mu.Unlock()
}

func (pr *mproc) decideStore(op string, key leases.Key) Decision {
	if f := pr.w.p.decide; f != nil {
		if d, ok := f(pr, op, key); ok {
			return d
		}
	}
	d := pr.decideFault(op, key)
	if lat := pr.latency(op, key); lat > 0 {
		// Half on the way there, half on the way back.
		d.Delay += lat / 2
		d.ResponseDelay += lat - lat/2
	}
	return d
}

// latency returns how long a store call of pr takes without faults: the
// scenario's latency, or 5-50ms in a period of slow calls.
func (pr *mproc) latency(op string, key leases.Key) time.Duration {
	p := pr.w.p
	var lat time.Duration
	if lo, hi := p.latency[0], p.latency[1]; hi > 0 {
		lat = lo
		if hi > lo {
			lat += upTo(pr.rng("latency", op, key.Shard), hi-lo)
		}
	}
	el := time.Since(pr.w.start)
	for _, e := range p.events {
		if e.kind == mLatency && e.within(el) && (e.slot < 0 || e.slot == pr.slot) {
			pr.count(func(s *mstats) { s.slowCalls++ })
			lat = max(lat, 5*time.Millisecond+upTo(pr.rng("latency", op, key.Shard), 45*time.Millisecond))
		}
	}
	return lat
}

// decideFault decides the faults of a store call of pr.
func (pr *mproc) decideFault(op string, key leases.Key) Decision {
	p := pr.w.p
	member := isMemberOp(op)
	now := time.Now()
	if now.UnixNano() < pr.partUntil.Load() {
		r := pr.rng("partition", op, key.Shard)
		pr.count(func(s *mstats) { s.injected++ })
		return partitionFault(r, op, key, p.fenceStress, 200*time.Millisecond, p.storeMaxDelay)
	}
	el := now.Sub(pr.w.start)
	for _, e := range p.events {
		if !e.within(el) {
			continue
		}
		switch {
		case e.kind == mThrottle && (member || e.table):
			r := pr.rng("throttle", op, key.Shard)
			pr.count(func(s *mstats) { s.throttled++ })
			return Decision{Delay: upTo(r, 30*time.Millisecond),
				Err: &InjectedError{Op: op, Key: key, Msg: "ProvisionedThroughputExceededException (the whole fleet is throttled)"}}
		case e.kind == mThrottleRow && member && key == MemberRowKey(e.row):
			r := pr.rng("throttle-row", op, key.Shard)
			pr.count(func(s *mstats) { s.throttled++ })
			return Decision{Delay: upTo(r, 30*time.Millisecond),
				Err: &InjectedError{Op: op, Key: key, Msg: "ProvisionedThroughputExceededException (this membership row is throttled)"}}
		case e.kind == mLost && op == "Heartbeat" && (e.slot < 0 || e.slot == pr.slot):
			r := pr.rng("lost", op)
			pr.count(func(s *mstats) { s.lostHB++ })
			return Decision{Delay: upTo(r, p.hb/8), LoseResponse: true, ResponseDelay: upTo(r, p.hb/4)}
		}
	}
	if !pr.faulty() {
		return Decision{}
	}
	if p.lateP > 0 && !isRead(op) {
		// A write that lands late: its request stuck in a retransmitting
		// connection while the caller's client times out (as a timed-out
		// connection of a partition does).
		if r := pr.rng("late", op, key.Shard); r.Float64() < p.lateP {
			return Decision{Late: p.hb/2 + upTo(r, 2*p.timeout), Delay: 200*time.Millisecond + upTo(r, p.storeMaxDelay)}
		}
	}
	r := pr.rng("store", op, key.Shard)
	rates := storeRates{p.storeDelayP, p.storeErrP, p.storeLostP, p.storeRespDelayP, p.storeMaxDelay}
	if member {
		rates.delayP, rates.errP, rates.lostP = p.memDelayP, p.memErrP, p.memLostP
	}
	return storeFault(r, op, key, rates, isMemberWrite(op), func() { pr.count(func(s *mstats) { s.injected++ }) }, func() {
		pr.count(func(s *mstats) {
			if op == "Heartbeat" {
				s.lostHB++
			} else {
				s.lostOther++
			}
		})
	})
}

func (pr *mproc) decideKinesis(op, shardID string) (time.Duration, error) {
	var slow time.Duration
	if op == "ListShards" {
		el := time.Since(pr.w.start)
		for _, e := range pr.w.p.events {
			if e.kind == mSlowList && e.within(el) && (e.slot < 0 || e.slot == pr.slot) {
				pr.count(func(s *mstats) { s.slowLists++ })
				slow = max(slow, e.delay+upTo(pr.rng("slow-list"), e.delay))
			}
		}
	}
	if !pr.faulty() {
		return slow, nil
	}
	delay, err := kinesisFault(pr.rng("kinesis", op, shardID), &pr.w.p.planBase, op)
	return slow + delay, err
}

// apply runs a lease-row call with the checker's lock held, so that the
// checker sees every write that lands, in order, with its writer named by
// owner and incarnation. A TakeAs is checked against the fence of the
// process it takes the row from.
func (pr *mproc) apply(op string, l leases.Lease, do func() (leases.Lease, error)) (leases.Lease, error) {
	w := pr.w
	c := w.chk
	c.mu.Lock()
	defer c.mu.Unlock()
	write := op != "Get"
	var before leases.Lease
	if write {
		before, _ = w.mem.Get(context.Background(), l.Key)
	}
	got, err := do()
	if err != nil || !write {
		return got, err
	}
	switch op {
	case "TakeAs", "CreateAs":
		w.takeLanded(pr, before, got)
	case "Release":
		pr.count(func(s *mstats) { s.releases++ })
		delete(pr.ten, got.Key.Shard) // its lease is over
	case "ApplyRewind":
		for _, req := range w.rewinds {
			if req.id == got.Key.Shard && req.applied.IsZero() {
				req.applied = time.Now()
			}
		}
	}
	c.applied(op, pr.ident, w.identified(before), w.identified(got))
	w.snap()
	return got, err
}

// learn records that pr was told row l (the answer of a read or a write).
func (pr *mproc) learn(l leases.Lease) {
	pr.w.chk.mu.Lock()
	defer pr.w.chk.mu.Unlock()
	cp, supersedes := pr.w.chk.learned(pr.ident, l)
	if n, err := pr.w.chk.covered(l.Key.Shard, cp); err == nil {
		if k, ok := pr.knows[l.Key.Shard]; !ok || n > k || supersedes {
			pr.knows[l.Key.Shard] = n
		}
	}
}

// takeLanded records pr's TakeAs that landed on a row that was before, and
// checks (f): the row's previous holder, if another live process, must
// have lost its lease by the protocol's rule. The caller holds chk.mu.
func (w *mworld) takeLanded(pr *mproc, before, after leases.Lease) {
	id := after.Key.Shard
	now := time.Now()
	pr.heldEver[id] = true
	w.seq++
	// The holder of a row it recreated after a deletion goes on with the
	// lease it had: believed if that one was and no heartbeat sent after a
	// fence has lost it since. Its fence is checked at each delivery
	// (valid): one that lapsed while a heartbeat sent in time was in flight
	// moves on when that heartbeat is answered, and the lease with it.
	old := pr.ten[id]
	cont := w.chk.shard(id).goneHolder == pr.ident && old != nil && old.believed && old.seq >= pr.lostAll
	// pending only while its caller waits for the answer: a late take
	// lands after its caller got an error (takeFailed) and is never
	// believed (unless it carries a believed lease on, as above).
	// A take landing for an incarnation the process is no longer (its
	// request late, the process gone on as a new one) is never pending:
	// nothing of it waits for the answer.
	pending := pr.takesInFlight[id] > 0 && (pr.entryInc == "" || after.Incarnation == pr.entryInc)
	pr.ten[id] = &mtenure{landed: now, seq: w.seq, pending: pending, believed: cont}
	q := w.procOf(before.Owner, before.Incarnation)
	if q == nil || q == pr || q.dead.Load() || q.returned {
		return // free, its own (an earlier incarnation's), or of a process that is gone
	}
	prev := q.ident
	if ok, _ := q.valid(id, now, true); ok {
		w.violate("(f) %s took %s from %s (the row named its incarnation %s), whose lease is still valid: its last answered heartbeat was sent at T+%v, so it may deliver until T+%v",
			pr.ident, id, prev, before.Incarnation, w.elapsedAt(q.lastSent), w.elapsedAt(q.fenceAt))
	}
	for _, h := range w.chk.shard(id).open {
		if h.owner == prev && !w.chk.pausedSince(prev, h.entered) {
			w.violate("(f) %s took %s from %s while %s's handler on record #%d (entered at T+%v) is still running",
				pr.ident, id, prev, prev, h.idx, w.elapsedAt(h.entered))
		}
	}
}

// valid reports whether pr may deliver shard id at now by the protocol's
// rule, and if not why: pr was told its TakeAs landed while its fence had
// not passed, its last answered heartbeat was sent less than Timeout -
// FenceMargin ago, and since the take no heartbeat was sent after a fence
// had passed (the sticky fence: every lease is lost then). The caller holds
// chk.mu.
func (pr *mproc) valid(id string, now time.Time, pending bool) (bool, string) {
	t := pr.ten[id]
	w := pr.w
	switch {
	case t == nil:
		return false, "it never took the row"
	case !t.believed && !(pending && t.pending):
		return false, fmt.Sprintf("its TakeAs of T+%v was not answered before its fence passed", w.elapsedAt(t.landed))
	case !pr.started || !now.Before(pr.fenceAt):
		return false, fmt.Sprintf("its fence passed at T+%v (last answered heartbeat sent at T+%v)", w.elapsedAt(pr.fenceAt), w.elapsedAt(pr.lastSent))
	case t.seq < pr.lostAll:
		return false, fmt.Sprintf("it lost every lease at T+%v (a heartbeat sent after its fence had passed), after taking this one at T+%v",
			w.elapsedAt(pr.lostAllAt), w.elapsedAt(t.landed))
	}
	return true, ""
}

// leavingAnswered records that a leaving heartbeat of pr (sent by an
// incarnation that found itself fenced) was answered: the Group lost every
// lease before sending it, and its fence does not move.
func (pr *mproc) leavingAnswered() {
	w := pr.w
	w.chk.mu.Lock()
	defer w.chk.mu.Unlock()
	pr.lostAllAt = time.Now()
	w.seq++
	pr.lostAll = w.seq
}

// entryWritten records that an entry of pr as inc was written by a join or
// a replacement that was answered: a process that goes on as a new
// incarnation has lost every lease first (the Group fences them all
// before it writes the new one: after a fence, an entry found gone, or
// another incarnation found in it).
func (pr *mproc) entryWritten(inc string) {
	w := pr.w
	w.chk.mu.Lock()
	defer w.chk.mu.Unlock()
	if pr.entryInc != "" && pr.entryInc != inc {
		pr.lostAllAt = time.Now()
		w.seq++
		pr.lostAll = w.seq
	}
	pr.entryInc = inc
}

// heartbeatAnswered records that a heartbeat of pr (or the ReplaceMember
// that wrote its first entry) sent at sent was answered: the Group moves
// its fence to sent + Timeout - FenceMargin, having lost every lease first
// if the fence had passed before sent.
func (pr *mproc) heartbeatAnswered(sent time.Time) {
	w := pr.w
	w.chk.mu.Lock()
	defer w.chk.mu.Unlock()
	if pr.started && !sent.Before(pr.fenceAt) {
		pr.fences = append(pr.fences, [2]time.Time{pr.fenceAt, sent})
		pr.lostAllAt = time.Now()
		w.seq++
		pr.lostAll = w.seq
		if len(pr.ten) > 0 {
			w.chk.tracef("%s: model: heartbeat sent at T+%v after the fence passed (T+%v): every lease lost", pr.ident, w.elapsedAt(sent), w.elapsedAt(pr.fenceAt))
		}
	}
	if !pr.started {
		pr.joinedAt = time.Now()
	}
	pr.started = true
	pr.lastSent = sent
	pr.fenceAt = sent.Add(w.p.timeout - w.p.effMargin)
}

// takeAnswered records that pr's TakeAs of id succeeded: the Group reads
// the shard unless its fence passed meanwhile.
func (pr *mproc) takeAnswered(id string) {
	w := pr.w
	w.chk.mu.Lock()
	defer w.chk.mu.Unlock()
	pr.takesInFlight[id]--
	if t := pr.ten[id]; t != nil {
		t.believed = t.believed || pr.started && time.Now().Before(pr.fenceAt) // a holder's recreate goes on with its lease (takeLanded)
		t.pending = false
	}
}

// takeFailed records that pr's TakeAs of id failed (it may have landed,
// its answer lost): the Group does not read the shard.
func (pr *mproc) takeFailed(id string) {
	w := pr.w
	w.chk.mu.Lock()
	defer w.chk.mu.Unlock()
	pr.takesInFlight[id]--
	if t := pr.ten[id]; t != nil {
		t.pending = false
	}
}

// applyMembers runs a call on a membership row with the checker's lock
// held and traces the entries that changed. An entry of pr's owner with an
// incarnation no process has (its join, or a new incarnation after a fence)
// is pr's from then on.
func (pr *mproc) applyMembers(op string, row int, do func() ([]leases.Member, error)) ([]leases.Member, error) {
	if op == "Members" {
		return do()
	}
	w := pr.w
	w.chk.mu.Lock()
	defer w.chk.mu.Unlock()
	before := map[string]leases.Member{}
	if ms, err := w.mem.Members(context.Background(), row); err == nil {
		for _, m := range ms {
			before[m.Owner] = m
		}
	}
	got, err := do()
	if err != nil {
		return got, err
	}
	after := map[string]leases.Member{}
	for _, m := range got {
		after[m.Owner] = m
	}
	changed := false
	var owners []string
	for o := range before {
		owners = append(owners, o)
	}
	for o := range after {
		if _, ok := before[o]; !ok {
			owners = append(owners, o)
		}
	}
	slices.Sort(owners)
	for _, owner := range owners {
		b, a := before[owner], after[owner]
		if a == b {
			continue
		}
		changed = true
		now := time.Now()
		if b.Owner != "" {
			w.lastEntry[ident(b.Owner, b.Incarnation)] = now
		}
		if a.Owner == "" {
			w.chk.tracef("%s %s on row %d: entry of %s removed", pr.ident, op, row, w.name(b.Owner, b.Incarnation))
			continue
		}
		key := ident(a.Owner, a.Incarnation)
		w.lastEntry[key] = now
		if a.Owner == pr.owner && w.byInc[key] == nil {
			w.byInc[key] = pr
			if key != pr.ident {
				w.chk.tracef("%s: its new incarnation %s is in row %d", pr.ident, a.Incarnation, row)
			}
		}
		switch {
		case op == "Heartbeat" && owner == pr.owner && b.Incarnation == a.Incarnation && b.Leaving == a.Leaving && *flagSeed == 0 && a.Heartbeat%8 != 0:
			// an ordinary heartbeat: not traced in bulk runs
		case op == "Heartbeat" && owner == pr.owner:
			w.chk.tracef("%s heartbeat %d landed on row %d (incarnation %s, leaving %v)", pr.ident, a.Heartbeat, row, a.Incarnation, a.Leaving)
		default:
			w.chk.tracef("%s %s on row %d landed: entry of %s now %+v", pr.ident, op, row, w.name(a.Owner, a.Incarnation), a)
		}
	}
	if op == "Heartbeat" {
		pr.count(func(s *mstats) { s.hbLanded++ })
		if !changed {
			pr.count(func(s *mstats) { s.hbUnchanged++ })
			w.chk.tracef("%s heartbeat landed on row %d and changed nothing (the same value again)", pr.ident, row)
		}
	}
	return got, err
}

// modelStore is pr's store: its FaultStore, watched for the answers the
// process gets, from which the simulation computes the process's fence.
type modelStore struct {
	*FaultStore
	pr       *mproc
	joinMu   sync.Mutex
	joinSent map[leases.Member]time.Time
}

func (s *modelStore) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	sent := time.Now() // the Group's send time: nothing between it and this call takes time
	rows, err := s.FaultStore.Heartbeat(ctx, row, m)
	switch {
	case err == nil && m.Leaving:
		s.pr.leavingAnswered() // a fenced incarnation's last word: it moves no fence
	case err == nil:
		s.pr.heartbeatAnswered(sent)
	}
	return rows, err
}

// Join models the Group's join: its fence counts from the send of the
// first attempt to write that same entry (a resent one finds it landed).
func (s *modelStore) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	sent := time.Now()
	s.joinMu.Lock()
	if s.joinSent == nil {
		s.joinSent = map[leases.Member]time.Time{}
	}
	if first, ok := s.joinSent[m]; ok {
		sent = first
	} else {
		s.joinSent[m] = sent
	}
	s.joinMu.Unlock()
	rows, err := s.FaultStore.Join(ctx, row, m)
	if err == nil && m.Owner == s.pr.owner {
		s.pr.entryWritten(m.Incarnation)
		s.pr.heartbeatAnswered(sent)
	}
	if err != nil && m.Owner == s.pr.owner {
		s.pr.w.chk.mu.Lock()
		if s.pr.unansweredJoins == nil {
			s.pr.unansweredJoins = map[leases.Member]bool{}
		}
		s.pr.unansweredJoins[m] = true
		s.pr.w.chk.mu.Unlock()
	}
	return rows, err
}

func (s *modelStore) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	sent := time.Now()
	own := next.Owner != "" && next.Owner == s.pr.owner // its join, or a new incarnation after a fence
	rows, err := s.FaultStore.ReplaceMember(ctx, row, seen, next)
	if err == nil && own {
		s.pr.entryWritten(next.Incarnation)
		s.pr.heartbeatAnswered(sent) // the Group moves its fence
	}
	return rows, err
}

// learned returns l and err, having recorded that the process was told l if
// err is nil.
func (s *modelStore) learned(l leases.Lease, err error) (leases.Lease, error) {
	if err == nil {
		s.pr.learn(l)
	}
	return l, err
}

func (s *modelStore) Get(ctx context.Context, key leases.Key) (leases.Lease, error) {
	return s.learned(s.FaultStore.Get(ctx, key))
}

func (s *modelStore) Create(ctx context.Context, key leases.Key) (leases.Lease, error) {
	return s.learned(s.FaultStore.Create(ctx, key))
}

func (s *modelStore) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return s.learned(s.FaultStore.Checkpoint(ctx, l, cp))
}

func (s *modelStore) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return s.learned(s.FaultStore.Release(ctx, l, cp))
}

func (s *modelStore) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return s.learned(s.FaultStore.Rewind(ctx, l, cp))
}

func (s *modelStore) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	return s.learned(s.FaultStore.ApplyRewind(ctx, l))
}

// takeSent records that pr's take of shard id was sent: its caller waits
// for the answer (takeAnswered or takeFailed).
func (pr *mproc) takeSent(id string) {
	pr.w.chk.mu.Lock()
	defer pr.w.chk.mu.Unlock()
	pr.takesInFlight[id]++
}

// lateLanding traces a write of pr landing late (Decision.Late): its
// caller got no answer, and may be gone.
func (pr *mproc) lateLanding(op string, key leases.Key, sent time.Time) {
	pr.count(func(s *mstats) { s.late++ })
	pr.w.chk.tracef("%s: its %s on %s sent at T+%v lands now, late (its caller got no answer; dead %v)",
		pr.ident, op, key, pr.w.elapsedAt(sent), pr.dead.Load())
}

func (s *modelStore) TakeAs(ctx context.Context, l leases.Lease, owner, inc string) (leases.Lease, error) {
	s.pr.takeSent(l.Key.Shard)
	got, err := s.FaultStore.TakeAs(ctx, l, owner, inc)
	s.learned(got, err)
	if err == nil {
		s.pr.takeAnswered(l.Key.Shard)
	} else {
		s.pr.takeFailed(l.Key.Shard)
	}
	return got, err
}

func (s *modelStore) CreateAs(ctx context.Context, key leases.Key, owner, inc string, cp leases.Checkpoint, rewind string) (leases.Lease, error) {
	s.pr.takeSent(key.Shard)
	got, err := s.FaultStore.CreateAs(ctx, key, owner, inc, cp, rewind)
	s.learned(got, err)
	if err == nil {
		s.pr.takeAnswered(key.Shard)
	} else {
		s.pr.takeFailed(key.Shard)
	}
	return got, err
}

// handle is the process's handler: it reports entry and exit to the
// checker, checks the entering process's fence (f), works a little,
// sometimes fails, and stalls with its process.
func (pr *mproc) handle(ctx context.Context, r *kltype.Record) error {
	if pr.dead.Load() {
		return deadHandler(ctx)
	}
	w := pr.w
	c := w.chk
	h := c.enter(pr.ident, r)
	c.mu.Lock()
	now := time.Now()
	if ok, why := pr.valid(r.ShardID, now, false); !ok {
		w.violate("(f) %s entered its handler on %s (%s/%d) while its lease is not valid: %s",
			pr.ident, r.ShardID, r.SequenceNumber, r.SubSequence, why)
	}
	if w.faultsOver {
		if _, ok := w.readAgain[r.ShardID]; !ok {
			w.readAgain[r.ShardID] = now
		}
	}
	if w.entries != nil {
		w.entries[r.ShardID] = append(w.entries[r.ShardID], entryRec{at: now, ident: pr.ident})
	}
	w.snap()
	c.mu.Unlock()
	pr.stall()
	rng := pr.rng("handler", r.ShardID, r.SequenceNumber, strconv.FormatInt(r.SubSequence, 10))
	return pr.work(ctx, c, h, rng, &w.p.planBase, pr.faulty, pr.cfg.ignoresCancel)
}

// procRow returns the membership row pr heartbeats in: the row its
// incarnations name (-1 if none does yet). The caller holds chk.mu (a
// scenario's check does).
func procRow(pr *mproc) int {
	row := -1
	for key, q := range pr.w.byInc {
		if q != pr {
			continue
		}
		if r, ok := driver.IncarnationRow(key[strings.LastIndexByte(key, '/')+1:]); ok {
			row = r
		}
	}
	return row
}
