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

import (
	"cmp"
	"math/bits"
	"slices"
)

const (
	// ringPoints is the points of a member on the ring: more even out the
	// arcs (a member's share varies by about 1/√ringPoints), so fewer
	// offers are refused and fewer units move on a change, at the cost of
	// a larger ring (32,000 points for 1,000 members).
	ringPoints = 32
	// probeRounds is the rounds of offers before the units left go to the
	// member of the highest score with room: each costs a look-up per unit
	// left, cheaper than the tail's scan of the members with room, and
	// what ends where is about as sticky either way.
	probeRounds = 128

	pointStep = 0x9e3779b97f4a7c15
	probeStep = 0xd6e8feb86659fd93
	memberTag = 0x2545f4914f6cdd1d
)

// mix is the splitmix64 finaliser.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// unitHash hashes stream, NUL, shard.
func unitHash(u Unit) uint64 {
	return mix(fnvString(fnvSep(fnvString(fnvOffset, u.Stream)), u.Shard))
}

func memberHash(id string) uint64 { return mix(fnvString(fnvOffset, id) ^ memberTag) }

// A ring holds the points of the members, sorted, with a bucket index: the
// points at or after position p start at first[p>>shift].
type ring struct {
	pts   []point
	spare []point  // the buffer of the next update
	hm    []uint64 // memberHash of each member
	first []int32
	shift uint
}

// A point is at pos, of the member of index m among the sorted members.
type point struct {
	pos uint64
	m   int32
}

func comparePoints(a, b point) int {
	return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.m, b.m))
}

// update changes the ring of the members old (sorted, distinct) into that
// of ms: it drops the points of the members gone, renumbers the others,
// and merges in those of the members new.
func (r *ring) update(old, ms []string) {
	renum := make([]int32, len(old)) // old index → new index, -1: gone
	hm := make([]uint64, len(ms))
	var fresh []point
	i := 0
	for j, id := range ms {
		for i < len(old) && old[i] < id {
			renum[i] = -1
			i++
		}
		if i < len(old) && old[i] == id {
			renum[i] = int32(j)
			hm[j] = r.hm[i]
			i++
			continue
		}
		hm[j] = memberHash(id)
		for k := range ringPoints {
			fresh = append(fresh, point{mix(hm[j] + uint64(k+1)*pointStep), int32(j)})
		}
	}
	for ; i < len(old); i++ {
		renum[i] = -1
	}
	slices.SortFunc(fresh, comparePoints)
	pts := resize(r.spare, len(ms)*ringPoints)
	w := 0
	f := fresh
	for _, p := range r.pts {
		m := renum[p.m]
		if m < 0 {
			continue
		}
		p.m = m
		for len(f) > 0 && comparePoints(f[0], p) < 0 {
			pts[w] = f[0]
			w++
			f = f[1:]
		}
		pts[w] = p
		w++
	}
	w += copy(pts[w:], f)
	r.spare, r.pts, r.hm = r.pts, pts[:w], hm

	b := 0
	if w > 1 {
		b = bits.Len(uint(w - 1))
	}
	r.shift = uint(64 - b)
	r.first = resize(r.first, 1<<b)
	k := 0
	for bucket := range r.first {
		start := uint64(bucket) << r.shift
		if b == 0 {
			start = 0
		}
		for k < w && pts[k].pos < start {
			k++
		}
		r.first[bucket] = int32(k)
	}
}

// lookup returns the member of the first point at or after p (the first
// point if none).
func (r *ring) lookup(p uint64) int32 {
	pts := r.pts
	i := int(r.first[p>>r.shift])
	for i < len(pts) && pts[i].pos < p {
		i++
	}
	if i == len(pts) {
		i = 0
	}
	return pts[i].m
}

// loadTable holds how many units of stream s member m holds: a dense table
// when streams × members is small, a hash table otherwise.
type loadTable struct {
	n     int32
	flat  bool
	dense []int32
	keys  []uint64 // s<<32 | m, plus one; 0 is empty
	vals  []int32
	shift uint
}

func (t *loadTable) reset(streams, n, units int) {
	t.n = int32(n)
	t.flat = int64(streams)*int64(n) <= 16*int64(units)+4096
	if t.flat {
		t.dense = resize(t.dense, streams*n)
		clear(t.dense)
		return
	}
	b := bits.Len(uint(2*units + 16)) // at most half full
	t.shift = uint(64 - b)
	t.keys = resize(t.keys, 1<<b)
	t.vals = resize(t.vals, 1<<b)
	clear(t.keys)
}

func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

func (t *loadTable) slot(key uint64) int {
	mask := len(t.keys) - 1
	i := int(((key) * 0x9e3779b97f4a7c15) >> t.shift)
	for t.keys[i] != key && t.keys[i] != 0 {
		i = (i + 1) & mask
	}
	return i
}

func (t *loadTable) get(s, m int32) int32 {
	if t.flat {
		return t.dense[s*t.n+m]
	}
	key := uint64(s)<<32 | uint64(m) + 1
	if i := t.slot(key); t.keys[i] == key {
		return t.vals[i]
	}
	return 0
}

