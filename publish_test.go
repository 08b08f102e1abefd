package kinesislease_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// partialFailure is an Initialize middleware for PutRecords that, for its
// first calls, takes one entry out of the request before it is sent and
// puts a failed entry (ProvisionedThroughputExceededException) at its
// position in the response, as Kinesis does when one shard is throttled.
type partialFailure struct {
	mu      sync.Mutex
	left    int      // calls still to disturb
	removed []string // the partition keys of the entries taken out
	calls   int
}

func (*partialFailure) ID() string { return "test.partialFailure" }

func (p *partialFailure) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
	middleware.InitializeOutput, middleware.Metadata, error,
) {
	input, ok := in.Parameters.(*kinesis.PutRecordsInput)
	if !ok {
		return next.HandleInitialize(ctx, in)
	}
	p.mu.Lock()
	p.calls++
	if p.left == 0 {
		p.mu.Unlock()
		return next.HandleInitialize(ctx, in)
	}
	p.left--
	j := len(input.Records) / 2
	p.removed = append(p.removed, aws.ToString(input.Records[j].PartitionKey))
	p.mu.Unlock()

	failed := ktypes.PutRecordsResultEntry{
		ErrorCode:    aws.String("ProvisionedThroughputExceededException"),
		ErrorMessage: aws.String("Rate exceeded for shard shardId-000000000000 in stream (injected by the test)"),
	}
	if len(input.Records) == 1 {
		// Nothing left to send: answer as Kinesis would.
		out := &kinesis.PutRecordsOutput{FailedRecordCount: aws.Int32(1), Records: []ktypes.PutRecordsResultEntry{failed}}
		return middleware.InitializeOutput{Result: out}, middleware.Metadata{}, nil
	}
	sent := *input // the caller's input stays as it was
	sent.Records = slices.Delete(slices.Clone(input.Records), j, j+1)
	in.Parameters = &sent
	out, md, err := next.HandleInitialize(ctx, in)
	if err != nil {
		return out, md, err
	}
	res := out.Result.(*kinesis.PutRecordsOutput)
	res.Records = slices.Insert(res.Records, j, failed)
	res.FailedRecordCount = aws.Int32(aws.ToInt32(res.FailedRecordCount) + 1)
	return out, md, nil
}

func (p *partialFailure) options(o *kinesis.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(p, middleware.Before)
	})
}

