package kinesislease_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/dynamo"
	"github.com/kinesislease/kinesislease/leases/memory"
)

type Order struct {
	ID       string  `json:"id"`
	Customer string  `json:"customer"`
	Total    float64 `json:"total"`
}

// A service of many instances: each runs this same code against one lease
// table; each shard is read by the instance holding its lease.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	svc, err := kinesislease.New(cfg,
		kinesislease.WithApp("fulfilment", "0.1.0"),
		kinesislease.WithLeaseStore(dynamo.New(cfg, "fulfilment-leases")),
	)
	if err != nil {
		log.Fatal(err)
	}
	fulfil := func(ctx context.Context, o Order) error {
		rec, _ := kinesislease.RecordFrom(ctx)
		slog.InfoContext(ctx, "fulfilling", "order.id", o.ID, "shard", rec.ShardID, "seq", rec.SequenceNumber)
		return nil // acknowledged
	}
	if err := kinesislease.Subscribe(svc, "fulfilment", fulfil, kinesislease.WithCodec(codec.Msgpack)); err != nil {
		log.Fatal(err)
	}
	// Blocks until SIGINT or SIGTERM, then drains, checkpoints and releases.
	if err := svc.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// Options are checked when the service or subscription is built, never
// later by Run; each error names what is wrong and matches
// ErrInvalidOption. Here a heartbeat slower than the timeout: the leases
// would be lost between two heartbeats.
func ExampleNew_invalidOption() {
	_, err := kinesislease.New(awsConfig(), kinesislease.WithHeartbeat(10*time.Second, 5*time.Second))
	fmt.Println(errors.Is(err, kinesislease.ErrInvalidOption))
	fmt.Println(err)
	// Output:
	// true
	// kinesislease: invalid option: WithHeartbeat(10s, 5s): want 0 < interval <= timeout/4
}

// A second subscription to one stream on one service is refused, whether
// the stream is named by its name or its ARN: the lease rows of a stream
// are keyed by its name.
func ExampleSubscribe_duplicate() {
	svc, _ := kinesislease.New(awsConfig())
	handle := func(context.Context, Order) error { return nil }
	_ = kinesislease.Subscribe(svc, "orders", handle, kinesislease.WithStartPosition(kltype.TrimHorizon))
	err := kinesislease.Subscribe(svc, "arn:aws:kinesis:us-east-1:123456789012:stream/orders", handle)
	fmt.Println(errors.Is(err, kinesislease.ErrDuplicateSubscription), err)
	// Output:
	// true kinesislease: stream already subscribed: "arn:aws:kinesis:us-east-1:123456789012:stream/orders" (subscribed as "orders"): both key their lease rows "orders"; if they are different streams (in another account or region), give one of them WithLeaseNamespace
}

// A subscription has one dead-letter sink: a stream (WithDeadLetterStream)
// or a function (WithDeadLetter). Given both, Subscribe refuses the
// subscription instead of letting the last one silently win.
func ExampleWithDeadLetterStream_oneSink() {
	svc, _ := kinesislease.New(awsConfig())
	handle := func(context.Context, Order) error { return nil }
	err := kinesislease.Subscribe(svc, "orders", handle,
		kinesislease.WithDeadLetterStream("orders-dead"),
		kinesislease.WithDeadLetter(func(ctx context.Context, dl *kltype.DeadLetterRecord) error { return nil }))
	fmt.Println(errors.Is(err, kinesislease.ErrInvalidOption))
	fmt.Println(err)
	// Output:
	// true
	// subscribe "orders": kinesislease: invalid option: WithDeadLetter and WithDeadLetterStream both given: a subscription has one dead-letter sink, give one of them
}

