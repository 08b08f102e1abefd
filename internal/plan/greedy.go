package plan

// The greedy's state and its steps: an offer, a placement and its undoing,
// the tail that places the units left after the rounds, and repair, which
// makes room along a chain of the flow network when none is left.

import "slices"

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
