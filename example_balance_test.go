package kinesislease_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
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

// What an instance carries of its fleet's load: Health().Balance, here for
// a lone instance of capacity 2 on the in-memory Kinesis and lease store,
// once the load of the records it read is published in its membership
// entry. With more instances, Share beside FairShare tells whether the plan
// gives it its part (otelkl reports both as gauges).
func ExampleService_Health_balance() {
	k := kinesisfake.New()
	if err := k.CreateStream("orders", 1); err != nil {
		log.Fatal(err)
	}
	svc, err := kinesislease.New(aws.Config{},
		kinesislease.WithKinesisClient(k),
		kinesislease.WithLeaseStore(memory.New()),
		kinesislease.WithCapacity(2),
		kinesislease.WithHeartbeat(50*time.Millisecond, 300*time.Millisecond),
		kinesislease.WithLogger(slog.New(slog.DiscardHandler)),
	)
	if err != nil {
		log.Fatal(err)
	}
	handled := make(chan struct{}, 100)
	err = kinesislease.Subscribe(svc, "orders", func(context.Context, Order) error { handled <- struct{}{}; return nil },
		kinesislease.WithStartPosition(kltype.TrimHorizon), kinesislease.WithPolling(10*time.Millisecond, 20*time.Millisecond, 0))
	if err != nil {
		log.Fatal(err)
	}
	b := svc.Health().Balance
	fmt.Printf("before Run: mode %s, tolerance %v, capacity %v, %d members\n", b.Mode, b.Tolerance, b.Capacity, b.Members)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	for i := range 20 {
		if err := kinesislease.Publish(ctx, svc, "orders", "customer-1", Order{ID: fmt.Sprintf("order-%d", i)}); err != nil {
			log.Fatal(err)
		}
	}
	for range 20 {
		<-handled
	}
	deadline := time.Now().Add(10 * time.Second)
	for b = svc.Health().Balance; b.Load == 0; b = svc.Health().Balance {
		if time.Now().After(deadline) {
			log.Fatalf("no load published: %+v", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("running: %d member, load > 0: %v, fair share %v, share %v\n", b.Members, b.Load > 0, b.FairShare, b.Share)

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// before Run: mode throughput, tolerance 0.2, capacity 2, 0 members
	// running: 1 member, load > 0: true, fair share 1, share 1
}

// Correcting the plan by utilization: each instance publishes its
// process's CPU use (ProcessCPU) beside its load, and an instance whose
// handlers cost more per byte than the fleet's is given less load. A
// function of your own works as well, such as the share of a worker pool
// in use; nil is refused.
func ExampleWithUtilization() {
	_, err := kinesislease.New(awsConfig(), kinesislease.WithUtilization(kinesislease.ProcessCPU()))
	fmt.Println(err)
	busy, size := 3, 8 // a pool of 8 workers, 3 of them busy
	_, err = kinesislease.New(awsConfig(), kinesislease.WithUtilization(func() float64 { return float64(busy) / float64(size) }))
	fmt.Println(err)
	_, err = kinesislease.New(awsConfig(), kinesislease.WithUtilization(nil))
	fmt.Println(err)
	// Output:
	// <nil>
	// <nil>
	// kinesislease: invalid option: WithUtilization(nil)
}
