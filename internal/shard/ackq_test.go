package shard

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/internal/lease"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// resolution is a deferred acknowledgement resolved in a step of
// TestAckQueueDeferrals: the record's (by index), with err.
type resolution struct {
	rec int
	err error
}

// ackStep resolves deferred acknowledgements, lets the ack queue take them
// up (settle), then checks the checkpoint acknowledged and the deferrals
// outstanding.
type ackStep struct {
	resolve     []resolution
	acked       string // the newest acknowledged record's sequence number ("": none)
	outstanding int
}

// testWorker returns a worker holding a lease (its fence a day off, on the
// clock of a synctest bubble too) whose handler is handler and whose waits
// return at once, and its checkpointer, which acknowledges without
// writing.
func testWorker(t *testing.T, cfg *WorkerConfig) (*Worker, *checkpointer) {
	cfg.CheckpointEvery = math.MaxInt
	cfg.Defaults()
	shared := &fence.Fence{}
	shared.Store(fence.Mono() + int64(24*time.Hour))
	h := lease.New(lease.Config{Store: memory.New(), Lease: leases.Lease{Key: leases.Key{Stream: "s", Shard: "shardId-0"}}, Fence: shared, Sent: fence.Mono()})
	w := New(context.Background(), Config{Settings: cfg, Log: slog.New(slog.DiscardHandler), Stream: "s", Shard: "shardId-0", Start: kltype.Latest, Lease: h})
	w.proc.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	cp := w.newCheckpointer()
	t.Cleanup(cp.stop)
	return w, cp
}

// testRecords returns n plain records, their sequence numbers "0" to n-1.
func testRecords(n int) []types.Record {
	recs := make([]types.Record, n)
	for i := range recs {
		recs[i] = types.Record{SequenceNumber: aws.String(strconv.Itoa(i)), PartitionKey: aws.String("k"), Data: []byte{byte(i)}}
	}
	return recs
}

// TestAckQueueDeferrals: the ack queue acknowledges a shard's records to
// the checkpointer up to the resolved prefix as their deferred
// acknowledgements resolve, in whatever order: a record resolved behind an
// unresolved one waits; a failure is delivered again and resolves only
// then (or defers again); a drop resolves.
func TestAckQueueDeferrals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		deferred []int // the records whose first delivery defers
		again    []int // the records whose second delivery defers too
		taken    string
		steps    []ackStep
		later    []string // the records delivered again, in order
	}{
		{name: "none deferred", taken: "4"},
		{name: "resolved in order", deferred: []int{1, 3}, taken: "0", steps: []ackStep{
			{resolve: []resolution{{rec: 1}}, acked: "2", outstanding: 1},
			{resolve: []resolution{{rec: 3}}, acked: "4"},
		}},
		{name: "resolved out of order", deferred: []int{1, 3}, taken: "0", steps: []ackStep{
			{resolve: []resolution{{rec: 3}}, acked: "0", outstanding: 1},
			{resolve: []resolution{{rec: 1}}, acked: "4"},
		}},
		{name: "all deferred, resolved backwards", deferred: []int{0, 1, 2, 3, 4}, steps: []ackStep{
			{resolve: []resolution{{rec: 4}, {rec: 3}}, outstanding: 3},
			{resolve: []resolution{{rec: 2}, {rec: 1}}, outstanding: 1},
			{resolve: []resolution{{rec: 0}}, acked: "4"},
		}},
		{name: "resolved together, out of order", deferred: []int{0, 2, 4}, steps: []ackStep{
			{resolve: []resolution{{rec: 4}, {rec: 0}, {rec: 2}}, acked: "4"},
		}},
		{name: "dropped", deferred: []int{2}, taken: "1", steps: []ackStep{
			{resolve: []resolution{{rec: 2, err: &kltype.DropError{Err: errors.New("x")}}}, acked: "4"},
		}},
		{name: "failed, delivered again", deferred: []int{0, 2}, taken: "", steps: []ackStep{
			{resolve: []resolution{{rec: 0, err: errors.New("x")}}, acked: "1", outstanding: 1},
			{resolve: []resolution{{rec: 2}}, acked: "4"},
		}, later: []string{"0"}},
		{name: "failed, deferred again", deferred: []int{1}, again: []int{1}, taken: "0", steps: []ackStep{
			{resolve: []resolution{{rec: 1, err: errors.New("x")}}, acked: "0", outstanding: 1},
			{resolve: []resolution{{rec: 1}}, acked: "4"},
		}, later: []string{"1"}},
		{name: "failed together, delivered again in the shard's order", deferred: []int{1, 3, 4}, again: []int{1, 3, 4}, taken: "0", steps: []ackStep{
			{resolve: []resolution{{rec: 4, err: errors.New("x")}, {rec: 1, err: errors.New("x")}, {rec: 3, err: errors.New("x")}}, acked: "0", outstanding: 3},
			{resolve: []resolution{{rec: 3}, {rec: 1}}, acked: "3", outstanding: 1},
		}, later: []string{"1", "3", "4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			calls := map[string]int{}
			var later []string
			handles := map[string]pipeline.AckHandle{}
			in := func(list []int, seq string) bool {
				for _, i := range list {
					if strconv.Itoa(i) == seq {
						return true
					}
				}
				return false
			}
			w, cp := testWorker(t, &WorkerConfig{Handler: func(ctx context.Context, r *kltype.Record) error {
				if calls[r.SequenceNumber]++; calls[r.SequenceNumber] > 1 {
					later = append(later, r.SequenceNumber)
				}
				if n := calls[r.SequenceNumber]; n == 1 && in(tt.deferred, r.SequenceNumber) || n == 2 && in(tt.again, r.SequenceNumber) {
					handles[r.SequenceNumber] = pipeline.Defer(ctx)
				}
				return nil
			}})
			q := w.newAckQueue(&feed{}, cp)
			if !(singles{q}).take(read.Batch{Records: testRecords(5)}) {
				t.Fatal("take: stopped")
			}
			if cp.acked.Sequence != tt.taken || q.outstanding != len(tt.deferred) {
				t.Fatalf("once taken: acknowledged up to %q with %d outstanding, want %q with %d",
					cp.acked.Sequence, q.outstanding, tt.taken, len(tt.deferred))
			}
			for s, st := range tt.steps {
				for _, r := range st.resolve {
					if err := handles[strconv.Itoa(r.rec)].Resolve(r.err); err != nil {
						t.Fatalf("step %d: resolving record %d: %v", s, r.rec, err)
					}
				}
				if !q.settle(false) {
					t.Fatalf("step %d: settle: stopped", s)
				}
				if cp.acked.Sequence != st.acked || q.outstanding != st.outstanding || q.awaiting != st.outstanding {
					t.Errorf("step %d: acknowledged up to %q with %d outstanding (%d awaited), want %q with %d",
						s, cp.acked.Sequence, q.outstanding, q.awaiting, st.acked, st.outstanding)
				}
			}
			if !slices.Equal(later, tt.later) {
				t.Errorf("delivered again: %v, want %v", later, tt.later)
			}
		})
	}
}

