package plan

import (
	"slices"
	"testing"
	"time"
)

// TestMover: load moves wait for the hold time, the minimum hold and the
// move limit; moves of the count plan and units planned to nobody go at
// once.
func TestMover(t *testing.T) {
	u := func(i int) Unit { return shards("s", 10)[i] }
	self := "me"
	count := map[Unit]string{}
	for i := range 10 {
		count[u(i)] = self
	}
	count[u(9)] = "other" // a count move: the members changed
	plan := map[Unit]string{}
	for i := range 10 {
		plan[u(i)] = self
	}
	held := map[Unit]time.Duration{}
	for i := range 10 {
		held[u(i)] = 0
	}
	held[u(5)] = 170 * time.Second // taken late: its minimum hold ends at 290 s
	plan[u(9)] = "other"
	delete(plan, u(8)) // planned to nobody
	for i := 1; i <= 5; i++ {
		plan[u(i)] = "other" // load moves: the count plan gives them to self
	}
	var mv Mover
	for _, c := range []struct {
		at   time.Duration
		want []int
	}{
		{200 * time.Second, []int{8, 9}},       // the load moves start waiting
		{229 * time.Second, []int{8, 9}},       // 29 s: not yet
		{230 * time.Second, []int{1, 2, 8, 9}}, // 30 s: two, the limit of a minute
		{260 * time.Second, []int{1, 2, 8, 9}}, // the minute is not over
		{290 * time.Second, []int{1, 2, 3, 4, 8, 9}},
		{350 * time.Second, []int{1, 2, 3, 4, 5, 8, 9}}, // u(5) past its minimum hold
	} {
		if got := mv.Handoffs(c.at, self, plan, count, held, nil); !slices.Equal(got, units(u, c.want)) {
			t.Fatalf("at %v: %v, want %v", c.at, got, units(u, c.want))
		}
	}

	// The plan gives a unit back before the hold time is over: it waits
	// anew from the next time it moves.
	var m2 Mover
	plan2 := map[Unit]string{u(0): "other"}
	held2 := map[Unit]time.Duration{u(0): 0}
	own := map[Unit]string{u(0): self}
	m2.Handoffs(time.Hour, self, plan2, own, held2, nil)
	m2.Handoffs(time.Hour+20*time.Second, self, own, own, held2, nil)
	if got := m2.Handoffs(time.Hour+40*time.Second, self, plan2, own, held2, nil); len(got) != 0 {
		t.Fatalf("a break in the plan did not restart the hold time: %v", got)
	}
	if got := m2.Handoffs(time.Hour+70*time.Second, self, plan2, own, held2, nil); len(got) != 1 {
		t.Fatalf("30 s after the break: %v", got)
	}

	// No delays: negative settings.
	m3 := Mover{HoldTime: -1, MinHold: -1, MaxMovesPerMinute: -1}
	if got := m3.Handoffs(200*time.Second, self, plan, count, held, nil); len(got) != 7 {
		t.Fatalf("without delays: %v", got)
	}
}

func units(u func(int) Unit, is []int) []Unit {
	out := make([]Unit, len(is))
	for k, i := range is {
		out[k] = u(i)
	}
	return out
}

// TestMoverTakenForLoad: a unit this member took for load from another
// member (the count plan gives it to another member; its row showed it
// held before the take) is held by the load rules when the plan gives it
// away again, the minimum hold counted from its take where it goes back
// (to its count-plan owner, or to the member it was taken from): it does
// not go straight back when the plan flips after the take. It moves on to
// a third member after the hold time; it goes at once where its
// count-plan owner changed (a member joined or left, capacities or caps
// changed), and so does a free row taken for load that no member was seen
// holding, and a unit held that the plan never gave here.
func TestMoverTakenForLoad(t *testing.T) {
	u := shards("s", 1)[0]
	const self = "n"
	type round struct {
		at          time.Duration
		plan, count string
		holder      string // "-": held here (taken at 1 s); else its row's holder as last read
		want        bool   // handed over
	}
	for _, c := range []struct {
		name   string
		rounds []round
		load   bool // the last handoff is one for load (ForLoad)
	}{
		{"the plan flips back after the take", []round{
			{0, self, "r", "r", false}, // planned here for load while r holds it: taken
			{2 * time.Second, "r", "r", "-", false},
			{40 * time.Second, "r", "r", "-", false},           // the hold time is over, the minimum hold is not
			{2 * time.Minute, "r", "r", "-", false},            // 1 s short of it
			{2*time.Minute + time.Second, "r", "r", "-", true}, // both over: a load move
		}, true},
		{"back to the member it was taken from", []round{
			{-time.Second, self, "r", "x", false},
			{0, self, "r", "", false}, // x let go of it
			{2 * time.Second, "x", "r", "-", false},
			{40 * time.Second, "x", "r", "-", false},
			{2*time.Minute + time.Second, "x", "r", "-", true},
		}, true},
		{"on to a third member", []round{
			{0, self, "r", "x", false},
			{2 * time.Second, "y", "r", "-", false},
			{31 * time.Second, "y", "r", "-", false}, // 29 s
			{32 * time.Second, "y", "r", "-", true},  // the hold time: no minimum hold
		}, true},
		{"a flip back and forth restarts the hold time", []round{
			{0, self, "r", "r", false},
			{2 * time.Minute, "r", "r", "-", false},
			{2*time.Minute + 20*time.Second, self, "r", "-", false},
			{2*time.Minute + 40*time.Second, "r", "r", "-", false},
			{3*time.Minute + 10*time.Second, "r", "r", "-", true},
		}, true},
		{"the count-plan owner changes with the flip", []round{
			{0, self, "r", "r", false},
			{2 * time.Second, "j", "j", "-", true}, // a join: at once
		}, false},
		{"the count-plan owner changed while planned here", []round{
			{0, self, "r", "r", false},
			{2 * time.Second, self, "r", "-", false},
			{time.Minute, self, "j", "-", false},
			{time.Minute + time.Second, "r", "r", "-", true}, // its owner then was j
		}, false},
		{"a free row taken for load, never seen held", []round{
			{0, self, "r", "", false}, // members starting: no holder to go back to, nor figures
			{2 * time.Second, "r", "r", "-", true},
		}, false},
		{"held, never planned here", []round{
			{2 * time.Second, "r", "r", "-", true},
		}, false},
		{"taken by count, then a load move", []round{
			{0, self, self, "x", false},
			{2 * time.Second, "y", self, "-", false},
			{2 * time.Minute, "y", self, "-", false},
			{2*time.Minute + time.Second, "y", self, "-", true},
		}, true},
		{"planned nowhere", []round{
			{0, self, "r", "", false},
			{2 * time.Second, "", "r", "-", true},
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mv := Mover{HoldTime: 30 * time.Second, MinHold: 2 * time.Minute}
			for _, r := range c.rounds {
				plan, count := map[Unit]string{u: r.plan}, map[Unit]string{u: r.count}
				if r.plan == "" {
					plan = map[Unit]string{}
				}
				var held map[Unit]time.Duration
				if r.holder == "-" {
					held = map[Unit]time.Duration{u: time.Second}
				}
				holder := func(Unit) string { return r.holder }
				if got := mv.Handoffs(r.at, self, plan, count, held, holder); len(got) == 1 != r.want {
					t.Fatalf("at %v (plan %q, count %q): %v, want handed over %v", r.at, r.plan, r.count, got, r.want)
				}
			}
			if mv.ForLoad(u) != c.load {
				t.Fatalf("ForLoad %v, want %v", mv.ForLoad(u), c.load)
			}
		})
	}
}
