package read_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
)

const shard0 = "shardId-000000000000"

// call is one Kinesis read a recorder saw.
type call struct {
	Op         string
	Start, End time.Time
	Err        error
	In         *kinesis.GetShardIteratorInput // GetShardIterator
	// GetRecords: the records returned and how far behind they were.
	Records int
	Behind  int64
}

// recorder wraps a Kinesis client and records its reads.
type recorder struct {
	*kinesis.Client
	mu    sync.Mutex
	calls []call
}

func (r *recorder) add(c call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

func (r *recorder) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	c := call{Op: "GetShardIterator", Start: time.Now(), In: in}
	out, err := r.Client.GetShardIterator(ctx, in, optFns...)
	c.End, c.Err = time.Now(), err
	r.add(c)
	return out, err
}

func (r *recorder) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	c := call{Op: "GetRecords", Start: time.Now()}
	out, err := r.Client.GetRecords(ctx, in, optFns...)
	c.End, c.Err = time.Now(), err
	if err == nil {
		c.Records, c.Behind = len(out.Records), aws.ToInt64(out.MillisBehindLatest)
	}
	r.add(c)
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

// newStream creates a stream of shards shards on e and returns a recording
// client (with faults f, if not nil) and the stream's name.
func newStream(t *testing.T, e testutil.Emulator, shards int32, f *testutil.Faults) (*recorder, string) {
	t.Helper()
	var opts []func(*kinesis.Options)
	if f != nil {
		opts = append(opts, f.KinesisOptions)
	}
	kc := testutil.KinesisClient(t, e, opts...)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, shards)
	return &recorder{Client: kc}, stream
}

// putEach puts n records one call each, gap apart (so that their arrival
// times differ), and returns their sequence numbers in order.
func putEach(t *testing.T, kc *kinesis.Client, stream string, n int, gap time.Duration) []string {
	t.Helper()
	var seqs []string
	for i := range n {
		out, err := kc.PutRecord(testutil.WithoutFaults(context.Background()), &kinesis.PutRecordInput{
			StreamName: aws.String(stream), PartitionKey: aws.String(fmt.Sprint("k", i)), Data: fmt.Appendf(nil, "record %d", i),
		})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, aws.ToString(out.SequenceNumber))
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	slices.SortFunc(seqs, func(a, b string) int {
		x, _ := new(big.Int).SetString(a, 10)
		y, _ := new(big.Int).SetString(b, 10)
		return x.Cmp(y)
	})
	return seqs
}

func seqsOf(rs []ktypes.Record) []string {
	var s []string
	for _, r := range rs {
		s = append(s, aws.ToString(r.SequenceNumber))
	}
	return s
}

