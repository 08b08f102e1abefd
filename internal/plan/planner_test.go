package plan

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

type assignFunc func(members []string, units []Unit, maxLeases int) map[Unit]string

// forRegimes runs test with every way of computing a plan: Assign (the
// exact solution at the sizes of these tests); a new Planner per call made
// to use the greedy whatever the size; and one Planner for all the calls of
// the test, in each regime, so that what it carries from call to call is
// tested too (its plan must be the same as a new Planner's).
func forRegimes(t *testing.T, test func(t *testing.T, assign assignFunc)) {
	t.Helper()
	fresh := func(pairs int) assignFunc {
		return func(ms []string, us []Unit, max int) map[Unit]string {
			p := Planner{exactLimit: pairs}
			return p.Assign(ms, us, max)
		}
	}
	reused := func(pairs int) assignFunc {
		p := &Planner{exactLimit: pairs}
		return func(ms []string, us []Unit, max int) map[Unit]string {
			got := p.Assign(ms, us, max)
			if want := fresh(pairs)(ms, us, max); !maps.Equal(got, want) {
				t.Fatalf("a Planner used before plans otherwise than a new one (%d members, %d units, max %d)", len(ms), len(us), max)
			}
			return got
		}
	}
	for _, r := range []struct {
		name   string
		assign func() assignFunc
	}{
		{"Assign", func() assignFunc { return Assign }},
		{"large", func() assignFunc { return fresh(-1) }},
		{"exact reused", func() assignFunc { return reused(math.MaxInt) }},
		{"large reused", func() assignFunc { return reused(-1) }},
	} {
		t.Run(r.name, func(t *testing.T) { test(t, r.assign()) })
	}
}

// streamsOf returns streams streams of size shards each.
func streamsOf(streams, size int) []Unit {
	var us []Unit
	for k := range streams {
		us = append(us, shards(fmt.Sprintf("stream-%03d", k), size)...)
	}
	return us
}

// TestPlannerRegimes: the exact solution up to 25,000 pairs (members ×
// units placed), the greedy above, both balanced, and the same as Assign.
func TestPlannerRegimes(t *testing.T) {
	for _, c := range []struct {
		name      string
		members   int
		units     []Unit
		maxLeases int
		large     bool
	}{
		{"20 × 1,250: 25,000 pairs", 20, shards("s", 1250), 0, false},
		{"20 × 1,251", 20, shards("s", 1251), 0, true},
		{"50 × 500 in 50 streams", 50, streamsOf(50, 10), 0, false},
		{"50 × 510 in 51 streams", 50, streamsOf(51, 10), 0, true},
		{"200 × 125 in 125 streams", 200, streamsOf(125, 1), 0, false},
		{"200 × 126 in 126 streams", 200, streamsOf(126, 1), 0, true},
		{"one member × 30,000", 1, shards("s", 30000), 0, false},
		{"25 × 2,000 capped to 1,000 placed", 25, shards("s", 2000), 40, false},
		{"25 × 2,000 capped to 1,025 placed", 25, shards("s", 2000), 41, true},
		{"1,000 × 20,000", 1000, shards("s", 20000), 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms := fleet(c.members)
			var p Planner
			a := p.Assign(ms, c.units, c.maxLeases)
			if p.large != c.large {
				t.Errorf("solved by the greedy: %v, want %v", p.large, c.large)
			}
			placed := len(c.units)
			if c.maxLeases > 0 {
				placed = min(placed, c.members*c.maxLeases)
			}
			var kept []Unit
			for _, u := range c.units {
				if _, ok := a[u]; ok {
					kept = append(kept, u)
				}
			}
			if len(kept) != placed {
				t.Fatalf("%d placed, want %d", len(kept), placed)
			}
			checkBalanced(t, ms, kept, a)
			if want := Assign(ms, c.units, c.maxLeases); !maps.Equal(a, want) {
				t.Error("not the plan of Assign")
			}
		})
	}
}

