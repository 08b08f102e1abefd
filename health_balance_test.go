package kinesislease

import (
	"testing"

	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// TestBalanceHealth: an instance's part of the fleet's load from its
// configuration and the live entries, by case.
func TestBalanceHealth(t *testing.T) {
	t.Parallel()
	self := func(capacity, load int64) leases.Member {
		return leases.Member{Owner: "me", Capacity: capacity, Load: load}
	}
	other := func(owner string, capacity, load int64) leases.Member {
		return leases.Member{Owner: owner, Capacity: capacity, Load: load}
	}
	byLoad := config{owner: "me", balance: plan.Balance{ByLoad: true}}
	for _, c := range []struct {
		name  string
		cfg   config
		fleet []leases.Member
		want  kltype.BalanceHealth
	}{
		{"before Run: the configuration alone", config{owner: "me", capacity: 2500, maxLeases: 7}, nil,
			kltype.BalanceHealth{Mode: kltype.BalanceByCount, Capacity: 2.5, MaxLeases: 7}},
		{"default mode and tolerance, alone and idle", byLoad, []leases.Member{self(1000, 0)},
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.2, Capacity: 1, Members: 1, FairShare: 1}},
		{"ByThroughput{Tolerance: 0.35}", config{owner: "me", balance: plan.Balance{ByLoad: true, Tolerance: 35}}, []leases.Member{self(1000, 0)},
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.35, Capacity: 1, Members: 1, FairShare: 1}},
		{"capacities 1/1/2, this one of 2 carrying half", config{owner: "me", capacity: 2000, balance: plan.Balance{ByLoad: true}},
			[]leases.Member{other("a", 1000, 300), other("b", 1000, 200), self(2000, 500)},
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.2, Capacity: 2, Load: 500, FleetLoad: 1000, Members: 3, FairShare: 0.5, Share: 0.5}},
		{"its own capacity before its entry shows it", config{owner: "me", capacity: 3000}, []leases.Member{other("a", 1000, 100), self(0, 0)},
			kltype.BalanceHealth{Mode: kltype.BalanceByCount, Capacity: 3, FleetLoad: 100, Members: 2, FairShare: 0.75}},
		{"a member of an earlier version: by count, equal shares", config{owner: "me", capacity: 3000, balance: plan.Balance{ByLoad: true}},
			[]leases.Member{other("old", 0, 600), self(3000, 200), other("z", 1000, 200)},
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.2, Capacity: 3, Load: 200, FleetLoad: 1000, Members: 3, FairShare: 1.0 / 3, Share: 0.2, Legacy: true}},
		{"its own entry not read yet: counted in, as the plan does", byLoad, []leases.Member{other("a", 1000, 400)},
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.2, Capacity: 1, FleetLoad: 400, Members: 2, FairShare: 0.5}},
	} {
		if got := balanceHealth(c.cfg, c.fleet); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}