func (t *loadTable) add(s, m, d int32) {
	if t.flat {
		t.dense[s*t.n+m] += d
		return
	}
	key := uint64(s)<<32 | uint64(m) + 1
	i := t.slot(key)
	if t.keys[i] == 0 {
		t.keys[i], t.vals[i] = key, 0
	}
	t.vals[i] += d
}

// greedy is the state of one run, kept across runs for its buffers.
type greedy struct {
	n      int32
	r      *ring
	hu     []uint64 // the units placed, in processing order: hash
	su     []int32  // and stream
	own    []int32  // and member (-1 for none yet)
	floor  []int32  // of each stream: ⌊s/n⌋
	tok    []int32  // and its extras left
	extras []int32  // of each member: the streams of which it holds an extra
	eLo    int32    // ⌊R/n⌋
	pool   int32    // R mod n
	gtok   int32    // the pool left
	loads  loadTable

	pending []int32
	// The tail: the members with room below the floor of a stream (built
	// when first needed), and those that may take one more extra.
	below      [][]int32
	belowBuilt []bool
	spare      []int32
	spareBuilt bool
	// repair: the units each member holds, built on the first repair.
	hold      [][]int32
	holdOK    bool
	repairs   int // runs of repair (tests)
	tailUnits int // units left after the rounds (tests)
	impasses  int // repairs that found no chain: cannot happen (tests)
}

