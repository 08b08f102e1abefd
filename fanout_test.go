package kinesislease_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// The enhanced fan-out tests run the library on kinesisfake.Kinesis'
// Client: the SDK's own client and serialisation, the events read by the
// library's own reader,
// served in the process by the in-memory Kinesis with Kinesis' rules for
// SubscribeToShard (shortened where a test says so).

const fanOutConsumer = "fulfilment-test"

// fanOutStream makes an in-memory Kinesis with rules and a stream of
// shards on it, and returns the Kinesis, a client of it whose calls faults
// records, and the stream.
func fanOutStream(t *testing.T, rules kinesisfake.FanOutRules, shards int) (*kinesisfake.Kinesis, *kinesis.Client, *testutil.Faults, string) {
	t.Helper()
	k := kinesisfake.New(kinesisfake.WithFanOutRules(rules))
	faults := &testutil.Faults{}
	kc := k.Client(faults.KinesisOptions)
	stream := testutil.StreamName(t)
	if err := k.CreateStream(stream, shards); err != nil {
		t.Fatal(err)
	}
	return k, kc, faults, stream
}

// fanOutSub is the test subscription with enhanced fan-out.
func fanOutSub(sub ...kinesislease.SubscribeOption) []kinesislease.SubscribeOption {
	return append([]kinesislease.SubscribeOption{kinesislease.WithEnhancedFanOut(fanOutConsumer)}, sub...)
}

// checkTallyOrder fails the test if a partition key's orders were handled
// out of order or more than once.
func checkTallyOrder(t *testing.T, ta *tally) {
	t.Helper()
	ta.mu.Lock()
	defer ta.mu.Unlock()
	for key, ids := range ta.byKey {
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("key %s: order %d handled after %d (%v...)", key, ids[i], ids[i-1], ids[:i+1])
			}
		}
	}
}

// fetched counts the events OnBatchFetched reported and the largest
// MillisBehindLatest; throttles the throttles by operation.
type fanOutHooks struct {
	mu        sync.Mutex
	events    int
	throttled map[string]int
}

func (h *fanOutHooks) OnBatchFetched(b kltype.BatchInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events++
}

func (h *fanOutHooks) OnThrottled(i kltype.ThrottleInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.throttled == nil {
		h.throttled = map[string]int{}
	}
	h.throttled[i.Op]++
}

func (h *fanOutHooks) counts() (events int, throttled map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.events, maps(h.throttled)
}

func maps(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestFanOutDelivers reads a backlog and then records pushed as they are
// put, with enhanced fan-out: every record once, in order per key, no
// GetRecords or GetShardIterator call, the checkpoint at each shard's last
// record, the consumer registered at Run and found again by the next.
func TestFanOutDelivers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fo, kc, faults, stream := fanOutStream(t, kinesisfake.FanOutRules{}, 2)
		store := memory.New()
		put(t, kc, stream, 0, 300)
		ta := newTally()
		hooks := &fanOutHooks{}
		in := startWith(t, kc, store, stream, "a", ta.handler("a"), fanOutSub(), kinesislease.WithHooks(hooks))
		ta.waitFor(t, 0, 300, 30*time.Second)
		put(t, kc, stream, 300, 200)
		ta.waitFor(t, 300, 200, 30*time.Second)
		in.stop(t)
		checkTallyOrder(t, ta)
		if _, dups := ta.count(); dups != 0 {
			t.Fatalf("%d records handled twice", dups)
		}
		for _, op := range []string{"GetRecords", "GetShardIterator"} {
			if n := faults.Calls(op); n != 0 {
				t.Errorf("%d %s calls with enhanced fan-out", n, op)
			}
		}
		if n := faults.Calls("RegisterStreamConsumer"); n != 1 {
			t.Errorf("RegisterStreamConsumer called %d times, want 1", n)
		}
		if n := faults.Calls("SubscribeToShard"); n < 2 {
			t.Errorf("SubscribeToShard called %d times, want one per shard at least", n)
		}
		if events, _ := hooks.counts(); events == 0 {
			t.Error("OnBatchFetched never called")
		}
		if st := fo.SubscribeStats(); st.LimitExceeded != 0 || st.ResourceInUse != 0 {
			t.Errorf("the library broke a subscribe rule: %+v", st)
		}
		// The checkpoints are the shards' last records.
		for _, shard := range []string{"shardId-000000000000", "shardId-000000000001"} {
			last := lastSequence(t, kc, stream, shard)
			l, err := store.Get(context.Background(), leases.Key{Stream: stream, Shard: shard})
			if err != nil || l.Checkpoint.Sequence != last {
				t.Errorf("%s: checkpoint %+v (%v), want the shard's last record %s", shard, l.Checkpoint, err, last)
			}
		}

		// A second run finds the consumer (no registration) and resumes after
		// the checkpoints.
		faults2 := &testutil.Faults{}
		kc2 := fo.Client(faults2.KinesisOptions)
		put(t, kc2, stream, 500, 50)
		in = startWith(t, kc2, store, stream, "a", ta.handler("a"), fanOutSub())
		ta.waitFor(t, 500, 50, 30*time.Second)
		in.stop(t)
		if n := faults2.Calls("RegisterStreamConsumer"); n != 0 {
			t.Errorf("RegisterStreamConsumer called %d times for an existing consumer", n)
		}
		if _, dups := ta.count(); dups != 0 {
			t.Fatalf("%d records handled twice after the restart", dups)
		}
	})
}

