package sim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"
)

// plan is everything a seed decides up front: the shape of the run, the
// fault rates and the schedule of process-level events. Per-call faults are
// drawn during the run from the same seed (see proc.rng).
type plan struct {
	planBase
	lease time.Duration

	procs []procPlan // one per slot; a slot's generations share it

	events []event
}

type procPlan struct {
	slotPlan
	renew, scan, margin time.Duration
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
	p := &plan{planBase: planBase{seed: seed}}
	p.drawShape(r)
	p.lease = []time.Duration{5 * time.Second, 10 * time.Second, 10 * time.Second, 20 * time.Second}[r.IntN(4)]
	n := 2 + r.IntN(3)
	for i := range n {
		margin := p.lease/8 + time.Duration(r.Int64N(int64(p.lease/8)))
		pp := procPlan{slotPlan: drawSlot(r, i, 20*time.Second), margin: margin}
		fence := p.lease - pp.margin
		pp.renew = fence/4 + time.Duration(r.Int64N(int64(fence/2)))
		pp.scan = p.lease/10 + time.Duration(r.Int64N(int64(p.lease*7/5)))
		p.procs = append(p.procs, pp)
	}
	p.drawPace(r)
	for i := range p.procs {
		p.procs[i].limit = p.keepUp(p.procs[i].limit)
	}

	rate := rater(r)
	p.drawStoreRates(rate)
	p.storeMaxDelay = time.Duration(1+r.IntN(int(p.lease/time.Second)/3+1)) * time.Second
	p.drawCallRates(rate)
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
				var up bool
				if t, up = p.restartAt(r, t, e.at, p.lease, slot, len(p.procs)); !up {
					break
				}
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
	r, ok := p.stressed(seed, 0xfe8e9)
	if !ok {
		return
	}
	for i := range p.procs {
		p.procs[i].scan = p.lease/20 + time.Duration(r.Int64N(int64(p.lease/5)))
		p.procs[i].stressSlot()
	}
	p.stressPace(r)
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
	writeTail(&b, &p.planBase, p.events)
	return b.String()
}
