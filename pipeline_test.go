package kinesislease_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// Helpers shared by pipeline_test.go, kplconsume_test.go and publish_test.go.

const plShard0 = "shardId-000000000000"

// plRetry keeps retries quick in tests.
var plRetry = kltype.RetryPolicy{Attempts: 3, InitialDelay: 10 * time.Millisecond, MaxDelay: 40 * time.Millisecond}

// plEntry is one record to put as is.
type plEntry struct {
	pk   string
	data []byte
}

func plOrder(id int) plEntry {
	o := order{ID: id, Key: fmt.Sprintf("customer-%d", id)}
	data, _ := json.Marshal(o)
	return plEntry{pk: o.Key, data: data}
}

func plOrders(first, n int) []plEntry {
	var es []plEntry
	for id := first; id < first+n; id++ {
		es = append(es, plOrder(id))
	}
	return es
}

// plPut puts es in one PutRecords call and returns their sequence
// numbers, in order.
func plPut(t testing.TB, client *kinesis.Client, stream string, es []plEntry) []string {
	t.Helper()
	in := &kinesis.PutRecordsInput{StreamName: aws.String(stream)}
	for _, e := range es {
		in.Records = append(in.Records, ktypes.PutRecordsRequestEntry{Data: e.data, PartitionKey: aws.String(e.pk)})
	}
	out, err := client.PutRecords(testutil.WithoutFaults(context.Background()), in)
	if err != nil {
		t.Fatal(err)
	}
	if n := aws.ToInt32(out.FailedRecordCount); n != 0 {
		t.Fatalf("PutRecords: %d failed", n)
	}
	seqs := make([]string, len(out.Records))
	for i, r := range out.Records {
		seqs[i] = aws.ToString(r.SequenceNumber)
	}
	return seqs
}

