package kinesislease_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// keyed is an order of one of many keys, numbered within its key.
type keyed struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// putKeyed puts n records per key for keys, interleaved, on one shard.
func putKeyed(t *testing.T, kc *kinesis.Client, stream string, keys, n, from int) {
	t.Helper()
	var entries []ktypes.PutRecordsRequestEntry
	flush := func() {
		if _, err := kc.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
			t.Fatal(err)
		}
		entries = entries[:0]
	}
	for i := from; i < from+n; i++ {
		for k := range keys {
			data := fmt.Appendf(nil, `{"key":"k%d","n":%d}`, k, i)
			entries = append(entries, ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(fmt.Sprintf("k%d", k))})
			if len(entries) == 500 {
				flush()
			}
		}
	}
	if len(entries) > 0 {
		flush()
	}
}

// keyOrder checks per-key order and counts deliveries.
type keyOrder struct {
	mu       sync.Mutex
	last     map[string]int // newest N first delivered per key
	inside   map[string]bool
	distinct int
	errs     []string
	want     int
	all      chan struct{}
	running  int
	maxRun   int
}

func newKeyOrder(want int) *keyOrder {
	return &keyOrder{last: map[string]int{}, inside: map[string]bool{}, want: want, all: make(chan struct{})}
}

func (o *keyOrder) handler(delay func() time.Duration) kinesislease.HandlerFunc[keyed] {
	return func(ctx context.Context, v keyed) error {
		o.mu.Lock()
		if o.inside[v.Key] {
			o.errs = append(o.errs, fmt.Sprintf("key %s: two records at once", v.Key))
		}
		o.inside[v.Key] = true
		o.running++
		o.maxRun = max(o.maxRun, o.running)
		o.mu.Unlock()
		time.Sleep(delay())
		o.mu.Lock()
		defer o.mu.Unlock()
		o.inside[v.Key] = false
		o.running--
		if last, seen := o.last[v.Key]; v.N > last || !seen {
			if seen && v.N != last+1 || !seen && v.N != 0 {
				o.errs = append(o.errs, fmt.Sprintf("key %s: record %d first delivered after %d", v.Key, v.N, last))
			}
			o.last[v.Key] = v.N
			o.distinct++
			if o.distinct == o.want {
				close(o.all)
			}
		}
		return nil
	}
}

// TestKeyConcurrency: 1,000 keys on one shard, random handler delays, key
// concurrency 16: records of one key never run at once and arrive in
// order, records of different keys do run at once (never more than 16),
// and a restart resumes from a checkpoint that skips no unacknowledged
// record: every record handled, duplicates only after the checkpoint.
func TestKeyConcurrency(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	const keys, per = 1000, 3
	putKeyed(t, kc, stream, keys, per, 0)
	store := memory.New()
	o := newKeyOrder(keys * per)
	rng := rand.New(rand.NewPCG(1, 2))
	var rmu sync.Mutex
	delay := func() time.Duration {
		rmu.Lock()
		defer rmu.Unlock()
		return time.Duration(rng.IntN(2000)) * time.Microsecond
	}
	run := func(owner string, until func() bool) {
		svc, err := kinesislease.New(testutil.Config(t), testEncoding(t), kinesislease.WithKinesisClient(kc), kinesislease.WithLeaseStore(store),
			kinesislease.WithOwner(owner), kinesislease.WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		if err := kinesislease.Subscribe(svc, stream, o.handler(delay), kinesislease.WithStartPosition(kltype.TrimHorizon),
			kinesislease.WithKeyConcurrency(16), kinesislease.WithCheckpoint(100, 50*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		in := runInstance(t, svc)
		deadline := time.Now().Add(60 * time.Second)
		for !until() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not done after 60s (%d of %d records)", owner, o.count(), keys*per)
			}
			time.Sleep(5 * time.Millisecond)
		}
		in.stop(t)
	}
	// Stopped half way, then restarted.
	run("a", func() bool { return o.count() >= keys*per/2 })
	l, err := store.Get(context.Background(), leases.Key{Stream: stream, Shard: "shardId-000000000000"})
	if err != nil || l.Checkpoint.Sequence == "" {
		t.Fatalf("row after the first run: %+v, %v", l, err)
	}
	run("b", func() bool {
		select {
		case <-o.all:
			return true
		default:
			return false
		}
	})
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.errs {
		t.Error(e)
	}
	if o.maxRun < 2 || o.maxRun > 16 {
		t.Errorf("at most %d records ran at once, want between 2 and 16", o.maxRun)
	}
	t.Logf("at most %d records at once", o.maxRun)
}

func (o *keyOrder) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.distinct
}

