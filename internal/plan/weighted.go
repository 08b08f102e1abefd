package plan

// The entry points of the weighted plan: members with a capacity and a cap
// of their own, balanced by count or by load.

import (
	"cmp"
	"maps"
	"math/bits"
	"slices"
	"strings"
)

// A Member is one member of a weighted plan: its id, its capacity and its
// own cap on the leases it holds, as it publishes them in its membership
// entry.
type Member struct {
	ID string
	// Capacity is the member's weight relative to the others, in
	// thousandths: 1000 is a member of weight 1, 2000 one of weight 2. Zero
	// or less means 1000; above MaxCapacity counts as MaxCapacity.
	Capacity int64
	// MaxLeases caps the units this member holds; zero or less is no cap.
	MaxLeases int
	// Cost is, in load mode, what a unit of load costs this member relative
	// to the fleet, in thousandths (its cost per byte over the fleet's):
	// its fair share of the load is in proportion to Capacity·1000/Cost, so
	// that a member of Cost 2000 is given half the load of one of Cost 1000
	// and the same capacity. Zero or less means 1000. The count plan, and
	// count mode, ignore it: a change of a Cost moves a unit only for load,
	// where it crosses a limit.
	Cost int64
}

// MaxCapacity is the largest capacity a Member counts with (2^40
// thousandths), so that sums over a million members fit 64-bit integers.
const MaxCapacity = 1 << 40

// MaxLoad is the largest load of a unit the plan counts with (2^40, a
// terabyte per second), so that the loads of millions of units add up in
// 64 bits. A negative load counts as zero.
const MaxLoad = 1 << 40

// Balance says what a weighted plan balances.
type Balance struct {
	// ByLoad balances the members' loads, each member's share of the total
	// load in proportion to its capacity; false balances counts of units.
	ByLoad bool
	// Tolerance is how far, in percent, a member's load may exceed its fair
	// share before units move off it for load: 0 means DefaultTolerance, a
	// negative value none.
	Tolerance int
}

// DefaultTolerance is the Tolerance of a Balance that gives none, in
// percent. A load-balanced plan moves units off a member only while it is
// more than this far above its fair share, and places the units moved so
// that no member ends above it where its greedy finds room (it does not
// search every placement: a plan within tolerance may exist that it
// misses). Measured on the scenario (8 members, 64
// shards of which 8 ten times hotter, 20 stream names, ±10% on each hot
// shard in turn: 320 perturbations): 20 moves no shard on any of them and
// leaves the busiest member at 1.06× the mean (TestLoadScenario,
// TestLoadPerturbation); 10 moves 90 shards over the 320; 50 moves 168
// and leaves the busiest at 1.47×.
const DefaultTolerance = 20

// AssignWeighted is Planner.AssignWeighted computed once.
func AssignWeighted(members []Member, units []Unit, load map[Unit]int64, defaultLoad int64, b Balance) map[Unit]string {
	var p Planner
	return p.AssignWeighted(members, units, load, defaultLoad, b)
}

// AssignWeighted returns the owner of every unit, as Assign does, for
// members that each publish a capacity and a cap, balancing by count or by
// load. Like Assign it is deterministic (a function of the sets of members
// and units, the loads and b, whatever their order; a duplicated member id
// counts once, the one of the highest capacity, then cap), integer
// arithmetic only, and the map it returns belongs to the Planner as
// Planner.Assign's does (a call that changes nothing returns the same map
// again; a returned map holds its plan until two other plans of any of the
// Planner's methods were returned).
//
// Count mode (b.ByLoad false): every member holds a number of units in
// proportion to its capacity (weights 1/1/2 on 40 units: 10/10/20),
// rounded by largest remainders (ties to the member of the higher
// capacity, then the lower hash of its id), and never more than its own
// MaxLeases: what a capped member cannot hold is shared among the others
// in proportion to their capacities, and units are left without an owner
// only when every member holds its cap (which units, as Assign chooses
// them). Of a stream of s units, a member whose total is q of the P placed
// holds ⌊s·q/P⌋ or ⌈s·q/P⌉ up to 25,000 pairs (members × units), and all
// but about 2 pairs in a thousand above, where the totals stay exact. Sticky as Assign: the
// highest total rendezvous score up to 25,000 pairs, the greedy of the
// ring above. When every member has the same capacity and the same
// MaxLeases the plan is exactly Assign's with that cap.
//
// Load mode (b.ByLoad true): load gives the load of some units (the hot
// ones their holders publish), defaultLoad that of every other; only the
// units of the count plan are placed (caps apply as there). The total load
// is shared among the members in proportion to their capacities, each
// divided by its Cost (member m's fair share F(m)) and the plan starts from the count plan: a unit
// moves off its count-plan owner only where that owner would hold more
// than F(m)·(1+Tolerance) (its limit) or more than its MaxLeases. First
// the hot units (explicit loads above the mean unit load and the default),
// hottest first by load class (loads within 4/3 or 3/2 of each other are
// one class, so that a small change of a load reorders nothing), then by
// their owner's rendezvous score: each stays on its count-plan owner if it
// fits under the owner's limit; else it goes to a member under whose limit
// it fits (the first along its probes of the ring, else the member with
// the most room below its fair share if it fits there); else it stays if
// its owner can get under its limit by shedding its other units; else it
// goes to the member on which it ends the least above its fair share once
// that member sheds its other units (the lowest load of the hot units on
// it over its fair share; ties: fewer units, then the higher rendezvous
// score). Then every member above its limit or its cap
// gives up its other units, those of its lowest rendezvous scores first,
// until it is under; each goes, heaviest first, to the first member along
// its probes that has room for it below its fair share and below its cap,
// or failing that to the member with the most room. A member whose cap
// holds fewer units than its share of the load would at the mean unit
// load has that many units' load as its fair share, the others sharing
// the rest. So where the count plan is within tolerance nothing moves, a
// small change of a load moves nothing unless it crosses a limit, and
// what moves is about what the overloaded members shed
// (TestLoadPerturbation, TestLoadShift). See load.go for the costs.
func (p *Planner) AssignWeighted(members []Member, units []Unit, load map[Unit]int64, defaultLoad int64, b Balance) map[Unit]string {
	w := &p.w
	if w.called && w.in.ByLoad == b.ByLoad && w.in.Tolerance == b.Tolerance && w.inDefault == defaultLoad &&
		slices.Equal(members, w.inMembers) && slices.Equal(units, p.inUnits) && (!b.ByLoad || maps.Equal(load, w.inLoad)) {
		return w.last
	}
	ms := normalize(members)
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	var count map[Unit]string
	if uniform(ms) {
		mx := 0
		if len(ms) > 0 {
			mx = ms[0].MaxLeases
		}
		count = p.Assign(ids, units, mx)
	} else {
		count = p.assignQuota(ms, ids, units)
	}
	out := count
	if b.ByLoad && len(ms) > 0 {
		tol := b.Tolerance
		if tol == 0 {
			tol = DefaultTolerance
		}
		out = p.balanceLoad(costed(ms), load, defaultLoad, min(max(tol, 0), 1<<30))
	}
	w.called, w.in, w.inDefault, w.last = true, b, defaultLoad, out
	w.inMembers = append(w.inMembers[:0], members...)
	if b.ByLoad {
		w.inLoad = maps.Clone(load)
	} else {
		w.inLoad = nil
	}
	p.inUnits = append(p.inUnits[:0], units...)
	return out
}

