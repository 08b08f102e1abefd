package kinesisfake_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// Shipment is the record type of the whole-service tests.
type Shipment struct {
	Customer string `json:"customer"`
	N        int    `json:"n"` // the customer's n-th shipment
}

// handling records every delivery of the services under test.
type handling struct {
	mu       sync.Mutex
	byShard  map[string][]string // sequence numbers, first deliveries, in order
	seen     map[string]bool     // shard/sequence number delivered
	byOwner  map[string]int      // deliveries per service
	lastN    map[string]int      // newest N first delivered per customer
	distinct int                 // records delivered at least once
	want     int                 // close done at that many
	done     chan struct{}       // closed once want records were delivered
	errs     []string            // order violations
}

func newHandling(want int) *handling {
	return &handling{byShard: map[string][]string{}, seen: map[string]bool{}, byOwner: map[string]int{},
		lastN: map[string]int{}, want: want, done: make(chan struct{})}
}

func (h *handling) handler(owner string) kinesislease.HandlerFunc[Shipment] {
	return func(ctx context.Context, s Shipment) error {
		rec, _ := kinesislease.RecordFrom(ctx)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.byOwner[owner]++
		id := rec.ShardID + "/" + rec.SequenceNumber
		if h.seen[id] {
			return nil // a redelivery after a handover: at least once
		}
		h.seen[id] = true
		if seqs := h.byShard[rec.ShardID]; len(seqs) > 0 && !seqLess(seqs[len(seqs)-1], rec.SequenceNumber) {
			h.errs = append(h.errs, fmt.Sprintf("shard %s: %s first delivered after %s", rec.ShardID, rec.SequenceNumber, seqs[len(seqs)-1]))
		}
		h.byShard[rec.ShardID] = append(h.byShard[rec.ShardID], rec.SequenceNumber)
		if s.N != h.lastN[s.Customer]+1 {
			h.errs = append(h.errs, fmt.Sprintf("customer %s: shipment %d first delivered after %d", s.Customer, s.N, h.lastN[s.Customer]))
		}
		h.lastN[s.Customer] = max(h.lastN[s.Customer], s.N)
		h.distinct++
		if h.distinct == h.want {
			close(h.done)
		}
		return nil
	}
}

// seqLess compares sequence numbers as Kinesis means them: as integers.
func seqLess(a, b string) bool {
	x, _ := new(big.Int).SetString(a, 10)
	y, _ := new(big.Int).SetString(b, 10)
	return x != nil && y != nil && x.Cmp(y) < 0
}