// lastSequence returns the sequence number of shard's last record.
func lastSequence(t *testing.T, kc *kinesis.Client, stream, shard string) string {
	t.Helper()
	ctx := context.Background()
	it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(shard), ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	last, iter := "", it.ShardIterator
	for iter != nil {
		out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(out.Records); n > 0 {
			last = aws.ToString(out.Records[n-1].SequenceNumber)
		}
		if len(out.Records) == 0 {
			break
		}
		iter = out.NextShardIterator
	}
	return last
}

// putFor puts 20 orders every 50ms from first, on a goroutine of its own,
// until the stop it returns is called; stop waits for the goroutine,
// fails the test if a put failed (the goroutine then stopped putting) and
// returns how many orders were put. The goroutine ends with the test even
// if stop is never called (a cleanup stops it and reports its error).
func putFor(t *testing.T, kc *kinesis.Client, stream string, first int) (stop func() int) {
	t.Helper()
	quit := make(chan struct{})
	done := make(chan struct{})
	var (
		put int
		err error
	)
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if err = putOrders(kc, stream, first+put, 20); err != nil {
				return
			}
			put += 20
		}
	}()
	var once sync.Once
	end := func() {
		once.Do(func() { close(quit); <-done })
	}
	reported := false
	t.Cleanup(func() {
		end()
		if err != nil && !reported {
			t.Errorf("putFor: after %d orders: %v", put, err)
		}
	})
	return func() int {
		t.Helper()
		end()
		if err != nil {
			reported = true
			t.Fatalf("putFor: after %d orders: %v", put, err)
		}
		return put
	}
}

