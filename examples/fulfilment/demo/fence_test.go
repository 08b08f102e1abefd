// TestReproTakeoverCountsFromReadReturn comes from a bug the demo's author
// found in the retired per-row protocol, which stamped every row it read
// with the time the scan started, not the time the read returned. When that
// read was slow and a later one fast, the taker counted the lease duration
// from before the holder's last renewal was sent, took the lease over early,
// and the holder, still inside its fence, went on delivering: two instances
// handled the shard at once. The membership protocol must not repeat it: a
// taker dates a heartbeat value from when the read that first showed it
// returned. Here the taker's read of the holder's membership row is slow,
// and the holder is cut off from the store right after it returns: the
// holder's last heartbeat may be one sent just before that return, so the
// taker may act only a whole timeout after it.

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/memory"
)

var errPartition = errors.New("partitioned")

// takerStore makes one armed read of the membership row of owner slow (a
// latency spike): it waits, then reads.
type takerStore struct {
	*memory.Store
	owner  string
	armed  *atomic.Bool
	onRead func()
}

func (s takerStore) Members(ctx context.Context, row int) ([]leases.Member, error) {
	peek, _ := s.Store.Members(ctx, row)
	if slices.ContainsFunc(peek, func(m leases.Member) bool { return m.Owner == s.owner }) && s.armed.CompareAndSwap(true, false) {
		time.Sleep(time.Second)
		ms, err := s.Store.Members(ctx, row)
		s.onRead()
		return ms, err
	}
	return s.Store.Members(ctx, row)
}

func TestReproTakeoverCountsFromReadReturn(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	mem := memory.New()
	var partitioned, armed atomic.Bool
	var partAt atomic.Int64

	var mu sync.Mutex
	handled := map[string][]time.Time{}
	handler := func(owner string) kinesislease.HandlerFunc[map[string]any] {
		return func(ctx context.Context, _ map[string]any) error {
			mu.Lock()
			handled[owner] = append(handled[owner], time.Now())
			mu.Unlock()
			return nil
		}
	}
	log := slog.New(slog.NewTextHandler(harness.TestLog(t), &slog.HandlerOptions{Level: slog.LevelInfo}))
	start := func(owner string, store leases.MembershipStore) (*kinesislease.Service, func()) {
		svc, err := kinesislease.New(testutil.Config(t),
			kinesislease.WithKinesisClient(kc), kinesislease.WithLeaseStore(store), kinesislease.WithOwner(owner),
			kinesislease.WithHeartbeat(400*time.Millisecond, 2*time.Second),
			kinesislease.WithShutdownTimeout(2*time.Second), kinesislease.WithLogger(log.With("svc", owner)))
		if err != nil {
			t.Fatal(err)
		}
		if err := kinesislease.Subscribe(svc, stream, handler(owner), kinesislease.WithStartPosition(kltype.TrimHorizon),
			kinesislease.WithPolling(20*time.Millisecond, 20*time.Millisecond, 0)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = svc.Run(ctx); close(done) }()
		return svc, func() { cancel(); <-done }
	}
	// A producer: a record every 20ms.
	pctx, pstop := context.WithCancel(context.Background())
	var pwg sync.WaitGroup
	pwg.Go(func() {
		for i := 0; pctx.Err() == nil; i++ {
			_, _ = kc.PutRecord(pctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), Data: []byte(fmt.Sprintf(`{"n":%d}`, i)), PartitionKey: aws.String("k")})
			time.Sleep(20 * time.Millisecond)
		}
	})
	defer func() { pstop(); pwg.Wait() }()

	// a's every write, heartbeats included, fails once partitioned (it lost
	// DynamoDB).
	// Row 0 holds entries of members long gone (marked leaving), so that a,
	// joining it, fills it.
	for i := range driver.RowCapacity - 1 {
		gone := leases.Member{Owner: fmt.Sprintf("gone-%d", i), Incarnation: driver.NewIncarnation(0, "gone"), Heartbeat: 1, Leaving: true}
		if _, err := mem.Join(context.Background(), 0, gone); err != nil {
			t.Fatal(err)
		}
	}
	if err := mem.BumpRow(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	a, stopA := start("a", harness.CutOffStore{Store: mem, Cut: &partitioned, Err: errPartition})
	defer stopA()
	kinesisleasetest.WaitReady(t, a) // a holds the shard
	// The taker b: in another membership row than a's (a's row is full, so
	// that b reads a's heartbeats with Members, the slow read, not in its
	// own heartbeat's answer), and an owner id to which the plan does not
	// give the shard (so that a keeps it until the partition).
	b := ""
	u := plan.Unit{Stream: stream, Shard: "shardId-000000000000"}
	// A candidate wins the shard from a with probability 1 - a's score:
	// when a's score is low, few do, and the chance that none of n does is
	// 1/(n+1). Try enough of them.
	for i := range 100000 {
		o := fmt.Sprintf("b%d", i)
		if plan.Assign([]string{"a", o}, []plan.Unit{u}, 0)[u] == "a" {
			b = o
			break
		}
	}
	if b == "" {
		t.Fatal("no taker owner id found that the plan leaves a's shard to")
	}
	taker, stopB := start(b, takerStore{Store: mem, owner: "a", armed: &armed, onRead: func() {
		partitioned.Store(true)
		partAt.Store(time.Now().UnixNano())
	}})
	defer stopB()
	// b has planned with a in its view (Ready: the shard held by a live
	// instance, a), so it reads a's row in its rounds; then a few more
	// ordinary rounds of b.
	kinesisleasetest.WaitReady(t, taker)
	time.Sleep(time.Second)
	armed.Store(true)
	// Until b has taken over and a's fence has passed (a's Held is empty:
	// a lease in it is one whose fence has not passed, and cut off from
	// the store a cannot take one again), so that every delivery a could
	// make beside b is in handled when it is checked.
	deadline := time.Now().Add(2 * time.Minute) // against a hang only
	for {
		mu.Lock()
		took := len(handled[b]) > 0
		mu.Unlock()
		if took && len(a.Held(stream)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s took over: %v; a still holds %v, 2 minutes after the taker's read was armed", b, took, a.Held(stream))
		}
		time.Sleep(20 * time.Millisecond)
	}

	mu.Lock()
	defer mu.Unlock()
	p := time.Unix(0, partAt.Load())
	bFirst := handled[b][0]
	if !bFirst.After(p) {
		t.Fatalf("%s handled a record %v before a was partitioned: the shard moved to it by plan, and the test checks nothing", b, p.Sub(bFirst))
	}
	aLast := handled["a"][len(handled["a"])-1]
	t.Logf("a partitioned at P (right after %s's slow read returned); %s's first delivery at P+%v; a's last delivery at P+%v",
		b, b, bFirst.Sub(p).Round(time.Millisecond), aLast.Sub(p).Round(time.Millisecond))
	n := 0
	for _, at := range handled["a"] {
		if !at.Before(bFirst) {
			n++
		}
	}
	if n > 0 {
		t.Errorf("a delivered %d records after %s's first delivery: both handled the shard at once for %v", n, b, aLast.Sub(bFirst).Round(time.Millisecond))
	}
}
