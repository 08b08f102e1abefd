package kinesislease_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// One service reads a stream named "orders" in two accounts, with one
// lease table: the service's client reads its own account's, and a
// subscription with its own client (WithKinesisClient given to Subscribe)
// reads the other's, its rows keyed apart by WithLeaseNamespace. Here the
// two accounts are two in-memory Kinesis; on AWS the second client's
// credentials assume a role in the other account (docs/consuming.md).
func ExampleWithLeaseNamespace() {
	home, other := kinesisfake.New(), kinesisfake.New()
	for _, k := range []*kinesisfake.Kinesis{home, other} {
		if err := k.CreateStream("orders", 1); err != nil {
			log.Fatal(err)
		}
	}
	store := memory.New()
	svc, err := kinesislease.New(aws.Config{},
		kinesislease.WithKinesisClient(home),
		kinesislease.WithLeaseStore(store),
		kinesislease.WithHeartbeat(50*time.Millisecond, 300*time.Millisecond),
		kinesislease.WithLogger(slog.New(slog.DiscardHandler)),
	)
	if err != nil {
		log.Fatal(err)
	}
	handled := make(chan string, 2)
	handler := func(account string) kinesislease.HandlerFunc[Order] {
		return func(ctx context.Context, o Order) error {
			handled <- account + ": " + o.ID
			return nil
		}
	}
	opts := []kinesislease.SubscribeOption{kinesislease.WithStartPosition(kltype.TrimHorizon), kinesislease.WithPolling(10*time.Millisecond, 20*time.Millisecond, 0)}
	if err := kinesislease.Subscribe(svc, "orders", handler("home"), opts...); err != nil {
		log.Fatal(err)
	}
	err = kinesislease.Subscribe(svc, "orders", handler("acct-b"), append(opts,
		kinesislease.WithKinesisClient(other),
		kinesislease.WithLeaseNamespace("acct-b"),
	)...)
	if err != nil {
		log.Fatal(err)
	}
	for k, id := range map[*kinesisfake.Kinesis]string{home: "h-1", other: "b-1"} {
		data, _ := json.Marshal(Order{ID: id})
		if _, err := k.PutRecord(context.Background(), &kinesis.PutRecordInput{StreamName: aws.String("orders"), PartitionKey: aws.String(id), Data: data}); err != nil {
			log.Fatal(err)
		}
	}

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	got := []string{<-handled, <-handled}
	slices.Sort(got)
	fmt.Println(got)
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	for _, key := range []string{"orders", "acct-b/orders"} {
		l, err := store.Get(context.Background(), leases.Key{Stream: key, Shard: "shardId-000000000000"})
		fmt.Println(l.Key, err == nil && !l.Checkpoint.IsZero())
	}
	// Output:
	// [acct-b: b-1 home: h-1]
	// orders:shardId-000000000000 true
	// acct-b/orders:shardId-000000000000 true
}
