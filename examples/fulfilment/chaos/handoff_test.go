// TestReproHandoffRequestsKeepDeadLeaseAlive is a regression test for slow
// takeovers the chaos run measured (up to ~15s after a SIGKILL with a 2s
// lease and 0.5s scans): an instance below its fair share asked the dead
// owner for a lease (RequestHandoff) at every scan; each request bumped the
// row's lease_counter, which takers then read as the holder's sign of life,
// so the requests themselves kept the dead owner's leases alive. Takers now
// watch the holder's renewals (owner and expires_at), and an instance asks
// for one lease at a time.

package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

var errDead = fmt.Errorf("this instance is dead")

// countingStore counts the survivor's handoff requests.
type countingStore struct {
	leases.Store
	requests atomic.Int64
}

func (s *countingStore) RequestHandoff(ctx context.Context, l leases.Lease, to string) (leases.Lease, error) {
	s.requests.Add(1)
	return s.Store.RequestHandoff(ctx, l, to)
}

// It runs on the in-memory Kinesis and lease store in a testing/synctest
// bubble, so the takeover's time is measured on the bubble's virtual clock,
// which load on the machine cannot stretch: the bound below is exact.
func TestReproHandoffRequestsKeepDeadLeaseAlive(t *testing.T) {
	synctest.Test(t, testReproHandoff)
}

func testReproHandoff(t *testing.T) {
	const (
		shards = 4
		lease  = time.Second
		renew  = 250 * time.Millisecond
		scan   = 100 * time.Millisecond
	)
	const stream = "orders"
	k := kinesisleasetest.NewKinesis()
	if err := k.CreateStream(stream, shards); err != nil {
		t.Fatal(err)
	}
	mem := memory.New()
	start := func(owner string, store leases.Store) (*kinesislease.Service, func()) {
		svc, err := kinesislease.New(aws.Config{},
			kinesislease.WithKinesisClient(k), kinesislease.WithLeaseStore(store), kinesislease.WithOwner(owner),
			kinesislease.WithLease(lease, renew), kinesislease.WithScanInterval(scan),
			kinesislease.WithShutdownTimeout(time.Second),
			kinesislease.WithLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))))
		if err != nil {
			t.Fatal(err)
		}
		if err := kinesislease.Subscribe(svc, stream, func(context.Context, map[string]any) error { return nil },
			kinesislease.WithStartPosition(kltype.TrimHorizon)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = svc.Run(ctx) })
		return svc, func() { cancel(); wg.Wait() }
	}
	_, _ = k.PutRecord(context.Background(), &kinesis.PutRecordInput{StreamName: aws.String(stream), Data: []byte(`{}`), PartitionKey: aws.String("k")})

	// a holds every shard, then dies: once dead is set it writes nothing
	// more (its process is gone; its rows stay held).
	var dead atomic.Bool
	a, stopA := start("a", harness.CutOffStore{Store: mem, Cut: &dead, Err: errDead})
	defer stopA()
	for len(a.Held(stream)) < shards {
		time.Sleep(20 * time.Millisecond)
	}
	counters := func() []int64 {
		var cs []int64
		for i := range shards {
			l, err := mem.Get(context.Background(), leases.Key{Stream: stream, Shard: fmt.Sprintf("shardId-%012d", i)})
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, l.Counter)
		}
		return cs
	}
	time.Sleep(renew) // a renewed at most a renew interval ago
	dead.Store(true)
	died := time.Now()
	atDeath := counters()

	// b starts, holding nothing: its fair share is 2, a holds 4, so it asks
	// a for a lease, every scan, until it holds 2.
	cs := &countingStore{Store: mem}
	b, stopB := start("b", cs)
	defer stopB()
	// Expected: a's rows stay unchanged once it is dead, and b takes every
	// shard over about a lease (+ a scan) after a's last renewal.
	bound := 2 * (lease + scan)
	deadline := time.Now().Add(30 * time.Second) // virtual: a bound against a hang
	for len(b.Held(stream)) < shards && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(died)
	t.Logf("lease %v, scan %v: b held every shard %v (virtual) after a died; b sent %d handoff requests to the dead a; a's row counters %v at its death, %v now",
		lease, scan, took.Round(time.Millisecond), cs.requests.Load(), atDeath, counters())
	if took > bound {
		t.Errorf("b took %v to hold every shard of the dead a, want at most %v (2×(lease+scan)): its %d RequestHandoff writes to a's rows each bumped lease_counter and restarted the lease-duration count",
			took.Round(time.Millisecond), bound, cs.requests.Load())
	}
}
