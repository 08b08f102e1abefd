package engine_test

import (
	"context"
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

// TestStreamNewToTableInUse: a fleet of one has read stream "a" on a table
// for a minute (long enough to write the table's id). Then a stream new to
// the table is subscribed, at runtime by the running instance and at start
// by a new one: its rows never existed, which the records of creations on
// a table whose id both trust tell, so each is created and taken at once,
// not after the lost-row wait of a member that knows no checkpoint (22 s at
// the defaults, which every stream new to a table in use waited before).
func TestStreamNewToTableInUse(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := sim.NewKinesis()
		a := newSimStream(t, k, "a", 2)
		b := newSimStream(t, k, "b", 2)
		c := newSimStream(t, k, "c", 2)
		store := sim.NewFaultStore(memory.New(), sim.StoreHooks{Decide: func(string, leases.Key) sim.Decision {
			return sim.Decision{Delay: 5 * time.Millisecond}
		}})
		var mu sync.Mutex
		first := map[string]time.Time{} // stream -> first record handled
		handler := func(_ context.Context, r *kltype.Record) error {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := first[r.Stream]; !ok {
				first[r.Stream] = time.Now()
			}
			return nil
		}
		stream := func(name string) engine.StreamConfig {
			return engine.StreamConfig{Stream: name, Start: kltype.TrimHorizon, Worker: engine.WorkerConfig{
				Handler: handler, MinInterval: 100 * time.Millisecond, IdleInterval: 100 * time.Millisecond,
			}}
		}
		run := func(owner string, sc engine.StreamConfig) (*engine.Group, func()) {
			g, err := engine.NewGroup(engine.GroupConfig{Owner: owner, Store: store, Client: k, Streams: []engine.StreamConfig{sc}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- g.Run(ctx) }()
			return g, func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}
		}
		put := func(l *sim.Ledger) {
			for _, id := range l.ShardIDs() {
				if _, err := l.Put(id, "k", []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
		}
		firstOf := func(name string, since time.Time, within time.Duration) time.Duration {
			t.Helper()
			for deadline := since.Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				mu.Lock()
				at, ok := first[name]
				mu.Unlock()
				if ok {
					return at.Sub(since)
				}
			}
			t.Fatalf("stream %q: no record handled within %v (virtual time)", name, within)
			return 0
		}

		g1, stop1 := run("one", stream("a"))
		defer stop1()
		put(a)
		firstOf("a", time.Now(), 10*time.Second)
		time.Sleep(time.Minute) // the table's id is written meanwhile

		put(b)
		start := time.Now()
		if err := g1.AddStream(context.Background(), stream("b")); err != nil {
			t.Fatal(err)
		}
		d := firstOf("b", start, 30*time.Second)
		t.Logf("a stream subscribed at runtime on a table in use: first record %v after AddStream", d.Round(time.Millisecond))
		if d > 3*time.Second {
			t.Errorf("a stream subscribed at runtime on a table in use: first record %v after AddStream, want within 3s", d)
		}

		put(c)
		start = time.Now()
		_, stop2 := run("two", stream("c"))
		defer stop2()
		d = firstOf("c", start, 30*time.Second)
		t.Logf("a stream new to a table in use, subscribed by a new instance: first record %v after Run", d.Round(time.Millisecond))
		if d > 3*time.Second {
			t.Errorf("a stream new to a table in use, subscribed by a new instance: first record %v after Run, want within 3s", d)
		}
	})
}