// TestFanOutResubscribes puts records while subscriptions end every 1.5s
// (the 5-minute end, shortened) and break mid-stream (a reset connection,
// an exception event): the library subscribes again from the last record
// received, so every record is handled once, in order.
func TestFanOutResubscribes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fo, kc, _, stream := fanOutStream(t, kinesisfake.FanOutRules{Lifetime: 1500 * time.Millisecond, TakeoverAfter: 500 * time.Millisecond}, 2)
		ta := newTally()
		startWith(t, kc, memory.New(), stream, "a", ta.handler("a"), fanOutSub())
		eventually(t, 10*time.Second, func() bool {
			return fo.Subscriptions("shardId-000000000000") == 1 && fo.Subscriptions("shardId-000000000001") == 1
		},
			func() string { return fmt.Sprintf("not subscribed: %+v", fo.SubscribeStats()) })
		stopPut := putFor(t, kc, stream, 0)
		subs0 := fo.SubscribeStats().Subscribed
		// Two subscription ends by Kinesis at least, a reset, an exception.
		eventually(t, 20*time.Second, func() bool { return fo.SubscribeStats().Subscribed >= subs0+4 }, func() string { return fmt.Sprintf("no renewal: %+v", fo.SubscribeStats()) })
		if fo.DropSubscriptions("shardId-000000000000") != 1 {
			t.Fatal("Drop: no subscription of shard 0")
		}
		fo.FailSubscriptions("shardId-000000000001", &ktypes.InternalFailureException{Message: aws.String("injected")})
		subs1 := fo.SubscribeStats().Subscribed
		eventually(t, 20*time.Second, func() bool { return fo.SubscribeStats().Subscribed >= subs1+4 }, func() string { return fmt.Sprintf("no resubscription: %+v", fo.SubscribeStats()) })
		total := stopPut()
		ta.waitFor(t, 0, total, 30*time.Second)
		checkTallyOrder(t, ta)
		if _, dups := ta.count(); dups != 0 {
			t.Fatalf("%d of %d records handled twice", dups, total)
		}
		if st := fo.SubscribeStats(); st.LimitExceeded != 0 {
			t.Errorf("the library broke the one-call-a-second rule: %+v", st)
		}
	})
}

// TestFanOutFiveSecondRule: a subscription broken right after it began is
// refused for 5 seconds (ResourceInUseException) and retried every second
// until Kinesis takes it over; a second instance taking a shard over in a
// handoff waits the same way. Nothing is lost or handled twice, and no
// call of one instance breaks the one-a-second limit (two instances may:
// the limit is the consumer's, and a handoff's first call can come within
// a second of the previous holder's last; it is retried).
func TestFanOutFiveSecondRule(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fo, kc, _, stream := fanOutStream(t, kinesisfake.FanOutRules{}, 2)
		store := memory.New()
		ta := newTally()
		startWith(t, kc, store, stream, "a", ta.handler("a"), fanOutSub())
		eventually(t, 10*time.Second, func() bool { return fo.Subscriptions("shardId-000000000000") == 1 },
			func() string { return fmt.Sprintf("not subscribed: %+v", fo.SubscribeStats()) })
		fo.DropSubscriptions("shardId-000000000000")
		put(t, kc, stream, 0, 100)
		ta.waitFor(t, 0, 100, 30*time.Second)
		if st := fo.SubscribeStats(); st.ResourceInUse == 0 || st.LimitExceeded != 0 {
			t.Errorf("want ResourceInUseException (the resubscription within 5 seconds) and no LimitExceededException (one call a second): %+v", st)
		}

		// A second instance: one shard is handed over while its subscription
		// may be young.
		b := startWith(t, kc, store, stream, "b", ta.handler("b"), fanOutSub())
		eventually(t, 30*time.Second, func() bool { return len(b.svc.Held(stream)) == 1 }, func() string { return "b holds no shard" })
		put(t, kc, stream, 100, 200)
		ta.waitFor(t, 100, 200, 30*time.Second)
		checkTallyOrder(t, ta)
		if _, dups := ta.count(); dups != 0 {
			t.Fatalf("%d records handled twice", dups)
		}
		ta.mu.Lock()
		byB := slices.Contains(slicesOf(ta.by), "b")
		ta.mu.Unlock()
		if !byB {
			t.Error("b handled none of the records put after it took a shard")
		}
	})
}

