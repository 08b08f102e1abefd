package plan

// spread, the balanced placement problem of the exact plan, and its
// min-cost flow (solve).

import "slices"

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

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
