package plan

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// members returns members i-0 .. with the given capacities (in units of
// 1000) and caps.
func members(caps []int, weights ...int64) []Member {
	ms := make([]Member, len(weights))
	for i, w := range weights {
		ms[i] = Member{ID: fmt.Sprintf("i-%d", i), Capacity: w * 1000}
		if caps != nil {
			ms[i].MaxLeases = caps[i]
		}
	}
	return ms
}

// weightedRegimes runs test with a new Planner in each regime (exact, the
// greedy whatever the size) and with one Planner reused for every call,
// which must plan as a new one does.
func weightedRegimes(t *testing.T, test func(t *testing.T, assign func([]Member, []Unit, map[Unit]int64, int64, Balance) map[Unit]string)) {
	t.Helper()
	for _, limit := range []int{math.MaxInt, -1} {
		fresh := func(ms []Member, us []Unit, l map[Unit]int64, d int64, b Balance) map[Unit]string {
			p := Planner{exactLimit: limit}
			return p.AssignWeighted(ms, us, l, d, b)
		}
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) { test(t, fresh) })
		reused := &Planner{exactLimit: limit}
		t.Run(fmt.Sprint("reused, limit ", limit), func(t *testing.T) {
			test(t, func(ms []Member, us []Unit, l map[Unit]int64, d int64, b Balance) map[Unit]string {
				got := reused.AssignWeighted(ms, us, l, d, b)
				if want := fresh(ms, us, l, d, b); !maps.Equal(got, want) {
					t.Fatalf("a Planner used before plans otherwise than a new one (%d members, %d units, %+v)", len(ms), len(us), b)
				}
				return got
			})
		})
	}
}

// totals returns what each member of ms holds in a, in the order of ms.
func totals(ms []Member, a map[Unit]string) []int {
	by := map[string]int{}
	for _, m := range a {
		by[m]++
	}
	out := make([]int, len(ms))
	for i, m := range ms {
		out[i] = by[m.ID]
	}
	return out
}

// TestWeightedUniformIsAssign: equal capacities and caps (whatever their
// value) give exactly Assign's plan, so that nothing changes for today's
// callers.
func TestWeightedUniformIsAssign(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 1))
	for trial := range 300 / raceScale {
		n := 1 + r.IntN(12)
		ids, units := randomFleet(r, n, 1+r.IntN(8), r.IntN(200))
		capacity := []int64{0, 1000, 2500, -3}[trial%4]
		maxLeases := r.IntN((len(units)+n-1)/n + 2)
		ms := make([]Member, n)
		for i, id := range ids {
			ms[i] = Member{ID: id, Capacity: capacity, MaxLeases: maxLeases}
		}
		if capacity <= 0 && trial%8 == 0 {
			ms[0].Capacity = 1000 // ≤ 0 is 1000
		}
		for _, limit := range []int{0, -1} {
			p, q := Planner{exactLimit: limit}, Planner{exactLimit: limit}
			if got, want := p.AssignWeighted(ms, units, nil, 0, Balance{}), q.Assign(ids, units, maxLeases); !maps.Equal(got, want) {
				t.Fatalf("%d members of capacity %d, cap %d, %d units: not Assign's plan", n, capacity, maxLeases, len(units))
			}
		}
	}
}

