package kinesislease_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// TestHealth: a service on DynamoDB Local is neither ready nor live before
// Run; ready and live, its shard reading, once started; with DynamoDB
// blocked (every call fails, injected through SDK middleware) it turns not
// live once its fence passes, and while it says so no handler runs; with
// DynamoDB back it is live and reading again.
func TestHealth(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	faults := &testutil.Faults{}
	dc := testutil.DynamoClient(t, faults.DynamoOptions)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, testutil.DynamoClient(t), table)
	ta := newTally()
	var afterNotLive atomic.Bool
	svc, err := kinesislease.New(testutil.Config(t), testEncoding(t), kinesislease.WithKinesisClient(kc),
		kinesislease.WithLeaseStore(dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(dc))),
		kinesislease.WithHeartbeat(250*time.Millisecond, time.Second), kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	handler := ta.handler("a")
	err = kinesislease.Subscribe(svc, stream, func(ctx context.Context, o order) error {
		if afterNotLive.Load() {
			t.Errorf("handler entered for order %d while Health says not live", o.ID)
		}
		return handler(ctx, o)
	}, kinesislease.WithStartPosition(kltype.TrimHorizon), kinesislease.WithPolling(20*time.Millisecond, 50*time.Millisecond, 0))
	if err != nil {
		t.Fatal(err)
	}
	if h := svc.Health(); h.Ready || h.Live || len(h.Streams) != 1 || h.Streams[0].Stream != stream {
		t.Fatalf("Health before Run: %+v, want neither ready nor live, the subscription listed", h)
	}
	in := runInstance(t, svc)
	reading := func(h kltype.Health) bool {
		return h.Ready && h.Live && len(h.Streams) == 1 && len(h.Streams[0].Shards) == 1 && h.Streams[0].Shards[0].Reading
	}
	waitHealth(t, in, reading, "ready, live and reading")
	put(t, kc, stream, 0, 10)
	ta.waitFor(t, 0, 10, 30*time.Second)
	if lag := svc.Health().Streams[0].Shards[0].MillisBehindLatest; lag < 0 {
		t.Fatalf("lag %d after records were read, want the last batch's", lag)
	}

	faults.Inject(testutil.Fault{Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused (injected)")}})
	blocked := time.Now()
	waitHealth(t, in, func(h kltype.Health) bool { return !h.Live }, "not live with DynamoDB blocked")
	t.Logf("not live %v after DynamoDB was blocked (timeout 1s, fence 833ms after the last heartbeat sent)", time.Since(blocked).Round(time.Millisecond))
	afterNotLive.Store(true)
	put(t, kc, stream, 10, 10)         // records flow while not live: none may be handled
	time.Sleep(300 * time.Millisecond) // a window for the handler check above
	afterNotLive.Store(false)

	faults.Clear()
	waitHealth(t, in, reading, "live and reading again with DynamoDB back")
	ta.waitFor(t, 10, 10, 30*time.Second)
	in.stop(t)
	if h := svc.Health(); h.Ready || h.Live {
		t.Fatalf("Health after Run returned: %+v", h)
	}
}

// waitHealth polls in.svc.Health until ok, failing after 30s or if Run
// returned.
func waitHealth(t *testing.T, in *instance, ok func(kltype.Health) bool, what string) {
	t.Helper()
	svc := in.svc
	deadline := time.Now().Add(30 * time.Second)
	for !ok(svc.Health()) {
		select {
		case <-in.done:
			t.Fatalf("Run returned (%v) before %s", in.err, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %s after 30s: %+v", what, svc.Health())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHealthBalance: two services on DynamoDB Local of capacities 1 and 3
// (the second capped at 5 leases) share a one-shard stream that carries
// records: each one's Health reports the mode, its capacity and cap, a fair
// share of 1/4 and 3/4, and, once the holder's load is published, the
// holder carries the whole fleet's load (share 1) and the other none, with
// the holder's load seen by both.
func TestHealthBalance(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, testutil.DynamoClient(t), table)
	ta := newTally()
	start := func(owner string, opts ...kinesislease.Option) *instance {
		svc, err := kinesislease.New(testutil.Config(t), append([]kinesislease.Option{testEncoding(t), kinesislease.WithKinesisClient(kc),
			kinesislease.WithOwner(owner), kinesislease.WithLeaseStore(dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(testutil.DynamoClient(t)))),
			kinesislease.WithHeartbeat(250*time.Millisecond, time.Second), kinesislease.WithLogger(testLogger(t))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := kinesislease.Subscribe(svc, stream, ta.handler(owner), kinesislease.WithStartPosition(kltype.TrimHorizon),
			kinesislease.WithPolling(20*time.Millisecond, 50*time.Millisecond, 0)); err != nil {
			t.Fatal(err)
		}
		if b := svc.Health().Balance; b.Mode != kltype.BalanceByThroughput || b.Tolerance != 0.2 || b.Members != 0 {
			t.Errorf("%s: Health().Balance before Run: %+v, want the default mode and tolerance, no members", owner, b)
		}
		return runInstance(t, svc)
	}
	small := start("small")
	big := start("big", kinesislease.WithCapacity(3), kinesislease.WithMaxLeases(5))
	put(t, kc, stream, 0, 200)
	ta.waitFor(t, 0, 200, 30*time.Second)

	reads := func(h kltype.Health) bool {
		return len(h.Streams) == 1 && len(h.Streams[0].Shards) == 1 && h.Streams[0].Shards[0].Reading
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		hs, hb := small.svc.Health(), big.svc.Health()
		for _, c := range []struct {
			h                   kltype.Health
			capacity, fairShare float64
			maxLeases           int
		}{{hs, 1, 0.25, 0}, {hb, 3, 0.75, 5}} {
			b := c.h.Balance
			if b.Mode != kltype.BalanceByThroughput || b.Tolerance != 0.2 || b.Capacity != c.capacity || b.MaxLeases != c.maxLeases || b.Legacy {
				t.Fatalf("%s: Balance %+v, want mode throughput, tolerance 0.2, capacity %v, max leases %d", c.h.Owner, b, c.capacity, c.maxLeases)
			}
			if b.Members == 2 && b.FairShare != c.fairShare {
				t.Fatalf("%s: Balance %+v with both members seen, want fair share %v", c.h.Owner, b, c.fairShare)
			}
			if b.FleetLoad > 0 && b.Share != float64(b.Load)/float64(b.FleetLoad) || b.FleetLoad == 0 && b.Share != 0 || b.Load > b.FleetLoad {
				t.Fatalf("%s: Balance %+v: share is not load over fleet load", c.h.Owner, b)
			}
		}
		holder, other := hs, hb
		if reads(hb) {
			holder, other = hb, hs
		}
		x, y := holder.Balance, other.Balance
		if reads(holder) && !reads(other) && x.Members == 2 && y.Members == 2 && x.Load > 0 && x.Share == 1 &&
			y.Load == 0 && y.Share == 0 && y.FleetLoad > 0 {
			t.Logf("holder %s: %+v; other %s: %+v", holder.Owner, x, other.Owner, y)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, no state where the holder carries the whole load seen by both: %s %+v, %s %+v",
				hs.Owner, hs.Balance, hb.Owner, hb.Balance)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !small.svc.Health().OK() || !big.svc.Health().OK() {
		t.Errorf("Health not OK: %+v, %+v", small.svc.Health(), big.svc.Health())
	}
	small.stop(t)
	big.stop(t)
}