// run computes the owner of every unit of p.byHash that is kept, in that
// order, as an index into p.members.
func (g *greedy) run(p *Planner) []int32 {
	n := len(p.members)
	g.n, g.r = int32(n), &p.ring
	g.hu, g.su = g.hu[:0], g.su[:0]
	for _, r := range p.byHash {
		if r.kept {
			g.hu = append(g.hu, r.hash)
			g.su = append(g.su, r.st.idx)
		}
	}
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

// spareRoom reports whether member m may take one more extra.
func (g *greedy) spareRoom(m int32) bool {
	return g.extras[m] < g.eLo || g.extras[m] == g.eLo && g.gtok > 0
}

// offer places unit k on member m if m has room for it.
func (g *greedy) offer(k, m int32) bool {
	s := g.su[k]
	l := g.loads.get(s, m)
	if l < g.floor[s] {
		g.loads.add(s, m, 1)
		g.own[k] = m
		return true
	}
	if l == g.floor[s] && g.tok[s] > 0 && g.spareRoom(m) {
		g.put(k, m)
		return true
	}
	return false
}

// put places unit k on member m, counting the extra it may make.
func (g *greedy) put(k, m int32) {
	s := g.su[k]
	if g.loads.get(s, m) == g.floor[s] {
		g.tok[s]--
		if g.extras[m] == g.eLo {
			g.gtok--
		}
		g.extras[m]++
	}
	g.loads.add(s, m, 1)
	g.own[k] = m
}

// take removes unit k from its member.
func (g *greedy) take(k int32) {
	s, m := g.su[k], g.own[k]
	if g.loads.get(s, m) == g.floor[s]+1 {
		g.tok[s]++
		g.extras[m]--
		if g.extras[m] == g.eLo {
			g.gtok++
		}
	}
	g.loads.add(s, m, -1)
	g.own[k] = -1
}

// tail places the units left after the rounds, in order, each on the
// member of the highest score among those with room for it, or by repair.
func (g *greedy) tail(pending []int32) {
	n := g.n
	S := len(g.floor)
	g.below = resize(g.below, S)
	g.belowBuilt = resize(g.belowBuilt, S)
	clear(g.belowBuilt)
	for _, k := range pending {
		s := g.su[k]
		f := g.floor[s]
		best, top := int32(-1), uint64(0)
		consider := func(m int32) {
			if sc := mix(g.hu[k] ^ g.r.hm[m]); best < 0 || sc > top || sc == top && m < best {
				best, top = m, sc
			}
		}
		if f > 0 {
			if !g.belowBuilt[s] {
				lst := g.below[s][:0]
				for m := range n {
					if g.loads.get(s, m) < f {
						lst = append(lst, m)
					}
				}
				g.below[s], g.belowBuilt[s] = lst, true
			}
			lst := g.below[s][:0]
			for _, m := range g.below[s] {
				if g.loads.get(s, m) < f {
					lst = append(lst, m)
					consider(m)
				}
			}
			g.below[s] = lst
		}
		if g.tok[s] > 0 {
			if !g.spareBuilt {
				g.spare = g.spare[:0]
				for m := range n {
					if g.spareRoom(m) {
						g.spare = append(g.spare, m)
					}
				}
				g.spareBuilt = true
			}
			lst := g.spare[:0]
			for _, m := range g.spare {
				if g.spareRoom(m) {
					lst = append(lst, m)
					if g.loads.get(s, m) == f {
						consider(m)
					}
				}
			}
			g.spare = lst
		}
		if best >= 0 {
			g.put(k, best)
			if g.holdOK {
				g.hold[best] = append(g.hold[best], k)
			}
			continue
		}
		g.repair(k)
		clear(g.belowBuilt) // the loads moved both ways
		g.spareBuilt = false
	}
}

// repair places unit k0, for which no member has room, by moving units
// along a chain of the flow network that ends where there is room: a
// (stream, member) below its floor, or at it with the member free to take
// one more extra.
//
// The nodes are the units, the pairs (stream s, member m), the members'
// extras E(m) and the pool P. The arcs: a unit to every pair of its stream
// but its own (moving it there); a pair at its floor to E(m) (taking an
// extra); E(m) with ⌊R/n⌋ extras to P; back along the arcs in use, a pair
// to the units it holds (moving one away), E(m) to the pairs of which m
// holds an extra (giving it up), P to the members that used the pool. As in
// any flow, if a complete placement exists, such a chain does, and the
// search, breadth first but for the units, which it moves on as soon as it
// reaches them, finds one.
func (g *greedy) repair(k0 int32) {
	g.repairs++
	n := g.n
	units := int32(len(g.hu))
	if !g.holdOK {
		g.hold = resize(g.hold, int(n))
		for m := range g.hold {
			g.hold[m] = g.hold[m][:0]
		}
		for k, m := range g.own {
			if m >= 0 {
				g.hold[m] = append(g.hold[m], int32(k))
			}
		}
		g.holdOK = true
	}
	// Node ids: units [0, units), E(m) units+m, P units+n, pairs after.
	E, P := units, units+n
	type pair struct{ s, m int32 }
	var pairs []pair
	pairID := map[int64]int32{}
	parent := map[int32]int32{k0: -1}
	var queue []int32
	moving := []int32{k0} // nodes to expand before the queue: the units, and the pairs that must move one on
	end := int32(-1)
	// visit reaches node y from x and reports whether y has room.
	visit := func(y, x int32) bool {
		if _, ok := parent[y]; ok {
			return false
		}
		parent[y] = x
		switch {
		case y < units:
			moving = append(moving, y)
			return false
		case y < P:
			if g.extras[y-E] < g.eLo {
				end = y
				return true
			}
		case y == P:
			if g.gtok > 0 {
				end = y
				return true
			}
		default:
			pr := pairs[y-P-1]
			l, f := g.loads.get(pr.s, pr.m), g.floor[pr.s]
			if l < f || l == f && g.spareRoom(pr.m) {
				end = y
				return true
			}
			if x >= E && x < P {
				// Reached giving up an extra: it only moves a unit on.
				moving = append(moving, y)
				return false
			}
		}
		queue = append(queue, y)
		return false
	}
	pairNode := func(s, m int32) int32 {
		key := int64(s)*int64(n) + int64(m)
		id, ok := pairID[key]
		if !ok {
			pairs = append(pairs, pair{s, m})
			id = P + int32(len(pairs))
			pairID[key] = id
		}
		return id
	}
search:
	for qi := 0; qi < len(queue) || len(moving) > 0; {
		var x int32
		if len(moving) > 0 {
			x, moving = moving[0], moving[1:]
		} else {
			x = queue[qi]
			qi++
		}
		switch {
		case x < units:
			s, cur := g.su[x], g.own[x]
			start := g.r.lookup(g.hu[x])
			for i := range n {
				c := (start + i) % n
				if c != cur && visit(pairNode(s, c), x) {
					break search
				}
			}
		case x < P:
			m := x - E
			if g.extras[m] == g.eLo && g.pool > 0 && visit(P, x) {
				break search
			}
			for _, k := range g.hold[m] {
				if s := g.su[k]; g.loads.get(s, m) == g.floor[s]+1 && visit(pairNode(s, m), x) {
					break search
				}
			}
		case x == P:
			for m := range n {
				if g.extras[m] == g.eLo+1 && visit(E+m, x) {
					break search
				}
			}
		default:
			pr := pairs[x-P-1]
			if g.loads.get(pr.s, pr.m) == g.floor[pr.s] && visit(E+pr.m, x) {
				break search
			}
			for _, k := range g.hold[pr.m] {
				if g.su[k] == pr.s && visit(k, x) {
					break search
				}
			}
		}
	}
	if end < 0 {
		// Cannot happen (see above); keep the unit placed, if unbalanced,
		// on the member holding the fewest.
		g.impasses++
		counts := make([]int, n)
		for _, m := range g.own {
			if m >= 0 {
				counts[m]++
			}
		}
		g.put(k0, int32(slices.Index(counts, slices.Min(counts))))
		g.hold[g.own[k0]] = append(g.hold[g.own[k0]], k0)
		return
	}
	// The moves: every unit on the chain goes to the pair after it.
	type move struct{ k, m int32 }
	var moves []move
	for y := end; parent[y] >= 0; y = parent[y] {
		if x := parent[y]; x < units && y > P {
			moves = append(moves, move{x, pairs[y-P-1].m})
		}
	}
	for _, mv := range moves {
		if m := g.own[mv.k]; m >= 0 {
			g.take(mv.k)
			h := g.hold[m]
			i := slices.Index(h, mv.k)
			g.hold[m] = append(h[:i], h[i+1:]...)
		}
	}
	for _, mv := range moves {
		g.put(mv.k, mv.m)
		g.hold[mv.m] = append(g.hold[mv.m], mv.k)
	}
}