// TestWeightedCounts: each member's count in proportion to its capacity,
// rounded by largest remainders; caps honoured, the rest shared; units
// left over only when every member is at its cap.
func TestWeightedCounts(t *testing.T) {
	cases := []struct {
		name  string
		ms    []Member
		units []Unit
		want  []int
	}{
		{"weights 1/1/2 on 40", members(nil, 1, 1, 2), shards("s", 40), []int{10, 10, 20}},
		{"weights 1/1/2 on 41", members(nil, 1, 1, 2), shards("s", 41), []int{10, 10, 21}},
		{"weights 1/1/2 on 42: the remainders tie, to the lower hash", members(nil, 1, 1, 2), shards("s", 42), []int{11, 10, 21}},
		{"weights 1/1/2 on 40 in 4 streams", members(nil, 1, 1, 2), streamsOf(4, 10), []int{10, 10, 20}},
		{"MaxLeases 5 beside two uncapped", members([]int{5, 0, 0}, 1, 1, 1), shards("s", 40), []int{5, 18, 17}},
		{"MaxLeases 5 beside 1/2 uncapped", members([]int{5, 0, 0}, 1, 1, 2), shards("s", 40), []int{5, 12, 23}},
		{"every member capped below: left over", members([]int{5, 3, 4}, 1, 1, 2), shards("s", 40), []int{5, 3, 4}},
		{"caps that just hold all", members([]int{10, 10, 20}, 1, 1, 2), shards("s", 40), []int{10, 10, 20}},
		{"a heavy member capped", members([]int{0, 0, 12}, 1, 1, 4), shards("s", 40), []int{14, 14, 12}},
		{"capacity 0 counts as 1000", []Member{{ID: "a"}, {ID: "b", Capacity: 1000}, {ID: "c", Capacity: 2000}}, shards("s", 40), []int{10, 10, 20}},
		{"fewer units than members", members(nil, 1, 3, 1, 1), shards("s", 2), []int{1, 1, 0, 0}},
		{"no units", members(nil, 1, 2), nil, []int{0, 0}},
	}
	weightedRegimes(t, func(t *testing.T, assign func([]Member, []Unit, map[Unit]int64, int64, Balance) map[Unit]string) {
		for _, c := range cases {
			a := assign(c.ms, c.units, nil, 0, Balance{})
			if got := totals(c.ms, a); !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
			if a == nil {
				t.Errorf("%s: nil plan", c.name)
			}
		}
	})
	if got := AssignWeighted(nil, shards("s", 3), nil, 0, Balance{}); got != nil {
		t.Errorf("no members: %v, want nil", got)
	}
}

// TestQuotas: over random members, the totals are proportional (every
// uncapped member within one of its exact share of what the capped ones
// leave), capped ones at most their cap and at it when their share is
// above, and they add up to the units, or the caps when all bind.
func TestQuotas(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 2))
	for range 2000 / raceScale {
		n := 1 + r.IntN(10)
		ms := make([]Member, n)
		sumCaps, allCapped := 0, true
		for i := range ms {
			ms[i] = Member{ID: fmt.Sprintf("m%02d", i), Capacity: int64(1 + r.IntN(4000))}
			if r.IntN(3) == 0 {
				ms[i].MaxLeases = 1 + r.IntN(30)
				sumCaps += ms[i].MaxLeases
			} else {
				allCapped = false
			}
		}
		total := r.IntN(200)
		q := quotas(ms, total)
		want := total
		if allCapped {
			want = min(total, sumCaps)
		}
		if sum(q) != want {
			t.Fatalf("%+v on %d: %v adds up to %d, want %d", ms, total, q, sum(q), want)
		}
		// What the members at their cap leave is shared in proportion.
		left, c := float64(want), 0.0
		for i, m := range ms {
			if m.MaxLeases > 0 && q[i] > m.MaxLeases {
				t.Fatalf("%+v: member %d holds %d above its cap", ms, i, q[i])
			}
			if m.MaxLeases > 0 && q[i] == m.MaxLeases {
				left -= float64(q[i])
			} else {
				c += float64(m.Capacity)
			}
		}
		for i, m := range ms {
			if m.MaxLeases > 0 && q[i] == m.MaxLeases {
				continue
			}
			if share := left * float64(m.Capacity) / c; math.Abs(float64(q[i])-share) >= 1+1e-9 {
				t.Fatalf("%+v on %d: member %d holds %d, its share is %.2f (%v)", ms, total, i, q[i], share, q)
			}
		}
	}
}

