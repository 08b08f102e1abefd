package plan

// The entry points of the plan: Assign, which computes it once, and
// Planner.Assign, which computes it round after round.

import "slices"

// Assign is the planner of the membership protocol: it returns the owner of
// every unit, the member that should hold its lease, over all the shards of
// all the streams of a service at once. Every member computes it from its
// own view; members with the same view compute the same plan.
//
// With n members and T units it guarantees:
//
//   - Deterministic: a function of the set of members and the set of units
//     only. Their order and duplicates make no difference; the empty member
//     id is ignored (an empty owner means a free lease). No randomness,
//     clock or store, no map iteration order, integer arithmetic only, so
//     that members on different architectures compute the same plan. With
//     no members the result is nil.
//   - Balanced in total: every member holds ⌊T/n⌋ or ⌈T/n⌉ units.
//   - Balanced per stream: of a stream of s units every member holds ⌊s/n⌋
//     or ⌈s/n⌉ (10 one-shard streams on 3 members: 4/3/3; two on 2: one
//     each).
//   - Sticky: up to 25,000 pairs (n × the units placed), of all the
//     assignments balanced so, it is one of the highest total rendezvous
//     score (the score of a unit on a member is a hash of the pair, the same
//     whoever else is a member), so a unit leaves its top-ranked member only
//     where balance demands it, and for the least loss. A member joining
//     takes its share and a member leaving gives its units up; the other
//     units stay, but for a few moved to rebalance, about the square root of
//     a stream's size (64 shards on 4 members: a fifth takes 13 and 4 more
//     move; see TestAssignSticky). Plain rendezvous hashing is sticky but
//     does not balance (64 shards on 4 members: a median spread of 8 between
//     the most and the least loaded); greedy capacity-bounded rendezvous
//     (each unit in turn to its best member with room left) balances, but
//     what ends where depends on the order of the units, and it moves more
//     on a change.
//     Above 25,000 pairs that exact solution costs too much (5 to 180 ms at
//     200,000 pairs, far more at 20,000,000), and the plan is that of a
//     greedy on a ring of the members' points instead (see large.go), which
//     keeps every other guarantee exactly but is sticky only in practice,
//     with no bound on the score: a member joining takes its share and one
//     leaving gives its units up, and some 3 to 6 times the share more move
//     to rebalance (20,000 shards on 1,000 members, in one stream or 200: a
//     newcomer takes its 20 and about 65 others move; a leaver gives up its
//     20 and about 105 of the others' move; see TestPlannerSticky), about
//     as many as the exact solution moves where both run (4,000 shards on
//     200 members: 45 others on a join and 64 on a leave, against 74 and
//     71). Crossing 25,000 pairs, as members join or shards split, moves
//     most units, once.
//   - Capped: maxLeases > 0 caps what one member holds. When the cap binds
//     (maxLeases < ⌈T/n⌉) only n × maxLeases units are placed, every member
//     holding exactly maxLeases, and the others are absent from the result:
//     nobody is to hold them until more members join. The units placed are
//     shared out among the streams in proportion to their sizes (largest
//     remainders; ties to the stream with fewer placed, then to the one
//     whose name sorts first), and within a stream they are the first in
//     shard id order, so that the same ones stay out as members come and go.
//     maxLeases ≤ 0 is no cap.
//
// Assign is a Planner used once: a caller that plans round after round
// keeps a Planner, which returns the last plan again when nothing changed
// and otherwise recomputes only what it must.
func Assign(members []string, units []Unit, maxLeases int) map[Unit]string {
	var p Planner
	return p.Assign(members, units, maxLeases)
}

// Assign returns the plan for members and units: see the package function
// Assign for what it guarantees, and Planner for what it reuses.
func (p *Planner) Assign(members []string, units []Unit, maxLeases int) map[Unit]string {
	maxLeases = max(maxLeases, 0)
	p.w.called = false // AssignWeighted's last plan may be patched below
	if p.called && !p.weighted && maxLeases == p.inMax && slices.Equal(members, p.inMembers) && slices.Equal(units, p.inUnits) {
		return p.cur
	}
	membersChanged := p.setMembers(members)
	unitsChanged := p.setUnits(units)
	p.inMembers = append(p.inMembers[:0], members...)
	p.inUnits = append(p.inUnits[:0], units...)
	if p.called && !p.weighted && !membersChanged && !unitsChanged && maxLeases == p.inMax {
		return p.cur
	}
	p.called, p.weighted = true, false
	p.inMax = maxLeases
	p.replan(maxLeases)
	return p.cur
}