// TestAckQueueDeferredBatch: a deferred batch holds the checkpoint before
// its first unresolved record; its resolution acknowledges the resolved
// prefix, a failed item holding the rest until it is delivered again; the
// tracker orders the batch by its first unresolved record.
func TestAckQueueDeferredBatch(t *testing.T) {
	t.Parallel()
	var (
		calls   [][]string
		handles []pipeline.AckHandle
	)
	handler := func(ctx context.Context, recs []*kltype.Record) []pipeline.BatchFailure {
		var seqs []string
		for _, r := range recs {
			seqs = append(seqs, r.SequenceNumber)
		}
		calls = append(calls, seqs)
		handles = append(handles, pipeline.Defer(ctx))
		return nil
	}
	w, cp := testWorker(t, &WorkerConfig{Batch: &BatchConfig{Handler: handler, MaxRecords: 3, MaxBytes: math.MaxInt}})
	q := w.newAckQueue(&feed{}, cp)
	s := &batches{ackQueue: q, cfg: w.cfg.Batch}
	if !s.take(read.Batch{Records: testRecords(6)}) {
		t.Fatal("take: stopped")
	}
	check := func(step, acked string, outstanding int) {
		t.Helper()
		if cp.acked.Sequence != acked || q.outstanding != outstanding {
			t.Errorf("%s: acknowledged up to %q with %d outstanding, want %q with %d", step, cp.acked.Sequence, q.outstanding, acked, outstanding)
		}
	}
	check("taken: two batches deferred", "", 6)
	// Both resolve, the second first, each with an item failed: the first
	// batch's failed item is delivered again first (the shard's order), and
	// the checkpoint passes its first record only.
	failed := func(i int) error {
		return &kltype.BatchError{Failures: []kltype.ItemFailure{{Index: i, Err: errors.New("x")}}}
	}
	if handles[1].Resolve(failed(0)) != nil || handles[0].Resolve(failed(1)) != nil {
		t.Fatal("resolving the batches")
	}
	if !q.settle(false) {
		t.Fatal("settle: stopped")
	}
	check("both batches resolved but one item each", "0", 2)
	if want := [][]string{{"0", "1", "2"}, {"3", "4", "5"}, {"1"}, {"3"}}; !slices.EqualFunc(calls, want, slices.Equal) {
		t.Fatalf("handler calls %v, want %v: the failed items again, alone, in the shard's order", calls, want)
	}
	// The later failed item resolves first: it waits behind the earlier.
	if handles[3].Resolve(nil) != nil || !q.settle(false) {
		t.Fatal("resolving record 3 again")
	}
	check("record 3 resolved", "0", 1)
	if handles[2].Resolve(nil) != nil || !q.settle(false) {
		t.Fatal("resolving record 1 again")
	}
	check("every record resolved", "5", 0)
}
