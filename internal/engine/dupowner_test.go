package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/engine/sim"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestRestartAfterReadsFailedIsNoDuplicate: a process restarted with its
// fixed owner id finds the entry of its earlier incarnation, which still
// heartbeats for a while and then dies (a SIGKILL). The new process's reads
// of the membership fail for two seconds meanwhile; the next read shows the
// heartbeat moved since the first. A change seen between two reads that far
// apart does not show a process heartbeating now: the new process must
// take the entry over once it stands still for a timeout, not end Run with
// ErrDuplicateOwner. Before, the "changed" flag was kept for ever, and Run
// ended as soon as the wait since the first sighting had passed.
func TestRestartAfterReadsFailedIsNoDuplicate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := sim.NewKinesis()
		stream := newSimStream(t, k, "dupe", 1)
		inner := memory.New()
		ctx := context.Background()
		old := leases.Member{Owner: "a", Incarnation: leases.NewIncarnation(0, "old"), Heartbeat: 1}
		if _, err := inner.Join(ctx, 0, old); err != nil {
			t.Fatal(err)
		}
		if err := inner.BumpRow(ctx, 0); err != nil {
			t.Fatal(err)
		}
		var failing atomic.Bool
		store := sim.NewFaultStore(inner, sim.StoreHooks{Decide: func(op string, key leases.Key) sim.Decision {
			if failing.Load() && (op == "Header" || op == "Members") {
				return sim.Decision{Err: &sim.InjectedError{Op: op, Key: key, Msg: "unavailable"}}
			}
			return sim.Decision{}
		}})
		// The earlier incarnation heartbeats until 1.5 s, then dies.
		go func() {
			for start := time.Now(); time.Since(start) < 1500*time.Millisecond; {
				time.Sleep(40 * time.Millisecond)
				old.Heartbeat++
				if _, err := inner.Heartbeat(ctx, 0, old); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		cfg := groupConfig("a", store, k, stream.Name())
		g, err := engine.NewGroup(cfg)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- g.Run(runCtx) }()
		time.Sleep(50 * time.Millisecond) // the join's first read sees the entry
		failing.Store(true)
		time.Sleep(2 * time.Second)
		failing.Store(false)
		select {
		case err := <-done:
			t.Fatalf("Run returned %v before the earlier incarnation's entry could be taken over", err)
		case <-time.After(2 * time.Second):
		}
		cancel()
		if err := <-done; err != nil {
			var dup *engine.DuplicateOwnerError
			if errors.As(err, &dup) {
				t.Fatalf("Run: %v; want the dead incarnation's entry taken over", err)
			}
			t.Fatal(err)
		}
		if inc := g.Incarnation(); inc == old.Incarnation || inc == "" {
			t.Fatalf("incarnation %q: never joined", inc)
		}
	})
}
