package sim

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// TestFaultStoreLate checks Decision.Late: a write lands Late after its
// call started, through the hooks, whatever its caller's context or process
// does meanwhile; the caller gets its context's error, or a late
// *ResponseLostError after Delay; a read with Late is only slow.
func TestFaultStoreLate(t *testing.T) {
	key := leases.Key{Stream: "s", Shard: "shardId-000000000000"}
	type landing struct {
		op string
		at time.Duration
	}
	setup := func(decide func(op string) Decision, dead func() bool) (*FaultStore, *Table, *[]landing, *sync.Mutex) {
		tab := NewTable()
		var mu sync.Mutex
		var landed []landing
		start := time.Now()
		fs := NewFaultStore(tab, StoreHooks{
			Decide: func(op string, _ leases.Key) Decision { return decide(op) },
			Dead:   dead,
			Apply: func(op string, _ leases.Lease, do func() (leases.Lease, error)) (leases.Lease, error) {
				got, err := do()
				if err == nil {
					mu.Lock()
					landed = append(landed, landing{op, time.Since(start)})
					mu.Unlock()
				}
				return got, err
			},
			ApplyMembers: func(op string, _ int, do func() ([]leases.Member, error)) ([]leases.Member, error) {
				got, err := do()
				if err == nil && op != "Members" && op != "Header" {
					mu.Lock()
					landed = append(landed, landing{op, time.Since(start)})
					mu.Unlock()
				}
				return got, err
			},
		})
		return fs, tab, &landed, &mu
	}

	t.Run("answer-timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fs, tab, landed, mu := setup(func(op string) Decision {
				return Decision{Late: 3 * time.Second, Delay: 500 * time.Millisecond, Err: errors.New("ignored"), LoseResponse: true}
			}, nil)
			start := time.Now()
			_, err := fs.Create(context.Background(), key)
			var lost *ResponseLostError
			if !errors.As(err, &lost) || !lost.Late || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Create: %v, want a late *ResponseLostError", err)
			}
			if d := time.Since(start); d != 500*time.Millisecond {
				t.Errorf("the caller waited %v, want Delay (500ms)", d)
			}
			if _, err := tab.Get(context.Background(), key); !errors.Is(err, leases.ErrNotFound) {
				t.Fatalf("the row exists before the late write landed: %v", err)
			}
			fs.WaitLate()
			if d := time.Since(start); d != 3*time.Second {
				t.Errorf("the late write landed %v after the call, want 3s", d)
			}
			if _, err := tab.Get(context.Background(), key); err != nil {
				t.Fatalf("the late Create did not land: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(*landed) != 1 || (*landed)[0] != (landing{"Create", 3 * time.Second}) {
				t.Errorf("the Apply hook saw %v, want the Create at 3s", *landed)
			}
		})
	})

	t.Run("context-ends-process-dies", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var dead sync.Mutex
			isDead := false
			late := true
			fs, tab, landed, mu := setup(func(op string) Decision {
				if late && op != "Get" {
					return Decision{Late: 2 * time.Second} // no Delay: the caller waits for its context
				}
				return Decision{}
			}, func() bool { dead.Lock(); defer dead.Unlock(); return isDead })
			late = false
			l, err := fs.Create(context.Background(), key)
			if err != nil {
				t.Fatal(err)
			}
			if l, err = fs.TakeAs(context.Background(), l, "a", driver.NewIncarnation(0, "x")); err != nil {
				t.Fatal(err)
			}
			late = true
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if _, err := fs.Checkpoint(ctx, l, leases.Checkpoint{Sequence: "1"}); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Checkpoint: %v, want its context's error", err)
			}
			// The process dies; its write lands all the same, and the
			// hook sees it.
			dead.Lock()
			isDead = true
			dead.Unlock()
			ctx2, cancel2 := context.WithCancel(context.Background())
			cancel2()
			if _, err := fs.Get(ctx2, key); err == nil {
				t.Fatal("a dead process's Get succeeded")
			}
			time.Sleep(3 * time.Second)
			got, err := tab.Get(context.Background(), key)
			if err != nil || got.Checkpoint.Sequence != "1" {
				t.Fatalf("the late Checkpoint did not land: %+v, %v", got, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(*landed) != 3 || (*landed)[2] != (landing{"Checkpoint", 2 * time.Second}) {
				t.Errorf("the Apply hook saw %v, want the Create, the TakeAs, then the Checkpoint at 2s", *landed)
			}
		})
	})

	t.Run("read-is-slow", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fs, tab, _, _ := setup(func(string) Decision { return Decision{Late: time.Second, Delay: 200 * time.Millisecond} }, nil)
			if _, err := tab.Create(context.Background(), key); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if _, err := fs.Get(context.Background(), key); err != nil {
				t.Fatalf("a late read failed: %v", err)
			}
			if d := time.Since(start); d != 1200*time.Millisecond {
				t.Errorf("the read took %v, want Delay + Late (1.2s)", d)
			}
		})
	})

	t.Run("membership-write", func(t *testing.T) {
		var tab *Table
		var landed *[]landing
		synctest.Test(t, func(t *testing.T) {
			var fs *FaultStore
			fs, tab, landed, _ = setup(func(string) Decision { return Decision{Late: 5 * time.Second, Delay: time.Second} }, nil)
			m := leases.Member{Owner: "a", Incarnation: driver.NewIncarnation(0, "x"), Heartbeat: 1}
			if _, err := fs.Join(context.Background(), 0, m); err == nil {
				t.Fatal("a late Join was answered")
			}
			if ms, _ := tab.Members(context.Background(), 0); len(ms) != 0 {
				t.Fatalf("the Join landed early: %+v", ms)
			}
			fs.WaitLate() // a bubble must not end with a late write pending
		})
		ms, _ := tab.Members(context.Background(), 0)
		if len(ms) != 1 || len(*landed) != 1 || (*landed)[0] != (landing{"Join", 5 * time.Second}) {
			t.Errorf("after the bubble: members %+v, landed %v; want the Join landed at 5s", ms, *landed)
		}
	})

	t.Run("dropped", func(t *testing.T) {
		var tab *Table
		synctest.Test(t, func(t *testing.T) {
			var fs *FaultStore
			fs, tab, _, _ = setup(func(string) Decision { return Decision{Late: 30 * time.Second, Delay: time.Second} }, nil)
			if _, err := fs.Create(context.Background(), key); err == nil {
				t.Fatal("a late Create was answered")
			}
			start := time.Now()
			fs.DropLate() // the bubble may end: the write never lands
			if d := time.Since(start); d != 0 {
				t.Errorf("DropLate took %v of virtual time", d)
			}
		})
		if _, err := tab.Get(context.Background(), key); !errors.Is(err, leases.ErrNotFound) {
			t.Errorf("a dropped late Create landed: %v", err)
		}
	})
}
