package plan

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// shards returns n units of stream, shardId-000000000000 on.
func shards(stream string, n int) []Unit {
	us := make([]Unit, n)
	for i := range us {
		us[i] = Unit{Stream: stream, Shard: fmt.Sprintf("shardId-%012d", i)}
	}
	return us
}

// fleet returns members named i-0 .. i-<n-1>.
func fleet(n int) []string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf("i-%d", i)
	}
	return ms
}

// counts returns how many units each member holds (every member of ms,
// holding none or some), and of each stream.
func counts(ms []string, a map[Unit]string) (total map[string]int, perStream map[string]map[string]int) {
	total = map[string]int{}
	perStream = map[string]map[string]int{}
	for _, m := range ms {
		total[m] = 0
	}
	for u, m := range a {
		total[m]++
		if perStream[u.Stream] == nil {
			perStream[u.Stream] = map[string]int{}
		}
		perStream[u.Stream][m]++
	}
	return total, perStream
}

// loads returns the units each member holds, largest first.
func loads(ms []string, a map[Unit]string) []int {
	total, _ := counts(ms, a)
	l := slices.Collect(maps.Values(total))
	slices.Sort(l)
	slices.Reverse(l)
	return l
}

// checkBalanced fails t unless a places every unit of units on a member of
// ms, every member holds ⌊T/n⌋ or ⌈T/n⌉ units in all and ⌊s/n⌋ or ⌈s/n⌉ of
// every stream of s units. ms and units hold no duplicates.
func checkBalanced(t *testing.T, ms []string, units []Unit, a map[Unit]string) {
	t.Helper()
	n := len(ms)
	if len(a) != len(units) {
		t.Fatalf("%d units placed, want %d", len(a), len(units))
	}
	size := map[string]int{}
	for _, u := range units {
		size[u.Stream]++
		m, ok := a[u]
		if !ok || !slices.Contains(ms, m) {
			t.Fatalf("unit %v placed on %q (present %v), not a member of %q", u, m, ok, ms)
		}
	}
	total, perStream := counts(ms, a)
	for _, m := range ms {
		if c, T := total[m], len(units); c != T/n && c != (T+n-1)/n {
			t.Fatalf("member %s holds %d units, want %d or %d (loads %v)", m, c, T/n, (T+n-1)/n, loads(ms, a))
		}
		for s, sz := range size {
			if c := perStream[s][m]; c != sz/n && c != (sz+n-1)/n {
				t.Fatalf("member %s holds %d units of stream %s (%d units), want %d or %d", m, c, s, sz, sz/n, (sz+n-1)/n)
			}
		}
	}
}

