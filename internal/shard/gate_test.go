package shard

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/internal/lease"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// gateWorker returns a worker of a lease under fence f, with the row
// written at sent, for its gate (Wait) alone, and the lease's store.
func gateWorker(t *testing.T, f *fence.Fence, sent int64, proof time.Duration) (*Worker, *memory.Store) {
	t.Helper()
	store := memory.New()
	l, err := store.CreateAs(context.Background(), leases.Key{Stream: "s", Shard: "shardId-0"}, "me", "inc-1", leases.Checkpoint{}, "")
	if err != nil {
		t.Fatal(err)
	}
	h := lease.New(lease.Config{Store: store, Lease: l, Fence: f, Sent: sent, Proof: proof})
	cfg := &WorkerConfig{Handler: func(context.Context, *kltype.Record) error { return nil }}
	cfg.Defaults()
	w := New(context.Background(), Config{Settings: cfg, Log: slog.New(slog.DiscardHandler), Stream: "s", Shard: "shardId-0", Start: kltype.TrimHorizon, Lease: h})
	t.Cleanup(w.Kill)
	return w, store
}

// waitGate calls w.Wait on a goroutine of its own; its answer comes on the
// channel returned.
func waitGate(w *Worker) <-chan bool {
	got := make(chan bool, 1)
	go func() { got <- w.Wait() }()
	return got
}

// blocked reports whether Wait is still blocked, once every goroutine of
// the bubble is; no time passes meanwhile.
func blocked(got <-chan bool) (ok, still bool) {
	synctest.Wait()
	select {
	case ok = <-got:
		return ok, false
	default:
		return false, true
	}
}

// TestGateWakesWhenFenceMoves checks that a worker held at a passed fence
// delivers again as soon as a heartbeat moves the fence, with no time
// passing: the fence signals its waiters, nothing polls it.
func TestGateWakesWhenFenceMoves(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := &fence.Fence{}
		f.Store(fence.Mono()) // passed
		w, _ := gateWorker(t, f, fence.Mono(), 0)
		got := waitGate(w)
		if _, still := blocked(got); !still {
			t.Fatal("Wait returned with the fence passed")
		}
		before := time.Now()
		f.Store(fence.Mono() + int64(time.Hour))
		ok, still := blocked(got)
		if still {
			t.Fatal("Wait still blocked after the fence moved: it did not wake on the move")
		}
		if !ok {
			t.Fatal("Wait refused delivery after the fence moved")
		}
		if d := time.Since(before); d != 0 {
			t.Fatalf("Wait woke %v after the fence moved, want at once", d)
		}
	})
}

// TestGateWakesWhenRowRecreated checks that a worker whose row vanished
// delivers again as soon as the Group recreates the row, with no time
// passing.
func TestGateWakesWhenRowRecreated(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := &fence.Fence{}
		f.Store(fence.Mono() + int64(time.Hour))
		w, _ := gateWorker(t, f, fence.Mono(), 0)
		w.lease.MarkVanished()
		got := waitGate(w)
		if _, still := blocked(got); !still {
			t.Fatal("Wait returned with the row vanished")
		}
		w.lease.Recreated(fence.Mono(), false)
		ok, still := blocked(got)
		if still {
			t.Fatal("Wait still blocked after the row was recreated: it did not wake")
		}
		if !ok {
			t.Fatal("Wait refused delivery after the row was recreated")
		}
	})
}

// TestGateStops checks that a worker held at a passed fence stops waiting
// when it is asked to stop, and refuses delivery.
func TestGateStops(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := &fence.Fence{}
		f.Store(fence.Fenced)
		w, _ := gateWorker(t, f, fence.Mono(), 0)
		got := waitGate(w)
		if _, still := blocked(got); !still {
			t.Fatal("Wait returned with the instance fenced")
		}
		w.Stop()
		ok, still := blocked(got)
		if still {
			t.Fatal("Wait still blocked after the worker was asked to stop")
		}
		if ok {
			t.Fatal("Wait allowed delivery after the worker was asked to stop")
		}
	})
}

// TestGateProvesIdleRow checks that a worker idle past its proof bound
// proves its row (a touch) before it delivers, and retries a touch that
// fails after touchRetry rather than giving up.
func TestGateProvesIdleRow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := &fence.Fence{}
		f.Store(fence.Mono() + int64(time.Hour))
		const proof = time.Minute
		w, store := gateWorker(t, f, fence.Mono()-int64(2*proof), proof) // idle past the bound
		key := w.lease.Current().Key
		if !store.Delete(key) { // the touch fails: no row
			t.Fatal("no row to delete")
		}
		got := waitGate(w)
		if _, still := blocked(got); !still {
			t.Fatal("Wait returned with the row unproven and the touch failing")
		}
		w.lease.SetVanished(false) // as if recreated, unproven
		l, err := store.CreateAs(context.Background(), key, "me", "inc-1", leases.Checkpoint{}, "")
		if err != nil {
			t.Fatal(err)
		}
		w.lease.Adopt(l)
		time.Sleep(touchRetry)
		ok, still := blocked(got)
		if still {
			t.Fatal("Wait still blocked a touchRetry after the row came back: the touch was not retried")
		}
		if !ok {
			t.Fatal("Wait refused delivery once the touch proved the row")
		}
	})
}
