package engine_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/engine/sim"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestNewStreamLoneMember: one instance, alone on a new table, a new
// stream of 5 shards, the default heartbeat and timeout. It takes every
// shard two heartbeats after its join (newStream's wait), all in the same
// round:
//
//   - not at the first round after the wait, up to a heartbeat later (the
//     round loop did not wake when the wait ran out: first leases 2.5 to
//     3.75 s after Run started);
//   - not one heartbeat later for a shard whose read found its row missing
//     just before another take of the same round created the stream's rows
//     (createAll): that read was taken for a sighting of a vanished row (a
//     vanished report, and the row left to the next round). Here the read
//     of the last shard's row answers 100ms late, so it always returns
//     after the others have created the rows; the bench's 4 shards lost
//     that race by themselves most runs (two shards a heartbeat late).
//
// Several bubbles: the round loop's schedule is jittered.
func TestNewStreamLoneMember(t *testing.T) {
	t.Parallel()
	for i := range 4 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := sim.NewKinesis()
				ids := newSimStream(t, k, "fresh", 5).ShardIDs()
				slow := ids[len(ids)-1] // never among the rows otherRowExists reads
				store := sim.NewFaultStore(memory.New(), sim.StoreHooks{Decide: func(op string, key leases.Key) sim.Decision {
					if op == "Get" && key.Shard == slow {
						return sim.Decision{ResponseDelay: 100 * time.Millisecond}
					}
					return sim.Decision{}
				}})
				var mu sync.Mutex
				acquired := map[string]time.Duration{}
				start := time.Now()
				cfg := engine.GroupConfig{
					Owner: "lone", Store: store, Client: k, ShutdownTimeout: time.Second,
					Events: func(e engine.LeaseEvent) {
						if e.Type == engine.LeaseAcquired {
							mu.Lock()
							defer mu.Unlock()
							if _, ok := acquired[e.ShardID]; !ok {
								acquired[e.ShardID] = time.Since(start)
							}
						}
					},
					Streams: []engine.StreamConfig{{Stream: "fresh", Start: kltype.TrimHorizon, Worker: engine.WorkerConfig{
						Handler: func(context.Context, *kltype.Record) error { return nil }, MinInterval: 200 * time.Millisecond, IdleInterval: 200 * time.Millisecond,
					}}},
				}
				if os.Getenv("KL_DEBUG") != "" {
					cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
				}
				_, stop := startGroup(t, cfg)
				time.Sleep(6 * time.Second)
				stop()
				mu.Lock()
				defer mu.Unlock()
				hb := engine.DefaultHeartbeat
				var first, last time.Duration
				for i, id := range ids {
					at, ok := acquired[id]
					if !ok {
						t.Fatalf("shard %s never acquired (acquired: %v)", id, acquired)
					}
					if i == 0 || at < first {
						first = at
					}
					last = max(last, at)
				}
				// The join is at once (a memory store in a bubble): the wait is
				// two heartbeats from Run's start.
				if first > 2*hb+10*time.Millisecond {
					t.Errorf("first lease %v after Run started, want two heartbeats (%v): %v", first, 2*hb, acquired)
				}
				if last-first > hb/2 {
					t.Errorf("leases acquired %v apart, want one round: %v", last-first, acquired)
				}
			})
		})
	}
}
