package balance

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/leases"
)

func TestPublishedUtilization(t *testing.T) {
	for _, c := range []struct {
		before int64
		v      float64
		want   int64
	}{
		{0, 0.43, 430},         // the first, to two significant digits
		{0, 0.4341, 430},       //
		{0, 1.234, 1200},       //
		{0, 0, 1},              // published: at least 1
		{0, 0.0004, 1},         //
		{0, 250, 100_000},      // at most MaxUtilization
		{0, -1, 0},             // no measure: nothing
		{0, math.NaN(), 0},     //
		{430, 0.47, 430},       // within 10%: unchanged
		{430, 0.39, 430},       //
		{430, 0.48, 480},       // beyond: anew
		{430, 0.38, 380},       //
		{50, 0.059, 50},        // small values: within 0.01
		{50, 0.061, 61},        //
		{1200, 1.3, 1200},      //
		{1200, 1.35, 1400},     // 1350 → 1400 (two digits, halves up)
		{430, math.NaN(), 430}, // no measure: as before
	} {
		if got := PublishedUtilization(c.before, c.v); got != c.want {
			t.Errorf("PublishedUtilization(%d, %v) = %d, want %d", c.before, c.v, got, c.want)
		}
	}
}

func TestCostFactors(t *testing.T) {
	u := func(load, util int64) Usage { return Usage{Capacity: 1000, Load: load, Utilization: util} }
	for _, c := range []struct {
		name string
		us   []Usage
		want []int64
	}{
		{"none published", []Usage{u(1000, 0), u(1000, 0)}, []int64{1000, 1000}},
		{"equal cost per byte", []Usage{u(1000, 200), u(3000, 600)}, []int64{1000, 1000}},
		// Work 16, 4, 4, 4 on equal loads: fleet 7/load, the first 16/7 =
		// 2.29 → 2.3; the others 0.57, not given more than their share: 1.
		{"one at 4x", []Usage{u(1000, 800), u(1000, 200), u(1000, 200), u(1000, 200)}, []int64{2300, 1000, 1000, 1000}},
		{"one at 12x: at most 3", []Usage{u(1000, 1200), u(1000, 100), u(1000, 100), u(1000, 100)}, []int64{3000, 1000, 1000, 1000}},
		// 1.4 / ((1.4+1)/2) = 1.1667 → 1150 (steps of 50).
		{"a little above", []Usage{u(1000, 700), u(1000, 500)}, []int64{1150, 1000}},
		// Without utilization (or load): 1000, and out of the fleet's sums.
		{"some unpublished", []Usage{u(1000, 600), u(1000, 300), u(5000, 0), u(0, 900)}, []int64{1350, 1000, 1000, 1000}},
		// Capacity 2 at the same utilization does twice the work: on the
		// same load, twice the cost per byte. 2/(3/2) = 1.33 → 1350.
		{"capacities", []Usage{{Capacity: 2000, Load: 1000, Utilization: 500}, u(1000, 500)}, []int64{1350, 1000}},
		{"extremes stay in bounds", []Usage{{Capacity: 1 << 40, Load: 1 << 50, Utilization: 1 << 40}, u(1, 1)}, []int64{1000, 3000}},
		{"empty", nil, []int64{}},
	} {
		if got := CostFactors(c.us); !slices.Equal(got, c.want) {
			t.Errorf("%s: CostFactors = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestInputsCost: by load, the members' Costs come from the utilizations
// in their entries (this member's from its own entry too, as the others
// see it); none without a published utilization, and none by count.
func TestInputsCost(t *testing.T) {
	us := units(8)
	entries := []leases.Member{
		{Owner: "a", Capacity: 1000, Load: 4000, Utilization: 800},
		{Owner: "b", Capacity: 1000, Load: 4000, Utilization: 200},
		{Owner: "c", Capacity: 1000, Load: 4000},
	}
	b := New(Config{Self: "b", Mode: Mode{Balance: plan.Balance{ByLoad: true}}})
	ms, _, _, _ := b.Inputs(entries, us)
	if got := []int64{ms[0].Cost, ms[1].Cost, ms[2].Cost}; !slices.Equal(got, []int64{1600, 1000, 1000}) {
		t.Fatalf("Costs %v, want [1600 1000 1000] (a: 0.8 against the fleet's 0.5)", got)
	}
	// The plan: a keeps less than the others.
	a := b.Plan(entries, us)
	n := map[string]int{}
	for _, o := range a {
		n[o]++
	}
	if n["a"] >= n["b"] || n["a"] >= n["c"] {
		t.Fatalf("plan counts %v: a should hold fewer", n)
	}
	entries[0].Utilization = 0
	entries[1].Utilization = 0
	if ms, _, _, _ := b.Inputs(entries, us); ms[0].Cost != 0 || ms[1].Cost != 0 {
		t.Fatalf("no utilization published: Costs %d, %d, want none", ms[0].Cost, ms[1].Cost)
	}
	entries[0].Utilization = 800
	bc := New(Config{Self: "b"})
	if ms, _, _, _ := bc.Inputs(entries, us); ms[0].Cost != 0 {
		t.Fatalf("by count: Cost %d, want none", ms[0].Cost)
	}
}

// TestPublishUtilization: the utilization published is the decayed
// average of the samples, changed only past UtilizationStep; nothing
// without a source, by count, or before a first measure.
func TestPublishUtilization(t *testing.T) {
	v := -1.0
	src := func() float64 { return v }
	b := New(Config{Self: "a", Mode: Mode{Balance: plan.Balance{ByLoad: true}, Utilization: src}})
	t0 := time.Unix(1000, 0)
	if got := b.util.publish(t0); got != 0 {
		t.Fatalf("no measure yet: published %d", got)
	}
	v = 0.5
	if got := b.util.publish(t0); got != 500 {
		t.Fatalf("first measure 0.5: published %d", got)
	}
	// A step to 1.0: the average crosses 0.55 (beyond 10%) after about
	// 0.1·UtilizationWindow (1.6 s), and reaches 1.0 after a few windows.
	v = 1.0
	at, moved := t0, time.Duration(0)
	for range 300 {
		at = at.Add(time.Second)
		if got := b.util.publish(at); got != 500 && moved == 0 {
			moved = at.Sub(t0)
		}
	}
	if moved != 2*time.Second {
		t.Fatalf("a step 0.5 → 1.0 republished after %v, want after 2 s (0.1 of the way at %v)", moved, UtilizationWindow)
	}
	// Within the step of the average (0.997) from below.
	if got := b.util.publish(at); got < 900 || got > 1000 {
		t.Fatalf("after five windows at 1.0: published %d, want 900 to 1000", got)
	}
	// Noise within the step: unchanged.
	pub := b.util.publish(at)
	for i := range 120 {
		at = at.Add(time.Second)
		v = 1.0 + 0.3*float64(i%2*2-1)
		if got := b.util.publish(at); got != pub {
			t.Fatalf("noise ±0.3 around 1.0: published %d, then %d", pub, got)
		}
	}
	for _, cfg := range []Config{{Self: "a", Mode: Mode{Utilization: src}}, {Self: "a", Mode: Mode{Balance: plan.Balance{ByLoad: true}}}} {
		if b := New(cfg); b.util.publish(at) != 0 {
			t.Fatalf("%+v: published a utilization", cfg)
		}
	}
}