func samePointer(a, b map[Unit]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// TestPlannerCache: the same sets give the same map, whatever their order
// and duplicates; a change gives a new one, and the one before stays as it
// was until two more plans are returned.
func TestPlannerCache(t *testing.T) {
	for _, pairs := range []int{math.MaxInt, -1} {
		t.Run(fmt.Sprint("exactPairs ", pairs), func(t *testing.T) {
			p := &Planner{exactLimit: pairs}
			ms, units := fleet(7), slices.Concat(shards("a", 40), shards("b", 9), shards("c", 1))
			a := p.Assign(ms, units, 0)
			if b := p.Assign(ms, units, 0); !samePointer(a, b) {
				t.Fatal("the same slices again: a new map")
			}
			r := rand.New(rand.NewPCG(1, 1))
			for range 5 {
				ms2 := append(slices.Clone(ms), ms[:3]...)
				us2 := append(slices.Clone(units), units[5:9]...)
				r.Shuffle(len(ms2), func(i, j int) { ms2[i], ms2[j] = ms2[j], ms2[i] })
				r.Shuffle(len(us2), func(i, j int) { us2[i], us2[j] = us2[j], us2[i] })
				if b := p.Assign(ms2, us2, 0); !samePointer(a, b) {
					t.Fatal("the same sets in another order: a new map")
				}
			}
			keep := maps.Clone(a)
			b := p.Assign(ms[1:], units, 0)
			if samePointer(a, b) || !maps.Equal(a, keep) {
				t.Fatal("a member left: the last map was reused")
			}
			keepB := maps.Clone(b)
			c := p.Assign(ms[1:], units, 1)
			if samePointer(b, c) || !maps.Equal(b, keepB) || len(c) != 6 {
				t.Fatalf("maxLeases 1: %d placed; the last map kept: %v", len(c), maps.Equal(b, keepB))
			}
			keepC := maps.Clone(c)
			d := p.Assign(ms, units[1:], 1)
			fresh := Planner{exactLimit: pairs}
			if !maps.Equal(c, keepC) || !maps.Equal(d, fresh.Assign(ms, units[1:], 1)) {
				t.Fatal("a unit gone: the last map changed, or the plan is wrong")
			}
		})
	}
}

// TestPlannerIncremental: a Planner that lives through members coming and
// going, shards and streams added and removed, caps and reorderings, plans
// as a new one would at every step, in both regimes; and the maps it
// returned keep their plans as documented.
func TestPlannerIncremental(t *testing.T) {
	for _, c := range []struct {
		name    string
		pairs   int
		members int
		streams int
		size    int
	}{
		{"exact", math.MaxInt, 6, 4, 15},
		{"greedy", -1, 30, 5, 40},
		{"greedy, many small streams (hash table)", -1, 300, 150, 3},
		{"greedy, more members than units", -1, 80, 3, 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.members), uint64(c.streams)))
			p := &Planner{exactLimit: c.pairs}
			ms := fleet(c.members)
			next := c.members
			var units []Unit
			for k := range c.streams {
				units = append(units, shards(fmt.Sprintf("st-%d", k), 1+r.IntN(2*c.size))...)
			}
			maxLeases := 0
			type kept struct {
				m    map[Unit]string
				want map[Unit]string
			}
			var returned []kept
			for step := range 60 {
				switch r.IntN(7) {
				case 0: // members join
					for range 1 + r.IntN(3) {
						ms = append(ms, fmt.Sprintf("i-%d", next))
						next++
					}
				case 1: // members leave
					for range 1 + r.IntN(3) {
						if len(ms) > 1 {
							i := r.IntN(len(ms))
							ms = slices.Delete(ms, i, i+1)
						}
					}
				case 2: // a stream is added or removed
					if r.IntN(2) == 0 || len(units) == 0 {
						units = append(units, shards(fmt.Sprintf("st-new-%d", step), 1+r.IntN(2*c.size))...)
					} else {
						gone := units[r.IntN(len(units))].Stream
						units = slices.DeleteFunc(units, func(u Unit) bool { return u.Stream == gone })
					}
				case 3: // shards end, others split
					for range 1 + r.IntN(4) {
						if len(units) > 0 {
							i := r.IntN(len(units))
							st := units[i].Stream
							units = slices.Delete(units, i, i+1)
							units = append(units, Unit{st, fmt.Sprintf("child-%d-%d", step, r.IntN(1000))})
						}
					}
				case 4:
					maxLeases = []int{0, 0, 1, 2, 5}[r.IntN(5)]
				case 5: // the same sets, reordered, with duplicates
					r.Shuffle(len(units), func(i, j int) { units[i], units[j] = units[j], units[i] })
					if len(units) > 0 {
						units = append(units, units[r.IntN(len(units))])
					}
					ms = append(ms, ms[r.IntN(len(ms))])
				case 6: // nothing
				}
				got := p.Assign(slices.Clone(ms), slices.Clone(units), maxLeases)
				fresh := Planner{exactLimit: c.pairs}
				want := fresh.Assign(ms, units, maxLeases)
				if !maps.Equal(got, want) {
					t.Fatalf("step %d: %d members, %d units, max %d: the Planner's plan is not a new Planner's", step, len(ms), len(units), maxLeases)
				}
				returned = append(returned, kept{got, maps.Clone(got)})
				// The plans returned stay as they were until two other
				// plans were returned after them.
				others := 0
				for i := len(returned) - 1; i >= 0; i-- {
					if i < len(returned)-1 && !samePointer(returned[i].m, returned[i+1].m) {
						others++
					}
					if others >= 2 {
						break
					}
					if !maps.Equal(returned[i].m, returned[i].want) {
						t.Fatalf("step %d: the plan returned at step %d changed", step, i)
					}
				}
			}
		})
	}
}

