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
		if got := mv.Handoffs(c.at, self, plan, count, held); !slices.Equal(got, units(u, c.want)) {
			t.Fatalf("at %v: %v, want %v", c.at, got, units(u, c.want))
		}
	}

	// The plan gives a unit back before the hold time is over: it waits
	// anew from the next time it moves.
	var m2 Mover
	plan2 := map[Unit]string{u(0): "other"}
	held2 := map[Unit]time.Duration{u(0): 0}
	own := map[Unit]string{u(0): self}
	m2.Handoffs(time.Hour, self, plan2, own, held2)
	m2.Handoffs(time.Hour+20*time.Second, self, own, own, held2)
	if got := m2.Handoffs(time.Hour+40*time.Second, self, plan2, own, held2); len(got) != 0 {
		t.Fatalf("a break in the plan did not restart the hold time: %v", got)
	}
	if got := m2.Handoffs(time.Hour+70*time.Second, self, plan2, own, held2); len(got) != 1 {
		t.Fatalf("30 s after the break: %v", got)
	}

	// No delays: negative settings.
	m3 := Mover{HoldTime: -1, MinHold: -1, MaxMovesPerMinute: -1}
	if got := m3.Handoffs(200*time.Second, self, plan, count, held); len(got) != 7 {
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

// TestMoverTakenForLoad: a unit taken for load (the count plan gives it
// to another member, the member it was taken from) is held by the load
// rules when the plan gives it back, not handed straight back; it goes at
// once when its count-plan owner changes (a member joined or left).
func TestMoverTakenForLoad(t *testing.T) {
	u := shards("s", 1)[0]
	self := "n"
	count := map[Unit]string{u: "r"} // the releaser's by count
	toSelf := map[Unit]string{u: self}
	back := map[Unit]string{u: "r"}
	mv := Mover{HoldTime: 30 * time.Second, MinHold: 2 * time.Minute}
	// The round that takes it: planned here, not held yet.
	if got := mv.Handoffs(0, self, toSelf, count, nil); len(got) != 0 {
		t.Fatalf("nothing held: %v", got)
	}
	held := map[Unit]time.Duration{u: time.Second}
	for _, c := range []struct {
		at   time.Duration
		plan map[Unit]string
		want int
	}{
		{2 * time.Second, back, 0},             // the plan changed its mind during the handoff: held
		{40 * time.Second, back, 0},            // the hold time is over, the minimum hold is not
		{2*time.Minute + time.Second, back, 1}, // both over: a load move
	} {
		if got := mv.Handoffs(c.at, self, c.plan, count, held); len(got) != c.want {
			t.Fatalf("at %v: %v, want %d", c.at, got, c.want)
		}
	}

	// First seen held while the plan gives it away, and the count plan's
	// owner changed since the take: at once.
	var m2 Mover
	m2.Handoffs(0, self, toSelf, count, nil)
	if got := m2.Handoffs(2*time.Second, self, map[Unit]string{u: "x"}, map[Unit]string{u: "x"}, held); len(got) != 1 {
		t.Fatalf("count owner changed since the take: %v, want at once", got)
	}
	// Held a while, planned here, then the count plan moves it elsewhere
	// (a join): at once; without the change, by the load rules.
	var m3 Mover
	m3.Handoffs(0, self, toSelf, count, nil)
	m3.Handoffs(time.Hour, self, toSelf, count, held)
	if got := m3.Handoffs(time.Hour+time.Second, self, back, count, held); len(got) != 0 {
		t.Fatalf("count owner unchanged: %v, want held", got)
	}
	if got := m3.Handoffs(time.Hour+2*time.Second, self, map[Unit]string{u: "j"}, map[Unit]string{u: "j"}, held); len(got) != 1 {
		t.Fatalf("count owner changed (a join): %v, want at once", got)
	}
	// A unit held that was never planned here (no take seen): the count
	// plan giving it to another member moves it at once, as before.
	var m4 Mover
	if got := m4.Handoffs(time.Hour, self, back, count, held); len(got) != 1 {
		t.Fatalf("never planned here: %v, want at once", got)
	}
	// ForLoad tells a load move from the others.
	if !mv.ForLoad(u) || m3.ForLoad(u) {
		t.Fatalf("ForLoad: %v %v, want true false", mv.ForLoad(u), m3.ForLoad(u))
	}
}