func TestAssignExamples(t *testing.T) {
	cat := func(groups ...[]Unit) []Unit { return slices.Concat(groups...) }
	var tenStreams []Unit
	for k := range 10 {
		tenStreams = append(tenStreams, shards(fmt.Sprintf("stream-%d", k), 1)...)
	}
	tests := []struct {
		name      string
		members   []string
		units     []Unit
		maxLeases int
		loads     []int // units held per member, largest first; nil: Assign returns nil
		placed    int   // units placed; -1: all
	}{
		{name: "no members", members: nil, units: shards("s", 3), loads: nil},
		{name: "only the empty id", members: []string{"", ""}, units: shards("s", 3), loads: nil},
		{name: "no units", members: fleet(3), units: nil, loads: []int{0, 0, 0}, placed: -1},
		{name: "one member takes everything", members: fleet(1), units: cat(shards("a", 7), shards("b", 5)), loads: []int{12}, placed: -1},
		{name: "64 shards on 4 members: 16 each", members: fleet(4), units: shards("s", 64), loads: []int{16, 16, 16, 16}, placed: -1},
		{name: "10 one-shard streams on 3 members: 4/3/3", members: fleet(3), units: tenStreams, loads: []int{4, 3, 3}, placed: -1},
		{name: "two one-shard streams on 2 members: one each", members: fleet(2), units: cat(shards("a", 1), shards("b", 1)), loads: []int{1, 1}, placed: -1},
		{name: "4 shards on 3 members: 2/1/1", members: fleet(3), units: shards("s", 4), loads: []int{2, 1, 1}, placed: -1},
		{name: "fewer shards than members", members: fleet(5), units: shards("s", 2), loads: []int{1, 1, 0, 0, 0}, placed: -1},
		{name: "three streams of 2 on 3 members: 2 each", members: fleet(3), units: cat(shards("a", 2), shards("b", 2), shards("c", 2)), loads: []int{2, 2, 2}, placed: -1},
		{name: "duplicates and the empty id are ignored", members: []string{"i-1", "", "i-0", "i-1"}, units: cat(shards("s", 3), shards("s", 3)), loads: []int{2, 1}, placed: -1},
		{name: "a cap that does not bind", members: fleet(2), units: shards("s", 10), maxLeases: 5, loads: []int{5, 5}, placed: -1},
		{name: "a binding cap: the rest is left out", members: fleet(2), units: shards("s", 10), maxLeases: 3, loads: []int{3, 3}, placed: 6},
		{name: "a cap of one", members: fleet(3), units: cat(shards("a", 4), shards("b", 4)), maxLeases: 1, loads: []int{1, 1, 1}, placed: 3},
		{name: "a negative cap is no cap", members: fleet(2), units: shards("s", 10), maxLeases: -1, loads: []int{5, 5}, placed: -1},
	}
	forRegimes(t, func(t *testing.T, assign assignFunc) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				a := assign(tt.members, tt.units, tt.maxLeases)
				if tt.loads == nil {
					if a != nil {
						t.Fatalf("Assign = %v, want nil", a)
					}
					return
				}
				if a == nil {
					t.Fatal("Assign = nil, want a map")
				}
				ms := slices.Compact(slices.Sorted(slices.Values(slices.DeleteFunc(slices.Clone(tt.members), func(m string) bool { return m == "" }))))
				if got := loads(ms, a); !slices.Equal(got, tt.loads) {
					t.Errorf("loads %v, want %v", got, tt.loads)
				}
				us := slices.Compact(slices.SortedFunc(slices.Values(tt.units), CompareUnits))
				if tt.placed < 0 {
					checkBalanced(t, ms, us, a)
				} else if len(a) != tt.placed {
					t.Errorf("%d units placed, want %d", len(a), tt.placed)
				}
			})
		}
	})
}

// TestAssignCapShares: under a binding cap the units placed are shared out
// among the streams by size, the first of each stream in shard order.
func TestAssignCapShares(t *testing.T) {
	forRegimes(t, func(t *testing.T, assign assignFunc) {
		units := slices.Concat(shards("a", 6), shards("b", 3), shards("c", 1))
		// 2 members × 2 = 4 of 10: a 2.4, b 1.2, c 0.4 → 2, 1, 1 (c's remainder is the largest).
		a := assign(fleet(2), units, 2)
		want := []Unit{{"a", "shardId-000000000000"}, {"a", "shardId-000000000001"}, {"b", "shardId-000000000000"}, {"c", "shardId-000000000000"}}
		if got := slices.SortedFunc(maps.Keys(a), CompareUnits); !slices.Equal(got, want) {
			t.Errorf("placed %v, want %v", got, want)
		}
		if got := loads(fleet(2), a); !slices.Equal(got, []int{2, 2}) {
			t.Errorf("loads %v, want [2 2]", got)
		}
	})
}

// randomFleet returns n members with random names and streams streams of
// random names holding total shards in all, each stream at least one when
// total allows.
func randomFleet(r *rand.Rand, n, streams, total int) ([]string, []Unit) {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf("host-%08x-%d", r.Uint32(), i)
	}
	size := make([]int, streams)
	for i := range total {
		if i < streams {
			size[i]++
		} else {
			size[r.IntN(streams)]++
		}
	}
	var units []Unit
	for k, s := range size {
		name := fmt.Sprintf("orders-%x-%d", r.Uint32()&0xfff, k)
		units = append(units, shards(name, s)...)
	}
	return ms, units
}

// TestAssignBalanced: over random fleets of 1 to 12 members, 1 to 10
// streams and 0 to 300 shards, every member holds ⌊T/n⌋ or ⌈T/n⌉ units in
// all and ⌊s/n⌋ or ⌈s/n⌉ of every stream.
func TestAssignBalanced(t *testing.T) {
	forRegimes(t, func(t *testing.T, assign assignFunc) {
		r := rand.New(rand.NewPCG(1, 2))
		for n := 1; n <= 12; n++ {
			for streams := 1; streams <= 10; streams++ {
				for range 8 / raceScale {
					ms, units := randomFleet(r, n, streams, r.IntN(301))
					checkBalanced(t, ms, units, assign(ms, units, 0))
				}
			}
		}
		// Many small streams, the shape where per-stream remainders decide
		// everything.
		for range 200 / raceScale {
			n, streams := 1+r.IntN(12), 1+r.IntN(60)
			ms, units := randomFleet(r, n, streams, streams+r.IntN(3*streams))
			checkBalanced(t, ms, units, assign(ms, units, 0))
		}
	})
}

