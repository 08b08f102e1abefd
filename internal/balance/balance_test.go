package balance

import (
	"maps"
	"math"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/leases"
)

func TestQuantize(t *testing.T) {
	for in, want := range map[int64]int64{-5: 0, 0: 0, 7: 7, 99: 99, 100: 100, 104: 100, 105: 110, 1234: 1200, 96_500: 97_000, 999: 1000, 1 << 40: 1_100_000_000_000} {
		if got := Quantize(in); got != want {
			t.Errorf("Quantize(%d) = %d, want %d", in, got, want)
		}
	}
}

func TestHotRoundTrip(t *testing.T) {
	hs := []Hot{{ID: "abc", Load: 1_200_000}, {ID: "d", Load: 7}, {ID: "e", Load: 0}, {ID: "f", Load: 110}}
	s := EncodeHot(hs)
	if s != "abc:12e5 d:7 e:0 f:11e1" {
		t.Fatalf("EncodeHot = %q", s)
	}
	if got := DecodeHot(s); !equalHot(got, hs) {
		t.Fatalf("DecodeHot(%q) = %v, want %v", s, got, hs)
	}
	// Malformed words are skipped; huge loads are capped.
	got := DecodeHot("x y: :5 a:-1 b:1e99 c:9e15 ok:3e2")
	want := []Hot{{ID: "c", Load: plan.MaxLoad}, {ID: "ok", Load: 300}}
	if !equalHot(got, want) {
		t.Fatalf("DecodeHot of malformed words = %v, want %v", got, want)
	}
	if len(s) > leases.MaxHot {
		t.Fatal("too long")
	}
}

func equalHot(a, b []Hot) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func units(n int) []plan.Unit {
	us := make([]plan.Unit, n)
	for i := range us {
		us[i] = plan.Unit{Stream: "s", Shard: string(rune('a'+i%26)) + string(rune('a'+i/26))}
	}
	return us
}

func TestSummarize(t *testing.T) {
	us := units(8)
	loads := map[plan.Unit]int64{}
	for i, u := range us {
		loads[u] = 100
		if i < 6 && i%2 == 0 {
			loads[u] = 1234 * int64(i+1)
		}
	}
	total, hot, _ := Summarize(loads, 0, nil, 0)
	// 1234 + 3702 + 6170 + 500 = 11,606: mean 1,450; hot above 2,901.
	if total != 12_000 {
		t.Errorf("total %d, want 12,000", total)
	}
	want := EncodeHot([]Hot{{UnitID(us[4]), 6200}, {UnitID(us[2]), 3700}})
	if hot != want {
		t.Errorf("hot %q, want %q", hot, want)
	}
	// A lower fleet mean makes more hot, at most MaxHot.
	_, hot, _ = Summarize(loads, 40, nil, 0)
	if n := len(DecodeHot(hot)); n != MaxHot {
		t.Errorf("with a fleet mean of 40: %d hot (%q), want %d", n, hot, MaxHot)
	}
	if total, hot, _ := Summarize(map[plan.Unit]int64{us[0]: 0}, 0, nil, 0); total != 0 || hot != "" {
		t.Errorf("idle: %d %q", total, hot)
	}
	// Jitter within the quantum changes nothing.
	loads[us[4]] = 6180
	if _, h, _ := Summarize(loads, 0, nil, 0); h != want {
		t.Errorf("after a jitter of 10 in 6,170: %q, want %q", h, want)
	}
}

func TestMeter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := NewMeter(leases.Throughput{BytesPerSecond: 5000, RecordsPerSecond: 50}, t0)
	if got := m.Rate(t0); got.BytesPerSecond != 5000 || got.RecordsPerSecond != 50 {
		t.Fatalf("from the row: %+v", got)
	}
	// A steady 1,000 bytes and 10 records a second, after five windows,
	// reads about that, whatever it started from.
	at := t0
	for range int(5 * Window / time.Second) {
		at = at.Add(time.Second)
		m.Add(10, 1000, at)
	}
	got := m.Rate(at)
	if math.Abs(float64(got.BytesPerSecond)-1000) > 50 || math.Abs(float64(got.RecordsPerSecond)-10) > 1 {
		t.Fatalf("steady 1,000 B/s: %+v", got)
	}
	// Idle for a window: down to about 37%.
	got = m.Rate(at.Add(Window))
	if math.Abs(float64(got.BytesPerSecond)-368) > 30 {
		t.Fatalf("idle a window: %+v", got)
	}
	var nilMeter *Meter
	nilMeter.Add(1, 1, at)
	if nilMeter.Rate(at) != (leases.Throughput{}) {
		t.Fatal("a nil meter measures nothing")
	}
}