func slicesOf(m map[int]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestFanOutReshard reshards a stream on kinesis-local while records are
// put: each parent is read to its end (SHARD_END, from the event with no
// continuation), its children only after, every record once and in order
// per key.
func TestFanOutReshard(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fo, kc, _, stream := fanOutStream(t, kinesisfake.FanOutRules{}, 2)
		store := memory.New()
		ta := newTally()
		startWith(t, kc, store, stream, "a", ta.handler("a"), fanOutSub(), kinesislease.WithShardSyncInterval(300*time.Millisecond))
		stopPut := putFor(t, kc, stream, 0)
		eventually(t, 10*time.Second, func() bool { d, _ := ta.count(); return d > 50 }, func() string { return "nothing handled" })
		var kids []string
		for _, parent := range []string{"shardId-000000000000", "shardId-000000000001"} {
			c, err := fo.SplitShard(stream, parent)
			if err != nil {
				t.Fatal(err)
			}
			kids = append(kids, c[:]...)
		}
		children := func() int {
			n := 0
			for _, id := range kids {
				if fo.Subscriptions(id) > 0 {
					n++
				}
			}
			return n
		}
		eventually(t, 30*time.Second, func() bool { return children() >= 2 }, func() string { return fmt.Sprintf("children not subscribed: %+v", fo.SubscribeStats()) })
		total := stopPut()
		ta.waitFor(t, 0, total, 30*time.Second)
		checkTallyOrder(t, ta)
		if _, dups := ta.count(); dups != 0 {
			t.Fatalf("%d records handled twice", dups)
		}
		// The parents' last records are handled before their end events
		// arrive (Kinesis sends a closed shard's end after its records):
		// each parent's checkpoint reaches SHARD_END soon after.
		var notEnded []string
		eventually(t, 10*time.Second, func() bool {
			notEnded = notEnded[:0]
			for _, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
				l, err := store.Get(context.Background(), leases.Key{Stream: stream, Shard: id})
				if err != nil || l.Checkpoint.Sequence != leases.ShardEnd {
					notEnded = append(notEnded, fmt.Sprintf("%s: %+v, %v", id, l.Checkpoint, err))
				}
			}
			return len(notEnded) == 0
		}, func() string { return fmt.Sprintf("parents not at SHARD_END: %v", notEnded) })
	})
}

// TestFanOutLeaseLoss: an instance whose heartbeats fail is fenced, and
// its subscriptions close at once, with no other instance to take them
// over; while fenced it subscribes to nothing. Once its heartbeats pass
// again it subscribes again, from its checkpoints.
func TestFanOutLeaseLoss(t *testing.T) {
	t.Parallel()
	fo, kc, kfaults, stream := fanOutStream(t, kinesisfake.FanOutRules{TakeoverAfter: 500 * time.Millisecond}, 2)
	dfaults := &testutil.Faults{}
	dc := testutil.DynamoClient(t, dfaults.DynamoOptions)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, dc, table)
	store := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(dc))
	ta := newTally()
	startWith(t, kc, store, stream, "a", ta.handler("a"), fanOutSub(), kinesislease.WithHeartbeat(200*time.Millisecond, time.Second))
	active := func() int { return fo.Subscriptions("shardId-000000000000") + fo.Subscriptions("shardId-000000000001") }
	eventually(t, 10*time.Second, func() bool { return active() == 2 }, func() string { return fmt.Sprintf("not subscribed: %+v", fo.SubscribeStats()) })
	put(t, kc, stream, 0, 50)
	ta.waitFor(t, 0, 50, 30*time.Second)

	dfaults.Inject(testutil.Fault{Op: "UpdateItem", Err: &smithy.GenericAPIError{Code: "ThrottlingException", Message: "injected"}})
	eventually(t, 10*time.Second, func() bool { return active() == 0 }, func() string {
		return fmt.Sprintf("subscriptions still open after the fence: %+v", fo.SubscribeStats())
	})
	calls := kfaults.Calls("SubscribeToShard")
	put(t, kc, stream, 50, 50)
	// Fenced for a second more: nothing subscribed, nothing handled.
	time.Sleep(time.Second)
	if d, _ := ta.count(50, 100); d != 0 || kfaults.Calls("SubscribeToShard") != calls || active() != 0 {
		t.Fatalf("fenced instance: %d records handled, %d subscribe calls, %d open subscriptions", d, kfaults.Calls("SubscribeToShard")-calls, active())
	}
	dfaults.Clear()
	ta.waitFor(t, 50, 50, 30*time.Second)
	// The checkpoints failed while fenced too: records after the last one
	// written may come again, first deliveries in order.
	checkFirstOrder(t, ta)
}