// plReadAll reads every record of a one-shard stream, waiting up to timeout
// for at least want of them.
func plReadAll(t testing.TB, client *kinesis.Client, stream string, want int, timeout time.Duration) []ktypes.Record {
	t.Helper()
	ctx := testutil.WithoutFaults(context.Background())
	it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
		StreamName: aws.String(stream), ShardId: aws.String(plShard0), ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	iter := it.ShardIterator
	var recs []ktypes.Record
	deadline := time.Now().Add(timeout)
	for {
		out, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, out.Records...)
		iter = out.NextShardIterator
		if len(out.Records) == 0 {
			if len(recs) >= want {
				return recs
			}
			if time.Now().After(deadline) {
				t.Fatalf("stream %s: %d records after %v, want %d", stream, len(recs), timeout, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// plRow reads the row of one shard.
func plRow(t testing.TB, store leases.Store, stream, shardID string) leases.Lease {
	t.Helper()
	l, err := store.Get(context.Background(), leases.Key{Stream: stream, Shard: shardID})
	if err != nil {
		t.Fatalf("reading the row of %s:%s: %v", stream, shardID, err)
	}
	return l
}

// plWaitCheckpoint waits until the shard's checkpoint is want.
func plWaitCheckpoint(t testing.TB, store leases.Store, stream, shardID string, want leases.Checkpoint, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l := plRow(t, store, stream, shardID)
		if l.Checkpoint == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %+v after %v, want %+v", l.Checkpoint, timeout, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// plRun runs a service with one subscription of T to stream: reading from
// TRIM_HORIZON, checkpointing after every record (or 50ms), polling fast.
// subOpts come after those defaults and may override them.
func plRun[T any](t testing.TB, client *kinesis.Client, store leases.MembershipStore, stream, owner string, svcOpts []kinesislease.Option,
	h kinesislease.HandlerFunc[T], subOpts ...kinesislease.SubscribeOption,
) *instance {
	t.Helper()
	sub := append([]kinesislease.SubscribeOption{kinesislease.WithCheckpoint(1, 50*time.Millisecond)}, subOpts...)
	return startWith(t, client, store, stream, owner, h, sub, svcOpts...)
}

// plLogs returns a service option logging warnings and errors to t and to
// the returned buffer, for a test that checks what was logged.
func plLogs(t testing.TB) (kinesislease.Option, *lockedBuffer) {
	logs := &lockedBuffer{}
	h := slog.NewTextHandler(io.MultiWriter(logs, tWriter{t}), &slog.HandlerOptions{Level: slog.LevelWarn})
	return kinesislease.WithLogger(slog.New(h)), logs
}

// shutdownTimeoutLog is what the service logs when its shutdown timeout
// expires with handlers still running, which it then cancels.
const shutdownTimeoutLog = "shutdown timeout; cancelling handlers"

// plStopWithin cancels in's Run and waits for it to return, failing the
// test if it has not after within (a bound against a hang, far above the
// expected time, not a timing check) or returned an error; it returns when
// it cancelled and how long Run then took to return, for the log.
func plStopWithin(t testing.TB, in *instance, within time.Duration) (began time.Time, took time.Duration) {
	t.Helper()
	began = time.Now()
	in.cancel()
	select {
	case <-in.done:
	case <-time.After(within):
		t.Fatalf("Run still running %v after cancel", within)
	}
	if in.err != nil {
		t.Fatalf("Run: %v", in.err)
	}
	return began, time.Since(began)
}

// plDelivery is one call of a handler, with what RecordFrom said.
type plDelivery struct {
	id       int
	attempt  int
	seq      string
	sub      int64
	pk, ehk  string
	shardID  string
	stream   string
	dataCopy []byte
}

// plLog records handler calls.
type plLog struct {
	mu   sync.Mutex
	list []plDelivery
	tick chan struct{}
}

func newPLLog() *plLog { return &plLog{tick: make(chan struct{}, 1)} }

func (d *plLog) add(ctx context.Context, t testing.TB, id int) plDelivery {
	r, ok := kinesislease.RecordFrom(ctx)
	if !ok {
		t.Errorf("RecordFrom: no record in the handler's context")
		return plDelivery{id: id}
	}
	dv := plDelivery{id: id, attempt: r.Attempt, seq: r.SequenceNumber, sub: r.SubSequence, pk: r.PartitionKey,
		ehk: r.ExplicitHashKey, shardID: r.ShardID, stream: r.Stream, dataCopy: slices.Clone(r.Data)}
	d.mu.Lock()
	d.list = append(d.list, dv)
	d.mu.Unlock()
	select {
	case d.tick <- struct{}{}:
	default:
	}
	return dv
}

func (d *plLog) all() []plDelivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.list)
}

// attempts returns the attempt numbers id was delivered with.
func (d *plLog) attempts(id int) []int {
	var out []int
	for _, dv := range d.all() {
		if dv.id == id {
			out = append(out, dv.attempt)
		}
	}
	return out
}

// waitUntil waits until cond holds of the deliveries.
func (d *plLog) waitUntil(t testing.TB, what string, timeout time.Duration, cond func([]plDelivery) bool) {
	t.Helper()
	deadline := time.After(timeout)
	for !cond(d.all()) {
		select {
		case <-d.tick:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("after %v: %s; deliveries: %v", timeout, what, plSummary(d.all()))
		}
	}
}

// plSeen reports whether every id was delivered at least n times.
func plSeen(n int, want ...int) func([]plDelivery) bool {
	return func(ds []plDelivery) bool {
		count := map[int]int{}
		for _, d := range ds {
			count[d.id]++
		}
		for _, id := range want {
			if count[id] < n {
				return false
			}
		}
		return true
	}
}

func plSummary(ds []plDelivery) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, " %d/%d", d.id, d.attempt)
		if d.sub != 0 {
			fmt.Fprintf(&b, "(sub %d)", d.sub)
		}
	}
	return b.String()
}

func plIDs(ds []plDelivery) []int {
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = d.id
	}
	return out
}

func plSpan(first, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = first + i
	}
	return out
}

// plSinkLog records dead letters a WithDeadLetter sink confirmed.
type plSinkLog struct {
	mu  sync.Mutex
	dls []kltype.DeadLetterRecord
}

