package plan

// The weighted count plan above exactPairs: the greedy of large.go with
// per-member quotas. A stream of s units gives member m (quota q of the P
// placed) ⌊s·q/P⌋ of them (its floor) and, where that has a fraction,
// perhaps one more (an extra): the stream's extras are s less its floors,
// the member's are q less its floors. Every unit kept, in the order of its
// hash, offers itself round after round to the member its probe names,
// which takes it below its floor, or at its floor while both the stream
// and the member have an extra left. The units left after probeRounds go
// each to the member of the highest rendezvous score that would take it so;
// failing that, by one swap (a unit of another stream moved off a member
// with room in this stream to one with room in that), or to the member of
// the highest score with room below ⌈s·q/P⌉ and its quota, or below its
// quota. The totals are exact; a stream's spread is within its floor and
// one more but for about 2 pairs in a thousand (TestWeightedBalanced).
// Sticky in practice as the greedy is: a member joining or leaving changes
// the probes on its arcs of the ring.

// wgreedy is the state of one run, kept across runs for its buffers.
type wgreedy struct {
	hu      []uint64 // the units placed, in processing order: hash
	su      []int32  // and stream
	own     []int32  // and member
	size    []int64  // of each stream: its units placed
	cnt     []int32  // of each member: the units it holds
	ext     []int32  // the extras it holds (units above ⌊s·q/P⌋ of a stream)
	need    []int32  // the extras its quota leaves: q less Σ ⌊s·q/P⌋
	tok     []int32  // of each stream: its extras left
	loads   loadTable
	pending []int32
}

// run computes the owner of every unit of p.byHash that is kept, in that
// order, as an index into p.members, member m holding q[m] of them.
func (g *wgreedy) run(p *Planner, q []int) []int32 {
	n := int32(len(p.members))
	r := &p.ring
	g.hu, g.su = p.keptUnits(g.hu[:0], g.su[:0])
	units := len(g.hu)
	S := len(p.streams)
	g.size = resize(g.size, S)
	P := int64(0)
	for _, st := range p.streams {
		g.size[st.idx] = int64(st.keep)
		P += int64(st.keep)
	}
	g.cnt = resize(g.cnt, int(n))
	clear(g.cnt)
	g.own = resize(g.own, units)
	g.loads.reset(S, int(n), units)
	// Floors and extras, as the greedy's, with each member's extras fixed
	// by its quota.
	g.ext, g.need, g.tok = resize(g.ext, int(n)), resize(g.need, int(n)), resize(g.tok, S)
	clear(g.ext)
	for m := range n {
		g.need[m] = int32(q[m])
	}
	for s := range int32(S) {
		t := g.size[s]
		for m := range n {
			lo := g.size[s] * int64(q[m]) / P
			g.need[m] -= int32(lo)
			t -= lo
		}
		g.tok[s] = int32(t)
	}
	room := func(s, m int32) bool { // below ⌈s·q/P⌉ and the quota
		return g.cnt[m] < int32(q[m]) && int64(g.loads.get(s, m)) < (g.size[s]*int64(q[m])+P-1)/P
	}
	accept := func(s, m int32) bool { // below the floor, or an extra left for both
		if g.cnt[m] >= int32(q[m]) {
			return false
		}
		num := g.size[s] * int64(q[m])
		l := int64(g.loads.get(s, m))
		return l < num/P || l == num/P && num%P != 0 && g.tok[s] > 0 && g.ext[m] < g.need[m]
	}
	place := func(k, m int32) {
		s := g.su[k]
		if num := g.size[s] * int64(q[m]); int64(g.loads.get(s, m)) == num/P {
			g.tok[s]--
			g.ext[m]++
		}
		g.own[k] = m
		g.cnt[m]++
		g.loads.add(s, m, 1)
	}
	pending := g.pending[:0]
	for k := range units {
		g.own[k] = -1
		pending = append(pending, int32(k))
	}
	for round := uint64(1); round <= probeRounds && len(pending) > 0; round++ {
		next := pending[:0]
		step := round * probeStep
		for _, k := range pending {
			if m := r.lookup(mix(g.hu[k] + step)); accept(g.su[k], m) {
				place(k, m)
			} else {
				next = append(next, k)
			}
		}
		pending = next
	}
	g.pending = pending
	var hold [][]int32 // the units of each member, built at the first swap
	for _, k := range pending {
		best, level, top := int32(-1), 0, uint64(0)
		for m := range n {
			if g.cnt[m] >= int32(q[m]) {
				continue
			}
			lv := 1
			if accept(g.su[k], m) {
				lv = 3
			} else if room(g.su[k], m) {
				lv = 2
			}
			sc := mix(g.hu[k] ^ r.hm[m])
			if best < 0 || lv > level || lv == level && sc > top {
				best, level, top = m, lv, sc
			}
		}
		if level < 3 && g.swap(k, q, room, place, &hold) {
			continue
		}
		place(k, best) // Σ q is the units placed: some member has room
		if hold != nil {
			hold[best] = append(hold[best], k)
		}
	}
	return g.own
}

// swap places unit k, for which no member has room both in all and in its
// stream, on a member m with room in its stream, moving one of m's units
// of another stream to a member with room for it in all and in its
// stream; it reports whether it found such a pair of moves (the first in
// the order of the members, and of m's units).
func (g *wgreedy) swap(k int32, q []int, room func(s, m int32) bool, place func(k, m int32), hold *[][]int32) bool {
	n := int32(len(g.cnt))
	s := g.su[k]
	if *hold == nil {
		*hold = make([][]int32, n)
		for k2, m := range g.own {
			if m >= 0 {
				(*hold)[m] = append((*hold)[m], int32(k2))
			}
		}
	}
	h := *hold
	for m := range n {
		// m has room in the stream but for its total.
		if q[m] == 0 {
			continue
		}
		g.cnt[m]--
		ok := room(s, m)
		g.cnt[m]++
		if !ok {
			continue
		}
		for i, k2 := range h[m] {
			s2 := g.su[k2]
			if s2 == s {
				continue
			}
			for m2 := range n {
				if m2 != m && room(s2, m2) {
					g.own[k2] = m2
					g.cnt[m]--
					g.cnt[m2]++
					g.loads.add(s2, m, -1)
					g.loads.add(s2, m2, 1)
					h[m] = append(h[m][:i], h[m][i+1:]...)
					h[m2] = append(h[m2], k2)
					place(k, m)
					h[m] = append(h[m], k)
					return true
				}
			}
		}
	}
	return false
}
