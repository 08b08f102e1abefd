package engine

import (
	"fmt"
	"slices"
	"testing"
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