// TestFanOutThrottledAndErrors: LimitExceededException on SubscribeToShard
// (the per-second rate) is retried and reported to OnThrottled; an
// InternalFailure is retried. Records are all handled, in order.
func TestFanOutThrottledAndErrors(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		_, kc, faults, stream := fanOutStream(t, kinesisfake.FanOutRules{TakeoverAfter: 500 * time.Millisecond}, 1)
		faults.Inject(testutil.Fault{Op: "SubscribeToShard", Times: 2, Err: &ktypes.LimitExceededException{Message: aws.String("Rate exceeded for consumer")}})
		faults.Inject(testutil.Fault{Op: "SubscribeToShard", Skip: 2, Times: 1, Err: &ktypes.InternalFailureException{Message: aws.String("injected")}})
		put(t, kc, stream, 0, 100)
		ta := newTally()
		hooks := &fanOutHooks{}
		startWith(t, kc, memory.New(), stream, "a", ta.handler("a"), fanOutSub(), kinesislease.WithHooks(hooks))
		ta.waitFor(t, 0, 100, 30*time.Second)
		checkTallyOrder(t, ta)
		if _, th := hooks.counts(); th["SubscribeToShard"] != 2 {
			t.Errorf("OnThrottled: %v, want SubscribeToShard twice", th)
		}
		if n := faults.Calls("SubscribeToShard"); n < 4 {
			t.Errorf("%d SubscribeToShard calls, want the 3 refused and one that passed", n)
		}
	})
}

