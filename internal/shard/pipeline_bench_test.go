package shard

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

	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/internal/lease"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// BenchmarkPipeline measures the library's own per-record path in memory,
// decode excluded: a worker holding a lease hands batches of 10,000
// records, as GetRecords returns them, to a handler that reads the record
// from its context and does nothing (the fence checked before every call,
// the outcome, the checkpoint bookkeeping). An op is one batch, taken up
// as the consume loop takes it (singles.take); ns/record is per record.
// The
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
		if got, ok := pipeline.RecordFrom(ctx); !ok || got != r {
			b.Fatal("RecordFrom: not the record handled")
		}
		seen.Add(1)
		return nil
	}, CheckpointEvery: math.MaxInt, HandlerTimeout: timeout}
	cfg.Defaults()
	shared := &fence.Fence{}
	shared.Store(math.MaxInt64)
	h := lease.New(lease.Config{Store: memory.New(), Lease: leases.Lease{Key: leases.Key{Stream: "s", Shard: "shardId-0"}}, Fence: shared, Sent: fence.Mono()})
	w := New(context.Background(), Config{Settings: cfg, Log: slog.New(slog.DiscardHandler), Stream: "s", Shard: "shardId-0", Start: kltype.Latest, Lease: h})
	cp := w.newCheckpointer()
	defer cp.stop()
	s := singles{w.newAckQueue(&feed{}, cp)}
	b.ReportAllocs()
	done := 0
	for b.Loop() {
		if !s.take(read.Batch{Records: recs}) {
			b.Fatal("stopped")
		}
		done += batch
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(done), "ns/record")
	if int(seen.Load()) != done {
		b.Fatalf("%d records handled, want %d", seen.Load(), done)
	}
}