// waitUntil polls cond until it holds, failing the test after a minute (of
// the synctest bubble's clock: no real time passes).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTwoServicesOnInMemoryKinesis runs a whole service test without AWS:
// two instances of a service share a 4-shard stream of the in-memory
// Kinesis through one memory lease store; 200 records are published, one
// instance stops half way, and every record is handled at least once, in
// order per shard and per partition key. It runs in a testing/synctest
// bubble: the heartbeats, polling and backoff run on the bubble's clock,
// so the test takes milliseconds and never sleeps for real.
func TestTwoServicesOnInMemoryKinesis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream, records = "shipments", 200
		k := kinesisfake.New()
		if err := k.CreateStream(stream, 4); err != nil {
			t.Fatal(err)
		}
		store := memory.New()
		h := newHandling(records)
		log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))

		type instance struct {
			svc    *kinesislease.Service
			cancel context.CancelFunc
			done   chan error
		}
		start := func(owner string) *instance {
			svc, err := kinesislease.New(aws.Config{},
				kinesislease.WithOwner(owner),
				kinesislease.WithLeaseStore(store),
				kinesislease.WithKinesisClient(k),
				kinesislease.WithLogger(log),
				kinesislease.WithHeartbeat(50*time.Millisecond, 300*time.Millisecond),
			)
			if err != nil {
				t.Fatal(err)
			}
			err = kinesislease.Subscribe(svc, stream, h.handler(owner),
				kinesislease.WithStartPosition(kltype.TrimHorizon),
				kinesislease.WithPolling(10*time.Millisecond, 20*time.Millisecond, 0),
			)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			in := &instance{svc: svc, cancel: cancel, done: make(chan error, 1)}
			go func() { in.done <- svc.Run(ctx) }()
			return in
		}
		stop := func(in *instance) {
			in.cancel()
			if err := <-in.done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
		a, b := start("instance-a"), start("instance-b")
		defer stop(b)
		aStopped := false
		defer func() {
			if !aStopped {
				stop(a)
			}
		}()

		// Both instances share the shards: 2 each.
		waitUntil(t, "each instance holds 2 shards", func() bool {
			return len(a.svc.Held(stream)) == 2 && len(b.svc.Held(stream)) == 2
		})

		pub, err := kinesislease.NewPublisherFromClient[Shipment](k, stream)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		publish := func(count int) {
			var results []<-chan error
			for i := range count {
				c := fmt.Sprintf("customer-%d", i%16)
				n[c]++
				res, err := pub.PutAsync(c, Shipment{Customer: c, N: n[c]})
				if err != nil {
					t.Fatal(err)
				}
				results = append(results, res)
			}
			for _, res := range results {
				if err := <-res; err != nil {
					t.Fatal(err)
				}
			}
		}
		publish(records / 2)
		waitUntil(t, "the first half is handled", func() bool {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.distinct >= records/2
		})

		// Stop instance a: it checkpoints and releases its shards, which b
		// takes over from the checkpoints.
		stop(a)
		aStopped = true
		k.Throttle(kinesisfake.OpGetRecords, 3) // b rides out throttling too
		publish(records / 2)
		if err := pub.Close(t.Context()); err != nil {
			t.Fatal(err)
		}

		select {
		case <-h.done:
		case <-time.After(time.Minute):
			h.mu.Lock()
			defer h.mu.Unlock()
			t.Fatalf("%d of %d records handled after a minute", h.distinct, records)
		}
		if got := b.svc.Held(stream); len(got) != 4 {
			t.Errorf("b holds %v after a stopped, want every shard", got)
		}
		if got := k.Records(stream); got != records {
			t.Errorf("the stream holds %d records, want %d", got, records)
		}

		h.mu.Lock()
		defer h.mu.Unlock()
		for _, e := range h.errs {
			t.Error(e)
		}
		if h.byOwner["instance-a"] == 0 || h.byOwner["instance-b"] == 0 {
			t.Errorf("deliveries per instance %v: want both to have handled records", h.byOwner)
		}
		for c, last := range h.lastN {
			if last != n[c] {
				t.Errorf("%s: %d of %d shipments handled", c, last, n[c])
			}
		}
		if len(h.byShard) != 4 {
			t.Errorf("records handled from %d shards, want 4", len(h.byShard))
		}
		t.Logf("deliveries per instance %v, %d records", h.byOwner, h.distinct)
	})
}

// TestServiceAcrossResharding: a service reads a stream that is split and
// merged while it runs; the children are read after their parents end, so
// every customer's shipments are handled in order.
func TestServiceAcrossResharding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stream, records = "shipments", 300
		k := kinesisfake.New()
		if err := k.CreateStream(stream, 3); err != nil {
			t.Fatal(err)
		}
		h := newHandling(records)
		svc, err := kinesislease.New(aws.Config{},
			kinesislease.WithOwner("only"),
			kinesislease.WithLeaseStore(memory.New()),
			kinesislease.WithKinesisClient(k),
			kinesislease.WithLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))),
			kinesislease.WithHeartbeat(50*time.Millisecond, 300*time.Millisecond),
			kinesislease.WithShardSyncInterval(100*time.Millisecond),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := kinesislease.Subscribe(svc, stream, h.handler("only"),
			kinesislease.WithStartPosition(kltype.TrimHorizon),
			kinesislease.WithPolling(10*time.Millisecond, 20*time.Millisecond, 0)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()

		pub, err := kinesislease.NewPublisherFromClient[Shipment](k, k.ARN(stream))
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		publish := func(count int) {
			for i := range count {
				c := fmt.Sprintf("customer-%d", i%60)
				n[c]++
				if err := pub.Put(t.Context(), c, Shipment{Customer: c, N: n[c]}); err != nil {
					t.Fatal(err)
				}
			}
		}
		publish(records / 3)
		if _, err := k.SplitShard(stream, "shardId-000000000000"); err != nil {
			t.Fatal(err)
		}
		publish(records / 3)
		if _, err := k.MergeShards(stream, "shardId-000000000001", "shardId-000000000002"); err != nil {
			t.Fatal(err)
		}
		publish(records / 3)
		if err := pub.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.done:
		case <-time.After(time.Minute):
			h.mu.Lock()
			defer h.mu.Unlock()
			t.Fatalf("%d of %d records handled after a minute", h.distinct, records)
		}
		waitUntil(t, "the service holds the 3 open shards", func() bool { return len(svc.Held(stream)) == 3 })

		h.mu.Lock()
		defer h.mu.Unlock()
		for _, e := range h.errs {
			t.Error(e)
		}
		if len(h.byShard) != 6 {
			t.Errorf("records handled from %d shards, want 6 (3, 2 children of a split, 1 of a merge)", len(h.byShard))
		}
	})
}

