package kinesislease_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// BenchmarkKeyConcurrency: one shard of the in-memory Kinesis, 1,000
// distinct keys, a handler sleeping 10ms: records/s at key concurrency 1,
// 16 and 64 (the goal: about n × 100 records/s until the shard's own rate
// bounds it), from the first record handled to the last.
func BenchmarkKeyConcurrency(b *testing.B) {
	for _, n := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", n), func(b *testing.B) {
			records := 500 * n // about five seconds of work at the goal rate
			for range b.N {
				k := kinesisleasetest.NewKinesis()
				if err := k.CreateStream("keys", 1); err != nil {
					b.Fatal(err)
				}
				p, err := kinesislease.NewPublisherFromClient[keyed](k, "keys")
				if err != nil {
					b.Fatal(err)
				}
				for i := range records {
					if _, err := p.PutAsync(fmt.Sprintf("k%d", i%1000), keyed{Key: fmt.Sprintf("k%d", i%1000), N: i / 1000}); err != nil {
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
				var count atomic.Int64
				var first atomic.Int64 // unix ns of the first handler call: the start-up (join, take) is not the rate
				all := make(chan struct{})
				err = kinesislease.Subscribe(svc, "keys", func(context.Context, keyed) error {
					first.CompareAndSwap(0, time.Now().UnixNano())
					time.Sleep(10 * time.Millisecond)
					if count.Add(1) == int64(records) {
						close(all)
					}
					return nil
				}, kinesislease.WithStartPosition(kltype.TrimHorizon), kinesislease.WithKeyConcurrency(n))
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- svc.Run(ctx) }()
				<-all
				elapsed := time.Since(time.Unix(0, first.Load()))
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
			}
		})
	}
}