// TestAssignDeterministic: the same sets of members and units in any order,
// with duplicates, give the same assignment.
func TestAssignDeterministic(t *testing.T) {
	forRegimes(t, func(t *testing.T, assign assignFunc) {
		r := rand.New(rand.NewPCG(3, 4))
		for range 300 / raceScale {
			ms, units := randomFleet(r, 1+r.IntN(12), 1+r.IntN(10), r.IntN(301))
			want := maps.Clone(assign(ms, units, 0))
			for range 3 {
				ms2 := append(slices.Clone(ms), ms[:r.IntN(len(ms)+1)]...)
				units2 := append(slices.Clone(units), units[:r.IntN(len(units)+1)]...)
				r.Shuffle(len(ms2), func(i, j int) { ms2[i], ms2[j] = ms2[j], ms2[i] })
				r.Shuffle(len(units2), func(i, j int) { units2[i], units2[j] = units2[j], units2[i] })
				if got := assign(ms2, units2, 0); !maps.Equal(got, want) {
					t.Fatalf("members %q, %d units: the assignment depends on their order", ms, len(units))
				}
			}
			// Assign does not touch its arguments.
			ms2, units2 := slices.Clone(ms), slices.Clone(units)
			assign(ms2, units2, 1)
			if !slices.Equal(ms2, ms) || !slices.Equal(units2, units) {
				t.Fatal("Assign modified its arguments")
			}
		}
	})
}

// TestAssignCapped: with maxLeases, nobody holds more; when it binds every
// member holds exactly maxLeases, each stream has its proportional share
// placed (the first of its shards), spread evenly over the members.
func TestAssignCapped(t *testing.T) {
	forRegimes(t, func(t *testing.T, assign assignFunc) {
		r := rand.New(rand.NewPCG(5, 6))
		for range 500 / raceScale {
			n := 1 + r.IntN(12)
			ms, units := randomFleet(r, n, 1+r.IntN(10), r.IntN(301))
			T := len(units)
			maxLeases := 1 + r.IntN((T+n-1)/n+2)
			a := assign(ms, units, maxLeases)
			placed := min(T, n*maxLeases)
			if len(a) != placed {
				t.Fatalf("%d units, %d members, max %d: %d placed, want %d", T, n, maxLeases, len(a), placed)
			}
			total, perStream := counts(ms, a)
			for m, c := range total {
				if c > maxLeases || (placed < T && c != maxLeases) {
					t.Fatalf("%d units, %d members, max %d: %s holds %d", T, n, maxLeases, m, c)
				}
			}
			size := map[string]int{}
			for _, u := range units {
				size[u.Stream]++
			}
			var kept []Unit
			for u := range a {
				kept = append(kept, u)
			}
			keptBy := map[string]int{}
			for _, u := range kept {
				keptBy[u.Stream]++
			}
			for s, sz := range size {
				k := keptBy[s]
				// Proportional, rounded either way.
				if lo, hi := sz*placed/T, (sz*placed+T-1)/T; k < lo || k > hi {
					t.Fatalf("stream %s of %d: %d placed, want %d or %d", s, sz, k, lo, hi)
				}
				for _, u := range shards(s, k) {
					if _, ok := a[u]; !ok {
						t.Fatalf("stream %s: %d placed but %v is not: not the first ones", s, k, u)
					}
				}
				for _, m := range ms {
					if c := perStream[s][m]; c != k/n && c != (k+n-1)/n {
						t.Fatalf("stream %s: %s holds %d of the %d placed", s, m, c, k)
					}
				}
			}
			checkBalanced(t, ms, kept, a)
		}
	})
}

