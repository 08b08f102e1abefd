package kinesislease_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// Fault tests run one instance on a 1-shard kinesalite stream, so that the
// faults (counted per client) hit known calls, and the records can be
// compared one by one with what was published.

// call is one Kinesis call a recorder saw.
type call struct {
	Op         string
	Start, End time.Time
	Err        error
	Records    int
	// GetShardIterator: the iterator asked for, and the newest sequence
	// number GetRecords had returned before the call.
	Type            ktypes.ShardIteratorType
	Seq, LastBefore string
}

// recorder wraps a Kinesis client and records its reads.
type recorder struct {
	*kinesis.Client
	mu    sync.Mutex
	calls []call
	last  string // newest sequence number GetRecords returned
}

func (r *recorder) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	r.mu.Lock()
	c := call{Op: "GetShardIterator", Start: time.Now(), Type: in.ShardIteratorType, Seq: aws.ToString(in.StartingSequenceNumber), LastBefore: r.last}
	r.mu.Unlock()
	out, err := r.Client.GetShardIterator(ctx, in, optFns...)
	c.End, c.Err = time.Now(), err
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return out, err
}

func (r *recorder) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	c := call{Op: "GetRecords", Start: time.Now()}
	out, err := r.Client.GetRecords(ctx, in, optFns...)
	c.End, c.Err = time.Now(), err
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		c.Records = len(out.Records)
		if n := len(out.Records); n > 0 {
			r.last = aws.ToString(out.Records[n-1].SequenceNumber)
		}
	}
	r.calls = append(r.calls, c)
	return out, err
}

func (r *recorder) ops(op string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var cs []call
	for _, c := range r.calls {
		if c.Op == op {
			cs = append(cs, c)
		}
	}
	return cs
}

// fastSDKRetries: the standard retryer, 3 attempts, 10ms apart.
func fastSDKRetries(o *kinesis.Options) {
	o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = 3
		so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 10 * time.Millisecond, nil })
	})
}

// faultyStream creates a 1-shard kinesalite stream holding n events and
// returns a client with faults (none injected yet) wrapped in a recorder, and
// the published sequence numbers in order.
func faultyStream(t *testing.T, n int) (*recorder, *testutil.Faults, string, []string) {
	t.Helper()
	f := &testutil.Faults{}
	kc := testutil.KinesisClient(t, testutil.Kinesalite, f.KinesisOptions, fastSDKRetries)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	var seqs []string
	for first := 0; first < n; first += 100 {
		var entries []ktypes.PutRecordsRequestEntry
		for i := first; i < min(n, first+100); i++ {
			e := event{Key: fmt.Sprintf("key-%d", i%10), N: i}
			data, _ := json.Marshal(e)
			entries = append(entries, ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(e.Key)})
		}
		out, err := kc.PutRecords(testutil.WithoutFaults(context.Background()), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Records {
			if r.ErrorCode != nil {
				t.Fatalf("PutRecords: %s", aws.ToString(r.ErrorMessage))
			}
			seqs = append(seqs, aws.ToString(r.SequenceNumber))
		}
	}
	slices.SortFunc(seqs, compareSeq)
	return &recorder{Client: kc}, f, stream, seqs
}

func compareSeq(a, b string) int {
	x, _ := new(big.Int).SetString(a, 10)
	y, _ := new(big.Int).SetString(b, 10)
	return x.Cmp(y)
}

// consumeExactly runs one instance reading 20 records per GetRecords call,
// polling every 10ms, until every published record was handled, and checks
// that the handler saw exactly the published records, in order, each once.
func consumeExactly(t *testing.T, rec *recorder, stream string, published []string, extra ...kinesislease.Option) {
	t.Helper()
	j := newJournal()
	in := startJournal(t, rec, memory.New(), stream, "a", j,
		[]kinesislease.SubscribeOption{kinesislease.WithPolling(10*time.Millisecond, 10*time.Millisecond, 20)}, extra...)
	j.waitUntil(t, 60*time.Second, func(ds []delivery) bool { return len(ds) >= len(published) },
		func(ds []delivery) string { return fmt.Sprintf("%d of %d records handled", len(ds), len(published)) })
	in.stop(t)
	var got []string
	for _, d := range j.deliveries() {
		got = append(got, d.Seq)
	}
	if !slices.Equal(got, published) {
		t.Errorf("handled %d records, published %d: not the same sequence", len(got), len(published))
		for i := range max(len(got), len(published)) {
			var g, p string
			if i < len(got) {
				g = got[i]
			}
			if i < len(published) {
				p = published[i]
			}
			if g != p {
				t.Fatalf("first difference at record %d: handled %q, published %q", i, g, p)
			}
		}
	}
}