func (s *plSinkLog) sink(ctx context.Context, dl *kltype.DeadLetterRecord) error {
	c := *dl
	r := *dl.Record
	r.Data = slices.Clone(r.Data)
	c.Record = &r
	s.mu.Lock()
	s.dls = append(s.dls, c)
	s.mu.Unlock()
	return nil
}

func (s *plSinkLog) all() []kltype.DeadLetterRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.dls)
}

// TestPipelineRetryThenSuccess: a handler that fails twice is retried in
// place and succeeds on its third attempt; later records wait for it and
// nothing is dead-lettered.
func TestPipelineRetryThenSuccess(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	seqs := plPut(t, kc, stream, plOrders(0, 6))

	d := newPLLog()
	var dead plSinkLog
	failures := 0
	in := plRun(t, kc, memory.New(), stream, "a", nil, func(ctx context.Context, o order) error {
		dv := d.add(ctx, t, o.ID)
		if o.ID == 2 && dv.attempt < 3 {
			failures++
			return fmt.Errorf("transient failure %d", failures)
		}
		return nil
	}, kinesislease.WithRetryPolicy(kltype.RetryPolicy{Attempts: 5, InitialDelay: 10 * time.Millisecond, MaxDelay: 40 * time.Millisecond}),
		kinesislease.WithDeadLetter(dead.sink))
	d.waitUntil(t, "all 6 records handled", 15*time.Second, plSeen(1, plSpan(0, 6)...))
	in.stop(t)

	got := d.all()
	want := []struct{ id, attempt int }{{0, 1}, {1, 1}, {2, 1}, {2, 2}, {2, 3}, {3, 1}, {4, 1}, {5, 1}}
	if len(got) != len(want) {
		t.Fatalf("deliveries%s, want 0/1 1/1 2/1 2/2 2/3 3/1 4/1 5/1", plSummary(got))
	}
	for i, w := range want {
		if got[i].id != w.id || got[i].attempt != w.attempt {
			t.Fatalf("deliveries%s, want 0/1 1/1 2/1 2/2 2/3 3/1 4/1 5/1", plSummary(got))
		}
		if got[i].seq != seqs[w.id] || got[i].stream != stream || got[i].shardID != plShard0 || got[i].pk != fmt.Sprintf("customer-%d", w.id) {
			t.Fatalf("delivery %d: record metadata %+v, want seq %s stream %s shard %s", i, got[i], seqs[w.id], stream, plShard0)
		}
	}
	if dls := dead.all(); len(dls) != 0 {
		t.Fatalf("%d records dead-lettered, want none", len(dls))
	}
}

// plEnvelopes reads the dead-letter stream and decodes its envelopes.
func plEnvelopes(t testing.TB, client *kinesis.Client, dlq string, want int) ([]kinesislease.DeadLetterEnvelope, []ktypes.Record) {
	t.Helper()
	recs := plReadAll(t, client, dlq, want, 15*time.Second)
	if len(recs) != want {
		t.Fatalf("dead-letter stream holds %d records, want %d", len(recs), want)
	}
	envs := make([]kinesislease.DeadLetterEnvelope, len(recs))
	for i, r := range recs {
		if err := json.Unmarshal(r.Data, &envs[i]); err != nil {
			t.Fatalf("dead letter %d: %v: %s", i, err, r.Data)
		}
	}
	return envs, recs
}

