package kinesislease_test

import (
	"fmt"

	"github.com/kinesislease/kinesislease"
)

// Balancing by throughput (the default) with a tolerance of 30%, on an
// instance twice the size of the others that holds at most 50 shards: the
// plan gives it twice their share of the fleet's bytes per second, within
// its cap. Invalid settings are refused by New.
func ExampleWithBalance() {
	_, err := kinesislease.New(awsConfig(),
		kinesislease.WithBalance(kinesislease.ByThroughput{Tolerance: 0.3}),
		kinesislease.WithCapacity(2),
		kinesislease.WithMaxLeases(50),
	)
	fmt.Println(err)
	_, err = kinesislease.New(awsConfig(), kinesislease.WithBalance(kinesislease.ByCount{}))
	fmt.Println(err)
	_, err = kinesislease.New(awsConfig(),
		kinesislease.WithBalance(kinesislease.ByThroughput{Tolerance: -1}),
		kinesislease.WithCapacity(0),
	)
	fmt.Println(err)
	// Output:
	// <nil>
	// <nil>
	// kinesislease: invalid option: WithBalance(ByThroughput{Tolerance: -1}): want 0 <= Tolerance <= 10
	// kinesislease: invalid option: WithCapacity(0): want 0.001 <= weight <= 1e6
}

// Instances of different sizes in one fleet: each sets its own capacity,
// published in its membership entry. With ByCount, three instances of
// capacities 1, 1 and 2 on 40 shards hold 10, 10 and 20.
func ExampleWithCapacity() {
	_, err := kinesislease.New(awsConfig(),
		kinesislease.WithBalance(kinesislease.ByCount{}),
		kinesislease.WithCapacity(2),
	)
	fmt.Println(err)
	// Output:
	// <nil>
}