// anyError matches every error but the cancellations of shutdown.
func anyError(err error) bool { return !errors.Is(err, context.Canceled) }

// errorsOf counts the errors of calls matching is.
func errorsOf(cs []call, is func(error) bool) (n int) {
	for _, c := range cs {
		if c.Err != nil && is(c.Err) {
			n++
		}
	}
	return n
}

func isThrottle(err error) bool {
	var pte *ktypes.ProvisionedThroughputExceededException
	return errors.As(err, &pte)
}

// throttles counts HookThrottled calls.
type throttles struct{ n atomic.Int64 }

func (h *throttles) OnThrottled(kltype.ThrottleInfo) { h.n.Add(1) }

// TestThrottling: ProvisionedThroughputExceededException on GetShardIterator
// and on GetRecords, injected before the SDK's retry loop (per call) and
// inside it (per attempt): the SDK retries no throttle (the reader's calls
// say so), so the reader and the hooks see every one, it backs off once
// and retries with the same iterator, losing, skipping and repeating
// nothing.
func TestThrottling(t *testing.T) {
	t.Parallel()
	rec, f, stream, published := faultyStream(t, 200)
	pte := &ktypes.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard (injected)")}
	f.Inject(testutil.Fault{Op: "GetShardIterator", Times: 3, Err: pte})
	f.Inject(testutil.Fault{Op: "GetRecords", Skip: 2, Times: 5, Err: pte}) // calls 3 to 7: the reader sees them
	// Attempts 7 to 10: with no SDK retry, four calls of one attempt each,
	// every throttle seen by the reader.
	f.Inject(testutil.Fault{Op: "GetRecords", PerAttempt: true, Skip: 6, Times: 4, Err: pte})

	th := &throttles{}
	consumeExactly(t, rec, stream, published, kinesislease.WithHooks(th))

	gsi, gr := rec.ops("GetShardIterator"), rec.ops("GetRecords")
	if got := th.n.Load(); got != 3+9 {
		t.Errorf("HookThrottled called %d times, want every throttle: 3 of GetShardIterator and 9 of GetRecords", got)
	}
	if n := errorsOf(gsi, isThrottle); n != 3 || len(gsi) != 4 {
		t.Errorf("GetShardIterator: %d calls, %d throttled; want 4 and 3 (retried until it worked, then one iterator for good)", len(gsi), n)
	}
	if n := errorsOf(gr, isThrottle); n != 9 {
		t.Errorf("GetRecords: the reader saw %d throttles, want 9 (5 per call, 4 per attempt: the SDK retries none)", n)
	}
	if errs := errorsOf(gr, anyError); errs != 9 {
		t.Errorf("GetRecords: %d errors, want only the 9 throttles", errs)
	}
	// The SDK retried no throttled attempt: one attempt per call that
	// reached it. A call cancelled by the shutdown may end before its
	// attempt starts: each such call may lack its one attempt.
	canceled := errorsOf(gr, func(err error) bool { return errors.Is(err, context.Canceled) })
	if calls, attempts := f.Calls("GetRecords"), f.Attempts("GetRecords"); attempts > calls-5 || attempts < calls-5-canceled {
		t.Errorf("GetRecords: %d calls (5 stopped before the SDK, %d cancelled by the shutdown), %d attempts; want %d attempts (less one per cancelled call at most)",
			calls, canceled, attempts, calls-5)
	}
	// Five throttles in a row: the reader backed off, growing. The least
	// backoffs from a 10ms base are 5+10+20+40+80ms; pacing alone would
	// retry every 10ms.
	first := slices.IndexFunc(gr, func(c call) bool { return c.Err != nil })
	if first < 0 || first+5 >= len(gr) {
		t.Fatalf("GetRecords calls: no run of 5 throttles (%d calls)", len(gr))
	}
	for i := first; i < first+5; i++ {
		if !isThrottle(gr[i].Err) {
			t.Fatalf("GetRecords call %d: %v, want the 5 throttles in a row", i+1, gr[i].Err)
		}
	}
	if gap := gr[first+5].Start.Sub(gr[first].End); gap < 150*time.Millisecond {
		t.Errorf("5 throttles in a row retried within %v: want at least 150ms of backoff", gap)
	} else {
		t.Logf("5 throttles in a row: next successful call %v after the first", gap.Round(time.Millisecond))
	}
}