func TestInputs(t *testing.T) {
	us := units(10)
	b := New(Config{Self: "a", Capacity: 2000, MaxLeases: 7, Mode: Mode{Balance: plan.Balance{ByLoad: true}}})
	entries := []leases.Member{
		{Owner: "a", Capacity: 1, Load: 999}, // its own capacity and cap come from its configuration
		{Owner: "b", Capacity: 1000, MaxLeases: 3, Held: 5, Load: 3000, Hot: EncodeHot([]Hot{{UnitID(us[0]), 1000}, {"zzzz", 500}})},
		{Owner: "c", Capacity: 500, Held: 5, Load: 1600, Hot: EncodeHot([]Hot{{UnitID(us[0]), 1200}})},
	}
	ms, load, def, legacy := b.Inputs(entries, us)
	wantMs := []plan.Member{{ID: "a", Capacity: 2000, MaxLeases: 7}, {ID: "b", Capacity: 1000, MaxLeases: 3}, {ID: "c", Capacity: 500}}
	if legacy || len(ms) != 3 || ms[0] != wantMs[0] || ms[1] != wantMs[1] || ms[2] != wantMs[2] {
		t.Fatalf("members %v (legacy %v), want %v", ms, legacy, wantMs)
	}
	// Unit 0 at the higher of its two holders' figures; "zzzz" is no unit.
	if !maps.Equal(load, map[plan.Unit]int64{us[0]: 1200}) {
		t.Fatalf("load %v", load)
	}
	// (999 + 3000 + 1600 - 1000 - 500 - 1200) / 9 cold units.
	if def != 322 {
		t.Fatalf("default load %d, want 322", def)
	}
	if b.fleetMean.Load() != (999+3000+1600)/10 {
		t.Fatalf("fleet mean %d", b.fleetMean.Load())
	}
	// A unit in a handoff: its load in its releaser's total, held by
	// nobody. The mean is over every unit still.
	entries[2].Held = 4
	b.Inputs(entries, us)
	if b.fleetMean.Load() != (999+3000+1600)/10 {
		t.Fatalf("one unit in a handoff: fleet mean %d, want %d", b.fleetMean.Load(), (999+3000+1600)/10)
	}
	entries[2].Held = 5
	// A member that publishes no capacity: planned as before.
	entries[2].Capacity = 0
	if _, load, _, legacy := b.Inputs(entries, us); !legacy || load != nil {
		t.Fatalf("with a member of no capacity: legacy %v, load %v", legacy, load)
	}
	// By count: no loads.
	bc := New(Config{Self: "a"})
	if ms, load, def, _ := bc.Inputs(entries[:2], us); load != nil || def != 0 || ms[0].Capacity != 1000 {
		t.Fatalf("by count: %v %v %d", ms, load, def)
	}
}

// TestPlanNoLoad: by load with no load at all, the plan is the count
// plan; a fleet where one member publishes no capacity gets Assign's plan
// with this member's cap.
func TestPlanNoLoad(t *testing.T) {
	us := units(40)
	entries := []leases.Member{{Owner: "a", Capacity: 1000}, {Owner: "b", Capacity: 1000}, {Owner: "c", Capacity: 1000}}
	b := New(Config{Self: "a", Mode: Mode{Balance: plan.Balance{ByLoad: true}}})
	a := maps.Clone(b.Plan(entries, us))
	if want := plan.Assign([]string{"a", "b", "c"}, us, 0); !maps.Equal(a, want) {
		t.Fatalf("no load: not the count plan")
	}
	entries[1].Capacity = 0
	b = New(Config{Self: "a", MaxLeases: 4, Mode: Mode{Balance: plan.Balance{ByLoad: true}}})
	if a, want := b.Plan(entries, us), plan.Assign([]string{"a", "b", "c"}, us, 4); !maps.Equal(a, want) {
		t.Fatalf("legacy fleet: not Assign's plan with the own cap")
	}
}

