package plan

import (
	"cmp"
	"slices"
	"strings"
)

// A Unit is one shard to place: an active shard of one of the streams the
// service subscribes to. The caller leaves out shards that are done (at
// SHARD_END, no rewind pending) and children whose parents still in the
// stream are not done.
type Unit struct {
	Stream string
	Shard  string
}

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

// exact is Assign up to 25,000 pairs.
//
// How: a stream of s units gives every member ⌊s/n⌋ of them and s mod n
// members one more. Which members get the one more of which stream is
// decided first, for all the streams together: each member gets ⌊R/n⌋ or
// ⌈R/n⌉ of the R extras (so that the totals balance), at most one per
// stream, with the highest total score of the (stream, member) pairs. Then,
// stream by stream, the units go to the members with those quotas with the
// highest total score of the (unit, member) pairs. Both steps are the same
// min-cost flow (spread.solve).
func exact(members []string, units []Unit, maxLeases int) map[Unit]string {
	ms := slices.DeleteFunc(slices.Clone(members), func(m string) bool { return m == "" })
	slices.Sort(ms)
	ms = slices.Compact(ms)
	n := len(ms)
	if n == 0 {
		return nil
	}
	us := slices.Clone(units)
	slices.SortFunc(us, compareUnits)
	us = slices.Compact(us)
	streams := byStream(us)
	if maxLeases > 0 && maxLeases < (len(us)+n-1)/n {
		streams = capStreams(streams, len(us), n*maxLeases)
	}

	out := make(map[Unit]string, len(us))
	extra := extras(ms, streams)
	for k, st := range streams {
		if len(st) == 0 {
			continue // capped to nothing
		}
		// The members with a quota of this stream: all of them, or when the
		// stream has fewer units than members, those with its extras.
		var to []string
		for m, id := range ms {
			if len(st)/n > 0 || extra[k] != nil && extra[k][m] {
				to = append(to, id)
			}
		}
		if len(to) == 1 {
			for _, u := range st {
				out[u] = to[0]
			}
			continue
		}
		nt := len(to)
		p := spread{n: nt, w: make([]int64, len(st)*nt), mult: make([]int, len(st)), low: make([]int, nt)}
		for i, u := range st {
			h := fnvSep(fnvString(fnvSep(fnvString(fnvOffset, u.Stream)), u.Shard))
			for m, id := range to {
				p.w[i*nt+m] = score(fnvString(h, id))
			}
			p.mult[i] = 1
		}
		j := 0
		for m := range ms {
			if q := len(st)/n + b2i(extra[k] != nil && extra[k][m]); q > 0 {
				p.low[j] = q
				j++
			}
		}
		held := p.solve()
		for i, u := range st {
			for m := range nt {
				if held[i*nt+m] {
					out[u] = to[m]
				}
			}
		}
	}
	return out
}

// extras returns, for the streams whose units do not divide evenly among
// the members, which members hold one unit more than the others: extra[k][m]
// for stream k and member m (nil for a stream that divides evenly). Every
// member gets ⌊R/n⌋ or ⌈R/n⌉ of the R extras of all the streams, so that the
// totals balance too, and which ones maximises the total score of the
// (stream, member) pairs, so that the extras stay where they are as members
// come and go.
func extras(ms []string, streams [][]Unit) [][]bool {
	n := len(ms)
	var uneven []int // the streams with a remainder
	for k, st := range streams {
		if len(st)%n != 0 {
			uneven = append(uneven, k)
		}
	}
	extra := make([][]bool, len(streams))
	if len(uneven) == 0 {
		return extra
	}
	p := spread{n: n, w: make([]int64, len(uneven)*n), mult: make([]int, len(uneven)), low: make([]int, n)}
	total := 0
	for i, k := range uneven {
		h := fnvSep(fnvString(fnvOffset, streams[k][0].Stream))
		for m, id := range ms {
			p.w[i*n+m] = score(fnvString(h, id) ^ pairTag)
		}
		p.mult[i] = len(streams[k]) % n
		total += p.mult[i]
	}
	for m := range p.low {
		p.low[m] = total / n
	}
	p.pool = total % n
	held := p.solve()
	for i, k := range uneven {
		extra[k] = held[i*n : (i+1)*n]
	}
	return extra
}

