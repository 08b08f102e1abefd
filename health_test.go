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
