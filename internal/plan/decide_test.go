package plan

import (
	"fmt"
	"slices"
	"testing"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	u := func(i int) Unit { return Unit{Stream: "s", Shard: fmt.Sprintf("shard-%d", i)} }
	none := func(Unit) bool { return false }
	cases := []struct {
		name    string
		a       map[Unit]string
		held    map[Unit]Held
		orphans map[Unit]bool
		settled bool
		max     int
		failing func(Unit) bool
		want    Actions
	}{
		{
			name: "takes what the plan gives and is not held",
			a:    map[Unit]string{u(1): "me", u(2): "me", u(3): "b"},
			held: map[Unit]Held{u(1): {Active: true}},
			want: Actions{Takes: []Unit{u(2)}},
		},
		{
			name:    "hands over only once the plan has settled",
			a:       map[Unit]string{u(1): "b"},
			held:    map[Unit]Held{u(1): {Active: true}},
			settled: false,
			want:    Actions{},
		},
		{
			name:    "hands over what the plan gives another",
			a:       map[Unit]string{u(1): "b"},
			held:    map[Unit]Held{u(1): {Active: true}},
			settled: true,
			want:    Actions{Handoffs: []Unit{u(1)}},
		},
		{
			name:    "a draining lease is not handed over twice",
			a:       map[Unit]string{u(1): "b"},
			held:    map[Unit]Held{u(1): {Active: true, Stopping: true}},
			settled: true,
			want:    Actions{},
		},
		{
			name:    "orphans the plan gives self are retaken directly, not released first (the livelock)",
			a:       map[Unit]string{u(1): "me", u(2): "me", u(3): "me"},
			orphans: map[Unit]bool{u(1): false, u(2): false, u(3): false},
			want:    Actions{Retakes: []Unit{u(1), u(2), u(3)}},
		},
		{
			name:    "orphans the plan gives another, or nobody, are released",
			a:       map[Unit]string{u(1): "b"},
			orphans: map[Unit]bool{u(1): false, u(2): false},
			want:    Actions{Releases: []Unit{u(1), u(2)}},
		},
		{
			name:    "an orphan whose old worker still stops waits",
			a:       map[Unit]string{u(1): "me"},
			orphans: map[Unit]bool{u(1): true},
			held:    map[Unit]Held{u(1): {Stopping: true}},
			want:    Actions{},
		},
		{
			name:    "beyond the cap, leases the plan gives nobody go",
			a:       map[Unit]string{u(1): "me"},
			held:    map[Unit]Held{u(1): {Active: true}, u(2): {Active: true}, u(3): {Active: true}},
			settled: true, max: 1,
			want: Actions{OverCap: []Unit{u(2), u(3)}},
		},
		{
			name:    "a unit set aside after a failure is neither taken nor retaken",
			a:       map[Unit]string{u(1): "me", u(2): "me"},
			orphans: map[Unit]bool{u(2): false},
			failing: func(x Unit) bool { return true },
			want:    Actions{Releases: []Unit{u(2)}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := c.failing
			if f == nil {
				f = none
			}
			got := Decide("me", c.a, c.held, c.orphans, c.settled, c.max, f)
			for _, p := range []struct {
				what      string
				got, want []Unit
			}{
				{"handoffs", got.Handoffs, c.want.Handoffs}, {"overCap", got.OverCap, c.want.OverCap},
				{"takes", got.Takes, c.want.Takes}, {"retakes", got.Retakes, c.want.Retakes}, {"releases", got.Releases, c.want.Releases},
			} {
				if !slices.Equal(p.got, p.want) {
					t.Errorf("%s = %v, want %v", p.what, p.got, p.want)
				}
			}
		})
	}
}