// TestPipelineDeadLetterStream: records that cannot be processed reach the
// dead-letter stream as envelopes with their bytes intact and where they
// came from: retries exhausted, a decode failure, a panic, a DeadLetter
// outcome; the records around them are handled in order.
func TestPipelineDeadLetterStream(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream, dlq := testutil.StreamName(t), testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	testutil.CreateStream(t, kc, dlq, 1)
	raw := []byte("not json \x00\xff{")
	es := plOrders(0, 7)
	es[2] = plEntry{pk: "raw-key", data: raw} // id 2 is not JSON
	seqs := plPut(t, kc, stream, es)

	d := newPLLog()
	store := memory.New()
	in := plRun(t, kc, store, stream, "a", nil, func(ctx context.Context, o order) error {
		d.add(ctx, t, o.ID)
		switch o.ID {
		case 1:
			return errors.New("boom: order 1 cannot be fulfilled")
		case 3:
			panic("kaboom on order 3")
		case 4:
			return kinesislease.DeadLetter(errors.New("order 4 is poison"))
		}
		return nil
	}, kinesislease.WithRetryPolicy(plRetry), kinesislease.WithDeadLetterStream(dlq))
	d.waitUntil(t, "ids 0, 5 and 6 handled", 15*time.Second, plSeen(1, 0, 5, 6))
	plWaitCheckpoint(t, store, stream, plShard0, leases.Checkpoint{Sequence: seqs[6]}, 10*time.Second)
	in.stop(t)

	if got := plIDs(d.all()); !slices.Equal(got, []int{0, 1, 1, 1, 3, 3, 3, 4, 5, 6}) {
		t.Fatalf("handler saw ids %v, want 0, 1 three times, 3 three times, 4, 5, 6 (2 never: it does not decode)", got)
	}
	envs, recs := plEnvelopes(t, kc, dlq, 4)
	want := []struct {
		i        int // the record's index in es
		attempts int
		reason   string
		errText  string
	}{
		{1, 3, "retries-exhausted", "boom: order 1 cannot be fulfilled"},
		{2, 0, "decode", "decode"},
		{3, 3, "panic", "kaboom on order 3"},
		{4, 1, "dead-letter", "order 4 is poison"},
	}
	for k, w := range want {
		env := envs[k]
		if string(env.Data) != string(es[w.i].data) {
			t.Errorf("dead letter %d: data %q, want the original bytes %q", k, env.Data, es[w.i].data)
		}
		if env.PartitionKey != es[w.i].pk || aws.ToString(recs[k].PartitionKey) != es[w.i].pk {
			t.Errorf("dead letter %d: partition key %q (record's %q), want %q", k, env.PartitionKey, aws.ToString(recs[k].PartitionKey), es[w.i].pk)
		}
		if env.SourceStream != stream || env.ShardID != plShard0 || env.SequenceNumber != seqs[w.i] || env.SubSequence != 0 {
			t.Errorf("dead letter %d: from %s/%s/%s/%d, want %s/%s/%s/0", k, env.SourceStream, env.ShardID, env.SequenceNumber, env.SubSequence, stream, plShard0, seqs[w.i])
		}
		if env.Attempts != w.attempts || env.Reason != w.reason || !strings.Contains(env.Error, w.errText) {
			t.Errorf("dead letter %d: attempts %d reason %q error %q, want %d %q containing %q", k, env.Attempts, env.Reason, env.Error, w.attempts, w.reason, w.errText)
		}
		if env.ArrivalTime.IsZero() || env.FailedAt.IsZero() || env.FailedAt.Before(env.ArrivalTime.Add(-time.Minute)) {
			t.Errorf("dead letter %d: arrival %v failed at %v", k, env.ArrivalTime, env.FailedAt)
		}
	}
}

// TestPipelineDrop: a dropped record is handled once, not dead-lettered,
// and acknowledged: the checkpoint passes it.
func TestPipelineDrop(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	seqs := plPut(t, kc, stream, plOrders(0, 4))
	d := newPLLog()
	var dead plSinkLog
	store := memory.New()
	in := plRun(t, kc, store, stream, "a", nil, func(ctx context.Context, o order) error {
		d.add(ctx, t, o.ID)
		if o.ID == 1 {
			return kinesislease.Drop(errors.New("order 1 is obsolete"))
		}
		return nil
	}, kinesislease.WithRetryPolicy(plRetry), kinesislease.WithDeadLetter(dead.sink))
	d.waitUntil(t, "all 4 handled", 15*time.Second, plSeen(1, plSpan(0, 4)...))
	plWaitCheckpoint(t, store, stream, plShard0, leases.Checkpoint{Sequence: seqs[3]}, 10*time.Second)
	in.stop(t)
	if got := plIDs(d.all()); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("handler saw %v, want 0 1 2 3 once each", got)
	}
	if n := len(dead.all()); n != 0 {
		t.Fatalf("%d dead letters, want none for a drop", n)
	}
}