// TestExpiredIterator: GetRecords answers ExpiredIteratorException before any
// record, then after some records, then twice in a row: each time the reader
// gets a new iterator from where it stands (the start position before any
// record, else AFTER_SEQUENCE_NUMBER of the last record it returned), and the
// handler sees every record exactly once, in order.
func TestExpiredIterator(t *testing.T) {
	t.Parallel()
	rec, f, stream, published := faultyStream(t, 200)
	expired := &ktypes.ExpiredIteratorException{Message: aws.String("Iterator expired (injected)")}
	f.Inject(testutil.Fault{Op: "GetRecords", Times: 1, Err: expired})          // call 1: nothing read yet
	f.Inject(testutil.Fault{Op: "GetRecords", Skip: 3, Times: 1, Err: expired}) // call 4: 40 records read
	f.Inject(testutil.Fault{Op: "GetRecords", Skip: 6, Times: 2, Err: expired}) // calls 7 and 8

	consumeExactly(t, rec, stream, published)

	gsi := rec.ops("GetShardIterator")
	if len(gsi) != 5 {
		t.Fatalf("%d GetShardIterator calls, want 5: the first and one per expired iterator", len(gsi))
	}
	for i, c := range gsi {
		switch {
		case c.Err != nil:
			t.Errorf("GetShardIterator %d: %v", i+1, c.Err)
		case c.LastBefore == "" && c.Type != ktypes.ShardIteratorTypeTrimHorizon:
			t.Errorf("GetShardIterator %d, no record read yet: %s, want TRIM_HORIZON (the start position)", i+1, c.Type)
		case c.LastBefore != "" && (c.Type != ktypes.ShardIteratorTypeAfterSequenceNumber || c.Seq != c.LastBefore):
			t.Errorf("GetShardIterator %d: %s %s, want AFTER_SEQUENCE_NUMBER %s (the last record read)", i+1, c.Type, c.Seq, c.LastBefore)
		}
	}
	if gsi[1].LastBefore != "" || gsi[2].LastBefore == "" {
		t.Errorf("the faults did not hit where intended: iterators after %q and %q", gsi[1].LastBefore, gsi[2].LastBefore)
	}
}

// TestTransientErrors: 500 InternalFailure and lost responses on GetRecords
// (seen by the reader, and retried inside the SDK) and a lost
// GetShardIterator response: all retried, nothing lost, skipped or repeated.
func TestTransientErrors(t *testing.T) {
	t.Parallel()
	rec, f, stream, published := faultyStream(t, 200)
	internal := &smithy.GenericAPIError{Code: "InternalFailure", Message: "internal error (injected)", Fault: smithy.FaultServer}
	f.Inject(testutil.Fault{Op: "GetShardIterator", Times: 1, LoseResponse: true})
	f.Inject(testutil.Fault{Op: "GetRecords", Skip: 1, Times: 2, Err: internal})                   // calls 2, 3
	f.Inject(testutil.Fault{Op: "GetRecords", PerAttempt: true, Skip: 3, Times: 2, Err: internal}) // call 6: 2 failed attempts, then success
	f.Inject(testutil.Fault{Op: "GetRecords", Skip: 7, Times: 1, LoseResponse: true})              // call 8: served, answer lost
	f.Inject(testutil.Fault{Op: "GetRecords", PerAttempt: true, Skip: 11, Times: 1, LoseResponse: true})

	consumeExactly(t, rec, stream, published)

	isInternal := func(err error) bool {
		var api smithy.APIError
		return errors.As(err, &api) && api.ErrorCode() == "InternalFailure" && api.ErrorFault() == smithy.FaultServer
	}
	isLost := func(err error) bool { return errors.Is(err, testutil.ErrResponseLost) }
	gsi, gr := rec.ops("GetShardIterator"), rec.ops("GetRecords")
	if len(gsi) != 2 || errorsOf(gsi, isLost) != 1 {
		t.Errorf("GetShardIterator: %d calls, %d lost answers; want 2 and 1", len(gsi), errorsOf(gsi, isLost))
	}
	if n, l, all := errorsOf(gr, isInternal), errorsOf(gr, isLost), errorsOf(gr, anyError); n != 2 || l != 1 || all != 3 {
		t.Errorf("GetRecords: the reader saw %d InternalFailure, %d lost answers, %d errors in all; want 2, 1 and 3", n, l, all)
	}
	// The SDK retried 2 failed attempts and 1 lost answer. A call
	// cancelled by the shutdown may end before its attempt starts.
	canceled := errorsOf(gr, func(err error) bool { return errors.Is(err, context.Canceled) })
	if calls, attempts := f.Calls("GetRecords"), f.Attempts("GetRecords"); attempts > calls-2+3 || attempts < calls-2+3-canceled {
		t.Errorf("GetRecords: %d calls (2 stopped before the SDK, %d cancelled by the shutdown), %d attempts; want %d attempts (less one per cancelled call at most)",
			calls, canceled, attempts, calls-2+3)
	}
}

