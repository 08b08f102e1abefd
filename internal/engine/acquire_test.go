package engine

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kinesislease/kinesislease/leases"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	u := func(i int) unit { return unit{Stream: "s", Shard: fmt.Sprintf("shard-%d", i)} }
	none := func(unit) bool { return false }
	cases := []struct {
		name    string
		a       map[unit]string
		held    map[unit]heldInfo
		orphans map[unit]bool
		settled bool
		max     int
		failing func(unit) bool
		want    actions
	}{
		{
			name: "takes what the plan gives and is not held",
			a:    map[unit]string{u(1): "me", u(2): "me", u(3): "b"},
			held: map[unit]heldInfo{u(1): {active: true}},
			want: actions{takes: []unit{u(2)}},
		},
		{
			name:    "hands over only once the plan has settled",
			a:       map[unit]string{u(1): "b"},
			held:    map[unit]heldInfo{u(1): {active: true}},
			settled: false,
			want:    actions{},
		},
		{
			name:    "hands over what the plan gives another",
			a:       map[unit]string{u(1): "b"},
			held:    map[unit]heldInfo{u(1): {active: true}},
			settled: true,
			want:    actions{handoffs: []unit{u(1)}},
		},
		{
			name:    "a draining lease is not handed over twice",
			a:       map[unit]string{u(1): "b"},
			held:    map[unit]heldInfo{u(1): {active: true, stopping: true}},
			settled: true,
			want:    actions{},
		},
		{
			name:    "orphans the plan gives self are retaken directly, not released first (the livelock)",
			a:       map[unit]string{u(1): "me", u(2): "me", u(3): "me"},
			orphans: map[unit]bool{u(1): false, u(2): false, u(3): false},
			want:    actions{retakes: []unit{u(1), u(2), u(3)}},
		},
		{
			name:    "orphans the plan gives another, or nobody, are released",
			a:       map[unit]string{u(1): "b"},
			orphans: map[unit]bool{u(1): false, u(2): false},
			want:    actions{releases: []unit{u(1), u(2)}},
		},
		{
			name:    "an orphan whose old worker still stops waits",
			a:       map[unit]string{u(1): "me"},
			orphans: map[unit]bool{u(1): true},
			held:    map[unit]heldInfo{u(1): {stopping: true}},
			want:    actions{},
		},
		{
			name:    "beyond the cap, leases the plan gives nobody go",
			a:       map[unit]string{u(1): "me"},
			held:    map[unit]heldInfo{u(1): {active: true}, u(2): {active: true}, u(3): {active: true}},
			settled: true, max: 1,
			want: actions{overCap: []unit{u(2), u(3)}},
		},
		{
			name:    "a unit set aside after a failure is neither taken nor retaken",
			a:       map[unit]string{u(1): "me", u(2): "me"},
			orphans: map[unit]bool{u(2): false},
			failing: func(x unit) bool { return true },
			want:    actions{releases: []unit{u(2)}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := c.failing
			if f == nil {
				f = none
			}
			got := decide("me", c.a, c.held, c.orphans, c.settled, c.max, f)
			for _, p := range []struct {
				what      string
				got, want []unit
			}{
				{"handoffs", got.handoffs, c.want.handoffs}, {"overCap", got.overCap, c.want.overCap},
				{"takes", got.takes, c.want.takes}, {"retakes", got.retakes, c.want.retakes}, {"releases", got.releases, c.want.releases},
			} {
				if !slices.Equal(p.got, p.want) {
					t.Errorf("%s = %v, want %v", p.what, p.got, p.want)
				}
			}
		})
	}
}

// TestAhead: which of two checkpoints of one shard is further; a position
// an operator's rewind wrote is never overridden.
func TestAhead(t *testing.T) {
	t.Parallel()
	cp := func(seq string, sub int64) leases.Checkpoint {
		return leases.Checkpoint{Sequence: seq, SubSequence: sub}
	}
	for _, c := range []struct {
		a, b leases.Checkpoint
		want bool
	}{
		{cp("49590338271490256608559692538361571095921575989136589198", 0), cp("49590338271490256608559692538361571095921575989136588964", 0), true},
		{cp("49590338271490256608559692538361571095921575989136588964", 0), cp("49590338271490256608559692538361571095921575989136589198", 0), false},
		{cp("1000", 0), cp("999", 0), true}, // longer is larger
		{cp("999", 0), cp("1000", 0), false},
		{cp("1000", 0), cp("1000", 0), false}, // equal
		{cp("1000", 0), cp("1000", 2), true},  // the whole aggregate done
		{cp("1000", 2), cp("1000", 0), false},
		{cp("1000", 3), cp("1000", 2), true},
		{cp(leases.ShardEnd, 0), cp("1000", 0), true},
		{cp("1000", 0), cp(leases.ShardEnd, 0), false},
		{cp("2000", 0), cp("AT_SEQUENCE_NUMBER:1000", 0), false}, // an operator's rewind stands
		{cp("2000", 0), cp("TRIM_HORIZON", 0), false},
		{cp("2000", 0), leases.Checkpoint{}, false},
	} {
		if got := ahead(c.a, c.b); got != c.want {
			t.Errorf("ahead(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