// CountPlan returns the count plan the last call of AssignWeighted started
// from (its own plan in count mode), which belongs to the Planner and holds
// until its next call. A Mover takes it to tell a unit moved for load (the
// count plan gives it to the member that holds it) from one moved because
// the members changed.
func (p *Planner) CountPlan() map[Unit]string { return p.cur }

// CountGen returns the generation of the count plan CountPlan returns: it
// changes when the Planner computes that plan anew (the members, their
// capacities or caps, or the units changed), and not otherwise.
func (p *Planner) CountGen() int { return p.gen }

// normalize returns the members with an id, sorted by id, one per id (the
// highest capacity, then the highest cap), capacities and caps normalised.
func normalize(members []Member) []Member {
	ms := make([]Member, 0, len(members))
	for _, m := range members {
		if m.ID == "" {
			continue
		}
		if m.Capacity <= 0 {
			m.Capacity = 1000
		}
		if m.Cost <= 0 {
			m.Cost = 1000
		}
		m.Capacity = min(m.Capacity, MaxCapacity)
		m.MaxLeases = max(m.MaxLeases, 0)
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b Member) int {
		return cmp.Or(strings.Compare(a.ID, b.ID), cmp.Compare(b.Capacity, a.Capacity), capCompare(b.MaxLeases, a.MaxLeases))
	})
	return slices.CompactFunc(ms, func(a, b Member) bool { return a.ID == b.ID })
}

// costed returns ms (normalized) with each member's capacity divided by
// its Cost (CostedCapacity): the capacities the load plan's fair shares are
// in proportion to. ms itself when every Cost is 1000.
func costed(ms []Member) []Member {
	var out []Member
	for i, m := range ms {
		if m.Cost == 1000 {
			continue
		}
		if out == nil {
			out = slices.Clone(ms)
		}
		out[i].Capacity = CostedCapacity(m.Capacity, m.Cost)
	}
	if out == nil {
		return ms
	}
	return out
}

// CostedCapacity is a member's capacity divided by its Cost, both in
// thousandths (zero or less: 1000; a capacity above MaxCapacity counts as
// MaxCapacity), at least 1 and at most MaxCapacity: what its fair share of
// the load plan is in proportion to, among the members' costed
// capacities. Its capacity itself for a Cost of 1000.
func CostedCapacity(capacity, cost int64) int64 {
	if capacity <= 0 {
		capacity = 1000
	}
	if cost <= 0 {
		cost = 1000
	}
	hi, lo := bits.Mul64(uint64(min(capacity, MaxCapacity)), 1000)
	c, _ := bits.Div64(hi, lo, uint64(cost)) // capacity ≤ 2^40, cost ≥ 1: no overflow
	return min(max(int64(c), 1), MaxCapacity)
}

// capCompare orders caps with no cap (0) above every other.
func capCompare(a, b int) int {
	switch {
	case a == b:
		return 0
	case a == 0:
		return 1
	case b == 0:
		return -1
	}
	return cmp.Compare(a, b)
}

// uniform reports whether every member has the same capacity and cap.
func uniform(ms []Member) bool {
	for _, m := range ms {
		if m.Capacity != ms[0].Capacity || m.MaxLeases != ms[0].MaxLeases {
			return false
		}
	}
	return true
}

// weightedState is what AssignWeighted keeps across calls.
type weightedState struct {
	called    bool
	in        Balance
	inMembers []Member
	inLoad    map[Unit]int64
	inDefault int64
	last      map[Unit]string

	lb loadBalancer // load.go
}
