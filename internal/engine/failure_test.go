package engine_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/testkit/sim"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestShardFailureIsolated: a read error no retry can cure on one shard
// (InvalidArgumentException) sets that shard aside: the Group goes on
// reading the other shard, tells the hooks (stream, shard, error, retry
// delay), and tries the failed shard again after the backoff, which reads
// it once the fault is gone. Run returns only when cancelled.
func TestShardFailureIsolated(t *testing.T) {
	t.Parallel()
	k := sim.NewKinesis()
	stream := newSimStream(t, k, "isolated", 2)
	ids := stream.ShardIDs()
	bad, good := ids[0], ids[1]
	const n = 20
	for i := range n {
		for _, id := range ids {
			if _, err := stream.Put(id, "k", []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var broken atomic.Bool
	broken.Store(true)
	invalid := &types.InvalidArgumentException{Message: aws.String("StartingSequenceNumber is not in the shard (injected)")}
	var (
		mu      sync.Mutex
		handled = map[string]int{}
	)
	hook := &testutil.Failures{}
	cfg := groupConfig("one", memory.New(), k, stream.Name())
	cfg.Client = sim.Client(k, sim.KinesisHooks{Decide: func(op, shard string) (time.Duration, error) {
		if op == "GetRecords" && shard == bad && broken.Load() {
			return 0, invalid
		}
		return 0, nil
	}})
	cfg.Hooks = []kltype.Hook{hook}
	cfg.FailureBackoff, cfg.MaxFailureBackoff = 200*time.Millisecond, 400*time.Millisecond
	cfg.Streams[0].Worker.Handler = func(_ context.Context, r *kltype.Record) error {
		mu.Lock()
		defer mu.Unlock()
		handled[r.ShardID]++
		return nil
	}
	done, stop := startGroup(t, cfg)
	count := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		return handled[id]
	}
	waitFor(t, 30*time.Second, func() bool { return count(good) == n && len(hook.All()) >= 2 }, done,
		"the good shard read and the bad one failed twice")
	for _, f := range hook.All() {
		if f.Stream != stream.Name() || f.ShardID != bad || !errors.As(f.Err, &invalid) || f.RetryIn <= 0 {
			t.Fatalf("HookFailed %+v: want stream %s, shard %s, the InvalidArgumentException and a retry delay", f, stream.Name(), bad)
		}
	}
	if c := hook.All(); c[1].Failures != 2 || c[1].RetryIn != 2*c[0].RetryIn {
		t.Fatalf("failures %d and %d, retry delays %v and %v: want 1, 2 and a doubling delay", c[0].Failures, c[1].Failures, c[0].RetryIn, c[1].RetryIn)
	}
	if count(bad) != 0 {
		t.Fatalf("%d records of the failing shard handled", count(bad))
	}
	broken.Store(false)
	waitFor(t, 30*time.Second, func() bool { return count(bad) == n }, done, "the failed shard read once the fault is gone")
	stop()
}

// waitFor polls cond until it holds, failing the test after timeout or if
// Run returned (done) first.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, done <-chan error, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("Run returned (%v) before %s", err, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %s after %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStreamFailureIsolated: ListShards failing for good (access denied)
// sets the stream aside instead of ending Run: the hooks hear of it with
// no shard, and once access is back the stream's shards are read.
func TestStreamFailureIsolated(t *testing.T) {
	t.Parallel()
	synctest.Test(t, streamFailureIsolated)
}

// streamFailureIsolated is TestStreamFailureIsolated's body, in virtual
// time: the waits for the retries and for the new stream's rows are the
// engine's own timers, not the machine's load.
func streamFailureIsolated(t *testing.T) {
	k := sim.NewKinesis()
	stream := newSimStream(t, k, "denied", 1)
	id := stream.ShardIDs()[0]
	const n = 10
	for i := range n {
		if _, err := stream.Put(id, "k", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var denied atomic.Bool
	denied.Store(true)
	var handled atomic.Int64
	hook := &testutil.Failures{}
	cfg := groupConfig("one", memory.New(), k, stream.Name())
	cfg.Client = sim.Client(k, sim.KinesisHooks{Decide: func(op, _ string) (time.Duration, error) {
		if op == "ListShards" && denied.Load() {
			return 0, &types.AccessDeniedException{Message: aws.String("not authorized to perform kinesis:ListShards (injected)")}
		}
		return 0, nil
	}})
	cfg.Hooks = []kltype.Hook{hook}
	cfg.FailureBackoff, cfg.MaxFailureBackoff = 100*time.Millisecond, 100*time.Millisecond
	cfg.Streams[0].Worker.Handler = func(context.Context, *kltype.Record) error { handled.Add(1); return nil }
	done, stop := startGroup(t, cfg)
	waitFor(t, 30*time.Second, func() bool { return len(hook.All()) >= 2 }, done, "the stream failed twice")
	if f := hook.All()[0]; f.Stream != stream.Name() || f.ShardID != "" || f.Err == nil {
		t.Fatalf("HookFailed %+v: want the stream, no shard, the error", f)
	}
	denied.Store(false)
	waitFor(t, 30*time.Second, func() bool { return handled.Load() >= n }, done, "the stream read once access is back")
	stop()
	if got := handled.Load(); got != n {
		t.Errorf("%d records handled, want each of the %d once", got, n)
	}
}