// TestOneStreamFailureIsolated: access denied on one stream's shard
// (GetShardIterator fails with AccessDeniedException, injected through SDK
// middleware) does not stop the service: the other stream's records are
// all handled, the failed shard is reported to the hooks with its stream,
// shard and error, and Run goes on until cancelled.
func TestOneStreamFailureIsolated(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	faults := &testutil.Faults{}
	faulty := testutil.KinesisClient(t, testutil.Kinesalite, faults.KinesisOptions)
	good, bad := testutil.StreamName(t), testutil.StreamName(t)
	testutil.CreateStream(t, kc, good, 1)
	testutil.CreateStream(t, kc, bad, 1)
	faults.Inject(testutil.Fault{Op: "GetShardIterator",
		Match: func(in any) bool {
			gi, ok := in.(*kinesis.GetShardIteratorInput)
			return ok && aws.ToString(gi.StreamName) == bad
		},
		Err: &ktypes.AccessDeniedException{Message: aws.String("not authorized to perform kinesis:GetShardIterator on " + bad + " (injected)")}})
	fl := &testutil.Failures{}
	ta := newTally()
	svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(faulty), kinesislease.WithLeaseStore(memory.New()),
		kinesislease.WithLogger(testLogger(t)), kinesislease.WithHooks(fl))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{good, bad} {
		if err := kinesislease.Subscribe(svc, s, ta.handler("a"), kinesislease.WithStartPosition(kltype.TrimHorizon),
			kinesislease.WithPolling(20*time.Millisecond, 50*time.Millisecond, 0)); err != nil {
			t.Fatal(err)
		}
	}
	in := runInstance(t, svc)
	put(t, kc, good, 0, 50)
	put(t, kc, bad, 1000, 50)
	ta.waitFor(t, 0, 50, 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for len(fl.All()) == 0 {
		select {
		case <-in.done:
			t.Fatalf("Run returned %v: one stream's failure stopped the service", in.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no HookFailed call after 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f := fl.All()[0]
	if f.Stream != bad || f.ShardID != "shardId-000000000000" || f.Err == nil || !strings.Contains(f.Err.Error(), "AccessDeniedException") || f.RetryIn <= 0 {
		t.Fatalf("HookFailed %+v: want stream %s, its shard, the access-denied error, a retry delay", f, bad)
	}
	if d, _ := ta.count(); d != 50 {
		t.Fatalf("%d records handled, want the good stream's 50 and none of the failing one's", d)
	}
	// Health shows it: the good stream reading, the bad one's shard set
	// aside with its error and when it is tried again.
	h := svc.Health()
	if !h.Live || len(h.Streams) != 2 || len(h.Streams[0].Shards) != 1 || !h.Streams[0].Shards[0].Reading {
		t.Fatalf("Health %+v: want live, the good stream's shard reading", h)
	}
	if b := h.Streams[1].Shards; len(b) != 1 || b[0].Reading || b[0].Err == nil || !b[0].RetryAt.After(time.Now()) {
		t.Fatalf("Health of %s: %+v, want its shard set aside with the error and a retry time", bad, b)
	}
	select {
	case <-in.done:
		t.Fatalf("Run returned %v", in.err)
	default:
	}
	in.stop(t)
}

// TestStartupWaitsForTheNetwork: Kinesis unreachable at start (ListShards
// fails with a connection error three times, injected outside the SDK's
// retries) is retried with backoff, each failure logged with the stream;
// then the service runs and reads. Unreachable until the context ends, Run
// returns the last failure prefixed with what was checked.
func TestStartupWaitsForTheNetwork(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused (injected)")}

	t.Run("comes up", func(t *testing.T) {
		faults := &testutil.Faults{}
		faults.Inject(testutil.Fault{Op: "ListShards", Times: 3, Err: refused})
		var logs lockedBuffer
		ta := newTally()
		svc, err := kinesislease.New(testutil.Config(t), testEncoding(t), kinesislease.WithKinesisClient(testutil.KinesisClient(t, testutil.Kinesalite, faults.KinesisOptions)),
			kinesislease.WithLeaseStore(memory.New()), kinesislease.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		if err := kinesislease.Subscribe(svc, stream, ta.handler("a"), kinesislease.WithStartPosition(kltype.TrimHorizon)); err != nil {
			t.Fatal(err)
		}
		in := runInstance(t, svc)
		put(t, kc, stream, 0, 10)
		ta.waitFor(t, 0, 10, 30*time.Second)
		in.stop(t)
		if n := strings.Count(logs.String(), "start-up check failed; retrying"); n != 3 || !strings.Contains(logs.String(), stream) {
			t.Fatalf("%d start-up retries logged, want 3 naming the stream; log:\n%s", n, logs.String())
		}
	})
	// newSubscribed returns a service on memory leases subscribed to
	// stream, its Kinesis calls through faults.
	newSubscribed := func(t *testing.T, faults *testutil.Faults) *kinesislease.Service {
		t.Helper()
		svc, err := kinesislease.New(testutil.Config(t), testEncoding(t), kinesislease.WithKinesisClient(testutil.KinesisClient(t, testutil.Kinesalite, faults.KinesisOptions)),
			kinesislease.WithLeaseStore(memory.New()), kinesislease.WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		if err := kinesislease.Subscribe(svc, stream, newTally().handler("a")); err != nil {
			t.Fatal(err)
		}
		return svc
	}
	t.Run("stopped while starting", func(t *testing.T) {
		// A shutdown while the first check is in flight is a shutdown:
		// nil, as after any other.
		faults := &testutil.Faults{}
		faults.Inject(testutil.Fault{Op: "ListShards", Delay: time.Minute})
		svc := newSubscribed(t, faults)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctx) }()
		for faults.Calls("ListShards") == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run cancelled while its first ListShards was in flight: %v, want nil", err)
		}
	})
	t.Run("never comes up", func(t *testing.T) {
		faults := &testutil.Faults{}
		faults.Inject(testutil.Fault{Op: "ListShards", Err: refused})
		svc := newSubscribed(t, faults)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := svc.Run(ctx)
		if err == nil || !strings.HasPrefix(err.Error(), "kinesislease: stream "+strconv.Quote(stream)) || !errors.Is(err, refused) {
			t.Fatalf("Run: %v, want the connection error prefixed with the stream", err)
		}
		if faults.Calls("ListShards") < 2 {
			t.Fatalf("ListShards called %d times: the start-up check was not retried", faults.Calls("ListShards"))
		}
	})
}

// TestRecreatedStream: a stream deleted and created again under the same
// name keeps the rows of the old one, whose checkpoints are not in the new
// shards: Kinesis refuses GetShardIterator after such a sequence number
// with InvalidArgumentException ("... is invalid because it did not come
// from this stream"). Neither emulator checks it, so the refusal is
// injected through SDK middleware, with Kinesis' error. The shard is set
// aside with kltype.ErrCheckpointNotInShard, whose message names the stream, the
// shard and the rewind command; the service goes on running.
func TestRecreatedStream(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	store := memory.New()
	ta := newTally()
	in := start(t, kc, store, stream, "a", ta)
	put(t, kc, stream, 0, 20)
	ta.waitFor(t, 0, 20, 30*time.Second)
	in.stop(t)
	l, err := store.Get(context.Background(), leases.Key{Stream: stream, Shard: "shardId-000000000000"})
	if err != nil || l.Checkpoint.Sequence == "" {
		t.Fatalf("row after the first service: %+v, %v; want a checkpoint", l, err)
	}

	faults := &testutil.Faults{}
	faults.Inject(testutil.Fault{Op: "GetShardIterator",
		Match: func(in any) bool {
			gi, ok := in.(*kinesis.GetShardIteratorInput)
			return ok && gi.ShardIteratorType == ktypes.ShardIteratorTypeAfterSequenceNumber
		},
		Err: &ktypes.InvalidArgumentException{Message: aws.String("StartingSequenceNumber " + l.Checkpoint.Sequence +
			" used in GetShardIterator on shard shardId-000000000000 in stream " + stream +
			" under account 000000000000 is invalid because it did not come from this stream. (injected)")}})
	fl := &testutil.Failures{}
	in2 := start(t, testutil.KinesisClient(t, testutil.Kinesalite, faults.KinesisOptions), store, stream, "b", newTally(), kinesislease.WithHooks(fl))
	deadline := time.Now().Add(30 * time.Second)
	for len(fl.All()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no failure reported for the recreated stream's shard after 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f := fl.All()[0]
	var ce *kltype.CheckpointError
	if !errors.Is(f.Err, kltype.ErrCheckpointNotInShard) || !errors.As(f.Err, &ce) || ce.ShardID != "shardId-000000000000" ||
		!strings.Contains(f.Err.Error(), "kinesislease rewind") || !strings.Contains(f.Err.Error(), stream) {
		t.Fatalf("failure %v: want kltype.ErrCheckpointNotInShard naming the stream, the shard and the rewind command", f.Err)
	}
	in2.stop(t)
}