// TestPipelineCheckpointAfterSink: the checkpoint passes a dead-lettered
// record only once the sink confirmed it: while the sink fails, the stored
// checkpoint stays on the record before.
func TestPipelineCheckpointAfterSink(t *testing.T) {
	t.Parallel()
	onMemoryStore(t, func(t *testing.T, newStore func() leases.MembershipStore) {
		kc := testutil.KinesisClient(t, testutil.Kinesalite)
		stream := testutil.StreamName(t)
		testutil.CreateStream(t, kc, stream, 1)
		seqs := plPut(t, kc, stream, plOrders(0, 6))
		const failFirst = 3
		store, probe := newStore(), newStore()

		var (
			mu     sync.Mutex
			calls  int
			during []leases.Checkpoint // the stored checkpoint at each failing call
			got    *kltype.DeadLetterRecord
		)
		sink := func(ctx context.Context, dl *kltype.DeadLetterRecord) error {
			l, err := probe.Get(ctx, leases.Key{Stream: stream, Shard: plShard0})
			if err != nil {
				t.Errorf("reading the checkpoint in the sink: %v", err)
			}
			cp := l.Checkpoint
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls <= failFirst {
				during = append(during, cp)
				time.Sleep(120 * time.Millisecond) // longer than the checkpoint interval
				return fmt.Errorf("sink unavailable (%d)", calls)
			}
			c := *dl
			got = &c
			return nil
		}
		d := newPLLog()
		in := plRun(t, kc, store, stream, "a", nil, func(ctx context.Context, o order) error {
			d.add(ctx, t, o.ID)
			if o.ID == 3 {
				return kinesislease.DeadLetter(errors.New("poison"))
			}
			return nil
		}, kinesislease.WithRetryPolicy(plRetry), kinesislease.WithDeadLetter(sink))
		d.waitUntil(t, "all handled", 15*time.Second, plSeen(1, plSpan(0, 6)...))
		plWaitCheckpoint(t, probe, stream, plShard0, leases.Checkpoint{Sequence: seqs[5]}, 10*time.Second)
		in.stop(t)

		mu.Lock()
		defer mu.Unlock()
		if calls != failFirst+1 || got == nil {
			t.Fatalf("sink called %d times, want %d", calls, failFirst+1)
		}
		for i, cp := range during {
			if cp != (leases.Checkpoint{Sequence: seqs[2]}) {
				t.Errorf("failing sink call %d: stored checkpoint %+v, want %s (the record before the dead letter)", i+1, cp, seqs[2])
			}
		}
		if got.Record.SequenceNumber != seqs[3] || got.Reason != "dead-letter" {
			t.Fatalf("dead letter %s %q, want %s dead-letter", got.Record.SequenceNumber, got.Reason, seqs[3])
		}
		// Nothing after the dead letter was handled before the sink confirmed it.
		if got := plIDs(d.all()); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5}) {
			t.Fatalf("handler saw %v", got)
		}
	})
}

