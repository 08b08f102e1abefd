package kinesislease_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// BenchmarkLeaseUpkeep measures, on DynamoDB Local with the capacity units
// it reports (ReturnConsumedCapacity), what keeping the leases costs in
// steady state: a fleet at the default settings, balanced, no records
// flowing (so no checkpoints), over a 15s window (KINESISLEASE_UPKEEP_WINDOW
// sets another; KINESISLEASE_UPKEEP_KEY_CONCURRENCY subscribes with
// WithKeyConcurrency), counting the lease events (moves) in it. Per
// instances and shards: write units per instance-hour, read units per
// instance-second, and the membership rows' share of the writes. The figures
// must not grow with the shard count.
func BenchmarkLeaseUpkeep(b *testing.B) {
	window := 15 * time.Second
	if d, err := time.ParseDuration(os.Getenv("KINESISLEASE_UPKEEP_WINDOW")); err == nil && d > 0 {
		window = d
	}
	for _, c := range []struct{ instances, shards int }{{4, 8}, {4, 64}, {4, 512}, {20, 64}, {8, 256}} {
		b.Run(fmt.Sprintf("instances=%d/shards=%d", c.instances, c.shards), func(b *testing.B) {
			for range b.N {
				kc := testutil.KinesisClient(b, testutil.Kinesalite)
				stream := testutil.StreamName(b)
				testutil.CreateStream(b, kc, stream, int32(c.shards))
				meter := testutil.NewCapacity(func(key string) string {
					if driver.IsMemberKey(key) {
						return "members"
					}
					return "leases"
				})
				dc := testutil.DynamoClient(b, meter.Options)
				table := testutil.TableName(b)
				testutil.CreateLeaseTable(b, dc, table)
				store := dynamo.New(testutil.Config(b), table, dynamo.WithDynamoDBClient(dc))
				var svcs []*kinesislease.Service
				var running []*instance
				var moves atomic.Int64 // lease moves, counted once balanced
				var counting atomic.Bool
				for i := range c.instances {
					opts := []kinesislease.Option{
						kinesislease.WithKinesisClient(kc), kinesislease.WithLeaseStore(store),
						kinesislease.WithOwner(fmt.Sprintf("bench-instance-%02d", i)),
						kinesislease.WithLogger(slog.New(slog.DiscardHandler)),
						kinesislease.WithHooks(leaseMoves(func(string, string, string) {
							if counting.Load() {
								moves.Add(1)
							}
						})),
					}
					svc, err := kinesislease.New(testutil.Config(b), opts...)
					if err != nil {
						b.Fatal(err)
					}
					subOpts := []kinesislease.SubscribeOption{kinesislease.WithStartPosition(kltype.TrimHorizon)}
					if n, err := strconv.Atoi(os.Getenv("KINESISLEASE_UPKEEP_KEY_CONCURRENCY")); err == nil && n > 1 {
						subOpts = append(subOpts, kinesislease.WithKeyConcurrency(n))
					}
					if err := kinesislease.Subscribe(svc, stream, func(context.Context, order) error { return nil }, subOpts...); err != nil {
						b.Fatal(err)
					}
					svcs = append(svcs, svc)
					running = append(running, runInstance(b, svc))
				}
				// Balanced: every shard held once, shares within one.
				deadline := time.Now().Add(3 * time.Minute)
				settled := time.Now()
				for {
					total, lo, hi := 0, c.shards, 0
					for _, s := range svcs {
						n := len(s.Held(stream))
						total += n
						lo, hi = min(lo, n), max(hi, n)
					}
					if total == c.shards && hi-lo <= 1 {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("not balanced after 3 minutes")
					}
					time.Sleep(100 * time.Millisecond)
				}
				b.ReportMetric(time.Since(settled).Seconds(), "s-to-balance")
				counting.Store(true)
				r0, w0, _, _ := meter.Units()
				g0 := meter.WritesBy()
				time.Sleep(window)
				r1, w1, _, _ := meter.Units()
				g1 := meter.WritesBy()
				counting.Store(false)
				inWindow := moves.Load()
				for _, in := range running {
					in.cancel() // all at once, as before
				}
				for _, in := range running {
					in.stop(b)
				}
				perHour := float64(time.Hour) / float64(window)
				n := float64(c.instances)
				b.ReportMetric((w1-w0)/n*perHour, "WCU/instance-hour")
				b.ReportMetric((r1-r0)/n/window.Seconds(), "RCU/instance-s")
				b.ReportMetric((g1["members"]-g0["members"])/n*perHour, "member-WCU/instance-hour")
				b.ReportMetric(float64(inWindow), "lease-events-in-window")
			}
		})
	}
}