// TestSpreadOptimal: solve finds a placement of the highest total score
// among all those meeting the quotas (brute force on small problems, with
// multi-copy items and a pool).
func TestSpreadOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for trial := range 3300 {
		if raceScale > 1 && trial%raceScale != 0 {
			continue
		}
		n, items := 2+r.IntN(3), 1+r.IntN(5)
		if trial >= 3000 {
			n, items = 5, 6 // single copies only, below
		}
		p := spread{n: n, w: make([]int64, items*n), mult: make([]int, items), low: make([]int, n)}
		total := 0
		for i := range items {
			p.mult[i] = 1
			if trial%2 == 1 && trial < 3000 {
				p.mult[i] = 1 + r.IntN(n-1)
			}
			total += p.mult[i]
		}
		for i := range p.w {
			p.w[i] = int64(r.IntN(1000)) // small: ties happen too
		}
		if trial%3 == 0 {
			for m := range p.low {
				p.low[m] = total / n
			}
			p.pool = total % n
		} else {
			// Arbitrary quotas adding up to total.
			left := total
			for m := range n - 1 {
				p.low[m] = r.IntN(left + 1)
				left -= p.low[m]
			}
			p.low[n-1] = left
		}
		held := p.solve()
		got, ok := p.value(held)
		if best := int64(-1); !ok {
			if p.brute(held[:0:0], 0, &best); best < 0 {
				continue // no placement meets these quotas
			}
			t.Fatalf("trial %d: %+v: solve gave %v, which breaks the quotas", trial, p, held)
		}
		best := int64(-1)
		p.brute(held[:0:0], 0, &best)
		if best < 0 {
			continue // no placement meets these quotas
		}
		if got != best {
			t.Fatalf("trial %d: %+v: solve scores %d, the best is %d", trial, p, got, best)
		}
	}
}

// value returns the total score of held and whether it meets p's quotas.
func (p *spread) value(held []bool) (int64, bool) {
	n := p.n
	d := make([]int, n)
	var v int64
	for i, c := range p.mult {
		k := 0
		for m := range n {
			if held[i*n+m] {
				k++
				d[m]++
				v += p.w[i*n+m]
			}
		}
		if k != c {
			return 0, false
		}
	}
	up := 0
	for m := range n {
		switch d[m] {
		case p.low[m]:
		case p.low[m] + 1:
			up++
		default:
			return 0, false
		}
	}
	return v, up == p.pool
}

// brute tries every placement of the items from i on and keeps the best
// score of those meeting the quotas in best.
func (p *spread) brute(held []bool, i int, best *int64) {
	if i == len(p.mult) {
		if v, ok := p.value(held); ok && v > *best {
			*best = v
		}
		return
	}
	for set := range 1 << p.n {
		if popcount(set) != p.mult[i] {
			continue
		}
		row := make([]bool, p.n)
		for m := range p.n {
			row[m] = set&(1<<m) != 0
		}
		p.brute(append(held, row...), i+1, best)
	}
}

func popcount(x int) int {
	c := 0
	for ; x != 0; x &= x - 1 {
		c++
	}
	return c
}

// moved counts the units of before whose owner in after differs, leaving
// out those before gave to skip.
func moved(before, after map[Unit]string, skip string) int {
	c := 0
	for u, m := range before {
		if m != skip && after[u] != m {
			c++
		}
	}
	return c
}

// streamCount returns the number of streams of units.
func streamCount(units []Unit) int {
	s := map[string]bool{}
	for _, u := range units {
		s[u.Stream] = true
	}
	return len(s)
}