// A service consumes the in-memory Kinesis as it would AWS: the stream is
// created in memory, the service reads it with WithKinesisClient and a
// memory lease store, and a Publisher puts records with the same client.
// The example waits on a channel, never a sleep; in a test, wrap it in
// synctest.Test to run its heartbeats and polling on a virtual clock.
func ExampleKinesis() {
	k := kinesisfake.New()
	if err := k.CreateStream("shipments", 2); err != nil {
		panic(err)
	}
	svc, err := kinesislease.New(aws.Config{},
		kinesislease.WithKinesisClient(k),
		kinesislease.WithLeaseStore(memory.New()),
		kinesislease.WithLogger(slog.New(slog.DiscardHandler)),
		kinesislease.WithHeartbeat(50*time.Millisecond, 300*time.Millisecond),
	)
	if err != nil {
		panic(err)
	}
	handled := make(chan Shipment)
	err = kinesislease.Subscribe(svc, "shipments", func(ctx context.Context, s Shipment) error {
		select {
		case handled <- s:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, kinesislease.WithStartPosition(kltype.TrimHorizon), kinesislease.WithPolling(10*time.Millisecond, 20*time.Millisecond, 0))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()

	pub, err := kinesislease.NewPublisherFromClient[Shipment](k, "shipments")
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 3; i++ {
		if err := pub.Put(ctx, "customer-7", Shipment{Customer: "customer-7", N: i}); err != nil {
			panic(err)
		}
	}
	if err := pub.Close(ctx); err != nil {
		panic(err)
	}
	for range 3 {
		select {
		case s := <-handled:
			fmt.Println(s.Customer, s.N)
		case <-time.After(10 * time.Second):
			panic("not handled within 10s")
		}
	}
	cancel()
	fmt.Println("Run:", <-done, "records in the stream:", k.Records("shipments"))
	// Output:
	// customer-7 1
	// customer-7 2
	// customer-7 3
	// Run: <nil> records in the stream: 3
}

// Enhanced fan-out on the in-memory Kinesis: the service gets
// Kinesis.Client, an SDK client that the in-memory Kinesis answers in the
// process, and reads with WithEnhancedFanOut: it registers its consumer
// and subscribes to each shard, and the records are pushed as they are
// put.
func ExampleKinesis_Client() {
	k := kinesisfake.New()
	if err := k.CreateStream("shipments", 1); err != nil {
		panic(err)
	}
	svc, err := kinesislease.New(aws.Config{},
		kinesislease.WithKinesisClient(k.Client()),
		kinesislease.WithLeaseStore(memory.New()),
		kinesislease.WithLogger(slog.New(slog.DiscardHandler)),
	)
	if err != nil {
		panic(err)
	}
	handled := make(chan Shipment)
	err = kinesislease.Subscribe(svc, "shipments", func(ctx context.Context, s Shipment) error {
		select {
		case handled <- s:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, kinesislease.WithStartPosition(kltype.TrimHorizon), kinesislease.WithEnhancedFanOut("shipments-app"))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()

	pub, err := kinesislease.NewPublisherFromClient[Shipment](k, "shipments")
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 2; i++ {
		if err := pub.Put(ctx, "customer-7", Shipment{Customer: "customer-7", N: i}); err != nil {
			panic(err)
		}
	}
	if err := pub.Close(ctx); err != nil {
		panic(err)
	}
	for range 2 {
		select {
		case s := <-handled:
			fmt.Println(s.Customer, s.N)
		case <-time.After(10 * time.Second):
			panic("not handled within 10s")
		}
	}
	cancel()
	fmt.Println("Run:", <-done, "subscribed:", k.SubscribeStats().Subscribed > 0)
	// Output:
	// customer-7 1
	// customer-7 2
	// Run: <nil> subscribed: true
}
