package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/testkit/sim"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// crashable is a memory store a process can crash away from: every call
// fails once crashed, so its clean-up never lands, as for a SIGKILL.
type crashable struct {
	*memory.Store
	crashed atomic.Bool
}

var errCrashed = errors.New("test: crashed")

func (s *crashable) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	if s.crashed.Load() {
		return nil, errCrashed
	}
	return s.Store.Heartbeat(ctx, row, m)
}

func (s *crashable) Members(ctx context.Context, row int) ([]leases.Member, error) {
	if s.crashed.Load() {
		return nil, errCrashed
	}
	return s.Store.Members(ctx, row)
}

func (s *crashable) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	if s.crashed.Load() {
		return nil, errCrashed
	}
	return s.Store.ReplaceMember(ctx, row, seen, next)
}

func (s *crashable) TakeAs(ctx context.Context, l leases.Lease, owner, inc string) (leases.Lease, error) {
	if s.crashed.Load() {
		return leases.Lease{}, errCrashed
	}
	return s.Store.TakeAs(ctx, l, owner, inc)
}

func (s *crashable) CreateAs(ctx context.Context, key leases.Key, owner, inc string, cp leases.Checkpoint, rewind string) (leases.Lease, error) {
	if s.crashed.Load() {
		return leases.Lease{}, errCrashed
	}
	return s.Store.CreateAs(ctx, key, owner, inc, cp, rewind)
}

func (s *crashable) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if s.crashed.Load() {
		return leases.Lease{}, errCrashed
	}
	return s.Store.Release(ctx, l, cp)
}

// newSimStream creates a stream named name with shards shards on k and
// returns its ledger.
func newSimStream(t *testing.T, k *kinesisfake.Kinesis, name string, shards int) *sim.Ledger {
	t.Helper()
	l, err := sim.NewStream(k, name, shards)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func groupConfig(owner string, store leases.Store, k *kinesisfake.Kinesis, stream string) engine.GroupConfig {
	return engine.GroupConfig{
		Owner: owner, Store: store, Client: k,
		Heartbeat: 40 * time.Millisecond, Timeout: 200 * time.Millisecond, ShutdownTimeout: time.Second,
		Streams: []engine.StreamConfig{{Stream: stream, Start: kltype.TrimHorizon, Worker: engine.WorkerConfig{
			Handler: func(context.Context, *kltype.Record) error { return nil }, MinInterval: 20 * time.Millisecond, IdleInterval: 20 * time.Millisecond,
		}}},
	}
}

// startGroup runs a Group of cfg until the returned stop is called or the
// test ends (a cleanup cancels Run and waits for it, so it does not
// outlive a test stopped by t.Fatal); stop cancels it, waits and fails the
// test if Run returned an error. done receives Run's result if it returns
// first (see waitFor).
func startGroup(t *testing.T, cfg engine.GroupConfig) (done <-chan error, stop func()) {
	t.Helper()
	g, err := engine.NewGroup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	finished := make(chan struct{})
	var runErr error
	go func() {
		runErr = g.Run(ctx)
		ran <- runErr
		close(finished)
	}()
	wait := sync.OnceFunc(func() { cancel(); <-finished })
	t.Cleanup(wait)
	return ran, func() {
		t.Helper()
		wait()
		if runErr != nil {
			t.Fatalf("Run: %v", runErr)
		}
	}
}

// TestMembershipRowsBounded: many processes with fresh owner ids crash
// (their entries left behind); the live member removes the stale entries,
// so the membership rows hold the live fleet, not every process that ever
// ran. KINESISLEASE_RESTARTS sets how many (default 300; the issue's
// measure is 1,000).
func TestMembershipRowsBounded(t *testing.T) {
	t.Parallel()
	restarts := 300
	if v, err := strconv.Atoi(os.Getenv("KINESISLEASE_RESTARTS")); err == nil && v > 0 {
		restarts = v
	}
	mem := memory.New()
	k := sim.NewKinesis()
	newSimStream(t, k, "bounded", 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lcfg := groupConfig("live", mem, k, "bounded")
	if os.Getenv("KL_DEBUG") != "" {
		lcfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	live, err := engine.NewGroup(lcfg)
	if err != nil {
		t.Fatal(err)
	}
	liveDone := make(chan error, 1)
	go func() { liveDone <- live.Run(ctx) }()
	stopLive := sync.OnceValue(func() error { cancel(); return <-liveDone })
	defer stopLive() // the live Group never outlives the test

	// countEntries counts the membership entries; it runs on the crashing
	// processes' goroutines too, so it returns its error.
	countEntries := func() (int, error) {
		n := 0
		h, err := mem.Header(context.Background())
		if err != nil {
			return 0, err
		}
		for r := range h.Rows {
			ms, err := mem.Members(context.Background(), r)
			if err != nil {
				return 0, err
			}
			n += len(ms)
		}
		return n, nil
	}
	entries := func() int { // on the test's goroutine
		t.Helper()
		n, err := countEntries()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const parallel = 20
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	maxSeen := 0
	var mu sync.Mutex
	for i := range restarts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			st := &crashable{Store: mem}
			g, err := engine.NewGroup(groupConfig(fmt.Sprintf("proc-%04d", i), st, k, "bounded"))
			if err != nil {
				t.Error(err)
				return
			}
			pctx, pcancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- g.Run(pctx) }()
			time.Sleep(80 * time.Millisecond) // a couple of heartbeats
			st.crashed.Store(true)
			pcancel()
			<-done
			n, err := countEntries()
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			maxSeen = max(maxSeen, n)
			mu.Unlock()
		})
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for entries() > 1 {
		if time.Now().After(deadline) {
			h, _ := mem.Header(context.Background())
			for r := range h.Rows {
				ms, _ := mem.Members(context.Background(), r)
				t.Logf("row %d (version %d): %+v", r, h.Rows[r], ms)
			}
			t.Fatalf("%d membership entries 10s after %d crashed processes, want 1 (the live one)", entries(), restarts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d crashed processes: at most %d entries at once (%d running at a time), 1 left", restarts, maxSeen, parallel)
	if err := stopLive(); err != nil {
		t.Fatal(err)
	}
}