// TestFanOutStartErrors: what Run says at start about the consumer.
func TestFanOutStartErrors(t *testing.T) {
	t.Parallel()
	// Each case in a bubble of its own, on a Kinesis of its own.
	bubble := func(t *testing.T, f func(t *testing.T, fo *kinesisfake.Kinesis, kc *kinesis.Client, stream string)) {
		synctest.Test(t, func(t *testing.T) {
			fo, kc, _, stream := fanOutStream(t, kinesisfake.FanOutRules{}, 1)
			f(t, fo, kc, stream)
		})
	}
	run := func(t *testing.T, client kinesislease.Kinesis, stream string, sub ...kinesislease.SubscribeOption) error {
		svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(client), kinesislease.WithLeaseStore(memory.New()),
			kinesislease.WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		if err := kinesislease.Subscribe(svc, stream, newTally().handler("a"), sub...); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return svc.Run(ctx)
	}

	t.Run("invalid name", func(t *testing.T) {
		bubble(t, func(t *testing.T, _ *kinesisfake.Kinesis, kc *kinesis.Client, stream string) {
			err := run(t, kc, stream, kinesislease.WithEnhancedFanOut("no spaces"))
			if !errors.Is(err, kinesislease.ErrInvalidOption) || !strings.Contains(err.Error(), "WithEnhancedFanOut") {
				t.Fatalf("got %v, want ErrInvalidOption naming WithEnhancedFanOut", err)
			}
		})
	})
	t.Run("client without SubscribeToShard", func(t *testing.T) {
		bubble(t, func(t *testing.T, _ *kinesisfake.Kinesis, kc *kinesis.Client, stream string) {
			err := run(t, pollingOnly{kc}, stream, kinesislease.WithEnhancedFanOut("x"))
			if !errors.Is(err, kinesislease.ErrInvalidOption) || !strings.Contains(err.Error(), "SubscribeToShard") {
				t.Fatalf("got %v, want ErrInvalidOption naming SubscribeToShard", err)
			}
		})
	})
	t.Run("access denied", func(t *testing.T) {
		bubble(t, func(t *testing.T, fo *kinesisfake.Kinesis, _ *kinesis.Client, stream string) {
			faults := &testutil.Faults{}
			faults.Inject(testutil.Fault{Op: "RegisterStreamConsumer", Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "User is not authorized to perform: kinesis:RegisterStreamConsumer"}})
			err := run(t, fo.Client(faults.KinesisOptions), stream, kinesislease.WithEnhancedFanOut("denied"))
			if !errors.Is(err, kinesislease.ErrAccessDenied) || !strings.Contains(err.Error(), "RegisterStreamConsumer") {
				t.Fatalf("got %v, want ErrAccessDenied naming RegisterStreamConsumer", err)
			}
		})
	})
	t.Run("consumer deregistered before the start", func(t *testing.T) {
		bubble(t, func(t *testing.T, fo *kinesisfake.Kinesis, kc *kinesis.Client, stream string) {
			arn := streamARN(t, kc, stream)
			ctx := context.Background()
			if _, err := kc.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(arn), ConsumerName: aws.String("deleted")}); err != nil {
				t.Fatal(err)
			}
			if _, err := kc.DeregisterStreamConsumer(ctx, &kinesis.DeregisterStreamConsumerInput{StreamARN: aws.String(arn), ConsumerName: aws.String("deleted")}); err != nil {
				t.Fatal(err)
			}
			faults := &testutil.Faults{}
			ta := newTally()
			in := startWith(t, fo.Client(faults.KinesisOptions), memory.New(), stream, "a", ta.handler("a"), []kinesislease.SubscribeOption{kinesislease.WithEnhancedFanOut("deleted")})
			put(t, kc, stream, 0, 10)
			ta.waitFor(t, 0, 10, 30*time.Second)
			in.stop(t)
			if n := faults.Calls("RegisterStreamConsumer"); n != 1 {
				t.Errorf("RegisterStreamConsumer called %d times, want once, after the old consumer was gone", n)
			}
		})
	})
	t.Run("consumer limit", func(t *testing.T) {
		bubble(t, func(t *testing.T, _ *kinesisfake.Kinesis, kc *kinesis.Client, stream string) {
			arn := streamARN(t, kc, stream)
			for i := range kinesisfake.MaxConsumersPerStream {
				if _, err := kc.RegisterStreamConsumer(context.Background(), &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(arn), ConsumerName: aws.String(fmt.Sprintf("other-%d", i))}); err != nil {
					t.Fatal(err)
				}
			}
			err := run(t, kc, stream, kinesislease.WithEnhancedFanOut("one-too-many"))
			if !errors.Is(err, kltype.ErrConsumerLimit) || !strings.Contains(err.Error(), "one-too-many") {
				t.Fatalf("got %v, want kltype.ErrConsumerLimit naming the consumer", err)
			}
			// An existing consumer is used though the stream is full.
			svc, _ := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(kc), kinesislease.WithLeaseStore(memory.New()), kinesislease.WithLogger(testLogger(t)))
			ta := newTally()
			_ = kinesislease.Subscribe(svc, stream, ta.handler("a"), kinesislease.WithEnhancedFanOut("other-3"), kinesislease.WithStartPosition(kltype.TrimHorizon))
			in := runInstance(t, svc)
			put(t, kc, stream, 0, 10)
			ta.waitFor(t, 0, 10, 20*time.Second)
			in.stop(t)
		})
	})
}

type pollingOnly struct{ kinesislease.Kinesis }

func streamARN(t *testing.T, kc *kinesis.Client, stream string) string {
	t.Helper()
	out, err := kc.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.StreamDescriptionSummary.StreamARN)
}

// TestFanOutConsumerDeleted: the consumer deregistered while its shards
// are read is registered again, and reading goes on from the last record.
func TestFanOutConsumerDeleted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		_, kc, faults, stream := fanOutStream(t, kinesisfake.FanOutRules{TakeoverAfter: 500 * time.Millisecond}, 1)
		ta := newTally()
		startWith(t, kc, memory.New(), stream, "a", ta.handler("a"), fanOutSub())
		put(t, kc, stream, 0, 50)
		ta.waitFor(t, 0, 50, 30*time.Second)
		if _, err := kc.DeregisterStreamConsumer(context.Background(), &kinesis.DeregisterStreamConsumerInput{
			StreamARN: aws.String(streamARN(t, kc, stream)), ConsumerName: aws.String(fanOutConsumer),
		}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, func() bool { return faults.Calls("RegisterStreamConsumer") == 2 }, func() string { return "consumer not registered again" })
		put(t, kc, stream, 50, 50)
		ta.waitFor(t, 50, 50, 30*time.Second)
		checkTallyOrder(t, ta)
		if _, dups := ta.count(); dups != 0 {
			t.Fatalf("%d records handled twice", dups)
		}
	})
}