// TestPipelineHoldAcrossRestart: with no dead-letter sink a record that
// keeps failing holds its shard: the checkpoint stays before it, nothing
// after it is handled, the service still stops within its shutdown timeout
// (the worker waiting to retry stops at once: the timeout, 30s, never
// expires, which the service would log), and a new service whose handler
// succeeds delivers it first and then everything after it.
func TestPipelineHoldAcrossRestart(t *testing.T) {
	t.Parallel()
	onMemoryStore(t, func(t *testing.T, newStore func() leases.MembershipStore) {
		kc := testutil.KinesisClient(t, testutil.Kinesalite)
		stream := testutil.StreamName(t)
		testutil.CreateStream(t, kc, stream, 1)
		seqs := plPut(t, kc, stream, plOrders(0, 10))
		const shutdown = 30 * time.Second
		probe := newStore()

		d1 := newPLLog()
		logged, logs := plLogs(t)
		in := plRun(t, kc, newStore(), stream, "a", []kinesislease.Option{kinesislease.WithShutdownTimeout(shutdown), logged},
			func(ctx context.Context, o order) error {
				d1.add(ctx, t, o.ID)
				if o.ID == 4 {
					return errors.New("downstream rejects order 4")
				}
				return nil
			}, kinesislease.WithRetryPolicy(kltype.RetryPolicy{Attempts: 2, InitialDelay: 10 * time.Millisecond, MaxDelay: 300 * time.Millisecond}))
		d1.waitUntil(t, "order 4 tried 4 times", 15*time.Second, plSeen(4, 4))
		plWaitCheckpoint(t, probe, stream, plShard0, leases.Checkpoint{Sequence: seqs[3]}, 5*time.Second)
		// Stop while the worker waits to retry.
		time.Sleep(50 * time.Millisecond)
		_, took := plStopWithin(t, in, 2*shutdown)
		t.Logf("Run returned %v after cancel", took)
		if strings.Contains(logs.String(), shutdownTimeoutLog) {
			t.Fatalf("the shutdown timeout (%v) expired while the worker waited to retry: it did not stop at once; log:\n%s", shutdown, logs.String())
		}
		for _, dv := range d1.all() {
			if dv.id > 4 {
				t.Fatalf("order %d handled while order 4 held the shard: %s", dv.id, plSummary(d1.all()))
			}
		}
		if l := plRow(t, probe, stream, plShard0); l.Held() || l.Checkpoint != (leases.Checkpoint{Sequence: seqs[3]}) {
			t.Fatalf("after the stop: row %+v, want released at %s", l, seqs[3])
		}

		d2 := newPLLog()
		in2 := plRun(t, kc, newStore(), stream, "b", nil, func(ctx context.Context, o order) error {
			d2.add(ctx, t, o.ID)
			return nil
		})
		d2.waitUntil(t, "orders 4 to 9 handled", 15*time.Second, plSeen(1, plSpan(4, 6)...))
		plWaitCheckpoint(t, probe, stream, plShard0, leases.Checkpoint{Sequence: seqs[9]}, 5*time.Second)
		in2.stop(t)
		if got := plIDs(d2.all()); !slices.Equal(got, plSpan(4, 6)) {
			t.Fatalf("after the restart the handler saw %v, want 4 to 9 once each, in order", got)
		}
	})
}

// TestPipelineRetryAfter: RetryAfter delivers the record again after its
// delay without counting against the retry policy (one attempt here, so a
// counted failure would dead-letter it).
func TestPipelineRetryAfter(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	plPut(t, kc, stream, plOrders(0, 3))
	const delay = 150 * time.Millisecond
	d := newPLLog()
	var dead plSinkLog
	var times []time.Time
	in := plRun(t, kc, memory.New(), stream, "a", nil, func(ctx context.Context, o order) error {
		dv := d.add(ctx, t, o.ID)
		if o.ID == 1 {
			times = append(times, time.Now())
			if dv.attempt < 4 {
				return kinesislease.RetryAfter(delay, errors.New("rate limited downstream"))
			}
		}
		return nil
	}, kinesislease.WithRetryPolicy(kltype.RetryPolicy{Attempts: 1, InitialDelay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond}),
		kinesislease.WithDeadLetter(dead.sink))
	d.waitUntil(t, "all handled", 15*time.Second, plSeen(1, 0, 1, 2))
	in.stop(t)
	if got := d.attempts(1); !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Fatalf("order 1 delivered with attempts %v, want 1 2 3 4", got)
	}
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < delay {
			t.Errorf("retry %d came %v after the previous delivery, want at least %v", i, gap, delay)
		}
	}
	if got := plIDs(d.all()); !slices.Equal(got, []int{0, 1, 1, 1, 1, 2}) {
		t.Fatalf("handler saw %v", got)
	}
	if n := len(dead.all()); n != 0 {
		t.Fatalf("%d dead letters, want none: RetryAfter must not count as a failure", n)
	}
}

