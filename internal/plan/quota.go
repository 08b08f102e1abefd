package plan

// The weighted count plan: each member's quota of the units (quotas), and
// the plan that meets the quotas, exactly up to exactPairs (exactQuota, the
// min-cost flow of exact.go with per-member quotas) and by the weighted
// greedy of wgreedy.go above.

import (
	"cmp"
	"math/bits"
	"slices"
)

// quotas returns how many of total units each member of ms (sorted by id)
// holds: in proportion to its capacity, never above its MaxLeases, what a
// capped member cannot hold shared among the others; Σ = total, or the sum
// of the caps if every member is capped below it.
//
// How: the members whose cap is below their share are capped first, in
// the order of cap per capacity (capping one raises the others' shares, so
// one pass in that order finds them all); the rest share what is left in
// proportion to their capacities, rounded down, and the units left over go
// one each by largest remainders (ties to the higher capacity, then to the
// lower hash of the id, then to the id first in order).
func quotas(ms []Member, total int) []int {
	n := len(ms)
	q := make([]int, n)
	placed := uint64(total)
	var sumCaps uint64
	capped := make([]int, 0, n)
	C := uint64(0)
	for i, m := range ms {
		C += uint64(m.Capacity)
		if m.MaxLeases > 0 {
			capped = append(capped, i)
			sumCaps += uint64(m.MaxLeases)
		}
	}
	if len(capped) == n {
		placed = min(placed, sumCaps)
	}
	// Cap per capacity, ascending: M_a·c_b < M_b·c_a.
	slices.SortFunc(capped, func(a, b int) int {
		return cmp.Or(cmp128(uint64(ms[a].MaxLeases), uint64(ms[b].Capacity), uint64(ms[b].MaxLeases), uint64(ms[a].Capacity)), a-b)
	})
	R := placed
	fixed := make([]bool, n)
	for _, i := range capped {
		M := uint64(ms[i].MaxLeases)
		if C == 0 || cmp128(R, uint64(ms[i].Capacity), M, C) < 0 {
			break // R·c < M·C: its share is below its cap
		}
		q[i], fixed[i] = int(M), true
		R -= M
		C -= uint64(ms[i].Capacity)
	}
	if C == 0 {
		return q
	}
	type share struct {
		i   int
		rem uint64
		h   uint64
	}
	var rest []share
	left := R
	for i, m := range ms {
		if fixed[i] {
			continue
		}
		hi, lo := bits.Mul64(R, uint64(m.Capacity))
		quo, rem := bits.Div64(hi, lo, C) // hi < C: R·c/C ≤ R
		q[i] = int(quo)
		left -= quo
		rest = append(rest, share{i, rem, memberHash(m.ID)})
	}
	slices.SortFunc(rest, func(a, b share) int {
		return cmp.Or(cmp.Compare(b.rem, a.rem), cmp.Compare(ms[b.i].Capacity, ms[a.i].Capacity), cmp.Compare(a.h, b.h), a.i-b.i)
	})
	for _, s := range rest[:left] {
		q[s.i]++
	}
	return q
}

// cmp128 compares a·b with c·d, in 128 bits.
func cmp128(a, b, c, d uint64) int {
	h1, l1 := bits.Mul64(a, b)
	h2, l2 := bits.Mul64(c, d)
	return cmp.Or(cmp.Compare(h1, h2), cmp.Compare(l1, l2))
}

// assignQuota is the weighted count plan of AssignWeighted: ms are the
// members normalised (sorted by id, distinct), ids their ids.
func (p *Planner) assignQuota(ms []Member, ids []string, units []Unit) map[Unit]string {
	membersChanged := p.setMembers(ids)
	unitsChanged := p.setUnits(units)
	total := 0
	for _, st := range p.streams {
		total += len(st.recs)
	}
	q := quotas(ms, total)
	if p.called && p.weighted && !membersChanged && !unitsChanged && slices.Equal(q, p.wq) {
		return p.cur
	}
	p.called, p.weighted = true, true
	p.wq = append(p.wq[:0], q...)
	p.replanQuota(q)
	return p.cur
}

