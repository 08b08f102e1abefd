package kinesislease_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// BenchmarkBatchSink compares a sink with a fixed 20ms cost per call
// written from a single-record handler (one call per record) and from a
// batch handler (one call per batch of up to 500), on one shard of the
// in-memory Kinesis: records/s.
func BenchmarkBatchSink(b *testing.B) {
	sink := func() { time.Sleep(20 * time.Millisecond) }
	for _, bc := range []struct {
		name    string
		records int
	}{{"single", 100}, {"batch-500", 5000}} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				k := kinesisfake.New()
				if err := k.CreateStream("sink", 1); err != nil {
					b.Fatal(err)
				}
				p, err := kinesislease.NewPublisherFromClient[order](k, "sink")
				if err != nil {
					b.Fatal(err)
				}
				for i := range bc.records {
					if _, err := p.PutAsync(fmt.Sprint(i%50), order{ID: i}); err != nil {
						b.Fatal(err)
					}
				}
				if err := p.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				svc, err := kinesislease.New(awsConfig(), kinesislease.WithKinesisClient(k), kinesislease.WithLeaseStore(memory.New()),
					kinesislease.WithLogger(testLogger(b)))
				if err != nil {
					b.Fatal(err)
				}
				var n atomic.Int64
				all := make(chan struct{})
				count := func(d int) {
					if n.Add(int64(d)) == int64(bc.records) {
						close(all)
					}
				}
				opts := []kinesislease.SubscribeOption{kinesislease.WithStartPosition(kltype.TrimHorizon)}
				if bc.name == "single" {
					err = kinesislease.Subscribe(svc, "sink", func(context.Context, order) error { sink(); count(1); return nil }, opts...)
				} else {
					err = kinesislease.SubscribeBatch(svc, "sink", func(_ context.Context, items []kinesislease.BatchItem[order]) error {
						sink()
						count(len(items))
						return nil
					}, append(opts, kinesislease.WithBatchSize(500, 5<<20, 0))...)
				}
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				start := time.Now()
				go func() { done <- svc.Run(ctx) }()
				<-all
				elapsed := time.Since(start)
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(bc.records)/elapsed.Seconds(), "records/s")
			}
		})
	}
}
