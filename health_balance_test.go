package kinesislease

import (
	"testing"

	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// TestBalanceHealth: an instance's part of the fleet's load from its
// configuration and the live entries, by case: with utilizations
// published, its own and its cost as the plan computes it, and its fair
// share corrected by it (balance.FairShares).
func TestBalanceHealth(t *testing.T) {
	t.Parallel()
	self := func(capacity, load int64) leases.Member {
		return leases.Member{Owner: "me", Capacity: capacity, Load: load}
	}
	other := func(owner string, capacity, load int64) leases.Member {
		return leases.Member{Owner: owner, Capacity: capacity, Load: load}
	}
	byLoad := config{owner: "me", balance: plan.Balance{ByLoad: true}}
	used := func(m leases.Member, util int64) leases.Member { m.Utilization = util; return m }
	// Four members of equal capacity and load, this one at 4 times the
	// others' utilization: its cost per byte is 0.8 over the fleet's 0.35,
	// a cost of 2.3, and its fair share 1000/2.3 (434) over 434 + 3 × 1000.
	fourX := []leases.Member{used(other("a", 1000, 1000), 200), used(self(1000, 1000), 800), used(other("b", 1000, 1000), 200), used(other("c", 1000, 1000), 200)}
	for _, c := range []struct {
		name  string
		cfg   config
		fleet []leases.Member
		want  kltype.BalanceHealth
	}{
		{"before Run: the configuration alone", config{owner: "me", capacity: 2500, maxLeases: 7}, nil,
			kltype.BalanceHealth{Mode: kltype.BalanceByCount, Capacity: 2.5, MaxLeases: 7}},
		{"default mode and tolerance, alone and idle", byLoad, []leases.Member{self(1000, 0)},
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.2, Capacity: 1, Members: 1, Cost: 1, FairShare: 1}},
		{"ByThroughput{Tolerance: 0.35}", config{owner: "me", balance: plan.Balance{ByLoad: true, Tolerance: 35}}, []leases.Member{self(1000, 0)},
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.35, Capacity: 1, Members: 1, Cost: 1, FairShare: 1}},
		{"capacities 1/1/2, this one of 2 carrying half", config{owner: "me", capacity: 2000, balance: plan.Balance{ByLoad: true}},
			[]leases.Member{other("a", 1000, 300), other("b", 1000, 200), self(2000, 500)},
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.2, Capacity: 2, Load: 500, FleetLoad: 1000, Members: 3, Cost: 1, FairShare: 0.5, Share: 0.5}},
		{"its own capacity before its entry shows it", config{owner: "me", capacity: 3000}, []leases.Member{other("a", 1000, 100), self(0, 0)},
			kltype.BalanceHealth{Mode: kltype.BalanceByCount, Capacity: 3, FleetLoad: 100, Members: 2, Cost: 1, FairShare: 0.75}},
		{"a member of an earlier version: by count, equal shares", config{owner: "me", capacity: 3000, balance: plan.Balance{ByLoad: true}},
			[]leases.Member{other("old", 0, 600), self(3000, 200), other("z", 1000, 200)},
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.2, Capacity: 3, Load: 200, FleetLoad: 1000, Members: 3, Cost: 1, FairShare: 1.0 / 3, Share: 0.2, Legacy: true}},
		{"its own entry not read yet: counted in, as the plan does", byLoad, []leases.Member{other("a", 1000, 400)},
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.2, Capacity: 1, FleetLoad: 400, Members: 2, Cost: 1, FairShare: 0.5}},
		{"4 times the others' cost per byte: cost 2.3, fair share corrected", byLoad, fourX,
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.2, Capacity: 1, Load: 1000, FleetLoad: 4000, Members: 4,
				Utilization: 0.8, Cost: 2.3, FairShare: 434.0 / 3434, Share: 0.25}},
		{"another at 4 times: its cost is not this one's", byLoad, append([]leases.Member{used(self(1000, 1000), 200)}, fourX[2:]...),
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.2, Capacity: 1, Load: 1000, FleetLoad: 3000, Members: 3,
				Utilization: 0.2, Cost: 1, FairShare: 1.0 / 3, Share: 1.0 / 3}},
		{"costly, of capacity 3: 3/1.35 of 1 + 3/1.35", config{owner: "me", capacity: 3000, balance: plan.Balance{ByLoad: true}},
			[]leases.Member{used(other("a", 1000, 3000), 600), used(self(3000, 1000), 100)},
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.2, Capacity: 3, Load: 1000, FleetLoad: 4000, Members: 2,
				Utilization: 0.1, Cost: 1.35, FairShare: 2222.0 / 3222, Share: 0.25}},
		{"by count: utilization shown, no cost", config{owner: "me"}, fourX,
			kltype.BalanceHealth{Mode: kltype.BalanceByCount, Capacity: 1, Load: 1000, FleetLoad: 4000, Members: 4, Utilization: 0.8, Cost: 1, FairShare: 0.25, Share: 0.25}},
		{"legacy: no cost", byLoad, append(fourX[:3:3], used(other("old", 0, 1000), 0)),
			kltype.BalanceHealth{Mode: kltype.BalanceByThroughput, Tolerance: 0.2, Capacity: 1, Load: 1000, FleetLoad: 4000, Members: 4,
				Utilization: 0.8, Cost: 1, FairShare: 0.25, Share: 0.25, Legacy: true}},
	} {
		if got := balanceHealth(c.cfg, c.fleet); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}