// TestPipelineDeadLetterStreamUnavailable: while the dead-letter stream
// cannot take the envelope (its PutRecords fails with
// ResourceNotFoundException, as after the stream was deleted: injected
// through SDK middleware, since a stream missing at start is refused) the
// failed record holds its shard and the checkpoint stays before it; once
// the stream takes envelopes again the envelope lands and consumption goes
// on.
func TestPipelineDeadLetterStreamUnavailable(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	faults := &testutil.Faults{}
	faulty := testutil.KinesisClient(t, testutil.Kinesalite, faults.KinesisOptions)
	stream, dlq := testutil.StreamName(t), testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	testutil.CreateStream(t, kc, dlq, 1)
	faults.Inject(testutil.Fault{Op: "PutRecords", Err: &ktypes.ResourceNotFoundException{Message: aws.String("Stream " + dlq + " not found (injected)")}})
	seqs := plPut(t, kc, stream, plOrders(0, 5))
	d := newPLLog()
	store := memory.New()
	in := plRun(t, faulty, store, stream, "a", nil, func(ctx context.Context, o order) error {
		d.add(ctx, t, o.ID)
		if o.ID == 2 {
			return kinesislease.DeadLetter(errors.New("poison"))
		}
		return nil
	}, kinesislease.WithRetryPolicy(plRetry), kinesislease.WithDeadLetterStream(dlq))
	d.waitUntil(t, "order 2 handled", 15*time.Second, plSeen(1, 2))
	plWaitCheckpoint(t, store, stream, plShard0, leases.Checkpoint{Sequence: seqs[1]}, 5*time.Second)
	for faults.Calls("PutRecords") < 3 { // the sink keeps failing meanwhile
		time.Sleep(10 * time.Millisecond)
	}
	if l := plRow(t, store, stream, plShard0); l.Checkpoint != (leases.Checkpoint{Sequence: seqs[1]}) {
		t.Fatalf("checkpoint %+v while the dead-letter stream is missing, want %s", l.Checkpoint, seqs[1])
	}
	if got := plIDs(d.all()); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("handled %v while order 2 could not be dead-lettered, want 0 1 2", got)
	}
	faults.Clear()
	d.waitUntil(t, "the rest handled", 15*time.Second, plSeen(1, 3, 4))
	plWaitCheckpoint(t, store, stream, plShard0, leases.Checkpoint{Sequence: seqs[4]}, 5*time.Second)
	in.stop(t)
	envs, _ := plEnvelopes(t, kc, dlq, 1)
	if envs[0].SequenceNumber != seqs[2] || envs[0].Reason != "dead-letter" {
		t.Fatalf("envelope %+v, want order 2's, reason dead-letter", envs[0])
	}
}

// TestShutdownTimeoutVirtual: Run, cancelled while a handler is busy,
// cancels the handler's context when the shutdown timeout expires, not
// before, and returns soon after: within 2s of the timeout, on the virtual
// clock of a testing/synctest bubble (the in-memory Kinesis and lease
// store), which load on the machine cannot stretch.
func TestShutdownTimeoutVirtual(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const stream, shutdown = "orders", 10 * time.Second
		k := kinesisfake.New()
		if err := k.CreateStream(stream, 1); err != nil {
			t.Fatal(err)
		}
		var entries []ktypes.PutRecordsRequestEntry
		for _, e := range plOrders(0, 4) {
			entries = append(entries, ktypes.PutRecordsRequestEntry{PartitionKey: aws.String(e.pk), Data: e.data})
		}
		if _, err := k.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
			t.Fatal(err)
		}
		logged, logs := plLogs(t)
		svc, err := kinesislease.New(aws.Config{}, kinesislease.WithKinesisClient(k), kinesislease.WithLeaseStore(memory.New()),
			kinesislease.WithShutdownTimeout(shutdown), logged)
		if err != nil {
			t.Fatal(err)
		}
		busy := make(chan struct{})
		var cancelled time.Time
		if err := kinesislease.Subscribe(svc, stream, func(ctx context.Context, o order) error {
			if o.ID == 2 {
				close(busy)
				<-ctx.Done()
				cancelled = time.Now()
				return ctx.Err()
			}
			return nil
		}, testSubscription(kinesislease.WithRetryPolicy(plRetry))...); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctx) }()
		select {
		case <-busy:
		case <-time.After(time.Minute): // virtual
			t.Fatal("order 2 not reached after a minute")
		}
		began := time.Now()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
		case <-time.After(10 * shutdown): // virtual
			t.Fatalf("Run still running %v after cancel (shutdown timeout %v)", 10*shutdown, shutdown)
		}
		took := time.Since(began)
		t.Logf("virtual: the handler cancelled %v and Run returned %v after cancel", cancelled.Sub(began), took)
		if waited := cancelled.Sub(began); waited < shutdown {
			t.Errorf("the busy handler was cancelled %v after the stop began, before the shutdown timeout %v", waited, shutdown)
		}
		if took > shutdown+2*time.Second {
			t.Errorf("Run returned %v after cancel, want within 2s of the %v shutdown timeout", took, shutdown)
		}
		if !strings.Contains(logs.String(), shutdownTimeoutLog) {
			t.Errorf("no %q logged; log:\n%s", shutdownTimeoutLog, logs.String())
		}
	})
}

