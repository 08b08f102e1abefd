package membership

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/roster"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// testHost is a Host with no workers: it counts the fences, and checks
// that each comes with the Member's lock held.
type testHost struct {
	me       *Member
	fences   atomic.Int32
	unlocked atomic.Bool // a FenceWorkers ran without the lock
}

func (h *testHost) Published() leases.Member { return leases.Member{Streams: "d"} }
func (h *testHost) FenceWorkers() int {
	if h.me.mu.TryLock() {
		h.me.mu.Unlock()
		h.unlocked.Store(true)
	}
	h.fences.Add(1)
	return 0
}
func (h *testHost) Kick()                                    {}
func (h *testHost) Reconcile()                               {}
func (h *testHost) EndedMoved()                              {}
func (h *testHost) HeldStreams() map[string]bool             { return nil }
func (h *testHost) MarkStream(context.Context, string) error { return nil }
func (h *testHost) ForgetMarks()                             {}

// testMember is the Member of owner on store (heartbeat 1s, timeout 4s,
// as the engine's defaults make them), not running, with a testHost.
func testMember(store leases.Membership, owner string) *Member {
	h := &testHost{}
	me := New(Config{
		Owner: owner, Store: store, Log: slog.New(slog.DiscardHandler), Host: h,
		Heartbeat: time.Second, Timeout: 4 * time.Second, FenceMargin: 4 * time.Second / 6, ShutdownTimeout: 30 * time.Second,
	})
	h.me = me
	return me
}

// TestFenceUnderTheLock: a fence that passes while heartbeats fail stops
// the workers (Host.FenceWorkers) holding the lock under which the
// incarnation changes, and the next heartbeat that lands goes on as a new
// incarnation, whose entry replaces the old one in its row; a worker's
// check under Locked sees the instance fenced until then.
func TestFenceUnderTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		me := testMember(store, "a")
		if err := me.Join(ctx); err != nil {
			t.Fatal(err)
		}
		first := me.Incarnation()
		if roster.RowOf(first) != 0 || me.Fence().Passed() || me.Fenced() {
			t.Fatalf("joined as %q, fence passed %v, fenced %v: want row 0, not fenced", first, me.Fence().Passed(), me.Fenced())
		}
		time.Sleep(4 * time.Second) // past the fence: no heartbeat
		if !me.Fence().Passed() {
			t.Fatal("the fence has not passed 4 s after the join")
		}
		if err := me.beat(ctx); err != nil { // landed, sent past the fence
			t.Fatal(err)
		}
		h := me.host.(*testHost)
		if h.fences.Load() == 0 || h.unlocked.Load() {
			t.Fatalf("%d fences, one without the lock: %v; want the workers fenced under the lock", h.fences.Load(), h.unlocked.Load())
		}
		var inc string
		var fenced bool
		me.Locked(func() { inc, fenced = me.IncarnationLocked(), me.Fenced() })
		if inc == first || fenced {
			t.Fatalf("after the heartbeat past the fence: incarnation %q (was %q), fenced %v; want a new one, not fenced", inc, first, fenced)
		}
		ms, err := store.Members(ctx, 0)
		if err != nil || len(ms) != 1 || ms[0].Incarnation != inc || ms[0].Streams != "d" {
			t.Fatalf("row 0: %+v, %v; want the new incarnation's entry alone, publishing the host's streams", ms, err)
		}
	})
}