// replanQuota computes the plan for the recorded sets with member m
// holding q[m] units and makes it p.cur: Planner.replan's steps with
// quotas in place of ⌊T/n⌋ and ⌈T/n⌉.
func (p *Planner) replanQuota(q []int) {
	n := len(p.members)
	sts, total := p.sortedStreams()
	if n == 0 {
		p.publish(nil, nil)
		return
	}
	placed, active := 0, 0
	for _, x := range q {
		placed += x
		active += b2i(x > 0)
	}
	if placed < total {
		sizes := make([]int, len(sts))
		for k, st := range sts {
			sizes[k] = len(st.recs)
		}
		keep := capCounts(sizes, total, placed)
		for k, st := range sts {
			st.keep = keep[k]
		}
	}
	for _, st := range sts {
		for i, r := range st.recs {
			r.kept = i < st.keep
		}
	}
	limit := p.exactLimit
	if limit == 0 {
		limit = exactPairs
	}
	if active <= 1 || int64(active)*int64(placed) <= int64(limit) {
		streams := make([][]Unit, 0, len(sts))
		for _, st := range sts {
			us := make([]Unit, st.keep)
			for i, r := range st.recs[:st.keep] {
				us[i] = r.u
			}
			streams = append(streams, us)
		}
		p.publish(exactQuota(p.members, q, streams), nil)
		return
	}
	p.publish(nil, nonNil(p.wg.run(p, q)))
}

// forbidden is the weight of a (stream, member) pair that may not take an
// extra unit in exactQuota: below any total of the allowed weights
// (scores of 30 bits, fewer than 2^22 extras), so that the flow uses none
// while a placement without one exists, which it always does (the
// fractional shares are one), and small enough that sums along chains of
// moves stay far from overflow.
const forbidden = -(int64(1) << 52)

// exactQuota places the units of streams (sorted, distinct, each the units
// kept of one stream) on the members ms, member m holding q[m] of them
// (Σ q = the units): of a stream of s units, with P the units in all,
// ⌊s·q[m]/P⌋ or ⌈s·q[m]/P⌉, the extras shared out first for all the
// streams (as exact's extras, with each member's count of them fixed by
// its quota), then each stream's units, both with the highest total score
// (spread.solve).
func exactQuota(ms []string, q []int, streams [][]Unit) map[Unit]string {
	var act []int // the members with a quota
	P := int64(0)
	for m, x := range q {
		if x > 0 {
			act = append(act, m)
			P += int64(x)
		}
	}
	out := make(map[Unit]string, P)
	if len(act) == 0 {
		return out
	}
	na := len(act)
	// base[k*na+j]: ⌊s·q/P⌋; an extra may go where the share has a
	// fraction.
	base := make([]int, len(streams)*na)
	frac := make([]bool, len(streams)*na)
	need := make([]int, na) // each member's extras: its quota less its bases
	for j, m := range act {
		need[j] = q[m]
	}
	var items []int // the streams with extras
	var mult []int
	for k, st := range streams {
		s := int64(len(st))
		sum := 0
		for j, m := range act {
			num := s * int64(q[m])
			base[k*na+j], frac[k*na+j] = int(num/P), num%P != 0
			sum += base[k*na+j]
			need[j] -= base[k*na+j]
		}
		if r := len(st) - sum; r > 0 {
			items = append(items, k)
			mult = append(mult, r)
		}
	}
	quota := slices.Clone(base)
	if len(items) > 0 {
		sp := spread{n: na, w: make([]int64, len(items)*na), mult: mult, low: need}
		for i, k := range items {
			h := fnvSep(fnvString(fnvOffset, streams[k][0].Stream))
			for j, m := range act {
				if frac[k*na+j] {
					sp.w[i*na+j] = score(fnvString(h, ms[m])^pairTag) >> 10
				} else {
					sp.w[i*na+j] = forbidden
				}
			}
		}
		held := sp.solve()
		for i, k := range items {
			for j := range na {
				if held[i*na+j] {
					quota[k*na+j]++
				}
			}
		}
	}
	for k, st := range streams {
		var to []int // indexes into act
		for j := range na {
			if quota[k*na+j] > 0 {
				to = append(to, j)
			}
		}
		if len(to) == 1 {
			for _, u := range st {
				out[u] = ms[act[to[0]]]
			}
			continue
		}
		nt := len(to)
		sp := spread{n: nt, w: make([]int64, len(st)*nt), mult: make([]int, len(st)), low: make([]int, nt)}
		for i, u := range st {
			h := fnvSep(fnvString(fnvSep(fnvString(fnvOffset, u.Stream)), u.Shard))
			for x, j := range to {
				sp.w[i*nt+x] = score(fnvString(h, ms[act[j]]))
			}
			sp.mult[i] = 1
		}
		for x, j := range to {
			sp.low[x] = quota[k*na+j]
		}
		held := sp.solve()
		for i, u := range st {
			for x := range nt {
				if held[i*nt+x] {
					out[u] = ms[act[to[x]]]
				}
			}
		}
	}
	return out
}