// TestReaderIdlePacing: on an empty shard Next keeps polling, at most once
// per IdleInterval.
func TestReaderIdlePacing(t *testing.T) {
	t.Parallel()
	rec, stream := newStream(t, testutil.Kinesalite, 1, nil)
	const idle = 100 * time.Millisecond
	// The gaps are measured between the instants the reader sends its
	// calls (OnSend), as in TestReaderBehind: the recording client's own
	// clock reads are later by scheduling delays, which under load made a
	// correct reader's calls look 86ms apart (CI50).
	var (
		sentMu sync.Mutex
		sent   []time.Time
	)
	r := read.NewReader(read.ReaderConfig{
		Client: rec, Stream: stream, ShardID: shard0, Start: kltype.TrimHorizon,
		MinInterval: 20 * time.Millisecond, IdleInterval: idle,
		OnSend: func(at time.Time) {
			sentMu.Lock()
			sent = append(sent, at)
			sentMu.Unlock()
		},
	})
	// Next is cancelled once the reader has polled the empty shard want
	// times (the pacing is in the gaps between the calls, whatever they
	// take); the timeout only bounds a reader that stopped polling.
	const want = 4
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ctx.Err() == nil {
			if len(rec.ops("GetRecords")) >= want {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	began := time.Now()
	b, err := r.Next(ctx)
	elapsed := time.Since(began)
	cancel()
	<-watched
	calls := len(rec.ops("GetRecords"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Next on an empty shard: %+v, %v after %v and %d GetRecords calls; want it cancelled after %d (the reader stopped polling?)",
			b, err, elapsed.Round(time.Millisecond), calls, want)
	}
	// The first call goes at once, each other one an idle interval after
	// the previous one started.
	if most := int(elapsed/idle) + 1; calls > most {
		t.Errorf("%d GetRecords calls in %v with IdleInterval %v: want at most %d", calls, elapsed.Round(time.Millisecond), idle, most)
	}
	sentMu.Lock()
	defer sentMu.Unlock()
	if len(sent) != calls {
		t.Fatalf("OnSend called %d times for %d GetRecords calls", len(sent), calls)
	}
	for i := 1; i < len(sent); i++ {
		if gap := sent[i].Sub(sent[i-1]); gap < idle {
			t.Errorf("GetRecords calls %d and %d sent %v apart, want at least IdleInterval %v", i, i+1, gap, idle)
		}
	}
	t.Logf("%d GetRecords calls in %v", calls, elapsed.Round(time.Millisecond))
}

// TestReaderBehind: while the reader is behind (MillisBehindLatest > 0, or a
// full batch) the next GetRecords goes after MinInterval, not IdleInterval;
// once caught up (an empty or short batch at the tip) it waits IdleInterval.
// kinesalite always answers MillisBehindLatest 0, so this runs on
// kinesis-local, which reports it.
func TestReaderBehind(t *testing.T) {
	t.Parallel()
	rec, stream := newStream(t, testutil.KinesisLocal, 1, nil)
	published := putEach(t, rec.Client, stream, 30, 5*time.Millisecond)
	const (
		limit       = 4
		minInterval = 150 * time.Millisecond // above kinesis-local's own latency, so that pacing, not the emulator, spaces the calls
		idle        = time.Second
	)
	// The gaps are measured on the reader's own clock reads (OnSend: the
	// instants it paces from); any other observer's clock reads differ from
	// them by scheduling delays, which can make a correct reader look a
	// fraction of a millisecond early or late.
	var (
		resMu    sync.Mutex
		reserved []time.Time
	)
	r := read.NewReader(read.ReaderConfig{
		Client: rec, Stream: stream, ShardID: shard0, Start: kltype.TrimHorizon,
		Limit: limit, MinInterval: minInterval, IdleInterval: idle,
		OnSend: func(at time.Time) {
			resMu.Lock()
			reserved = append(reserved, at)
			resMu.Unlock()
		},
	})
	ctx := t.Context()
	var got []string
	for len(got) < len(published) {
		b, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, seqsOf(b.Records)...)
	}
	if !slices.Equal(got, published) {
		t.Fatalf("read %v, want %v", got, published)
	}
	// Caught up (the last batch was short, at the tip): one more record is
	// read an idle interval later.
	more := putEach(t, rec.Client, stream, 1, 0)
	b, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqsOf(b.Records), more) {
		t.Fatalf("read %v, want %v", seqsOf(b.Records), more)
	}

	gr := rec.ops("GetRecords")
	resMu.Lock()
	defer resMu.Unlock()
	if len(reserved) != len(gr) {
		t.Fatalf("OnSend called %d times for %d GetRecords calls", len(reserved), len(gr))
	}
	var behind []int64
	idled, judged := 0, 0
	for i, c := range gr {
		behind = append(behind, c.Behind)
		if i == 0 {
			if c.Behind == 0 {
				t.Fatalf("kinesis-local answered MillisBehindLatest 0 on the first batch: cannot test pacing when behind")
			}
			continue
		}
		prev, gap := gr[i-1], reserved[i].Sub(reserved[i-1])
		caught := prev.Records == 0 || (prev.Behind == 0 && prev.Records < limit)
		// Behind, the reader sends again as soon as both MinInterval has
		// passed since its last send and that call has returned: a slow
		// answer (a loaded machine) delays the next call by its own
		// latency, not by the reader's choice. A reader that waited
		// IdleInterval instead would send idle - max(minInterval, latency)
		// after that instant, which tells the two apart while the call
		// took less than idle/2.
		ready := reserved[i-1].Add(minInterval)
		if prev.End.After(ready) {
			ready = prev.End
		}
		latency := prev.End.Sub(reserved[i-1])
		switch {
		case gap < minInterval:
			t.Errorf("GetRecords calls %d and %d %v apart, want at least MinInterval %v", i, i+1, gap, minInterval)
		case !caught && latency < idle/2 && reserved[i].Sub(ready) >= idle/2:
			t.Errorf("GetRecords call %d came %v after call %d (%d records, %dms behind, answered in %v): want the next call at once (MinInterval %v), not after IdleInterval %v",
				i+1, gap, i, prev.Records, prev.Behind, latency, minInterval, idle)
		case !caught && latency < idle/2:
			judged++
		case caught && gap < idle:
			t.Errorf("GetRecords call %d came %v after call %d (%d records, %dms behind, caught up): want IdleInterval %v", i+1, gap, i, prev.Records, prev.Behind, idle)
		case caught:
			idled++
		}
	}
	if idled == 0 {
		t.Errorf("the reader never was caught up: MillisBehindLatest per call %v", behind)
	}
	if judged == 0 {
		t.Errorf("no call while behind was answered within %v: cannot tell pacing from the emulator's latency (MillisBehindLatest per call %v)", idle/2, behind)
	}
	t.Logf("MillisBehindLatest per call: %v", behind)
}

