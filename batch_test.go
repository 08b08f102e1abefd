package kinesislease_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestBatchPartialFailure: a batch subscription on kinesalite. Batches hold
// at most 8 items, in order; the handler names its failed items: those
// failing once are retried in a batch of their own and then acknowledged,
// one asked to be dead-lettered is at once, one failing every attempt is
// dead-lettered after the policy's 3 attempts, and a record that cannot be
// decoded is dead-lettered without reaching the handler. Every other record
// is acknowledged once, and the checkpoint ends at the last record.
func TestBatchPartialFailure(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	put(t, kc, stream, 0, 20)
	if _, err := kc.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String(stream),
		Records: []ktypes.PutRecordsRequestEntry{{Data: []byte("not json"), PartitionKey: aws.String("x")}}}); err != nil {
		t.Fatal(err)
	}
	put(t, kc, stream, 20, 10)

	var (
		mu       sync.Mutex
		acked    = map[int]int{}
		failedAt = map[int]int{} // attempts seen of the items failing
		batches  [][]int
		dead     []*kltype.DeadLetterRecord
		all      = make(chan struct{})
	)
	handler := func(ctx context.Context, items []kinesislease.BatchItem[order]) error {
		mu.Lock()
		defer mu.Unlock()
		var ids []int
		var fails []kltype.ItemFailure
		for i, it := range items {
			id := it.Value.ID
			ids = append(ids, id)
			switch {
			case id == 7:
				fails = append(fails, kltype.ItemFailure{Index: i, Err: kinesislease.DeadLetter(errors.New("poison"))})
			case id == 15:
				failedAt[id] = it.Record.Attempt
				fails = append(fails, kltype.ItemFailure{Index: i, Err: errors.New("always fails")})
			case id%10 == 3 && it.Record.Attempt == 1:
				failedAt[id] = it.Record.Attempt
				fails = append(fails, kltype.ItemFailure{Index: i, Err: errors.New("fails once")})
			default:
				acked[id]++
			}
		}
		batches = append(batches, ids)
		if len(acked) == 28 {
			select {
			case <-all:
			default:
				close(all)
			}
		}
		if fails != nil {
			return kinesislease.FailItems(fails...)
		}
		return nil
	}
	store := memory.New()
	svc, err := kinesislease.New(testutil.Config(t), testEncoding(t), kinesislease.WithKinesisClient(kc), kinesislease.WithLeaseStore(store),
		kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	err = kinesislease.SubscribeBatch(svc, stream, handler, kinesislease.WithStartPosition(kltype.TrimHorizon),
		kinesislease.WithBatchSize(8, 1<<20, 0), kinesislease.WithRetryPolicy(plRetry),
		kinesislease.WithDeadLetter(func(_ context.Context, dl *kltype.DeadLetterRecord) error {
			mu.Lock()
			defer mu.Unlock()
			dead = append(dead, dl)
			return nil
		}), kinesislease.WithCheckpoint(1000, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	in := runInstance(t, svc)
	select {
	case <-all:
	case <-in.done:
		t.Fatalf("Run returned %v", in.err)
	case <-time.After(30 * time.Second):
		mu.Lock()
		t.Fatalf("after 30s: acked %v, batches %v", acked, batches)
	}
	// The dead letters land once the item's batch resolves.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(dead)
		mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dead letters, want 3", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	in.stop(t)
	mu.Lock()
	defer mu.Unlock()
	for id := range 30 {
		want := 1
		if id == 7 || id == 15 {
			want = 0
		}
		if acked[id] != want {
			t.Errorf("order %d acknowledged %d times, want %d", id, acked[id], want)
		}
	}
	for _, b := range batches {
		if len(b) > 8 || !slices.IsSorted(b) {
			t.Errorf("batch %v: want at most 8 items, in order", b)
		}
	}
	if failedAt[15] != 3 {
		t.Errorf("order 15 seen at attempt %d last, want 3 (the policy's attempts)", failedAt[15])
	}
	reasons := map[string]int{}
	for _, dl := range dead {
		reasons[dl.Reason]++
	}
	if reasons[kltype.ReasonDeadLetter] != 1 || reasons[kltype.ReasonRetriesExhausted] != 1 || reasons[kltype.ReasonDecode] != 1 {
		t.Errorf("dead letters by reason %v, want one dead-letter, one retries-exhausted, one decode", reasons)
	}
	l, err := store.Get(context.Background(), leases.Key{Stream: stream, Shard: "shardId-000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	last := shardSeqs(t, kc, stream, "shardId-000000000000")
	if l.Checkpoint.Sequence != last[len(last)-1] {
		t.Errorf("checkpoint %s, want the last record %s", l.Checkpoint.Sequence, last[len(last)-1])
	}
}

// TestBatchOptions: WithBatchSize is checked, and refused on a subscription
// that is not a batch one.
func TestBatchOptions(t *testing.T) {
	t.Parallel()
	svc, _ := kinesislease.New(awsConfig())
	h := func(context.Context, []kinesislease.BatchItem[order]) error { return nil }
	err := kinesislease.SubscribeBatch(svc, "orders", h, kinesislease.WithBatchSize(0, 0, -time.Second))
	if !errors.Is(err, kinesislease.ErrInvalidOption) || !strings.Contains(err.Error(), "WithBatchSize") {
		t.Errorf("SubscribeBatch with a bad size: %v", err)
	}
	err = kinesislease.Subscribe(svc, "orders", func(context.Context, order) error { return nil }, kinesislease.WithBatchSize(10, 1024, 0))
	if !errors.Is(err, kinesislease.ErrInvalidOption) || !strings.Contains(err.Error(), "SubscribeBatch") {
		t.Errorf("Subscribe with WithBatchSize: %v", err)
	}
	if err := kinesislease.SubscribeBatch[order](svc, "orders", nil); !errors.Is(err, kinesislease.ErrInvalidOption) {
		t.Errorf("SubscribeBatch(nil): %v", err)
	}
}

// TestBatchLeaseLost: a batch in the handler when the lease is lost (the
// instance cut off from the lease store: its fence passes) has its context
// cancelled, and no checkpoint passes the batch's first record.
func TestBatchLeaseLost(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	put(t, kc, stream, 0, 30)
	cs := &cutStore{Store: memory.New()}
	var mu sync.Mutex
	var firstBlocked string
	cancelled := make(chan struct{}, 1)
	runService(t, kc, cs, "a", func(svc *kinesislease.Service) error {
		return kinesislease.SubscribeBatch(svc, stream, func(ctx context.Context, items []kinesislease.BatchItem[order]) error {
			if items[0].Value.ID < 20 {
				return nil // the first batches go through
			}
			mu.Lock()
			if firstBlocked == "" {
				firstBlocked = items[0].Record.SequenceNumber
			}
			mu.Unlock()
			<-ctx.Done()
			select {
			case cancelled <- struct{}{}:
			default:
			}
			return ctx.Err()
		}, kinesislease.WithStartPosition(kltype.TrimHorizon), kinesislease.WithBatchSize(10, 1<<20, 0),
			kinesislease.WithCheckpoint(1, 20*time.Millisecond), kinesislease.WithPolling(20*time.Millisecond, 50*time.Millisecond, 10))
	}, failoverLease)
	eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstBlocked != ""
	}, func() string { return "no batch reached the handler's blocking part after 30s" })
	cs.cut.Store(true)
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the batch in the handler was not cancelled after the cut")
	}
	mu.Lock()
	blocked := firstBlocked
	mu.Unlock()
	checkpointBefore(t, cs.Store, stream, blocked, "the unacknowledged batch's first record")
	cs.cut.Store(false)
}