// byStream splits units, sorted, into one slice per stream.
func byStream(us []Unit) [][]Unit {
	var streams [][]Unit
	for i := 0; i < len(us); {
		j := i + 1
		for j < len(us) && us[j].Stream == us[i].Stream {
			j++
		}
		streams = append(streams, us[i:j:j])
		i = j
	}
	return streams
}

// capStreams keeps c of the total units of streams: to each stream its
// share (capCounts), the first of its units.
func capStreams(streams [][]Unit, total, c int) [][]Unit {
	sizes := make([]int, len(streams))
	for k, st := range streams {
		sizes[k] = len(st)
	}
	keep := capCounts(sizes, total, c)
	capped := make([][]Unit, len(streams))
	for k, st := range streams {
		capped[k] = st[:keep[k]]
	}
	return capped
}

// capCounts shares c of the total units out among streams of the given
// sizes (in the order of their names) in proportion to their sizes,
// rounded by largest remainders; ties go to the stream with fewer kept,
// then to the earlier stream. (In 64 bits: size × c overflows a 32-bit int
// from 46,341 units.)
func capCounts(sizes []int, total, c int) []int {
	keep := make([]int, len(sizes))
	rem := make([]int64, len(sizes))
	left := c
	for k, sz := range sizes {
		q := int64(sz) * int64(c)
		keep[k], rem[k] = int(q/int64(total)), q%int64(total)
		left -= keep[k]
	}
	order := make([]int, len(sizes))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if rem[a] != rem[b] {
			return cmp.Compare(rem[b], rem[a])
		}
		return keep[a] - keep[b]
	})
	for _, k := range order[:left] {
		keep[k]++
	}
	return keep
}

