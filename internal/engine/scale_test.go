package engine_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/testkit/sim"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// countingHandler is a slog.Handler counting the records whose message
// contains one of its substrings.
type countingHandler struct {
	mu     sync.Mutex
	counts map[string]int
	subs   []string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.subs {
		if strings.Contains(r.Message, s) {
			h.counts[s]++
		}
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }
func (h *countingHandler) count(s string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[s]
}

// TestManyShardsSlowStore: one instance holds 2,000 shards (set
// KINESISLEASE_SCALE_SHARDS for another count) at the library's defaults
// with 5 ms added to every store call, in virtual time. The store fails
// for longer than the timeout, which fences the instance; once it works
// again, every shard must deliver again within two timeouts. Before and
// after, a whole reconciliation pass (every held row re-read) runs and
// must never fence it. Today's code before the heartbeat had its own
// goroutine delivered nothing at 1,000 shards: after a fence it released
// the rows one at a time and retook them after the next fence, in a loop.
func TestManyShardsSlowStore(t *testing.T) {
	t.Parallel()
	testutil.Slow(t) // its size is its point
	shards := 2000
	if v, err := strconv.Atoi(os.Getenv("KINESISLEASE_SCALE_SHARDS")); err == nil && v > 0 {
		shards = v
	}
	synctest.Test(t, func(t *testing.T) {
		k := sim.NewKinesis()
		stream := newSimStream(t, k, "scale", shards)
		ids := stream.ShardIDs()
		var outage atomic.Bool
		store := sim.NewFaultStore(memory.New(), sim.StoreHooks{Decide: func(op string, key leases.Key) sim.Decision {
			d := sim.Decision{Delay: 5 * time.Millisecond}
			if outage.Load() {
				d.Err = &sim.InjectedError{Op: op, Key: key, Msg: "unavailable"}
			}
			return d
		}})
		var mu sync.Mutex
		handled := map[string]map[string]time.Time{} // shard -> data -> first handled
		logs := &countingHandler{counts: map[string]int{}, subs: []string{"fenced: every lease is lost", "new incarnation after a fence"}}
		cfg := engine.GroupConfig{
			Owner: "solo", Store: store, Client: k, Logger: slog.New(teeHandler{logs, os.Getenv("KINESISLEASE_SCALE_LOG") != ""}),
			Reconcile: 20 * time.Second, // a whole pass well inside the test
			Streams: []engine.StreamConfig{{Stream: stream.Name(), Start: kltype.TrimHorizon, Worker: engine.WorkerConfig{
				MinInterval: time.Second, IdleInterval: time.Second,
				Handler: func(_ context.Context, r *kltype.Record) error {
					mu.Lock()
					defer mu.Unlock()
					m := handled[r.ShardID]
					if m == nil {
						m = map[string]time.Time{}
						handled[r.ShardID] = m
					}
					if _, ok := m[string(r.Data)]; !ok {
						m[string(r.Data)] = time.Now()
					}
					return nil
				},
			}}},
		}
		// On a failure too, the cleanup stops Run inside the bubble: it
		// must end with no goroutine left.
		_, stop := startGroup(t, cfg)
		defer stop()

		put := func(data string) {
			for _, id := range ids {
				if _, err := stream.Put(id, "k", []byte(data)); err != nil {
					t.Fatal(err)
				}
			}
		}
		// every returns how many shards handled data, and by when the last did.
		every := func(data string) (int, time.Time) {
			mu.Lock()
			defer mu.Unlock()
			n, last := 0, time.Time{}
			for _, id := range ids {
				if at, ok := handled[id][data]; ok {
					n++
					if at.After(last) {
						last = at
					}
				}
			}
			return n, last
		}
		waitAll := func(data string, within time.Duration) time.Time {
			t.Helper()
			deadline := time.Now().Add(within)
			for {
				n, last := every(data)
				if n == len(ids) {
					return last
				}
				if time.Now().After(deadline) {
					t.Fatalf("%q: %d of %d shards delivered within %v (virtual time)", data, n, len(ids), within)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}

		start := time.Now()
		put("first")
		at := waitAll("first", time.Minute)
		t.Logf("%d shards: all delivering %v after start", len(ids), at.Sub(start).Round(time.Millisecond))

		// Steady: a whole reconciliation pass, no fence.
		time.Sleep(25 * time.Second)
		if n := logs.count("fenced: every lease is lost"); n != 0 {
			t.Fatalf("fenced %d times in steady state (reconciliation of %d held rows included)", n, len(ids))
		}

		// Outage longer than the timeout: fenced.
		outage.Store(true)
		time.Sleep(engine.DefaultTimeout + 2*time.Second)
		outage.Store(false)
		back := time.Now()
		put("second")
		at = waitAll("second", 2*engine.DefaultTimeout)
		t.Logf("delivering on every shard again %v after the store came back", at.Sub(back).Round(time.Millisecond))
		if n := logs.count("fenced: every lease is lost"); n != 1 {
			t.Errorf("fenced %d times by one outage, want 1", n)
		}
		if n := logs.count("new incarnation after a fence"); n != 1 {
			t.Errorf("%d new incarnations after one outage, want 1", n)
		}

		// Steady again, through another reconciliation pass.
		time.Sleep(25 * time.Second)
		put("third")
		waitAll("third", 2*engine.DefaultHeartbeat+2*time.Second)
		if n := logs.count("fenced: every lease is lost"); n != 1 {
			t.Errorf("fenced %d times in all, want only the one the outage forced", n)
		}
	})
}

// teeHandler passes records to a countingHandler and, when on, to stderr.
type teeHandler struct {
	c  *countingHandler
	on bool
}

func (h teeHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h teeHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.on {
		slog.NewTextHandler(os.Stderr, nil).Handle(ctx, r)
	}
	return h.c.Handle(ctx, r)
}
func (h teeHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h teeHandler) WithGroup(string) slog.Handler      { return h }