// TestHold: a held unit the load plan gives away while the count plan
// gives it to this member is kept until the Mover hands it over, its
// minimum hold counted from the round it was first seen held; one the
// count plan gives away goes at once.
func TestHold(t *testing.T) {
	us := units(3)
	free := func(plan.Unit) leases.Lease { return leases.Lease{} }
	s := func(d time.Duration) int64 { return int64(d) }
	b := New(Config{Self: "a", Mode: Mode{Balance: plan.Balance{ByLoad: true}}, Mover: plan.Mover{HoldTime: 10 * time.Second, MinHold: -1, MaxMovesPerMinute: -1}})
	b.count = map[plan.Unit]string{us[0]: "a", us[1]: "b", us[2]: "a"}
	a := map[plan.Unit]string{us[0]: "b", us[1]: "b", us[2]: "a"}
	held := map[plan.Unit]plan.Held{us[0]: {}, us[1]: {}, us[2]: {}}
	got := b.Hold(s(time.Minute), a, held, free)
	if got[us[0]] != "a" || got[us[1]] != "b" || got[us[2]] != "a" || a[us[0]] != "b" {
		t.Fatalf("at first: %v (plan %v)", got, a)
	}
	got = b.Hold(s(time.Minute+10*time.Second), a, held, free)
	if !maps.Equal(got, a) {
		t.Fatalf("after the hold time: %v, want the plan %v", got, a)
	}
	// The minimum hold, from the round first seen held.
	b = New(Config{Self: "a", Mode: Mode{Balance: plan.Balance{ByLoad: true}}, Mover: plan.Mover{HoldTime: -1, MinHold: time.Minute, MaxMovesPerMinute: -1}})
	b.count = map[plan.Unit]string{us[0]: "a"}
	b.Hold(s(time.Hour), map[plan.Unit]string{us[0]: "a"}, held, free)
	a = map[plan.Unit]string{us[0]: "b"}
	if got := b.Hold(s(time.Hour+59*time.Second), a, held, free); got[us[0]] != "a" {
		t.Fatalf("59 s after it was first seen held: %v", got)
	}
	if got := b.Hold(s(time.Hour+time.Minute), a, held, free); got[us[0]] != "b" {
		t.Fatalf("a minute after it was first seen held: %v", got)
	}
	// By count: the plan as it is.
	bc := New(Config{Self: "a"})
	if got := bc.Hold(0, a, held, free); !maps.Equal(got, a) {
		t.Fatalf("by count: %v", got)
	}
}