// TestPipelineShutdownTimeout: a handler still busy when the shutdown
// timeout expires has its context cancelled, not before (the service says
// so in its log); Run then returns, the record is not acknowledged (the
// checkpoint stays before it) and the next service delivers it again.
// That Run returns soon after the timeout is TestShutdownTimeoutVirtual's,
// on a clock load cannot stretch.
func TestPipelineShutdownTimeout(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	seqs := plPut(t, kc, stream, plOrders(0, 4))
	const shutdown = time.Second
	store := memory.New()
	busy := make(chan struct{})
	var cancelled time.Time // when the busy handler's context was done
	var cancelErr error
	d1 := newPLLog()
	logged, logs := plLogs(t)
	in := plRun(t, kc, store, stream, "a", []kinesislease.Option{kinesislease.WithShutdownTimeout(shutdown), logged},
		func(ctx context.Context, o order) error {
			d1.add(ctx, t, o.ID)
			if o.ID == 2 {
				close(busy)
				<-ctx.Done() // a slow call that honours its context
				cancelled, cancelErr = time.Now(), ctx.Err()
				return ctx.Err()
			}
			return nil
		}, kinesislease.WithRetryPolicy(plRetry))
	select {
	case <-busy:
	case <-time.After(15 * time.Second):
		t.Fatalf("order 2 not reached: %s", plSummary(d1.all()))
	}
	began, took := plStopWithin(t, in, 30*shutdown) // Run's return orders the handler's writes before these reads
	t.Logf("Run returned %v after cancel (shutdown timeout %v)", took, shutdown)
	if !errors.Is(cancelErr, context.Canceled) {
		t.Fatalf("the busy handler's context ended with %v, want context.Canceled", cancelErr)
	}
	if waited := cancelled.Sub(began); waited < shutdown {
		t.Fatalf("the busy handler was cancelled %v after the stop began, before the %v shutdown timeout", waited, shutdown)
	}
	if !strings.Contains(logs.String(), shutdownTimeoutLog) {
		t.Fatalf("no %q logged; log:\n%s", shutdownTimeoutLog, logs.String())
	}
	if l := plRow(t, store, stream, plShard0); l.Held() || l.Checkpoint != (leases.Checkpoint{Sequence: seqs[1]}) {
		t.Fatalf("after the stop: row %+v, want released at %s", l, seqs[1])
	}
	if got := plIDs(d1.all()); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("first run handled %v, want 0 1 2 (2 once: cancelled, not retried)", got)
	}
	d2 := newPLLog()
	in2 := plRun(t, kc, store, stream, "b", nil, func(ctx context.Context, o order) error {
		d2.add(ctx, t, o.ID)
		return nil
	})
	d2.waitUntil(t, "2 and 3 handled", 15*time.Second, plSeen(1, 2, 3))
	in2.stop(t)
	if got := plIDs(d2.all()); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("after the restart handled %v, want 2 3", got)
	}
}
