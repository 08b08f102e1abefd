package balance

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

// FairShare is the fraction of the fleet's load a member of capacity
// (Weight) should carry among n members whose capacities (each counted by
// Weight) add up to capacities: in proportion to its capacity, or 1/n in a
// legacy fleet (a member publishes no capacity), which the plan counts as
// every member alike. It is 0 for an empty fleet.
func FairShare(capacity, capacities int64, n int, legacy bool) float64 {
	switch {
	case n <= 0:
		return 0
	case legacy:
		return 1 / float64(n)
	case capacities <= 0:
		return 0
	}
	return float64(Weight(capacity)) / float64(capacities)
}
