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

// Replaying a stream from code while the service reads it: the instance
// holding the shard is asked to rewind, finishes the record in flight and
// reads again from the position, keeping its lease. Here on the in-memory
// Kinesis and lease store; with DynamoDB and Kinesis it is the same call.
func ExampleService_Rewind() {
	k := kinesisfake.New()
	if err := k.CreateStream("orders", 1); err != nil {
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
	handled := make(chan string, 10)
	err = kinesislease.Subscribe(svc, "orders", func(ctx context.Context, o Order) error {
		handled <- o.ID
		return nil
	}, kinesislease.WithStartPosition(kltype.TrimHorizon), kinesislease.WithPolling(10*time.Millisecond, 20*time.Millisecond, 0))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()

	for _, id := range []string{"o-1", "o-2"} {
		if err := kinesislease.Publish(ctx, svc, "orders", "customer-1", Order{ID: id}); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("handled", <-handled, <-handled)

	// Every shard of the stream ("") from its oldest record.
	results, err := svc.Rewind(ctx, "orders", "", kltype.TrimHorizon)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Printf("%s: held by this instance: %v, rewound to %s\n", r.ShardID, r.Holder == svc.Owner(), r.To)
	}
	fmt.Println("handled again", <-handled, <-handled)

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// handled o-1 o-2
	// shardId-000000000000: held by this instance: true, rewound to TRIM_HORIZON
	// handled again o-1 o-2
}
