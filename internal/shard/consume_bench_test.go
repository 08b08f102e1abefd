package shard

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/internal/lease"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// BenchmarkConsumeLoop measures a worker's whole consume loop, reader
// included, in memory: each op is one worker reading a closed shard of
// loopRecords records (GetRecords answers of 10,000, from a client that
// serves them from memory) to its end, under each delivery shape, with a
// handler that does nothing; the release writes SHARD_END. ns/record is
// the cost per record.
func BenchmarkConsumeLoop(b *testing.B) {
	recs := make([]types.Record, loopRecords)
	for i := range recs {
		recs[i] = types.Record{
			SequenceNumber: aws.String("4959033827149025660855969253836157109592157598913658" + strconv.Itoa(100000+i)),
			PartitionKey:   aws.String("customer-" + strconv.Itoa(i%64)), Data: []byte(`{"id":1}`),
			ApproximateArrivalTimestamp: aws.Time(time.Now()),
		}
	}
	noop := func(context.Context, *kltype.Record) error { return nil }
	for _, c := range []struct {
		name string
		cfg  WorkerConfig
	}{
		{"single", WorkerConfig{Handler: noop}},
		{"batch-500", WorkerConfig{Batch: &BatchConfig{MaxRecords: 500, MaxBytes: math.MaxInt,
			Handler: func(context.Context, []*kltype.Record) []pipeline.BatchFailure { return nil }}}},
		{"bykey-16", WorkerConfig{Handler: noop, KeyConcurrency: 16}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				runLoopShard(b, c.cfg, recs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*loopRecords), "ns/record")
		})
	}
}

const loopRecords = 50_000

// runLoopShard runs one worker over recs, a closed shard, to its end.
func runLoopShard(b *testing.B, cfg WorkerConfig, recs []types.Record) {
	cfg.CheckpointEvery, cfg.CheckpointInterval = math.MaxInt, time.Hour
	cfg.MinInterval, cfg.IdleInterval = time.Nanosecond, time.Nanosecond
	cfg.Defaults()
	ctx := context.Background()
	store := memory.New()
	key := leases.Key{Stream: "s", Shard: "shardId-0"}
	l, err := store.CreateAs(ctx, key, "me", "inc-1", leases.Checkpoint{}, "")
	if err != nil {
		b.Fatal(err)
	}
	h := lease.New(lease.Config{Store: store, Lease: l, Fence: loopFence(), Sent: fence.Mono()})
	w := New(ctx, Config{Settings: &cfg, Log: slog.New(slog.DiscardHandler), Client: &memShard{recs: recs}, Stream: "s", Shard: "shardId-0", Start: kltype.TrimHorizon, Lease: h})
	w.Run()
	if !w.ended || w.err != nil {
		b.Fatalf("ended %v, err %v", w.ended, w.err)
	}
}

// memShard serves one closed shard's records from memory.
type memShard struct{ recs []types.Record }

func (m *memShard) ListShards(context.Context, *kinesis.ListShardsInput, ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return &kinesis.ListShardsOutput{}, nil
}

func (m *memShard) GetShardIterator(context.Context, *kinesis.GetShardIteratorInput, ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String("0")}, nil
}

func (m *memShard) GetRecords(_ context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	off, _ := strconv.Atoi(aws.ToString(in.ShardIterator))
	end := min(off+10_000, len(m.recs))
	out := &kinesis.GetRecordsOutput{Records: m.recs[off:end], MillisBehindLatest: aws.Int64(1)}
	if end < len(m.recs) {
		out.NextShardIterator = aws.String(strconv.Itoa(end))
	}
	return out, nil
}

// loopFence is a fence that never passes.
func loopFence() *fence.Fence {
	f := &fence.Fence{}
	f.Store(math.MaxInt64)
	return f
}
