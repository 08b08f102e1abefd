package balance

import "github.com/kinesislease/kinesislease/internal/plan"

// How a member's part of the fleet is counted, the same way by the plan,
// by Health and by the command's members listing.

// Weight is a capacity in thousandths as the plan counts it: 1000 (a
// capacity of 1) when none is published (0 or less).
func Weight(capacity int64) int64 {
	if capacity <= 0 {
		return 1000
	}
	return capacity
}

// FairShares returns, for the members of a fleet as their entries publish
// them (us: a Capacity of 0 or less is none, a member of a version before
// capacities), the fraction of the fleet's load the plan aims to give each
// (fair) and each one's Cost in the load plan (thousandths), as the
// Balancer's plan counts them. By load (byLoad), a member's fair share is
// in proportion to its capacity divided by its Cost (CostFactors,
// plan.CostedCapacity), so that one of Cost 2000 is given half the share
// its capacity alone would; by count, in proportion to its capacity, every
// Cost 1000. legacy: a member publishes no capacity, and the fleet plans by
// count, every member alike: 1/n each, every Cost 1000. The plan lowers a
// fair share where caps bind; these do not.
func FairShares(us []Usage, byLoad bool) (fair []float64, costs []int64, legacy bool) {
	fair = make([]float64, len(us))
	for _, u := range us {
		legacy = legacy || u.Capacity <= 0
	}
	if legacy || !byLoad {
		costs = make([]int64, len(us))
		for i := range costs {
			costs[i] = MinCost
		}
	} else {
		costs = CostFactors(us)
	}
	if legacy {
		for i := range fair {
			fair[i] = 1 / float64(len(us))
		}
		return fair, costs, true
	}
	weights := make([]int64, len(us))
	var sum int64
	for i, u := range us {
		weights[i] = plan.CostedCapacity(u.Capacity, costs[i])
		sum += weights[i]
	}
	for i, w := range weights {
		fair[i] = float64(w) / float64(sum)
	}
	return fair, costs, false
}