// TestHoldTakes: a unit the load plan gives to this member while its
// live holder keeps it, the count plan giving it to the holder or to a
// third member (the holder took it for load from there), is read once,
// then again only when the holder's lease count changes or Recheck after
// the last read; every round if the holder is dead or another
// incarnation, the row free, or, for Recheck after the count plan changed
// or after the plan gave it here, the count plan gives it to this member
// (a join, a departure, a unit the holder took from a free row: it lets go
// at once). Past that, a holder that took it for load from another member
// keeps it for its minimum hold: read as above.
func TestHoldTakes(t *testing.T) {
	us := units(1)
	u := us[0]
	b := New(Config{Self: "a", Mode: Mode{Balance: plan.Balance{ByLoad: true}}})
	b.count = map[plan.Unit]string{u: "b"}
	b.live = map[string]leases.Member{"b": {Owner: "b", Incarnation: "i1", Held: 5}}
	a := map[plan.Unit]string{u: "a"}
	row := leases.Lease{Owner: "b", Incarnation: "i1"}
	at := func(d time.Duration) bool { // whether the row is read at d
		got := b.Hold(int64(d), a, nil, func(plan.Unit) leases.Lease { return row })
		if got[u] == "a" {
			return true
		}
		if got[u] != "b" || a[u] != "a" {
			t.Fatalf("at %v: %v (plan %v)", d, got, a)
		}
		return false
	}
	if !at(0) || at(time.Second) || at(Recheck-time.Second) {
		t.Fatal("read once, then not within Recheck")
	}
	if !at(Recheck) || at(Recheck+time.Second) {
		t.Fatal("not read again Recheck after the last read")
	}
	b.live["b"] = leases.Member{Owner: "b", Incarnation: "i1", Held: 4}
	if !at(Recheck+2*time.Second) || at(Recheck+3*time.Second) {
		t.Fatal("not read again once the holder's count changed")
	}
	for name, change := range map[string]func(){
		"holder dead":           func() { delete(b.live, "b") },
		"another incarnation":   func() { row.Incarnation = "i2" },
		"row free":              func() { row = leases.Lease{} },
		"count plan gives it a": func() { b.count[u], b.recount = "a", true },
	} {
		b.live = map[string]leases.Member{"b": {Owner: "b", Incarnation: "i1", Held: 4}}
		row, b.count[u] = leases.Lease{Owner: "b", Incarnation: "i1"}, "b"
		at(time.Hour)
		if at(time.Hour + time.Second) {
			t.Fatalf("%s: read before the change", name)
		}
		change()
		if !at(time.Hour+2*time.Second) || !at(time.Hour+3*time.Second) || !at(time.Hour+Recheck+time.Second) {
			t.Fatalf("%s: not read every round", name)
		}
	}
	// The count plan changes and gives it here while b, which took it
	// for load, keeps it (as its Mover does where the count-plan owner is
	// the one of its take): read every round for Recheck, then as a take
	// for load.
	b.live = map[string]leases.Member{"b": {Owner: "b", Incarnation: "i1", Held: 4}}
	row, b.count[u], b.recount = leases.Lease{Owner: "b", Incarnation: "i1"}, "a", true
	for d := time.Duration(0); d < Recheck; d += time.Second {
		if !at(2*time.Hour + d) {
			t.Fatalf("%v after the count plan changed: not read", d)
		}
	}
	if !at(2*time.Hour+Recheck) || at(2*time.Hour+Recheck+time.Second) || at(2*time.Hour+2*Recheck-time.Second) || !at(2*time.Hour+2*Recheck) {
		t.Fatal("Recheck after the count plan changed: not read once, then Recheck after")
	}
	// The plan gives it here anew (the count plan too), b keeping it: b
	// may have taken it from a free row and let go at once (seed
	// 93800642), or took it for load from another member and keeps it.
	// Read every round for Recheck, then as a take for load.
	b.Hold(int64(150*time.Minute), map[plan.Unit]string{u: "b"}, nil, func(plan.Unit) leases.Lease { return row })
	for d := time.Duration(0); d < Recheck; d += time.Second {
		if !at(150*time.Minute + time.Second + d) {
			t.Fatalf("%v after the plan gave it here anew: not read", d+time.Second)
		}
	}
	if !at(150*time.Minute+time.Second+Recheck) || at(150*time.Minute+2*time.Second+Recheck) {
		t.Fatal("Recheck after the plan gave it here anew: not read once, then Recheck after")
	}
	// The count plan gives it to c, from which b took it for load: b's
	// Mover holds it as one of c's, and it is read as above.
	row, b.count[u] = leases.Lease{Owner: "b", Incarnation: "i1"}, "c"
	if !at(3*time.Hour) || at(3*time.Hour+time.Second) || at(3*time.Hour+Recheck-time.Second) || !at(3*time.Hour+Recheck) {
		t.Fatal("count plan gives it c: not read once, then Recheck after")
	}
	// By count, nothing waits.
	bc := New(Config{Self: "a"})
	bc.count, bc.live = b.count, b.live
	if got := bc.Hold(0, a, nil, func(plan.Unit) leases.Lease { return row }); got[u] != "a" {
		t.Fatalf("by count: %v", got)
	}
}

