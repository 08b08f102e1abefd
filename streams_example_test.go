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

// Adding and removing a stream while the service runs: Subscribe returns
// once the stream is in the plan, Unsubscribe once its shards are drained,
// checkpointed and released. Here on the in-memory Kinesis and lease store.
func ExampleService_Unsubscribe() {
	k := kinesisfake.New()
	for _, s := range []string{"orders", "returns"} {
		if err := k.CreateStream(s, 1); err != nil {
			log.Fatal(err)
		}
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
	handler := func(stream string) kinesislease.HandlerFunc[Order] {
		return func(ctx context.Context, o Order) error {
			handled <- stream + " " + o.ID
			return nil
		}
	}
	opts := []kinesislease.SubscribeOption{kinesislease.WithStartPosition(kltype.TrimHorizon), kinesislease.WithPolling(10*time.Millisecond, 20*time.Millisecond, 0)}
	if err := kinesislease.Subscribe(svc, "orders", handler("orders"), opts...); err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()

	if err := kinesislease.Publish(ctx, svc, "returns", "customer-1", Order{ID: "r-1"}); err != nil {
		log.Fatal(err)
	}
	// While Run runs: in the plan at the next round, read from TRIM_HORIZON.
	if err := kinesislease.Subscribe(svc, "returns", handler("returns"), opts...); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-handled)

	if err := svc.Unsubscribe(ctx, "orders"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders held after Unsubscribe:", len(svc.Held("orders")))

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// returns r-1
	// orders held after Unsubscribe: 0
}
