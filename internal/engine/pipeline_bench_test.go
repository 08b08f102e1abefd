package engine

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// BenchmarkPipeline measures the library's own per-record path in memory,
// decode excluded: a worker holding a lease hands batches of 10,000
// records, as GetRecords returns them, to a handler that reads the record
// from its context and does nothing (the fence checked before every call,
// the outcome, the checkpoint bookkeeping). ns/op and allocs/op are per
// record; the batch's record contexts are allocated once per batch. The
// "timeout" case adds a handler timeout (a context with a deadline and its
// timer per call).
func BenchmarkPipeline(b *testing.B) {
	b.Run("no-timeout", func(b *testing.B) { benchmarkPipeline(b, 0) })
	b.Run("timeout", func(b *testing.B) { benchmarkPipeline(b, time.Minute) })
}

// benchmarkPipeline runs BenchmarkPipeline with a handler timeout (0: none).
func benchmarkPipeline(b *testing.B, timeout time.Duration) {
	const batch = 10_000
	recs := make([]types.Record, batch)
	for i := range recs {
		recs[i] = types.Record{
			SequenceNumber: aws.String("4959033827149025660855969253836157109592157598913658" + strconv.Itoa(1000+i)),
			PartitionKey:   aws.String("customer-17"), Data: []byte(`{"id":1}`),
			ApproximateArrivalTimestamp: aws.Time(time.Now()),
		}
	}
	var seen atomic.Int64
	cfg := &WorkerConfig{Handler: func(ctx context.Context, r *kltype.Record) error {
		if got, ok := RecordFrom(ctx); !ok || got != r {
			b.Fatal("RecordFrom: not the record handled")
		}
		seen.Add(1)
		return nil
	}, CheckpointEvery: math.MaxInt, HandlerTimeout: timeout}
	cfg.defaults()
	shared := &atomic.Int64{}
	shared.Store(math.MaxInt64)
	h := newMemberLease(memory.New(), leases.Lease{Key: leases.Key{Stream: "s", Shard: "shardId-0"}}, shared, mono(), 0)
	w := newWorker(context.Background(), cfg, slog.New(slog.DiscardHandler), nil, "s", "shardId-0", kltype.Latest, h)
	cp := w.newCheckpointer()
	defer cp.stop()
	q := w.newAckQueue(&feed{}, cp)
	b.ReportAllocs()
	var slots []recordContext
	done := 0
	for b.Loop() {
		i := done % batch
		if i == 0 {
			slots = make([]recordContext, batch) // as consume does per batch
		}
		if !w.handle(&recs[i], &slots[i], nil, q) {
			b.Fatal("stopped")
		}
		done++
	}
	if int(seen.Load()) != done {
		b.Fatalf("%d records handled, want %d", seen.Load(), done)
	}
}