// TestHandover: a hot unit a member lets go of stays in what it publishes
// (named, its load in the total) until another member names it, or for
// Handover; a cold one does not; a unit taken back is published as held.
func TestHandover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		us := units(8)
		meters := map[plan.Unit]*Meter{}
		for i, u := range us {
			l := int64(100)
			if i == 0 {
				l = 5000
			}
			meters[u] = NewMeter(leases.Throughput{BytesPerSecond: l}, time.Now())
		}
		b := New(Config{Self: "a", Mode: Mode{Balance: plan.Balance{ByLoad: true}}})
		hot0 := EncodeHot([]Hot{{UnitID(us[0]), 5000}})
		if _, _, load, hot := b.Publish(meters); load != 5700 || hot != hot0 {
			t.Fatalf("holding all: %d %q", load, hot)
		}
		// Unit 0 (hot) and 1 (cold) let go of: 0 stays named.
		rest := maps.Clone(meters)
		delete(rest, us[0])
		delete(rest, us[1])
		if _, _, load, hot := b.Publish(rest); load != 5600 || hot != hot0 {
			t.Fatalf("hot unit let go of: %d %q, want 5600 %q", load, hot, hot0)
		}
		// Others name other units: no change.
		other := leases.Member{Owner: "b", Capacity: 1000, Held: 1, Load: 900, Hot: EncodeHot([]Hot{{UnitID(us[5]), 900}})}
		b.Inputs([]leases.Member{{Owner: "a", Capacity: 1000, Held: 6, Load: 5600, Hot: hot0}, other}, us)
		time.Sleep(Handover - time.Second)
		if _, _, _, hot := b.Publish(rest); hot != hot0 {
			t.Fatalf("%v after: %q, want %q", Handover-time.Second, hot, hot0)
		}
		// Named by its new holder: no more.
		other.Hot = EncodeHot([]Hot{{UnitID(us[0]), 5000}})
		b.Inputs([]leases.Member{{Owner: "a", Capacity: 1000, Held: 6, Load: 5600, Hot: hot0}, other}, us)
		if _, _, load, hot := b.Publish(rest); load >= 600 || hot != "" {
			t.Fatalf("named by its new holder: %d %q, want the cold units' decayed load and no hot", load, hot)
		}
		// Taken back and let go of again: named for Handover, then not.
		b.Inputs(nil, us)
		_, _, held, again := b.Publish(meters)
		b.Publish(rest)
		time.Sleep(Handover - time.Second)
		if _, _, load, hot := b.Publish(rest); load < held*3/4 || hot != again {
			t.Fatalf("let go of again, %v after: %d %q, want about %d %q", Handover-time.Second, load, hot, held, again)
		}
		time.Sleep(time.Second)
		if _, _, load, hot := b.Publish(rest); load >= 600 || hot != "" {
			t.Fatalf("%v after: %d %q, want the cold units' decayed load and no hot", Handover, load, hot)
		}
	})
}

// TestHandoverLent: a cold unit handed over for load stays in its
// releaser's total, not named, until its new holder's entry shows another
// lease count (its take published), or for Handover; a take of it planned
// back here waits while the new holder keeps it, and a free row is read.
func TestHandoverLent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		us := units(4)
		meters := map[plan.Unit]*Meter{}
		for _, u := range us {
			meters[u] = NewMeter(leases.Throughput{BytesPerSecond: 100}, time.Now())
		}
		b := New(Config{Self: "a", Mode: Mode{Balance: plan.Balance{ByLoad: true}}, Mover: plan.Mover{HoldTime: -1, MinHold: -1, MaxMovesPerMinute: -1}})
		n := leases.Member{Owner: "n", Incarnation: "i1", Capacity: 1000, Held: 1}
		fleet := func(n leases.Member) {
			b.hand.setFleet([]leases.Member{{Owner: "a", Capacity: 1000, Held: 4}, n})
			b.live = map[string]leases.Member{"n": n}
		}
		b.count = map[plan.Unit]string{}
		for _, u := range us {
			b.count[u] = "a"
		}
		held := map[plan.Unit]plan.Held{us[0]: {}, us[1]: {}, us[2]: {}, us[3]: {}}
		a := maps.Clone(b.count)
		a[us[0]] = "n" // a load move
		free := func(plan.Unit) leases.Lease { return leases.Lease{} }
		b.Hold(0, a, held, free)
		fleet(n)
		if got := b.Hold(int64(time.Second), a, held, free); got[us[0]] != "n" {
			t.Fatalf("not handed over: %v", got)
		}
		if _, _, load, _ := b.Publish(meters); load != 400 {
			t.Fatalf("draining: %d, want 400", load)
		}
		rest := maps.Clone(meters)
		delete(rest, us[0])
		// What a holds itself now (the meters decay without batches): the
		// load lent is what is published beyond it.
		lent := func() int64 {
			_, _, load, _ := b.Publish(rest)
			_, _, own, _ := New(Config{Self: "c"}).Publish(rest)
			return load - own
		}
		time.Sleep(2 * time.Second)
		if l := lent(); l < 90 || l > 110 {
			t.Fatalf("let go of: %d lent, want 100", l)
		}
		if _, _, _, hot := b.Publish(rest); hot != "" {
			t.Fatalf("let go of: hot %q, want none", hot)
		}
		// The plan gives it back here: a free row is read, one the new
		// holder holds is left until its lease count changes (or Recheck).
		back := maps.Clone(b.count)
		delete(held, us[0])
		if got := b.Hold(int64(3*time.Second), back, held, free); got[us[0]] != "a" {
			t.Fatalf("a free row planned here not read: %v", got)
		}
		row := func(plan.Unit) leases.Lease { return leases.Lease{Owner: "n", Incarnation: "i1"} }
		b.Hold(int64(4*time.Second), back, held, row)
		if got := b.Hold(int64(5*time.Second), back, held, row); got[us[0]] != "n" {
			t.Fatalf("the new holder keeps it: read again at once: %v", got)
		}
		time.Sleep(10 * time.Second)
		if l := lent(); l < 90 {
			t.Fatalf("new holder's entry unchanged: %d lent, want 100", l)
		}
		// The new holder publishes its take: counted once, by it.
		n.Held = 2
		fleet(n)
		if l := lent(); l != 0 {
			t.Fatalf("take published: %d lent, want 0", l)
		}
		// Handed over again: counted until Handover at most.
		held[us[0]] = plan.Held{}
		b.Hold(int64(time.Minute), maps.Clone(b.count), held, free)
		b.Hold(int64(time.Minute+time.Second), a, held, free)
		b.Publish(meters)
		b.Publish(rest)
		time.Sleep(Handover - time.Second)
		if l := lent(); l < 50 {
			t.Fatalf("%v after: %d lent, want its load", Handover-time.Second, l)
		}
		time.Sleep(time.Second)
		if l := lent(); l != 0 {
			t.Fatalf("%v after: %d lent, want 0", Handover, l)
		}
	})
}