// TestReaderShardEnd: a parent shard closed by a split is read to its end:
// the last batch is marked End, and Next then returns ErrShardEnded without
// calling Kinesis. A reader resuming after the parent's last record gets an
// empty End batch. kinesalite cannot reshard; this runs on kinesis-local.
func TestReaderShardEnd(t *testing.T) {
	t.Parallel()
	rec, stream := newStream(t, testutil.KinesisLocal, 1, nil)
	published := putEach(t, rec.Client, stream, 10, 0)
	if _, err := rec.UpdateShardCount(context.Background(), &kinesis.UpdateShardCountInput{
		StreamName: aws.String(stream), TargetShardCount: aws.Int32(2), ScalingType: ktypes.ScalingTypeUniformScaling,
	}); err != nil {
		t.Fatal(err)
	}
	waitActive(t, rec.Client, stream)
	after := putEach(t, rec.Client, stream, 5, 0) // into the children

	read := func(start kltype.StartPosition) (got []string, batches int) {
		t.Helper()
		r := read.NewReader(read.ReaderConfig{
			Client: rec, Stream: stream, ShardID: shard0, Start: start,
			Limit: 4, MinInterval: 10 * time.Millisecond, IdleInterval: 10 * time.Millisecond,
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for {
			b, err := r.Next(ctx)
			if err != nil {
				t.Fatalf("Next after %d records: %v", len(got), err)
			}
			got = append(got, seqsOf(b.Records)...)
			batches++
			if b.End {
				break
			}
		}
		calls := len(rec.ops("GetRecords")) + len(rec.ops("GetShardIterator"))
		for range 2 {
			if b, err := r.Next(ctx); !errors.Is(err, read.ErrShardEnded) || len(b.Records) != 0 || b.End {
				t.Fatalf("Next after the End batch: %+v, %v; want ErrShardEnded", b, err)
			}
		}
		if n := len(rec.ops("GetRecords")) + len(rec.ops("GetShardIterator")); n != calls {
			t.Errorf("Next after the End batch called Kinesis %d times", n-calls)
		}
		return got, batches
	}

	got, batches := read(kltype.TrimHorizon)
	if !slices.Equal(got, published) {
		t.Fatalf("the closed parent read to its end: %v, want %v (and none of %v, put after the split)", got, published, after)
	}
	t.Logf("%d records in %d batches, the last marked End", len(got), batches)

	got, _ = read(kltype.StartPosition{Type: kltype.PositionAfterSequenceNumber, Sequence: published[len(published)-1]})
	if len(got) != 0 {
		t.Fatalf("after the parent's last record: read %v, want nothing", got)
	}
}

func waitActive(t *testing.T, kc *kinesis.Client, stream string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := kc.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			t.Fatal(err)
		}
		if out.StreamDescriptionSummary.StreamStatus == ktypes.StreamStatusActive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s still %s", stream, out.StreamDescriptionSummary.StreamStatus)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReaderPermanentErrors: a missing stream, a missing shard and denied
// access end Next with the error after one call, not retried forever.
func TestReaderPermanentErrors(t *testing.T) {
	t.Parallel()
	f := &testutil.Faults{}
	rec, stream := newStream(t, testutil.Kinesalite, 1, f)
	var notFound *ktypes.ResourceNotFoundException
	for _, c := range []struct {
		name, stream, shard string
		fault               *testutil.Fault
		is                  func(error) bool
	}{
		{"missing stream", "no-such-stream-" + stream, shard0, nil, func(err error) bool { return errors.As(err, &notFound) }},
		{"missing shard", stream, "shardId-000000000099", nil, func(err error) bool { return errors.As(err, &notFound) }},
		{"access denied", stream, shard0,
			&testutil.Fault{Op: "GetRecords", Times: 1, Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: kinesis:GetRecords (injected)"}},
			func(err error) bool {
				var api smithy.APIError
				return errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException"
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.fault != nil {
				f.Inject(*c.fault)
				defer f.Clear()
			}
			before := len(rec.ops("GetShardIterator")) + len(rec.ops("GetRecords"))
			var retried []error
			r := read.NewReader(read.ReaderConfig{
				Client: rec, Stream: c.stream, ShardID: c.shard, Start: kltype.TrimHorizon,
				MinInterval: 10 * time.Millisecond, IdleInterval: 10 * time.Millisecond,
				OnRetry: func(err error, _ time.Duration) { retried = append(retried, err) },
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := r.Next(ctx)
			if err == nil || ctx.Err() != nil || !c.is(err) {
				t.Fatalf("Next: %v (context: %v); want the %s error at once", err, ctx.Err(), c.name)
			}
			if !kinesisx.Permanent(err) {
				t.Errorf("Permanent(%v) = false", err)
			}
			if len(retried) != 0 {
				t.Errorf("retried %d times: %v", len(retried), retried)
			}
			if n := len(rec.ops("GetShardIterator")) + len(rec.ops("GetRecords")) - before; c.fault == nil && n != 1 || c.fault != nil && n != 2 {
				t.Errorf("%d Kinesis calls, want the one that failed (after GetShardIterator for the injected GetRecords fault)", n)
			}
			t.Logf("%v", err)
		})
	}
}

// TestReaderThrottleBackoff: throttled GetRecords calls are retried with the
// same iterator, after exponential backoff from MinInterval capped at
// MaxBackoff (with jitter over the upper half), and the reader waits each
// delay it reports.
func TestReaderThrottleBackoff(t *testing.T) {
	t.Parallel()
	f := &testutil.Faults{}
	rec, stream := newStream(t, testutil.Kinesalite, 1, f)
	published := putEach(t, rec.Client, stream, 30, 0)
	pte := &ktypes.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard (injected)")}
	f.Inject(testutil.Fault{Op: "GetRecords", Skip: 1, Times: 6, Err: pte})
	const (
		minInterval = 10 * time.Millisecond
		maxBackoff  = 100 * time.Millisecond
	)
	var delays []time.Duration
	r := read.NewReader(read.ReaderConfig{
		Client: rec, Stream: stream, ShardID: shard0, Start: kltype.TrimHorizon,
		Limit: 10, MinInterval: minInterval, IdleInterval: minInterval, MaxBackoff: maxBackoff,
		OnRetry: func(err error, d time.Duration) {
			var p *ktypes.ProvisionedThroughputExceededException
			if !errors.As(err, &p) {
				t.Errorf("retried %v, want only the injected throttles", err)
			}
			delays = append(delays, d)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for len(got) < len(published) {
		b, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, seqsOf(b.Records)...)
	}
	if !slices.Equal(got, published) {
		t.Fatalf("read %v, want %v", got, published)
	}
	if len(delays) != 6 {
		t.Fatalf("%d retries reported, want 6", len(delays))
	}
	for i, d := range delays {
		ceiling := min(minInterval<<i, maxBackoff)
		if d < ceiling/2 || d > ceiling {
			t.Errorf("backoff %d: %v, want within [%v, %v]", i+1, d, ceiling/2, ceiling)
		}
	}
	gr := rec.ops("GetRecords")
	if len(rec.ops("GetShardIterator")) != 1 {
		t.Errorf("%d GetShardIterator calls, want 1: a throttle keeps the iterator", len(rec.ops("GetShardIterator")))
	}
	for i := range 6 {
		failed, next := gr[1+i], gr[2+i]
		if failed.Err == nil {
			t.Fatalf("GetRecords call %d did not fail", 2+i)
		}
		if gap := next.Start.Sub(failed.End); gap < delays[i] {
			t.Errorf("GetRecords call %d came %v after throttle %d, want at least the backoff %v", 3+i, gap, i+1, delays[i])
		}
	}
	t.Logf("backoffs %v", delays)
}

// TestReaderExpiredIterator: after ExpiredIteratorException the reader gets a
// new iterator AFTER_SEQUENCE_NUMBER of the last record it returned: nothing
// lost, nothing repeated.
func TestReaderExpiredIterator(t *testing.T) {
	t.Parallel()
	f := &testutil.Faults{}
	rec, stream := newStream(t, testutil.Kinesalite, 1, f)
	published := putEach(t, rec.Client, stream, 30, 0)
	var retried []error
	r := read.NewReader(read.ReaderConfig{
		Client: rec, Stream: stream, ShardID: shard0, Start: kltype.TrimHorizon,
		Limit: 10, MinInterval: 10 * time.Millisecond, IdleInterval: 10 * time.Millisecond,
		OnRetry: func(err error, _ time.Duration) { retried = append(retried, err) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := r.Next(ctx)
	if err != nil || !slices.Equal(seqsOf(b.Records), published[:10]) {
		t.Fatalf("first batch %v, %v; want %v", seqsOf(b.Records), err, published[:10])
	}
	f.Inject(testutil.Fault{Op: "GetRecords", Times: 1, Err: &ktypes.ExpiredIteratorException{Message: aws.String("Iterator expired (injected)")}})
	got := seqsOf(b.Records)
	for len(got) < len(published) {
		b, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, seqsOf(b.Records)...)
	}
	if !slices.Equal(got, published) {
		t.Fatalf("read %v, want %v", got, published)
	}
	var expired *ktypes.ExpiredIteratorException
	if len(retried) != 1 || !errors.As(retried[0], &expired) {
		t.Fatalf("retried %v, want the one expired iterator", retried)
	}
	gsi := rec.ops("GetShardIterator")
	if len(gsi) != 2 {
		t.Fatalf("%d GetShardIterator calls, want 2", len(gsi))
	}
	if in := gsi[1].In; in.ShardIteratorType != ktypes.ShardIteratorTypeAfterSequenceNumber || aws.ToString(in.StartingSequenceNumber) != published[9] {
		t.Errorf("new iterator %s %s, want AFTER_SEQUENCE_NUMBER %s (the last record returned)", in.ShardIteratorType, aws.ToString(in.StartingSequenceNumber), published[9])
	}
}