// TestPlannerRepair: the greedy's repairs (a unit for which no member with
// room in its stream may take one more extra) happen, and always find a
// chain. Many small streams on about as many members, at the point where
// every extra counts, are where they happen.
func TestPlannerRepair(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	repairs := 0
	for range 300 / raceScale {
		n := 2 + r.IntN(30)
		ms, units := randomFleet(r, n, 1+r.IntN(40), n*(1+r.IntN(4))+r.IntN(n))
		p := Planner{exactLimit: -1}
		checkBalanced(t, ms, units, p.Assign(ms, units, 0))
		repairs += p.g.repairs
		if p.g.impasses > 0 {
			t.Fatalf("%d members, %d units: a repair found no chain", n, len(units))
		}
	}
	if repairs == 0 {
		t.Error("no repairs: the test does not test them")
	}
	t.Logf("%d repairs in 300 plans", repairs)
}

// TestPlannerGolden: the plan of the greedy is a fixed function of the
// sets, on every architecture and in every version that does not mean to
// change it.
func TestPlannerGolden(t *testing.T) {
	ms := fleet(300)
	units := slices.Concat(shards("a", 1500), streamsOf(60, 7), shards("z", 301))
	var p Planner
	a := p.Assign(ms, units, 0)
	if !p.large {
		t.Fatal("not the greedy")
	}
	h := uint64(fnvOffset)
	for _, u := range slices.SortedFunc(maps.Keys(a), CompareUnits) {
		h = fnvSep(fnvString(fnvSep(fnvString(fnvSep(fnvString(h, u.Stream)), u.Shard)), a[u]))
	}
	if want := uint64(0x38792b7b459f2c3); h != want {
		t.Errorf("plan checksum %#x, want %#x", h, want)
	}
}

// TestPlannerSticky: in the greedy's regime, 20,000 shards (one stream, or
// 200 of 100) on 1,000 members: a member joining takes its share (20) and
// one leaving gives its 20 up; what moves besides stays within a small
// multiple of that (measured: about 70 more on joining and 90 on leaving,
// for 1 to 10 newcomers or leavers; about the same, relative to the share,
// as the exact solution at 4,000 shards on 200 members).
func TestPlannerSticky(t *testing.T) {
	for _, c := range []struct {
		name  string
		units []Unit
	}{
		{"one stream of 20,000", shards("s", 20000)},
		{"200 streams of 100", streamsOf(200, 100)},
	} {
		t.Run(c.name, func(t *testing.T) {
			ms := fleet(1000)
			var p Planner
			before := maps.Clone(p.Assign(ms, c.units, 0))
			share := len(c.units) / len(ms)
			var joins, leaves []int
			for k := range max(1, 4/raceScale) {
				joined := p.Assign(append(slices.Clone(ms), fmt.Sprintf("newcomer-%d", k)), c.units, 0)
				total, _ := counts(nil, joined)
				if took := total[fmt.Sprintf("newcomer-%d", k)]; took < share-1 {
					t.Errorf("a newcomer takes %d, want about %d", took, share)
				}
				joins = append(joins, moved(before, joined, ""))
				leaver := ms[(k*7919)%len(ms)]
				left := p.Assign(slices.DeleteFunc(slices.Clone(ms), func(m string) bool { return m == leaver }), c.units, 0)
				leaves = append(leaves, moved(before, left, leaver))
			}
			t.Logf("share %d; joining: %v moved in all; leaving: %v of the others' moved", share, joins, leaves)
			for _, x := range slices.Concat(joins, leaves) {
				if x > 10*share {
					t.Errorf("%d moved, more than 10 × the share of %d", x, share)
				}
			}
			if s := sum(joins) + sum(leaves); s > 7*share*(len(joins)+len(leaves)) {
				t.Errorf("%d moved in %d changes: more than 7 × the share of %d on average", s, len(joins)+len(leaves), share)
			}
		})
	}
}

