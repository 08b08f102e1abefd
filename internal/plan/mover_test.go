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