// The handler reaches the record's metadata through its context. Here a
// whole service runs on the in-memory Kinesis of kinesisfake and the
// memory lease store; in production, on kinesislease.New(cfg) and a
// dynamo.Store.
func ExampleRecordFrom() {
	k := kinesisfake.New()
	if err := k.CreateStream("fulfilment", 1); err != nil {
		log.Fatal(err)
	}
	svc, err := kinesislease.New(aws.Config{}, kinesislease.WithKinesisClient(k), kinesislease.WithLeaseStore(memory.New()),
		kinesislease.WithLogger(slog.New(slog.DiscardHandler)), kinesislease.WithHeartbeat(50*time.Millisecond, 300*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	handle := func(ctx context.Context, o Order) error {
		rec, ok := kinesislease.RecordFrom(ctx)
		if !ok {
			return errors.New("not called by kinesislease")
		}
		fmt.Println(o.ID, rec.PartitionKey, rec.ShardID, rec.SequenceNumber != "", rec.Attempt)
		cancel() // one record is enough here
		return nil
	}
	// The default start position, LATEST, is the records put after
	// Subscribe: this one, put before Run.
	if err := kinesislease.Subscribe(svc, "fulfilment", handle); err != nil {
		log.Fatal(err)
	}
	if _, err := k.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("fulfilment"), PartitionKey: aws.String("customer-17"),
		Data: []byte(`{"id":"ord-000042","customer":"customer-17","total":42}`)}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("Run:", svc.Run(ctx))
	// Output:
	// ord-000042 customer-17 shardId-000000000000 true 1
	// Run: <nil>
}

// awsConfig stands for config.LoadDefaultConfig in examples that call no AWS.
func awsConfig() aws.Config { return aws.Config{Region: "us-east-1"} }

// The lease protocol's settings: a heartbeat interval and a timeout
// after which a silent instance's shards move. An interval that leaves no
// room for two failed heartbeats is refused.
func ExampleWithHeartbeat() {
	_, err := kinesislease.New(awsConfig(),
		kinesislease.WithHeartbeat(2*time.Second, 5*time.Second),
		kinesislease.WithMaxLeases(0),
	)
	fmt.Println(errors.Is(err, kinesislease.ErrInvalidOption))
	fmt.Println(err)
	// Output:
	// true
	// kinesislease: invalid option: WithHeartbeat(2s, 5s): want 0 < interval <= timeout/4
	// kinesislease: invalid option: WithMaxLeases(0): must be positive
}

// A memory budget for records fetched and not yet handled, shared by every
// shard the instance holds: 64 MiB and 200,000 records here. Less than
// 1 MiB or 100 records is refused.
func ExampleWithMemoryBudget() {
	_, err := kinesislease.New(awsConfig(), kinesislease.WithMemoryBudget(64<<20, 200_000))
	fmt.Println(err)
	_, err = kinesislease.New(awsConfig(), kinesislease.WithMemoryBudget(4096, 10))
	fmt.Println(err)
	// Output:
	// <nil>
	// kinesislease: invalid option: WithMemoryBudget(4096, 10): want at least 1 MiB and 100 records
}

// GetRecords in AWS JSON 1.1 with the SDK's own decoder instead of CBOR
// and the library's (the default, which gives the same records for less
// CPU): for an endpoint or proxy whose answers only the SDK's path reads.
// An unknown encoding is refused by New.
func ExampleWithGetRecordsEncoding() {
	svc, err := kinesislease.New(awsConfig(), kinesislease.WithGetRecordsEncoding(kinesislease.EncodingSDK))
	fmt.Println(svc != nil, err)
	_, err = kinesislease.New(awsConfig(), kinesislease.WithGetRecordsEncoding(7))
	fmt.Println(errors.Is(err, kinesislease.ErrInvalidOption))
	// Output:
	// true <nil>
	// true
}

// A producer-only program: a Publisher built from a Kinesis client, no
// Service and no lease store. In production the client is
// kinesis.NewFromConfig(cfg); here the in-memory Kinesis of
// kinesisfake, which counts what arrived.
func ExampleNewPublisherFromClient() {
	ctx := context.Background()
	k := kinesisfake.New()
	if err := k.CreateStream("fulfilment", 2); err != nil {
		log.Fatal(err)
	}
	p, err := kinesislease.NewPublisherFromClient[Order](k, "fulfilment", kinesislease.WithPublishCodec(codec.Msgpack))
	if err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		if err := p.Put(ctx, "customer-17", Order{ID: fmt.Sprintf("ord-%06d", i), Customer: "customer-17", Total: 42}); err != nil {
			log.Fatal(err)
		}
	}
	// Close flushes what Put buffered.
	if err := p.Close(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("records in the stream:", k.Records("fulfilment"))
	// Output:
	// records in the stream: 3
}

// fulfilment is a handler with its dependencies: the interface form.
type fulfilment struct{ log *slog.Logger }

// Handle fulfils one order.
func (f fulfilment) Handle(ctx context.Context, o Order) error {
	f.log.InfoContext(ctx, "fulfilling", "order.id", o.ID)
	return nil
}

// A type with a Handle method subscribes with SubscribeHandler; a plain
// function with Subscribe. Both run the same pipeline.
func ExampleSubscribeHandler() {
	svc, _ := kinesislease.New(awsConfig())
	err := kinesislease.SubscribeHandler[Order](svc, "fulfilment", fulfilment{log: slog.Default()}, kinesislease.WithCodec(codec.Msgpack))
	fmt.Println(err)
	// Output:
	// <nil>
}

// A batch handler for a bulk sink: the items of one shard, in order, up to
// 500 at a time (or 1s after a read, whichever first). It names the items
// that failed; the others are acknowledged.
func ExampleSubscribeBatch() {
	svc, _ := kinesislease.New(awsConfig())
	index := func(ctx context.Context, items []kinesislease.BatchItem[Order]) error {
		var failed []kltype.ItemFailure
		for i, it := range items {
			if it.Value.ID == "" { // say the bulk write rejected this one
				failed = append(failed, kltype.ItemFailure{Index: i, Err: kinesislease.DeadLetter(errors.New("no id"))})
			}
		}
		if failed != nil {
			return kinesislease.FailItems(failed...)
		}
		return nil
	}
	err := kinesislease.SubscribeBatch(svc, "fulfilment", index, kinesislease.WithBatchSize(500, 5<<20, time.Second))
	fmt.Println(err)
	// Output:
	// <nil>
}

// Enhanced fan-out: the stream consumer "fulfilment-service" is registered
// at Run if it does not exist, and each held shard's records are pushed as
// they arrive. Every instance of the application uses the same name. A
// name Kinesis would refuse is refused at Subscribe.
func ExampleWithEnhancedFanOut() {
	svc, err := kinesislease.New(awsConfig())
	if err != nil {
		panic(err)
	}
	fulfil := func(ctx context.Context, o Order) error { return nil }
	err = kinesislease.Subscribe(svc, "fulfilment", fulfil, kinesislease.WithEnhancedFanOut("fulfilment-service"))
	fmt.Println(err)
	err = kinesislease.Subscribe(svc, "returns", fulfil, kinesislease.WithEnhancedFanOut("returns service"))
	fmt.Println(errors.Is(err, kinesislease.ErrInvalidOption))
	// Output:
	// <nil>
	// true
}

// Records older than an hour when they would be handled go to the
// dead-letter sink with reason expired instead (here every subscription's
// default, given to New); a negative age is refused.
func ExampleWithMaxRecordAge() {
	svc, _ := kinesislease.New(awsConfig(), kinesislease.WithMaxRecordAge(time.Hour))
	err := kinesislease.Subscribe(svc, "orders", func(context.Context, Order) error { return nil },
		kinesislease.WithDeadLetterStream("orders-dead"))
	fmt.Println(err)

	_, err = kinesislease.New(awsConfig(), kinesislease.WithMaxRecordAge(-time.Minute))
	fmt.Println(errors.Is(err, kinesislease.ErrInvalidOption), err)
	// Output:
	// <nil>
	// true kinesislease: invalid option: WithMaxRecordAge(-1m0s): must not be negative (0 means no maximum age)
}