// TestFairShares: a member's fair share is its capacity divided by its
// Cost (CostFactors) over the fleet's, as the plan counts them
// (plan.CostedCapacity); by count, or in a legacy fleet (a capacity unset:
// 1/n each), costs count as 1.
func TestFairShares(t *testing.T) {
	u := func(capacity, load, util int64) Usage {
		return Usage{Capacity: capacity, Load: load, Utilization: util}
	}
	fourX := []Usage{u(1000, 1000, 800), u(1000, 1000, 200), u(1000, 1000, 200), u(1000, 1000, 200)} // CostFactors: 2300, 1000...
	for _, c := range []struct {
		name   string
		us     []Usage
		byLoad bool
		fair   []float64
		costs  []int64
		legacy bool
	}{
		{"capacities", []Usage{u(1000, 0, 0), u(3000, 0, 0)}, true, []float64{0.25, 0.75}, []int64{1000, 1000}, false},
		{"legacy: alike", []Usage{u(1000, 0, 0), u(3000, 0, 0), u(0, 0, 0)}, true, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, []int64{1000, 1000, 1000}, true},
		{"legacy: no costs", []Usage{u(1000, 1000, 800), u(0, 1000, 200)}, true, []float64{0.5, 0.5}, []int64{1000, 1000}, true},
		{"one at 4x per byte: cost 2.3", fourX, true,
			[]float64{434.0 / 3434, 1000.0 / 3434, 1000.0 / 3434, 1000.0 / 3434}, []int64{2300, 1000, 1000, 1000}, false},
		{"by count: no costs", fourX, false, []float64{0.25, 0.25, 0.25, 0.25}, []int64{1000, 1000, 1000, 1000}, false},
		{"capacity and cost: 3/1.35", []Usage{u(1000, 3000, 600), u(3000, 1000, 100)}, true,
			[]float64{1000.0 / 3222, 2222.0 / 3222}, []int64{1000, 1350}, false},
		{"no fleet", nil, true, []float64{}, []int64{}, false},
	} {
		fair, costs, legacy := FairShares(c.us, c.byLoad)
		if !slices.Equal(fair, c.fair) || !slices.Equal(costs, c.costs) || legacy != c.legacy {
			t.Errorf("%s: FairShares = %v, %v, %v; want %v, %v, %v", c.name, fair, costs, legacy, c.fair, c.costs, c.legacy)
		}
	}
	if Weight(0) != 1000 || Weight(-5) != 1000 || Weight(2500) != 2500 {
		t.Errorf("Weight: 0 -> %d, -5 -> %d, 2500 -> %d; want 1000, 1000, 2500", Weight(0), Weight(-5), Weight(2500))
	}
}