// outstanding tracks the bytes fetched (OnBatchFetched) and not yet
// handled (OnRecordHandled), and the most ever outstanding.
type outstanding struct {
	mu        sync.Mutex
	now, most int
	largest   int
	handled   atomic.Int64 // distinct records handled
	seen      map[string]bool
}

func (o *outstanding) OnBatchFetched(b kltype.BatchInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.now += b.Bytes
	o.most = max(o.most, o.now)
	o.largest = max(o.largest, b.Bytes)
}

func (o *outstanding) OnRecordHandled(r kltype.RecordInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.now -= r.Bytes
	// Counted once however often delivered: a lease lost and taken again
	// (a fence on a loaded machine) redelivers what followed the last
	// checkpoint, which says nothing of the budget.
	key := fmt.Sprintf("%s/%s/%d", r.ShardID, r.SequenceNumber, r.SubSequence)
	if o.seen == nil {
		o.seen = map[string]bool{}
	}
	if !o.seen[key] {
		o.seen[key] = true
		o.handled.Add(1)
	}
}

// TestFanOutMemoryBudget: pushed events are held to the memory budget plus
// one event per shard. Four shards with a backlog of 1 KiB records and a
// slow handler, events of up to 1,000 records (1 MiB) and a budget of 1
// MiB: without the budget each shard would hold two events (one handled,
// one waiting), eight in all.
func TestFanOutMemoryBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		_, kc, _, stream := fanOutStream(t, kinesisfake.FanOutRules{MaxEventRecords: 1000}, 4)
		const n, size = 8000, 1024
		pad := strings.Repeat("x", size-40)
		for start := 0; start < n; start += 400 {
			var entries []ktypes.PutRecordsRequestEntry
			for i := start; i < start+400; i++ {
				entries = append(entries, ktypes.PutRecordsRequestEntry{
					Data: fmt.Appendf(nil, `{"id":%d,"key":"k%d","pad":"%s"}`, i, i, pad), PartitionKey: aws.String(fmt.Sprint(i)),
				})
			}
			if _, err := kc.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
				t.Fatal(err)
			}
		}
		o := &outstanding{}
		const budget = 1 << 20
		h := func(ctx context.Context, v order) error { time.Sleep(200 * time.Microsecond); return nil }
		// One instance: a timeout a loaded machine's stalls do not reach (a
		// fence would drop fetched records unhandled and skew the count).
		startWith(t, kc, memory.New(), stream, "a", h, fanOutSub(), kinesislease.WithHooks(o), kinesislease.WithMemoryBudget(budget, 1<<40),
			kinesislease.WithHeartbeat(500*time.Millisecond, 3*time.Second))
		eventually(t, 60*time.Second, func() bool { return o.handled.Load() == n }, func() string { return fmt.Sprintf("%d of %d handled", o.handled.Load(), n) })
		o.mu.Lock()
		defer o.mu.Unlock()
		bound := budget + 4*o.largest
		t.Logf("most outstanding %d bytes; largest event %d bytes; bound %d", o.most, o.largest, bound)
		if o.most > bound {
			t.Fatalf("%d bytes fetched and not handled at once, over the budget plus one event per shard (%d)", o.most, bound)
		}
	})
}

// TestFanOutStreamARN: a stream subscribed by ARN registers its consumer
// on that ARN, with no DescribeStreamSummary call for it (one reads the
// stream's retention).
func TestFanOutStreamARN(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fo, kc, faults, stream := fanOutStream(t, kinesisfake.FanOutRules{}, 1)
		arn := fo.ARN(stream)
		ta := newTally()
		in := startWith(t, kc, memory.New(), arn, "a", ta.handler("a"), fanOutSub())
		put(t, kc, stream, 0, 20)
		ta.waitFor(t, 0, 20, 30*time.Second)
		in.stop(t)
		if n := faults.Calls("DescribeStreamSummary"); n != 1 {
			t.Errorf("DescribeStreamSummary called %d times for a stream named by ARN, want 1 (its retention, not its ARN)", n)
		}
		if n := faults.Calls("RegisterStreamConsumer"); n != 1 {
			t.Errorf("RegisterStreamConsumer called %d times, want 1", n)
		}
	})
}