func sum(x []int) int {
	s := 0
	for _, v := range x {
		s += v
	}
	return s
}

// BenchmarkPlanner: a Planner's round at the sizes of a service, with
// nothing changed (the same slices; the same sets with the streams and
// members in another order, as a Group passes them), and after one member
// leaves or joins (from the full set each time; moved/op counts the units
// that change owner, but for the leaver's).
func BenchmarkPlanner(b *testing.B) {
	for _, c := range []struct {
		name    string
		members int
		units   []Unit
	}{
		{"20x1000", 20, shards("s", 1000)},
		{"200x20000", 200, shards("s", 20000)},
		{"1000x20000 one stream", 1000, shards("s", 20000)},
		{"1000x20000 200 streams", 1000, streamsOf(200, 100)},
	} {
		ms := fleet(c.members)
		ms = append(ms[1:], ms[0]) // not sorted
		b.Run(c.name+"/steady", func(b *testing.B) {
			var p Planner
			p.Assign(ms, c.units, 0)
			for b.Loop() {
				p.Assign(ms, c.units, 0)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/op")
		})
		b.Run(c.name+"/steady reordered", func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			var views [][]string
			var orders [][]Unit
			for range 4 {
				v := slices.Clone(ms)
				r.Shuffle(len(v), func(i, j int) { v[i], v[j] = v[j], v[i] })
				views = append(views, v)
				orders = append(orders, reorderStreams(r, c.units))
			}
			var p Planner
			p.Assign(ms, c.units, 0)
			i := 0
			for b.Loop() {
				p.Assign(views[i%4], orders[i%4], 0)
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/op")
		})
		for _, change := range []string{"leave", "join"} {
			b.Run(c.name+"/"+change, func(b *testing.B) {
				var p Planner
				full := p.Assign(ms, c.units, 0)
				movedSum := 0
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					base := maps.Clone(p.Assign(ms, c.units, 0))
					view, skip := append(slices.Clone(ms), fmt.Sprintf("newcomer-%d", i)), ""
					if change == "leave" {
						skip = ms[(i*7919)%len(ms)]
						view = slices.DeleteFunc(slices.Clone(ms), func(m string) bool { return m == skip })
					}
					b.StartTimer()
					a := p.Assign(view, c.units, 0)
					b.StopTimer()
					movedSum += moved(base, a, skip)
					b.StartTimer()
				}
				_ = full
				b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/op")
				b.ReportMetric(float64(movedSum)/float64(b.N), "moved/op")
				b.ReportMetric(float64(len(c.units)/c.members), "share")
			})
		}
	}
}

// reorderStreams returns units with the order of the streams shuffled,
// each stream's shards in their order, as a Group lists them.
func reorderStreams(r *rand.Rand, units []Unit) []Unit {
	var names []string
	by := map[string][]Unit{}
	for _, u := range units {
		if by[u.Stream] == nil {
			names = append(names, u.Stream)
		}
		by[u.Stream] = append(by[u.Stream], u)
	}
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	var out []Unit
	for _, s := range names {
		out = append(out, by[s]...)
	}
	return out
}

// TestAssignUnchanged: up to 25,000 pairs Assign plans exactly as it did
// before the Planner (exact on all the units, the cap applied inside), so
// that members of two versions agree.
func TestAssignUnchanged(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for range 300 / raceScale {
		n := 1 + r.IntN(12)
		ms, units := randomFleet(r, n, 1+r.IntN(10), r.IntN(301))
		maxLeases := r.IntN((len(units)+n-1)/n + 2)
		if !maps.Equal(Assign(ms, units, maxLeases), exact(ms, units, maxLeases)) {
			t.Fatalf("%d members, %d units, max %d: not the plan of the exact solution", n, len(units), maxLeases)
		}
	}
}

// TestCapCountsLarge: the cap's shares are right where size × cap
// overflows 32 bits, so that 32-bit members place the same units.
func TestCapCountsLarge(t *testing.T) {
	sizes := []int{70001, 50000, 29999, 1}
	total := 150001
	for _, c := range []int{1, 1000, 99999, 150000} {
		keep := capCounts(sizes, total, c)
		if sum(keep) != c {
			t.Fatalf("cap %d: %v sums to %d", c, keep, sum(keep))
		}
		for k, sz := range sizes {
			q := int64(sz) * int64(c)
			if lo := q / int64(total); int64(keep[k]) < lo || int64(keep[k]) > lo+1 {
				t.Fatalf("cap %d: stream %d of %d keeps %d, want %d or %d", c, k, sz, keep[k], lo, lo+1)
			}
		}
	}
}