// TestKeyConcurrencyHeldKey: one key held by RetryAfter does not hold the
// others: every other key's records are handled meanwhile, and the
// checkpoint does not pass the held record.
func TestKeyConcurrencyHeldKey(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	putKeyed(t, kc, stream, 20, 5, 0)
	store := memory.New()
	var mu sync.Mutex
	others := 0
	release := make(chan struct{})
	var heldSeq string
	svc, err := kinesislease.New(testutil.Config(t), testEncoding(t), kinesislease.WithKinesisClient(kc), kinesislease.WithLeaseStore(store),
		kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	err = kinesislease.Subscribe(svc, stream, func(ctx context.Context, v keyed) error {
		if v.Key == "k0" && v.N == 0 {
			select {
			case <-release:
				return nil
			default:
				rec, _ := kinesislease.RecordFrom(ctx)
				mu.Lock()
				heldSeq = rec.SequenceNumber
				mu.Unlock()
				return kinesislease.RetryAfter(20*time.Millisecond, errors.New("not yet"))
			}
		}
		if v.Key != "k0" {
			mu.Lock()
			others++
			mu.Unlock()
		}
		return nil
	}, kinesislease.WithStartPosition(kltype.TrimHorizon), kinesislease.WithKeyConcurrency(4), kinesislease.WithCheckpoint(10, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	in := runInstance(t, svc)
	othersDone := func() int {
		mu.Lock()
		defer mu.Unlock()
		return others
	}
	eventually(t, 30*time.Second, func() bool { return othersDone() == 19*5 },
		func() string {
			return fmt.Sprintf("%d of %d records of the other keys handled while k0 was held", othersDone(), 19*5)
		})
	time.Sleep(100 * time.Millisecond) // checkpoints come every 20ms: give them time to (wrongly) pass the held record
	mu.Lock()
	held := heldSeq
	mu.Unlock()
	checkpointBefore(t, store, stream, held, "the held record")
	close(release)
	in.stop(t)
}

// TestKeyConcurrencyHandoff: per-key order holds across a planned handoff:
// a second instance joins while the first handles 1,000 keys over two
// shards at key concurrency 16; one shard moves, drained by the first
// before the second takes it; every record is handled, each key's records
// first delivered in order, never two of a key at once.
func TestKeyConcurrencyHandoff(t *testing.T) {
	t.Parallel()
	onMemoryStore(t, func(t *testing.T, newStore func() leases.MembershipStore) {
		kc := testutil.KinesisClient(t, testutil.Kinesalite)
		stream := testutil.StreamName(t)
		testutil.CreateStream(t, kc, stream, 2)
		const keys, per = 1000, 4
		putKeyed(t, kc, stream, keys, per, 0)
		o := newKeyOrder(keys * per)
		slow := func() time.Duration { return 2 * time.Millisecond }
		var ins []*instance
		for _, owner := range []string{"a", "b"} {
			ins = append(ins, startWith(t, kc, newStore(), stream, owner, o.handler(slow),
				[]kinesislease.SubscribeOption{kinesislease.WithKeyConcurrency(16)}))
			if owner == "a" {
				deadline := time.Now().Add(30 * time.Second)
				for o.count() < keys*per/4 {
					if time.Now().After(deadline) {
						t.Fatal("a handled too little after 30s")
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		}
		select {
		case <-o.all:
		case <-time.After(60 * time.Second):
			t.Fatalf("%d of %d records handled after 60s", o.count(), keys*per)
		}
		waitSplit(t, stream, map[string]*instance{"a": ins[0], "b": ins[1]}, []int{1, 1}) // the handoff happened
		for _, in := range ins {
			in.stop(t)
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, e := range o.errs {
			t.Error(e)
		}
	})
}

// TestKeyConcurrencyLeaseLost: with records in flight on several keys, the
// instance is cut off from the lease store (its heartbeats stop landing, so
// its fence passes): the records in flight are cancelled and no checkpoint
// passes the first record not acknowledged.
func TestKeyConcurrencyLeaseLost(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	putKeyed(t, kc, stream, 50, 2, 0)
	cs := &cutStore{Store: memory.New()}
	var mu sync.Mutex
	acked := 0
	var blockedSeq string
	cancelled := make(chan struct{}, 100)
	startWith(t, kc, cs, stream, "a", func(ctx context.Context, v keyed) error {
		if v.Key == "k7" || v.Key == "k9" {
			rec, _ := kinesislease.RecordFrom(ctx)
			mu.Lock()
			if blockedSeq == "" || compareSeq(rec.SequenceNumber, blockedSeq) < 0 {
				blockedSeq = rec.SequenceNumber
			}
			mu.Unlock()
			<-ctx.Done() // in flight until the lease is lost
			cancelled <- struct{}{}
			return ctx.Err()
		}
		mu.Lock()
		acked++
		mu.Unlock()
		return nil
	}, []kinesislease.SubscribeOption{kinesislease.WithKeyConcurrency(8)}, failoverLease)
	ackedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return acked
	}
	eventually(t, 30*time.Second, func() bool { return ackedNow() == 48*2 },
		func() string { return fmt.Sprintf("%d of %d records of the free keys handled", ackedNow(), 48*2) })
	cs.cut.Store(true)
	for range 2 { // both blocked keys' first records are cancelled
		select {
		case <-cancelled:
		case <-time.After(30 * time.Second):
			t.Fatal("the records in flight were not cancelled after the cut")
		}
	}
	mu.Lock()
	blocked := blockedSeq
	mu.Unlock()
	checkpointBefore(t, cs.Store, stream, blocked, "the first unacknowledged record")
	cs.cut.Store(false)
}

// TestHandoffDrainBounded: a planned handoff does not wait on a hung
// handler for ever: the instance giving the shard up cancels what is still
// in flight after its shutdown timeout, releases with what it had
// acknowledged, and the new holder reads the shard (the hung record
// included, never acknowledged).
func TestHandoffDrainBounded(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 2)
	putKeyed(t, kc, stream, 20, 2, 0)
	store := memory.New()
	var mu sync.Mutex
	byB := 0
	a := startWith(t, kc, store, stream, "a", func(ctx context.Context, v keyed) error {
		<-ctx.Done() // hung until cancelled
		return ctx.Err()
	}, []kinesislease.SubscribeOption{kinesislease.WithKeyConcurrency(4)}, kinesislease.WithShutdownTimeout(500*time.Millisecond))
	kinesisleasetest.WaitReady(t, a.svc) // a holds both shards
	b := startWith(t, kc, store, stream, "b", func(ctx context.Context, v keyed) error {
		mu.Lock()
		byB++
		mu.Unlock()
		return nil
	}, nil)
	waitSplit(t, stream, map[string]*instance{"a": a, "b": b}, []int{1, 1})
	eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return byB > 0
	}, func() string { return "b handled nothing of the shard handed over after 30s" })
}

// eventually polls cond every 5ms until it holds, failing the test with
// what after timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkpointBefore fails the test if shard 0's row of stream in store has
// a checkpoint at or past seq.
func checkpointBefore(t *testing.T, store leases.Store, stream, seq, what string) {
	t.Helper()
	l, err := store.Get(context.Background(), leases.Key{Stream: stream, Shard: "shardId-000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Checkpoint.Sequence != "" && compareSeq(l.Checkpoint.Sequence, seq) >= 0 {
		t.Fatalf("checkpoint %s at or past %s %s", l.Checkpoint.Sequence, what, seq)
	}
}
