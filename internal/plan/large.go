package plan

// The plan above exactPairs: a greedy on a ring, the same for every member
// with the same sets, balanced exactly, sticky in practice.
//
// Every member has ringPoints points on a ring of 2^64 positions, hashes of
// its id. Every unit has a sequence of probes, hashes of the unit: probe j
// lands on the ring, and names the member of the first point at or after
// it, so that every probe names a member at random (in proportion to the
// arcs its points end), and a change of members changes only the probes
// that land on the arcs of the members that came or went.
//
// A stream of s units gives every member ⌊s/n⌋ of them (its floor) and
// s mod n members one more (an extra); of the R extras of all the streams
// every member gets ⌊R/n⌋ and R mod n members one more (a pool), so that
// the totals balance. Which members get the extras is not fixed in
// advance: they go to those the units come to first.
//
// In round j (up to probeRounds), every unit not yet placed, in the order
// of its hash, offers itself to the member its probe j names, which takes
// it if it holds fewer than the floor of the unit's stream, or holds the
// floor and the stream has an extra left and the member may take one more
// extra (fewer than ⌊R/n⌋, or ⌊R/n⌋ with the pool not used up). Most units
// are placed in the first rounds (1.9 offers a unit at 1,000 members ×
// 20,000 shards, about 20 units left after the rounds); those left go each,
// in the same order, to the member of the highest rendezvous score (a hash
// of the pair) among those with room for it. Both keep the invariant that
// the units of a stream left are as many as the floors its members lack
// plus its extras left, so that every floor is met in the end; but a unit
// may find that every member with room in its stream has no room for one
// more extra (at 1,000 members × 200 streams of 100, about one plan in
// two), and then repair moves units along a chain that makes room (a path
// of the flow network unit → (stream, member) → member's extras → pool;
// there always is one).
//
// Sticky: a member joining is named by the probes on its arcs, about its
// share of every round, and takes those units; one leaving gives its units
// to the probes' next members. What moves besides is the ripple of those
// changes through the rounds that follow: a member that gained or lost an
// offer takes one offer less or more later on, and which members the
// extras go to shifts (with 1,000 members, 3 to 6 times a member's share
// in all; Assign's doc has the numbers). Fixing which members get the
// extras in advance, or a ring-walk to the next member with room
// (consistent hashing with bounded loads), moves far more: with no room to
// spare (20,000 shards on 1,000 members), what a change displaces must
// travel along the ring to the one member with room: 600 to 1,400 units
// where 20 must move.
//
// The cost is a pass over the units per round, a ring look-up per offer
// (a bucket index over the points), and a table of the (stream, member)
// loads; the hashes of the units, their order and the ring are kept by the
// Planner across calls.

const (
	// probeRounds is the rounds of offers before the units left go to the
	// member of the highest score with room: each costs a look-up per unit
	// left, cheaper than the tail's scan of the members with room, and
	// what ends where is about as sticky either way.
	probeRounds = 128

	probeStep = 0xd6e8feb86659fd93
)

// keptUnits appends the hash and the stream index of every unit placed
// (kept), in processing order, to hu and su: the greedies' inputs.
func (p *Planner) keptUnits(hu []uint64, su []int32) ([]uint64, []int32) {
	for _, r := range p.byHash {
		if r.kept {
			hu, su = append(hu, r.hash), append(su, r.st.idx)
		}
	}
	return hu, su
}

// run computes the owner of every unit of p.byHash that is kept, in that
// order, as an index into p.members.
func (g *greedy) run(p *Planner) []int32 {
	n := len(p.members)
	g.n, g.r = int32(n), &p.ring
	g.hu, g.su = p.keptUnits(g.hu[:0], g.su[:0])
	units := len(g.hu)
	S := len(p.streams)
	g.floor, g.tok = resize(g.floor, S), resize(g.tok, S)
	R := 0
	for _, st := range p.streams {
		g.floor[st.idx], g.tok[st.idx] = int32(st.keep/n), int32(st.keep%n)
		R += st.keep % n
	}
	g.eLo, g.pool = int32(R/n), int32(R%n)
	g.gtok = g.pool
	g.extras = resize(g.extras, n)
	clear(g.extras)
	g.own = resize(g.own, units)
	g.loads.reset(S, n, units)
	g.holdOK, g.spareBuilt = false, false

	pending := g.pending[:0]
	for k := range units {
		g.own[k] = -1
		pending = append(pending, int32(k))
	}
	for round := uint64(1); round <= probeRounds && len(pending) > 0; round++ {
		next := pending[:0]
		step := round * probeStep
		for _, k := range pending {
			if !g.offer(k, g.r.lookup(mix(g.hu[k]+step))) {
				next = append(next, k)
			}
		}
		pending = next
	}
	g.pending = pending
	g.tailUnits += len(pending)
	if len(pending) > 0 {
		g.tail(pending)
	}
	return g.own
}