func compareUnits(a, b Unit) int {
	return cmp.Or(strings.Compare(a.Stream, b.Stream), strings.Compare(a.Shard, b.Shard))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The rendezvous score: FNV-1a 64 over stream, NUL, shard, NUL, member for a
// unit (stream, NUL, member, then xor pairTag, for the pair of a stream and
// a member), through the splitmix64 finaliser so that every bit depends on
// every input byte, keeping the top scoreBits bits. All the arithmetic of
// the planner is on integers, so that members on different architectures
// compute the same plan. (The greedy of large.go keeps all 64 bits: mix.)
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
	pairTag   = 0x9e3779b97f4a7c15
	// scoreBits leaves room in an int64 for sums of score differences along
	// chains of moves over up to 2^20 members.
	scoreBits = 40
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// fnvSep adds a NUL byte.
func fnvSep(h uint64) uint64 { return h * fnvPrime }

func score(h uint64) int64 { return int64(mix(h) >> (64 - scoreBits)) }

// spread is a balanced placement problem: item i goes to mult[i] distinct
// members; member m gets low[m] items, or low[m]+1 for pool of the members
// (any pool of them; Σ mult = Σ low + pool); and among the placements that
// meet those quotas solve finds one of the highest total score, Σ w[i*n+m]
// over the placed pairs (i, m). Assign uses it twice: items are units with
// one copy each, or streams with one copy per extra unit.
type spread struct {
	n    int
	w    []int64
	mult []int
	low  []int
	pool int
}

const inf = int64(1) << 62

// solve returns held: held[i*n+m] when item i goes to member m.
//
// It is the successive shortest path method of min-cost flow, run over the
// members rather than the items. It starts from the best placement with no
// quotas, every item on its mult top-scored members, where moving item i
// from a member a to a member b not holding it loses w(i,a) − w(i,b) ≥ 0.
// Then, one item at a time, an excess item of a member above its quota goes
// along the chain of moves (a→b→…) of least total loss to a member with
// room: one below low (the edge m→T), or one at low while the pool is not
// used up (m→P→T); a chain reaching P may also take the pool slot of a
// member at low+1, which passes an item on (m→P→m'→…). Dijkstra finds the
// chain on costs reduced by potentials pi, which keep every edge of the
// residual graph ≥ 0, so that each placement along the way loses the least
// for the excess it has left, and the last one, with none left, is a
// balanced placement of the highest total score. A round costs O(n²) and a
// rescan of the moves of the members whose items changed; there are as many
// rounds as items in excess at the start (for random scores about the
// square root of items × n).
func (p *spread) solve() []bool {
	n := p.n
	items := len(p.mult)
	held := make([]bool, items*n)
	d := make([]int, n) // items held by each member
	order := make([]int, n)
	for i := range items {
		w := p.w[i*n : (i+1)*n]
		if p.mult[i] == 1 {
			best := 0
			for m := 1; m < n; m++ {
				if w[m] > w[best] {
					best = m
				}
			}
			held[i*n+best] = true
			d[best]++
			continue
		}
		for m := range order {
			order[m] = m
		}
		slices.SortFunc(order, func(a, b int) int {
			switch {
			case w[a] > w[b]:
				return -1
			case w[a] < w[b]:
				return 1
			}
			return a - b
		})
		for _, m := range order[:p.mult[i]] {
			held[i*n+m] = true
			d[m]++
		}
	}

	// The flow out of each member: f[m] of its low through m→T, one through
	// the pool when g[m]; the rest is its excess.
	f := make([]int, n)
	g := make([]bool, n)
	used, excess := 0, 0
	for m := range n {
		f[m] = min(d[m], p.low[m])
		if d[m] > f[m] && used < p.pool {
			g[m] = true
			used++
		}
		excess += d[m] - f[m] - b2i(g[m])
	}
	if excess == 0 {
		return held
	}

	// Nodes: members 0..n-1, the pool P, the sink T.
	P, T := n, n+1
	cost := make([]int64, n*n) // cheapest move a→b: cost[a*n+b], by item via[a*n+b] (-1: none)
	via := make([]int, n*n)
	stale := make([]bool, n)
	for m := range stale {
		stale[m] = true
	}
	pi := make([]int64, n+2)
	lab := make([]int64, n+2)
	pred := make([]int, n+2)
	done := make([]bool, n+2)
	for ; excess > 0; excess-- {
		for a := range n {
			if stale[a] {
				p.moves(a, held, cost[a*n:(a+1)*n], via[a*n:(a+1)*n])
				stale[a] = false
			}
		}
		for v := range lab {
			lab[v], pred[v], done[v] = inf, -1, false
		}
		for m := range n {
			if d[m]-f[m]-b2i(g[m]) > 0 {
				lab[m] = -pi[m]
			}
		}
		relax := func(u, v int, c int64) {
			if !done[v] {
				if l := lab[u] + c + pi[u] - pi[v]; l < lab[v] {
					lab[v], pred[v] = l, u
				}
			}
		}
		for {
			u := -1
			for v := range lab {
				if !done[v] && lab[v] < inf && (u < 0 || lab[v] < lab[u]) {
					u = v
				}
			}
			if u < 0 || u == T {
				break
			}
			done[u] = true
			if u == P {
				for m := range n {
					if g[m] {
						relax(P, m, 0)
					}
				}
				if used < p.pool {
					relax(P, T, 0)
				}
				continue
			}
			for b := range n {
				if via[u*n+b] >= 0 {
					relax(u, b, cost[u*n+b])
				}
			}
			if !g[u] && p.pool > 0 {
				relax(u, P, 0)
			}
			if f[u] < p.low[u] {
				relax(u, T, 0)
			}
		}
		if pred[T] < 0 {
			break // cannot happen: the quotas add up to the items
		}
		for v := range pi {
			pi[v] += min(lab[v], lab[T])
		}
		for v := T; pred[v] >= 0; v = pred[v] {
			u := pred[v]
			switch {
			case v == T && u == P:
				used++
			case v == T:
				f[u]++
			case v == P:
				g[u] = true
			case u == P:
				g[v] = false
			default:
				i := via[u*n+v]
				held[i*n+u], held[i*n+v] = false, true
				d[u]--
				d[v]++
				// The moves of every holder of i change: to v no longer, to u now.
				stale[u] = true
				for m := range n {
					stale[m] = stale[m] || held[i*n+m]
				}
			}
		}
	}
	return held
}

// moves fills cost[b] and via[b] with the cheapest move of an item from
// member a to member b (one a holds and b does not) and its cost.
func (p *spread) moves(a int, held []bool, cost []int64, via []int) {
	n := p.n
	for b := range n {
		cost[b], via[b] = inf, -1
	}
	for i := range len(p.mult) {
		if !held[i*n+a] {
			continue
		}
		wa := p.w[i*n+a]
		for b := range n {
			if b != a && !held[i*n+b] {
				if c := wa - p.w[i*n+b]; c < cost[b] {
					cost[b], via[b] = c, i
				}
			}
		}
	}
}
