package balance

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/leases"
)

// A Balancer makes one member's plan from the membership entries it reads
// (Plan), and holds its load-driven handoffs and takes back (Hold). It is
// not safe for concurrent use, but for Publish: the engine's round
// goroutine owns it. Build it with New.
type Balancer struct {
	planner   plan.Planner // cached: recomputes only when members or units change
	self      string
	capacity  int64 // thousandths; this member's
	maxLeases int   // this member's own cap; 0: none
	mode      Mode
	mover     plan.Mover
	util      *utilization                // nil: none published
	ids       map[plan.Unit]string        // UnitID of the units seen (a cache)
	count     map[plan.Unit]string        // the count plan of the last Plan
	countGen  int                         // its plan.Planner.CountGen
	recount   bool                        // the count plan changed since the last Hold
	countAt   time.Duration               // the first Hold after it last changed (wait)
	legacy    bool                        // the last Plan was made as before (a member publishes no capacity)
	live      map[string]leases.Member    // the entries of the last Plan, by owner
	taken     map[plan.Unit]time.Duration // the held units, with the round they were first seen held (Hold)
	waits     map[plan.Unit]waiting       // the units planned here whose holder keeps them (Hold)
	planned   map[plan.Unit]time.Duration // the units planned here, not held: since when (Hold)
	// fleetMean is the mean load per unit of the members last planned
	// over (Inputs), for Publish on the heartbeat's goroutine.
	fleetMean atomic.Int64
	fleet     atomic.Pointer[[]leases.Member] // the entries of the last Plan, for Fleet on any goroutine
	hand      handover                        // the hot units let go of, and those handed over for load (Publish)
	lent      map[plan.Unit]string            // the units handed over for load, to whom (Hold)
}

// Config is what a Balancer is made of.
type Config struct {
	Self      string // this member's owner id
	Capacity  int64  // its capacity in thousandths (0: 1000)
	MaxLeases int    // its own cap (0: none)
	Mode      Mode   // by count or by load, and the utilization published
	// Mover holds load-driven handoffs back (its zero value: the
	// defaults of plan.Mover).
	Mover plan.Mover
}

// New returns a Balancer.
func New(cfg Config) *Balancer {
	cfg.Capacity = Weight(cfg.Capacity)
	b := &Balancer{self: cfg.Self, capacity: cfg.Capacity, maxLeases: max(cfg.MaxLeases, 0), mode: cfg.Mode, mover: cfg.Mover, ids: map[plan.Unit]string{}}
	if cfg.Mode.ByLoad && cfg.Mode.Utilization != nil {
		b.util = &utilization{f: cfg.Mode.Utilization}
	}
	return b
}

// Plan returns the owner of every unit over the live members whose
// entries are given (this member's among them, or added), in a map of the
// Balancer's planner (the caller does not change it): each member weighted by
// the capacity it publishes and capped by its own MaxLeases, and, by load,
// each unit weighted by the load its holder publishes (a hot one) or the
// mean of the rest (Inputs). A fleet where a member publishes no capacity
// (a version before capacities) is planned as before, by count with every
// member of weight 1 and this member's own cap for all, so that every
// member computes the same plan during an upgrade.
func (b *Balancer) Plan(entries []leases.Member, units []plan.Unit) map[plan.Unit]string {
	p := &b.planner
	b.fleet.Store(&entries)
	b.hand.setFleet(entries)
	b.live = make(map[string]leases.Member, len(entries))
	for _, e := range entries {
		b.live[e.Owner] = e
	}
	members, load, def, legacy := b.Inputs(entries, units)
	b.legacy = legacy
	if legacy {
		ids := make([]string, len(members))
		for i, m := range members {
			ids[i] = m.ID
		}
		a := p.Assign(ids, units, b.maxLeases)
		b.count = a
		return a
	}
	a := p.AssignWeighted(members, units, load, def, b.mode.Balance)
	b.count = p.CountPlan()
	if g := p.CountGen(); g != b.countGen {
		b.countGen, b.recount = g, true
	}
	return a
}

// Fleet returns the entries of the live members the last Plan was made
// over (this member's among them), nil before the first: for Health, from
// any goroutine. The caller must not change them.
func (b *Balancer) Fleet() []leases.Member {
	if f := b.fleet.Load(); f != nil {
		return *f
	}
	return nil
}

