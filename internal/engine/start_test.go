package engine_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/observe"
	"github.com/kinesislease/kinesislease/internal/testkit/sim"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// The start at any size (issue 37): a first listing, a full re-read or
// parent polling is never bounded by one round. Every bound below is in
// virtual time (a synctest bubble) at the library's defaults, with every
// store call (reads, writes, membership) delayed by the latency given.

// startRun is one start of members Groups on one stream of shards shards.
type startRun struct {
	members, shards int
	latency         time.Duration
	// rows: the table holds a free row for every shard (a restart), with no
	// membership; else the table is new.
	rows bool
	// records: put one record on every shard and wait for each to be
	// handled; else wait for every shard to be held.
	records bool
	// recreated: the table was recreated (memory.Store.Clear) this long
	// before Run, so that its header shows it born then
	// (leases.MemberHeader.Born); 0: a table that never had an earlier one
	// (memory.New).
	recreated time.Duration
}

// run starts the Groups together and returns how long after Run every
// shard was held (or had handled its record), and when the first record
// was handled (records only). It fails the test past bound.
func (r startRun) run(t *testing.T, bound time.Duration) (all, first time.Duration) {
	k := sim.NewKinesis()
	stream := newSimStream(t, k, "start", r.shards)
	ids := stream.ShardIDs()
	inner := memory.New()
	if r.recreated > 0 {
		inner.Clear()
		time.Sleep(r.recreated)
	}
	if r.rows {
		for _, id := range ids {
			if _, err := inner.Create(context.Background(), leases.Key{Stream: stream.Name(), Shard: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if r.records {
		for _, id := range ids {
			if _, err := stream.Put(id, "k", []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	done := map[string]time.Duration{} // shard -> when held or handled
	var firstAt time.Duration
	start := time.Now()
	mark := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := done[id]; !ok {
			done[id] = time.Since(start)
		}
	}
	store := func() leases.Store {
		return sim.NewFaultStore(inner, sim.StoreHooks{Decide: func(string, leases.Key) sim.Decision {
			return sim.Decision{Delay: r.latency}
		}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for m := range r.members {
		cfg := engine.GroupConfig{
			Owner: fmt.Sprintf("member-%02d", m), Store: store(), Client: k,
			Streams: []engine.StreamConfig{{Stream: stream.Name(), Start: kltype.TrimHorizon, Worker: engine.WorkerConfig{
				// Idle shards are polled seldom: the CPU goes to the lease
				// protocol, whose start is measured.
				MinInterval: 200 * time.Millisecond, IdleInterval: 10 * time.Second,
				Handler: func(_ context.Context, rec *kltype.Record) error {
					mu.Lock()
					if firstAt == 0 {
						firstAt = time.Since(start)
					}
					mu.Unlock()
					mark(rec.ShardID)
					return nil
				},
			}}},
		}
		if !r.records {
			cfg.Events = func(e observe.LeaseEvent) {
				if e.Type == observe.LeaseAcquired {
					mark(e.ShardID)
				}
			}
		}
		g, err := engine.NewGroup(cfg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := g.Run(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	deadline := start.Add(bound)
	for {
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		n, f := len(done), firstAt
		var last time.Duration
		for _, at := range done {
			last = max(last, at)
		}
		mu.Unlock()
		if n == len(ids) && (!r.records || f > 0) {
			return last, f
		}
		if time.Now().After(deadline) {
			what := "held"
			if r.records {
				what = "handled a record"
			}
			t.Fatalf("%d of %d shards %s within %v of Run (virtual time)", n, len(ids), what, bound)
		}
	}
}

// TestStartManyShardsSlowStore: one instance on a new table, 2,000 shards,
// 10 ms per store call: every shard handles a record within 10 s of Run.
// Before issue 37 it handled about 500 in 60 s: the first listing read
// every row inside one round and started again when they did not fit.
func TestStartManyShardsSlowStore(t *testing.T) {
	t.Parallel()
	testutil.Slow(t)
	synctest.Test(t, func(t *testing.T) {
		all, first := startRun{members: 1, shards: 2000, latency: 10 * time.Millisecond, records: true}.run(t, 10*time.Second)
		t.Logf("2,000 shards at 10 ms a call, new table: first record %v, every shard's %v after Run", first, all)
	})
}

// TestStartManyShardsExistingRows: the same on a table that holds every
// row already (a restart).
func TestStartManyShardsExistingRows(t *testing.T) {
	t.Parallel()
	testutil.Slow(t)
	synctest.Test(t, func(t *testing.T) {
		all, first := startRun{members: 1, shards: 2000, latency: 10 * time.Millisecond, rows: true, records: true}.run(t, 10*time.Second)
		t.Logf("2,000 shards at 10 ms a call, existing rows: first record %v, every shard's %v after Run", first, all)
	})
}

// TestStartNewTable: on a new table, a new stream's rows are created once
// the joins settled, two heartbeats after the last join seen (the
// creator's own included), so that a fleet started over a few seconds
// takes each shard once (TestFleetStartedOverSeconds): one member, or four
// started together, handle their first record 2.55 s after Run at the
// defaults. Not sooner than a timeout after the table was born, though: an
// empty table may be one recreated under a running fleet, one of whose
// holders, cut off from the table, delivers until its fence, a timeout
// after its last heartbeat at most; a row created free before that could
// be read beside it (seed 95028121: 2.3 s after the join, when the rule
// was two heartbeats; TestNewTableWaitsForAHolderCutOff). A table whose
// header shows it born more than two timeouts ago (the second covers
// clocks apart), or that never had an earlier one (memory.New), or whose
// members' entries show it older than a timeout
// (TestStreamNewToTableInUse), is known old at once; one recreated just
// before Run is known old a timeout after the join.
func TestStartNewTable(t *testing.T) {
	t.Parallel()
	settled := 2*engine.DefaultHeartbeat + 200*time.Millisecond
	for _, c := range []struct {
		name       string
		members    int
		recreated  time.Duration
		from, upto time.Duration
	}{
		{"fresh", 1, 0, 0, settled},
		{"fresh", 4, 0, 0, settled},
		{"born-long-ago", 1, 2*engine.DefaultTimeout + time.Second, 0, settled},
		{"born-just-now", 1, time.Millisecond, engine.DefaultTimeout, engine.DefaultTimeout + 200*time.Millisecond},
		{"born-just-now", 4, time.Millisecond, engine.DefaultTimeout, engine.DefaultTimeout + 200*time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%s,members=%d", c.name, c.members), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := startRun{members: c.members, shards: 8, latency: 5 * time.Millisecond, records: true, recreated: c.recreated}
				all, first := r.run(t, 30*time.Second)
				t.Logf("%s table, %d member(s), 8 shards, 5 ms a call: first record %v, every shard's %v after Run", c.name, c.members, first, all)
				if first < c.from || first > c.upto {
					t.Errorf("first record %v after Run, want from %v to %v", first, c.from, c.upto)
				}
			})
		})
	}
}

// largeStartEnv gates the starts too large for the default suite.
const largeStartEnv = "KINESISLEASE_SIM_LARGE"

// TestStartLarge: 20,000 shards at 5 ms a call on one instance, every
// shard held within 30 s (new table, and existing rows); with
// KINESISLEASE_SIM_LARGE set.
func TestStartLarge(t *testing.T) {
	if os.Getenv(largeStartEnv) == "" {
		t.Skipf("set %s=1 to run it", largeStartEnv)
	}
	for _, rows := range []bool{false, true} {
		t.Run(fmt.Sprintf("rows=%v", rows), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				all, _ := startRun{members: 1, shards: 20000, latency: 5 * time.Millisecond, rows: rows}.run(t, 30*time.Second)
				t.Logf("20,000 shards at 5 ms a call, existing rows %v: every shard held %v after Run", rows, all)
			})
		})
	}
}

// TestStartFleetLarge: 100,000 shards on 50 members at 5 ms a call on a
// new table, every shard held within 60 s; with KINESISLEASE_SIM_LARGE set.
// Measured: 34.0 s, 125 MB of heap (854 shards held at 60 s before new
// streams were marked: every member read every row before the stream
// could be taken as new).
func TestStartFleetLarge(t *testing.T) {
	if os.Getenv(largeStartEnv) == "" {
		t.Skipf("set %s=1 to run it", largeStartEnv)
	}
	synctest.Test(t, func(t *testing.T) {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		all, _ := startRun{members: 50, shards: 100000, latency: 5 * time.Millisecond}.run(t, 60*time.Second)
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		t.Logf("100,000 shards on 50 members at 5 ms a call: every shard held %v after Run; heap %d MB (%d B a shard, the whole fleet and its Kinesis)",
			all, (after.HeapAlloc-before.HeapAlloc)>>20, (after.HeapAlloc-before.HeapAlloc)/100000)
	})
}

// TestStreamNewToTableInUse: a fresh process subscribes a stream new to a
// table another process is using. The other's entry shows the table older
// than a timeout (leases.Member.Young), and the stream has no mark: no row
// of it exists or is held, so the new member marks it, creates its rows
// and reads them at once: within 3 s (11.3 s when a missing row of a
// table in use was recovered and read after the recovery wait, 22.08 s
// before that).
func TestStreamNewToTableInUse(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := sim.NewKinesis()
		old := newSimStream(t, k, "old", 2)
		fresh := newSimStream(t, k, "fresh", 2)
		store := memory.New()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer func() {
			cancel()
			wg.Wait()
		}()
		var mu sync.Mutex
		var firstAt time.Time
		group := func(owner string, stream *sim.Ledger) {
			g, err := engine.NewGroup(engine.GroupConfig{
				Owner: owner, Store: store, Client: k,
				Streams: []engine.StreamConfig{{Stream: stream.Name(), Start: kltype.TrimHorizon, Worker: engine.WorkerConfig{
					MinInterval: 100 * time.Millisecond, IdleInterval: 100 * time.Millisecond,
					Handler: func(context.Context, *kltype.Record) error {
						if stream == fresh {
							mu.Lock()
							if firstAt.IsZero() {
								firstAt = time.Now()
							}
							mu.Unlock()
						}
						return nil
					},
				}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				if err := g.Run(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		group("a", old)
		time.Sleep(30 * time.Second) // a table in use: a's heartbeats are well past a start's
		for _, id := range fresh.ShardIDs() {
			if _, err := fresh.Put(id, "k", []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		group("b", fresh)
		for time.Since(start) < time.Minute {
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			f := firstAt
			mu.Unlock()
			if !f.IsZero() {
				d := f.Sub(start)
				t.Logf("a stream new to a table in use: first record %v after Run", d)
				if bound := 3 * time.Second; d > bound {
					t.Errorf("first record %v after Run, want within %v", d, bound)
				}
				return
			}
		}
		t.Fatal("the new stream handled no record within a minute")
	})
}