// TestFanOutStopMidStream stops an instance while events wait for a slow
// handler (the budget full, the SDK holding an event): the subscriptions
// and the SDK's goroutines end (the package's leak check), the final
// checkpoints hold, and a new instance handles every record, first
// deliveries in order.
func TestFanOutStopMidStream(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		_, kc, _, stream := fanOutStream(t, kinesisfake.FanOutRules{MaxEventRecords: 50}, 2)
		store := memory.New()
		put(t, kc, stream, 0, 1000)
		ta := newTally()
		slow := func(ctx context.Context, o order) error {
			time.Sleep(2 * time.Millisecond)
			return ta.handler("a")(ctx, o)
		}
		a := startWith(t, kc, store, stream, "a", slow, fanOutSub(), kinesislease.WithMemoryBudget(1<<20, 100))
		eventually(t, 30*time.Second, func() bool { d, _ := ta.count(); return d >= 100 }, func() string { return "100 records not handled" })
		a.stop(t)
		startWith(t, kc, store, stream, "b", ta.handler("b"), fanOutSub())
		ta.waitFor(t, 0, 1000, 30*time.Second)
		checkFirstOrder(t, ta)
	})
}

// checkFirstOrder fails the test if the first deliveries of a key's orders
// were out of order (redeliveries after a restart, from the checkpoint on,
// may repeat earlier ones).
func checkFirstOrder(t *testing.T, ta *tally) {
	t.Helper()
	ta.mu.Lock()
	defer ta.mu.Unlock()
	for key, ids := range ta.byKey {
		first := map[int]bool{}
		prev := -1
		for _, id := range ids {
			if first[id] {
				continue
			}
			first[id] = true
			if id < prev {
				t.Fatalf("key %s: %d first handled after %d", key, id, prev)
			}
			prev = id
		}
	}
}

// TestFanOutDeadLetters: outcomes with enhanced fan-out: every tenth order
// is dead-lettered (to WithDeadLetter's sink, with its sequence number),
// the rest acknowledged, and the checkpoint passes them all.
func TestFanOutDeadLetters(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		_, kc, _, stream := fanOutStream(t, kinesisfake.FanOutRules{}, 1)
		store := memory.New()
		var mu sync.Mutex
		var dead []int
		sink := func(ctx context.Context, dl *kltype.DeadLetterRecord) error {
			var o order
			if err := json.Unmarshal(dl.Record.Data, &o); err != nil {
				return err
			}
			mu.Lock()
			dead = append(dead, o.ID)
			mu.Unlock()
			return nil
		}
		ta := newTally()
		h := func(ctx context.Context, o order) error {
			if o.ID%10 == 0 {
				return kinesislease.DeadLetter(errors.New("poison"))
			}
			return ta.handler("a")(ctx, o)
		}
		put(t, kc, stream, 0, 100)
		in := startWith(t, kc, store, stream, "a", h, fanOutSub(kinesislease.WithDeadLetter(sink)))
		eventually(t, 30*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			d, _ := ta.count()
			return d == 90 && len(dead) == 10
		}, func() string { return "not every order handled or dead-lettered" })
		in.stop(t)
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(dead, []int{0, 10, 20, 30, 40, 50, 60, 70, 80, 90}) {
			t.Fatalf("dead letters %v, want every tenth order in order", dead)
		}
		last := lastSequence(t, kc, stream, "shardId-000000000000")
		if l, err := store.Get(context.Background(), leases.Key{Stream: stream, Shard: "shardId-000000000000"}); err != nil || l.Checkpoint.Sequence != last {
			t.Fatalf("checkpoint %+v (%v), want the last record %s", l.Checkpoint, err, last)
		}
	})
}
