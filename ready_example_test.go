package kinesislease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// Waiting until the service reads its shards, as a test before it puts
// records or a startup probe would, with no loop over Held or Health: Ready
// returns once this instance holds its part of the plan, here every shard
// (in a test, kinesisleasetest.WaitReady does the same and fails the test
// with the reason). Here on the in-memory Kinesis and lease store.
func ExampleService_Ready() {
	k := kinesisfake.New()
	if err := k.CreateStream("orders", 2); err != nil {
		log.Fatal(err)
	}
	svc, err := kinesislease.New(aws.Config{},
		kinesislease.WithKinesisClient(k),
		kinesislease.WithLeaseStore(memory.New()),
		kinesislease.WithHeartbeat(50*time.Millisecond, 300*time.Millisecond),
		kinesislease.WithLogger(slog.New(slog.DiscardHandler)),
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := kinesislease.Subscribe(svc, "orders", func(ctx context.Context, o Order) error { return nil }); err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()

	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := svc.Ready(readyCtx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("held:", svc.Held("orders"))

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println("Ready once Run returned:", errors.Is(svc.Ready(context.Background()), kinesislease.ErrStopped))
	// Output:
	// held: [shardId-000000000000 shardId-000000000001]
	// Ready once Run returned: true
}
