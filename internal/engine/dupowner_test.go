package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/testkit/sim"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
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
		old := leases.Member{Owner: "a", Incarnation: driver.NewIncarnation(0, "old"), Heartbeat: 1}
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

// replaceOwnEntry puts next in place of g's entry in row 0, as a late join
// or replacement of another process with g's owner id would.
func replaceOwnEntry(t *testing.T, store leases.Store, g *engine.Group, next leases.Member) {
	t.Helper()
	ctx := context.Background()
	ms, err := store.(leases.Membership).Members(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Incarnation == g.Incarnation() {
			if _, err := store.(leases.Membership).ReplaceMember(ctx, 0, m, next); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no entry of incarnation %s in row 0: %v", g.Incarnation(), ms)
}

// TestEntryReplacedByADeadProcessIsNoDuplicate: a running instance's entry
// is replaced by another incarnation of its owner id that never heartbeats
// again (seed 95011353: an earlier process's join, applied 11 s late on a
// recreated table). The instance must stop delivering (its fence cannot
// move), find the entry standing still and take it over as a new
// incarnation, not end Run with ErrDuplicateOwner. Before, Run ended at the
// first heartbeat that met the entry.
func TestEntryReplacedByADeadProcessIsNoDuplicate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := sim.NewKinesis()
		stream := newSimStream(t, k, "replaced", 1)
		store := memory.New()
		g, err := engine.NewGroup(groupConfig("a", store, k, stream.Name()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		time.Sleep(time.Second)
		first := g.Incarnation()
		dead := leases.Member{Owner: "a", Incarnation: driver.NewIncarnation(0, "late"), Heartbeat: 1}
		replaceOwnEntry(t, store, g, dead)
		select {
		case err := <-done:
			t.Fatalf("Run returned %v after a dead process's entry replaced this instance's", err)
		case <-time.After(3 * time.Second): // 15 timeouts
		}
		inc := g.Incarnation()
		if inc == first || inc == dead.Incarnation {
			t.Fatalf("incarnation %s: want a new one after the entry was replaced (was %s, the dead one %s)", inc, first, dead.Incarnation)
		}
		ms, err := store.Members(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 1 || ms[0].Incarnation != inc {
			t.Fatalf("row 0 holds %v, want this instance's entry %s alone", ms, inc)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

// TestEntryReplacedByALiveProcessIsDuplicate: the same, but the other
// incarnation keeps heartbeating: another process runs with this owner id,
// and Run ends with a *DuplicateOwnerError naming it once join's wait has
// passed, having stopped delivering at once.
func TestEntryReplacedByALiveProcessIsDuplicate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := sim.NewKinesis()
		stream := newSimStream(t, k, "replaced", 1)
		store := memory.New()
		cfg := groupConfig("a", store, k, stream.Name())
		g, err := engine.NewGroup(cfg)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- g.Run(context.Background()) }()
		time.Sleep(time.Second)
		other := leases.Member{Owner: "a", Incarnation: driver.NewIncarnation(0, "other"), Heartbeat: 1}
		replaceOwnEntry(t, store, g, other)
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(cfg.Heartbeat):
				}
				other.Heartbeat++
				if _, err := store.Heartbeat(context.Background(), 0, other); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		defer close(stop)
		var dup *engine.DuplicateOwnerError
		select {
		case err := <-done:
			if !errors.As(err, &dup) || dup.Incarnation != other.Incarnation {
				t.Fatalf("Run: %v, want a *DuplicateOwnerError naming %s", err, other.Incarnation)
			}
		case <-time.After(time.Minute):
			t.Fatal("Run still running a minute after another process took its entry and kept heartbeating")
		}
	})
}

// TestFirstJoinNeverReusesAnIdFoundDead: a process's first join lands with
// its answer lost, its later calls fail long enough for another member to
// find that entry dead and remove it, then it joins. It must join as a new
// incarnation, not its own suffix's again: the other member knows that id
// dead, and would take the rows the process takes under it at once (seed
// 91010012: a shard read by two members).
func TestFirstJoinNeverReusesAnIdFoundDead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := sim.NewKinesis()
		stream := newSimStream(t, k, "rejoin", 1)
		inner := memory.New()
		var joins atomic.Int64
		failUntil := time.Now().Add(10 * time.Second)
		store := sim.NewFaultStore(inner, sim.StoreHooks{Decide: func(op string, key leases.Key) sim.Decision {
			if op == "Join" && joins.Add(1) == 1 {
				return sim.Decision{LoseResponse: true} // lands; its answer is lost
			}
			if joins.Load() > 0 && time.Now().Before(failUntil) {
				return sim.Decision{Err: &sim.InjectedError{Op: op, Key: key, Msg: "unavailable"}}
			}
			return sim.Decision{}
		}})
		g, err := engine.NewGroup(groupConfig("a", store, k, stream.Name()))
		if err != nil {
			t.Fatal(err)
		}
		suffixed := driver.NewIncarnation(0, g.Incarnation())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		time.Sleep(time.Millisecond)
		ms, err := inner.Members(context.Background(), 0)
		if err != nil || len(ms) != 1 || ms[0].Incarnation != suffixed {
			t.Fatalf("row 0 after the first join: %v, %v; want the entry of %s", ms, err, suffixed)
		}
		// Another member finds it dead and removes it.
		if _, err := inner.ReplaceMember(context.Background(), 0, ms[0], leases.Member{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(15 * time.Second)
		if inc := g.Incarnation(); inc == suffixed {
			t.Fatalf("joined as %s, the id of its first attempt, which others may have found dead", inc)
		}
		if ms, err := inner.Members(context.Background(), 0); err != nil || len(ms) != 1 || ms[0].Incarnation != g.Incarnation() {
			t.Fatalf("row 0: %v, %v; want this instance's entry %s alone", ms, err, g.Incarnation())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}