// TestWeightedBalanced: random capacities and caps over random streams:
// the totals are quotas', and of every stream each member holds ⌊s·q/P⌋
// or ⌈s·q/P⌉ (exactly up to 25,000 pairs; above, the greedy's
// count of pairs outside those bounds is reported and must stay rare).
func TestWeightedBalanced(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 3))
	outside, pairs := 0, 0
	for trial := range 600 / raceScale {
		n := 1 + r.IntN(10)
		ids, units := randomFleet(r, n, 1+r.IntN(8), r.IntN(250))
		ms := make([]Member, n)
		for i, id := range ids {
			ms[i] = Member{ID: id, Capacity: int64(1+r.IntN(4)) * 500}
			if r.IntN(4) == 0 {
				ms[i].MaxLeases = 1 + r.IntN(40)
			}
		}
		large := trial%2 == 1
		p := Planner{exactLimit: map[bool]int{false: math.MaxInt, true: -1}[large]}
		a := p.AssignWeighted(ms, units, nil, 0, Balance{})
		norm := normalize(ms)
		q := quotas(norm, len(units))
		got := totals(norm, a)
		if uniform(norm) {
			// Assign's plan: the same totals, its extras where its
			// rendezvous puts them.
			slices.Sort(got)
			slices.Sort(q)
			ms = nil
		}
		if !slices.Equal(got, q) {
			t.Fatalf("totals %v, want %v", got, q)
		}
		if ms == nil {
			continue
		}
		P := int64(sum(q))
		size := map[string]int64{}
		for _, u := range units {
			if _, ok := a[u]; ok {
				size[u.Stream]++
			}
		}
		_, per := counts(ids, a)
		for s, sz := range size {
			for i, m := range norm {
				c := int64(per[s][m.ID])
				lo, hi := sz*int64(q[i])/P, (sz*int64(q[i])+P-1)/P
				pairs++
				if c < lo || c > hi {
					if !large {
						t.Fatalf("member %s (quota %d of %d) holds %d of stream %s of %d, want %d to %d", m.ID, q[i], P, c, s, sz, lo, hi)
					}
					outside++
				}
			}
		}
	}
	t.Logf("the greedy: %d of %d (stream, member) pairs outside ⌊s·q/P⌋..⌈s·q/P⌉", outside, pairs)
	if outside*100 > pairs {
		t.Errorf("the greedy leaves %d of %d pairs outside their bounds, more than 1%%", outside, pairs)
	}
}

// TestWeightedDeterministic: the members and units in any order, with
// duplicates, give the same plan, in both modes.
func TestWeightedDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 4))
	for trial := range 100 / raceScale {
		n := 2 + r.IntN(8)
		ids, units := randomFleet(r, n, 1+r.IntN(5), 20+r.IntN(150))
		ms := make([]Member, n)
		for i, id := range ids {
			ms[i] = Member{ID: id, Capacity: int64(1+r.IntN(3)) * 1000, MaxLeases: r.IntN(2) * (5 + r.IntN(20))}
		}
		load := map[Unit]int64{}
		for _, u := range units {
			if r.IntN(10) == 0 {
				load[u] = int64(1000 + r.IntN(20000))
			}
		}
		b := Balance{ByLoad: trial%2 == 1}
		want := AssignWeighted(ms, units, load, 1000, b)
		for range 3 {
			ms2 := append(slices.Clone(ms), ms[:2]...)
			us2 := append(slices.Clone(units), units[:3]...)
			r.Shuffle(len(ms2), func(i, j int) { ms2[i], ms2[j] = ms2[j], ms2[i] })
			r.Shuffle(len(us2), func(i, j int) { us2[i], us2[j] = us2[j], us2[i] })
			if got := AssignWeighted(ms2, us2, load, 1000, b); !maps.Equal(got, want) {
				t.Fatalf("%+v: another order gives another plan", b)
			}
		}
		// A duplicate id counts once: the highest capacity.
		dup := append(slices.Clone(ms), Member{ID: ms[0].ID, Capacity: 1})
		if got := AssignWeighted(dup, units, load, 1000, b); !maps.Equal(got, want) {
			t.Fatalf("a duplicate of lower capacity changed the plan")
		}
	}
}

// TestWeightedCache: the same inputs again return the same map; a change
// returns another, and the last stays as it was.
func TestWeightedCache(t *testing.T) {
	for _, b := range []Balance{{}, {ByLoad: true}} {
		var p Planner
		ms, units := members(nil, 1, 2, 3), streamsOf(3, 20)
		load := map[Unit]int64{units[0]: 9000, units[25]: 12000}
		a := p.AssignWeighted(ms, units, load, 1000, b)
		if a2 := p.AssignWeighted(slices.Clone(ms), slices.Clone(units), maps.Clone(load), 1000, b); !samePointer(a, a2) {
			t.Fatalf("%+v: the same inputs: a new map", b)
		}
		keep := maps.Clone(a)
		c := p.AssignWeighted(ms[1:], units, load, 1000, b)
		if samePointer(a, c) || !maps.Equal(a, keep) {
			t.Fatalf("%+v: a member left: the last map reused or changed", b)
		}
	}
}
