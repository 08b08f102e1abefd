package kinesislease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// BenchmarkKeyConcurrency: one shard of the in-memory Kinesis, 1,000
// distinct keys, a handler sleeping 10ms: records/s at key concurrency 1,
// 16 and 64 (the goal: about n × 100 records/s until the shard's own rate
// bounds it), from the first record handled to the last; and the most
// records acknowledged past the checkpoint at a checkpoint write (every
// 200ms here). "one-key-held": key k0 answers RetryAfter for ever; the
// rate is the other keys'.
func BenchmarkKeyConcurrency(b *testing.B) {
	for _, bc := range []struct {
		n    int
		held bool // key k0 answers RetryAfter for ever: the other keys' rate
	}{{1, false}, {16, false}, {64, false}, {16, true}} {
		n := bc.n
		name := fmt.Sprintf("concurrency=%d", n)
		if bc.held {
			name += "/one-key-held"
		}
		b.Run(name, func(b *testing.B) {
			records := 500 * n // about five seconds of work at the goal rate
			for range b.N {
				k := kinesisfake.New()
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
				lag := &checkpointLag{}
				svc, err := kinesislease.New(awsConfig(), kinesislease.WithKinesisClient(k), kinesislease.WithLeaseStore(memory.New()),
					kinesislease.WithLogger(testLogger(b)), kinesislease.WithHooks(lag))
				if err != nil {
					b.Fatal(err)
				}
				var count atomic.Int64
				var first atomic.Int64 // unix ns of the first handler call: the start-up (join, take) is not the rate
				all := make(chan struct{})
				want := int64(records)
				if bc.held {
					want -= int64(records / 1000) // k0's records never finish
				}
				err = kinesislease.Subscribe(svc, "keys", func(_ context.Context, v keyed) error {
					first.CompareAndSwap(0, time.Now().UnixNano())
					time.Sleep(10 * time.Millisecond)
					if bc.held && v.Key == "k0" {
						return kinesislease.RetryAfter(10*time.Millisecond, errors.New("held"))
					}
					if count.Add(1) == want {
						close(all)
					}
					return nil
				}, kinesislease.WithStartPosition(kltype.TrimHorizon), kinesislease.WithKeyConcurrency(n), kinesislease.WithCheckpoint(100_000, 200*time.Millisecond))
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
				b.ReportMetric(float64(want)/elapsed.Seconds(), "records/s")
				b.ReportMetric(float64(lag.worst()), "max-acked-past-checkpoint")
			}
		})
	}
}

// checkpointLag measures, at each checkpoint written, how many records
// were acknowledged past it (acknowledged, but a restart would hand them
// out again): the checkpoint's lag behind the newest acknowledged record.
type checkpointLag struct {
	mu    sync.Mutex
	acked []string // sequence numbers acknowledged
	max   int
}

func (c *checkpointLag) OnRecordHandled(r kltype.RecordInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acked = append(c.acked, r.SequenceNumber)
}

func (c *checkpointLag) OnCheckpointWritten(i kltype.CheckpointInfo) {
	if i.Err != nil || i.Checkpoint.Sequence == "" {
		return
	}
	c.mu.Lock()
	acked := c.acked[:len(c.acked):len(c.acked)] // counted outside the lock: handlers are not held up
	c.mu.Unlock()
	cp := i.Checkpoint.Sequence
	past := 0
	for _, s := range acked {
		// Decimal sequence numbers: longer is larger, else compare as text.
		if len(s) > len(cp) || len(s) == len(cp) && s > cp {
			past++
		}
	}
	c.mu.Lock()
	c.max = max(c.max, past)
	c.mu.Unlock()
}

func (c *checkpointLag) worst() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max
}