// Inputs returns the planner's inputs from the entries of the live
// members and the units to place: the members with their capacities and
// caps (this member's from its configuration), the loads of the hot units
// the members publish (a unit published by two, as during a handoff, at the
// higher), and the load of every other unit: the members' total loads less
// the hot ones', shared by the units not hot; by load, where members
// publish their utilization, each member's Cost (CostFactors). legacy: a
// member publishes no capacity.
func (b *Balancer) Inputs(entries []leases.Member, units []plan.Unit) (members []plan.Member, load map[plan.Unit]int64, def int64, legacy bool) {
	self := false
	var total, hot, held int64
	var hots map[string]int64
	for _, e := range entries {
		held += max(e.Held, 0)
		m := plan.Member{ID: e.Owner, Capacity: e.Capacity, MaxLeases: int(min(e.MaxLeases, 1<<31))}
		if e.Owner == b.self {
			self = true
			m.Capacity, m.MaxLeases = b.capacity, b.maxLeases
		} else if e.Capacity <= 0 {
			legacy = true
		}
		members = append(members, m)
		total += min(max(e.Load, 0), plan.MaxLoad)
		for _, h := range DecodeHot(e.Hot) {
			hot += h.Load
			if hots == nil {
				hots = map[string]int64{}
			}
			hots[h.ID] = max(hots[h.ID], h.Load)
		}
	}
	if n := max(held, int64(len(units))); n > 0 {
		// Over every unit, not only those held: the load of a unit in a
		// handoff stays in its releaser's total (Handover) while nobody
		// counts it held, and over the units held the mean of a small
		// fleet rose past half of its hot unit's load, which its holder
		// then stopped naming, and the plan fell back to the count plan
		// for the seconds of every handoff (seed 93600627 of the random
		// simulation: a member handed a cold shard over and took it back
		// 3 s later, every minimum hold).
		b.fleetMean.Store(total / n)
	}
	b.hand.setOthers(func() map[string]bool {
		ids := map[string]bool{}
		for _, e := range entries {
			for _, h := range DecodeHot(e.Hot) {
				if e.Owner != b.self {
					ids[h.ID] = true
				}
			}
		}
		return ids
	})
	if !self {
		members = append(members, plan.Member{ID: b.self, Capacity: b.capacity, MaxLeases: b.maxLeases})
	}
	if !b.mode.ByLoad || legacy {
		return members, nil, 0, legacy
	}
	costs(members, entries)
	if len(hots) > 0 {
		load = map[plan.Unit]int64{}
		for _, u := range units {
			id, ok := b.ids[u]
			if !ok {
				id = UnitID(u)
				b.ids[u] = id
			}
			if l, ok := hots[id]; ok {
				load[u] = l
			}
		}
		if len(b.ids) > 2*len(units)+64 {
			b.ids = map[plan.Unit]string{} // units gone: forget them
		}
	}
	if cold := len(units) - len(load); cold > 0 {
		def = max(total-hot, 0) / int64(cold)
	}
	return members, load, def, false
}

// costs sets the Cost of members (the first len(entries) of which are
// those of entries, in their order) from the utilizations and loads the
// entries publish, when any publishes a utilization (CostFactors).
func costs(members []plan.Member, entries []leases.Member) {
	us := make([]Usage, len(entries))
	some := false
	for i, e := range entries {
		us[i] = Usage{Capacity: members[i].Capacity, Load: e.Load, Utilization: e.Utilization}
		some = some || e.Utilization > 0
	}
	if !some {
		return
	}
	for i, c := range CostFactors(us) {
		members[i].Cost = c
	}
}

// SameStreams splits the live members' entries into those a member whose
// streams digest is digest plans its streams over (itself, self, and
// those whose entry shows the same digest, or none) and the owners of the
// others (members that subscribe other streams plan theirs over their own
// kind: a shard is never planned to a member that does not read its
// stream).
func SameStreams(live []leases.Member, self, digest string) (same []leases.Member, other []string) {
	for _, e := range live {
		if e.Owner == self || e.Streams == "" || e.Streams == digest {
			same = append(same, e)
		} else {
			other = append(other, e.Owner)
		}
	}
	return same, other
}

// Owners returns the owners of entries, in their order.
func Owners(entries []leases.Member) []string {
	owners := make([]string, len(entries))
	for i, e := range entries {
		owners[i] = e.Owner
	}
	return owners
}

// Publish returns what this member publishes in its entry: its capacity
// and cap, and the total and hot loads of the units it holds, measured by
// meters now, with the hot units it let go of lately and the load of
// those it handed over for load (Summarize, Handover). It may be called
// from any goroutine.
func (b *Balancer) Publish(meters map[plan.Unit]*Meter) (capacity, maxLeases, load int64, hot string) {
	loads := make(map[plan.Unit]int64, len(meters))
	now := time.Now()
	for u, m := range meters {
		loads[u] = m.Rate(now).BytesPerSecond
	}
	b.hand.mu.Lock()
	defer b.hand.mu.Unlock()
	gone, lent := b.hand.goneAt(now, loads)
	load, hot, b.hand.named = Summarize(loads, b.fleetMean.Load(), gone, lent)
	return b.capacity, int64(b.maxLeases), load, hot
}

// Published returns e, a member's entry, with what b publishes in it
// (Balancer.Publish, and its utilization where it has one) of the meters of the leases of workers, the units it
// holds, read under mu.
func Published[W any, H interface{ Meter() *Meter }](b *Balancer, e leases.Member, mu sync.Locker, workers map[plan.Unit]W, lease func(W) H) leases.Member {
	mu.Lock()
	ms := make(map[plan.Unit]*Meter, len(workers))
	for u, w := range workers {
		ms[u] = lease(w).Meter()
	}
	mu.Unlock()
	e.Capacity, e.MaxLeases, e.Load, e.Hot = b.Publish(ms)
	e.Utilization = b.util.publish(time.Now())
	return e
}