// TestPublisherPartialFailure: PutRecords answers with one throttled entry
// in the middle of each of its first calls; the Publisher retries only that
// entry, and every record is consumed exactly once and, per partition key,
// in publication order.
func TestPublisherPartialFailure(t *testing.T) {
	t.Parallel()
	const (
		k     = 8
		n     = 1200
		nKeys = 40
	)
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 2)
	pf := &partialFailure{left: k}
	faulty := testutil.KinesisClient(t, testutil.Kinesalite, pf.options)
	svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(faulty), kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := kinesislease.NewPublisher[order](svc, stream, kinesislease.WithLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	results := make([]<-chan error, n)
	for id := range n {
		key := fmt.Sprintf("customer-%d", id%nKeys)
		if results[id], err = p.PutAsync(key, order{ID: id, Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	for id, res := range results {
		select {
		case err := <-res:
			if err != nil {
				t.Fatalf("record %d: %v", id, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("record %d: no outcome after 20s", id)
		}
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	pf.mu.Lock()
	if pf.left != 0 || len(pf.removed) != k {
		t.Fatalf("%d calls disturbed, want %d", len(pf.removed), k)
	}
	t.Logf("%d PutRecords calls, %d of them with a throttled entry", pf.calls, k)
	pf.mu.Unlock()

	ta := newTally()
	in := start(t, kc, memory.New(), stream, "a", ta)
	ta.waitFor(t, 0, n, 30*time.Second)
	in.stop(t)
	if d, dups := ta.count(); d != n || dups != 0 {
		t.Fatalf("consumed %d distinct records with %d duplicates, want %d exactly once", d, dups, n)
	}
	ta.mu.Lock()
	defer ta.mu.Unlock()
	for key, got := range ta.byKey {
		if !slices.IsSorted(got) {
			t.Fatalf("key %s consumed in the order %v, want publication order", key, got)
		}
	}
}

// bigOrder is a value whose JSON encoding is larger than its Pad.
type bigOrder struct{ Pad string }

// TestPublishRecordTooLarge: a record over 1 MiB (data and partition key)
// is refused with ErrRecordTooLarge before anything is sent; one of exactly
// 1 MiB is put.
func TestPublishRecordTooLarge(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(kc), kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const key = "big-key"
	codec := kinesislease.WithPublishCodec(rawCodec{})
	fits := strings.Repeat("x", 1<<20-len(key))
	over := fits + "x"

	err = kinesislease.Publish(ctx, svc, stream, key, over, codec)
	if !errors.Is(err, kinesislease.ErrRecordTooLarge) {
		t.Fatalf("Publish of 1 MiB + 1 byte: %v, want ErrRecordTooLarge", err)
	}
	p, err := kinesislease.NewPublisher[string](svc, stream, codec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if _, err := p.PutAsync(key, over); !errors.Is(err, kinesislease.ErrRecordTooLarge) {
		t.Fatalf("PutAsync of 1 MiB + 1 byte: %v, want ErrRecordTooLarge", err)
	}
	if err := p.Put(ctx, key, fits); err != nil {
		t.Fatalf("Put of exactly 1 MiB with its key: %v", err)
	}
	// The JSON codec counts too: its encoding is what must fit.
	err = kinesislease.Publish(ctx, svc, stream, key, bigOrder{Pad: strings.Repeat("y", 1<<20)})
	if !errors.Is(err, kinesislease.ErrRecordTooLarge) {
		t.Fatalf("Publish of a value whose JSON is over 1 MiB: %v, want ErrRecordTooLarge", err)
	}
	recs := plReadAll(t, kc, stream, 1, 10*time.Second)
	if len(recs) != 1 || len(recs[0].Data) != len(fits) {
		t.Fatalf("stream holds %d records, want only the one that fits", len(recs))
	}
}

// rawCodec writes strings as their bytes.
type rawCodec struct{}

func (rawCodec) Name() string { return "raw" }
func (rawCodec) Marshal(v any) ([]byte, error) {
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("raw codec: %T", v)
	}
	return []byte(s), nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*string)
	if !ok {
		return fmt.Errorf("raw codec: %T", v)
	}
	*p = string(data)
	return nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestPublisherNoLingerIdle: a Publisher with no linger sends each record
// at once, every record of a key in turn without waiting for another put,
// and does not spin while idle.
//
// Not parallel: the idle check reads the CPU time of the whole test binary
// (getrusage), which tests running beside it would add to. Non-parallel
// tests run before any parallel one resumes, so nothing else of this
// binary is busy while it measures.
func TestPublisherNoLingerIdle(t *testing.T) {
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(kc), kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := kinesislease.NewPublisher[order](svc, stream, kinesislease.WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	// Three records of one key need three calls.
	var results []<-chan error
	for id := range 3 {
		res, err := p.PutAsync("one-key", order{ID: id, Key: "one-key"})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, res)
	}
	for id, res := range results {
		select {
		case err := <-res:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("record %d of one key not sent after 10s", id)
		}
	}
	const idle = 500 * time.Millisecond
	before := cpuTime()
	time.Sleep(idle)
	if used := cpuTime() - before; used > idle/2 {
		t.Fatalf("an idle Publisher with no linger used %v of CPU in %v: it spins", used, idle)
	}
}

// TestPublisherWithoutService: a program that only publishes builds its
// Publisher from a Kinesis client alone (no Service, no lease store); the
// records land on the stream in order with their partition keys.
func TestPublisherWithoutService(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	p, err := kinesislease.NewPublisherFromClient[order](kc, stream)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := p.Put(t.Context(), fmt.Sprintf("customer-%d", i), order{ID: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	it, err := kc.GetShardIterator(t.Context(), &kinesis.GetShardIteratorInput{StreamName: aws.String(stream),
		ShardId: aws.String("shardId-000000000000"), ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	out, err := kc.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Records) != 5 {
		t.Fatalf("%d records on the stream, want 5", len(out.Records))
	}
	for i, r := range out.Records {
		var o order
		if err := json.Unmarshal(r.Data, &o); err != nil || o.ID != i || aws.ToString(r.PartitionKey) != fmt.Sprintf("customer-%d", i) {
			t.Fatalf("record %d: %s under %q (%v)", i, r.Data, aws.ToString(r.PartitionKey), err)
		}
	}
	if _, err := kinesislease.NewPublisherFromClient[order](nil, stream); !errors.Is(err, kinesislease.ErrInvalidOption) {
		t.Fatalf("NewPublisherFromClient(nil): %v, want ErrInvalidOption", err)
	}
}