// TestAssignSticky: a member joining takes its share and the others keep
// theirs; a member leaving gives its units up and the others keep theirs;
// but for a few moved to rebalance. That few grows like the square root of
// a stream's size, so no fixed bound holds for every fleet: each fleet must
// stay within 3 × (streams + members) of the minimum, and on average over
// random fleets within streams + members.
func TestAssignSticky(t *testing.T) {
	// check returns the units moved when newcomer joins ms, what newcomer
	// takes, and the units not the leaver's moved when a member leaves.
	check := func(t *testing.T, ms []string, units []Unit) (join, took, leave, slack int) {
		t.Helper()
		n, T, S := len(ms), len(units), streamCount(units)
		slack = S + n
		before := Assign(ms, units, 0)
		joined := Assign(append(slices.Clone(ms), "newcomer"), units, 0)
		join = moved(before, joined, "")
		total, _ := counts(nil, joined)
		took = total["newcomer"]
		if limit := (T+n)/(n+1) + 3*slack; join > limit {
			t.Errorf("%d units (%d streams), %d → %d members: %d moved, limit %d", T, S, n, n+1, join, limit)
		}
		if n > 1 {
			leaver := ms[len(ms)/2]
			left := Assign(slices.DeleteFunc(slices.Clone(ms), func(m string) bool { return m == leaver }), units, 0)
			leave = moved(before, left, leaver)
			if limit := 3 * slack; leave > limit {
				t.Errorf("%d units (%d streams), %d → %d members: %d of the others' moved, limit %d", T, S, n, n-1, leave, limit)
			}
		}
		return join, took, leave, slack
	}
	var tenStreams []Unit
	for k := range 10 {
		tenStreams = append(tenStreams, shards(fmt.Sprintf("stream-%d", k), 1)...)
	}
	for _, c := range []struct {
		name  string
		ms    []string
		units []Unit
	}{
		{"64 shards, 4 members", fleet(4), shards("s", 64)},
		{"256 shards, 8 members", fleet(8), shards("s", 256)},
		{"1000 shards, 20 members", fleet(20), shards("s", 1000)},
		{"10 one-shard streams, 3 members", fleet(3), tenStreams},
		{"4 streams of 64, 4 members", fleet(4), slices.Concat(shards("a", 64), shards("b", 64), shards("c", 64), shards("d", 64))},
	} {
		join, took, leave, slack := check(t, c.ms, c.units)
		t.Logf("%s: a member joining takes %d, %d moved in all; one leaving: %d of the others' moved (streams + members: %d)", c.name, took, join, leave, slack)
	}
	r := rand.New(rand.NewPCG(9, 10))
	var joins, leaves []int
	sumJoin, sumLeave, sumSlack := 0, 0, 0
	for range 400 / raceScale {
		ms, units := randomFleet(r, 1+r.IntN(12), 1+r.IntN(10), r.IntN(301))
		join, took, leave, slack := check(t, ms, units)
		joins, leaves = append(joins, join-took), append(leaves, leave)
		sumJoin, sumLeave, sumSlack = sumJoin+join-took, sumLeave+leave, sumSlack+slack
	}
	if sumJoin > sumSlack || sumLeave > sumSlack {
		t.Errorf("random fleets: %d moved beyond the newcomers' takes, %d of the others' on leaving; want both ≤ Σ(streams + members) = %d", sumJoin, sumLeave, sumSlack)
	}
	slices.Sort(joins)
	slices.Sort(leaves)
	t.Logf("random fleets: on joining, moved beyond the newcomer's take: median %d, p90 %d, max %d, in all %d; on leaving, of the others': median %d, p90 %d, max %d, in all %d; Σ(streams + members) %d",
		joins[len(joins)/2], joins[len(joins)*9/10], joins[len(joins)-1], sumJoin, leaves[len(leaves)/2], leaves[len(leaves)*9/10], leaves[len(leaves)-1], sumLeave, sumSlack)
}

// TestAssignStable: once placed, nothing moves while the view stays the
// same, whichever member computes the plan (each with its own order).
func TestAssignStable(t *testing.T) {
	forRegimes(t, func(t *testing.T, assign assignFunc) {
		ms, units := fleet(5), slices.Concat(shards("a", 37), shards("b", 4))
		want := maps.Clone(assign(ms, units, 0))
		for i := range ms {
			view := slices.Concat(ms[i:], ms[:i])
			if got := assign(view, units, 0); !maps.Equal(got, want) {
				t.Fatalf("member %s's view gives another plan", ms[i])
			}
		}
	})
}

func BenchmarkAssign(b *testing.B) {
	for _, bc := range []struct {
		name    string
		members int
		units   []Unit
	}{
		{"1000 units in 10 streams, 20 members", 20, func() []Unit {
			var us []Unit
			for k := range 10 {
				us = append(us, shards(fmt.Sprintf("s%d", k), 100)...)
			}
			return us
		}()},
		{"1000 units in 1 stream, 20 members", 20, shards("s", 1000)},
		{"1000 one-unit streams, 20 members", 20, func() []Unit {
			var us []Unit
			for k := range 1000 {
				us = append(us, shards(fmt.Sprintf("s%d", k), 1)...)
			}
			return us
		}()},
		{"256 units, 8 members", 8, shards("s", 256)},
	} {
		ms := fleet(bc.members)
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				Assign(ms, bc.units, 0)
			}
		})
	}
}
