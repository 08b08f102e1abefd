package syncx

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestBoundedLimit: no more than limit calls run at once, every index runs
// once, and Bounded returns after the last.
func TestBoundedLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running, most, done atomic.Int32
		var mu sync.Mutex
		seen := map[int]int{}
		Bounded(context.Background(), 3, 10, func(i int) {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Second)
			Guard(&mu, func() { seen[i]++ })
			running.Add(-1)
			done.Add(1)
		})
		if done.Load() != 10 || most.Load() != 3 || len(seen) != 10 {
			t.Fatalf("done %d, at most %d at once, %d indexes; want 10, 3, 10", done.Load(), most.Load(), len(seen))
		}
	})
}

// TestBoundedStopsWithContext: once ctx ends, Bounded starts no more
// calls, but for one whose turn came at the same instant (the select sees
// both a free slot and the end: either may win).
func TestBoundedStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var started atomic.Int32
		Bounded(ctx, 1, 100, func(int) {
			if started.Add(1) == 2 {
				cancel()
			}
		})
		if n := started.Load(); n < 2 || n > 3 {
			t.Fatalf("%d calls started; want 2, or 3 if a slot came free as the context ended", n)
		}
	})
}

func TestClosedAndGuarded(t *testing.T) {
	ch := make(chan struct{})
	if Closed(ch) {
		t.Fatal("Closed: an open channel reported closed")
	}
	close(ch)
	if !Closed(ch) {
		t.Fatal("Closed: a closed channel reported open")
	}
	var mu sync.Mutex
	if got := Guarded(&mu, func() int { return 7 }); got != 7 || !mu.TryLock() {
		t.Fatalf("Guarded: %d, or the lock still held", got)
	}
}

// TestShared: a read sent at or after a caller's instant serves it; one
// sent before does not, and a new one runs.
func TestShared(t *testing.T) {
	var clock int64
	s, reads := NewShared(), 0
	read := func() bool { reads++; return reads%2 == 1 }
	now := func() int64 { return clock }
	clock = 10
	if !s.Read(context.Background(), 5, now, read) || reads != 1 {
		t.Fatalf("first read: reads = %d, want 1", reads)
	}
	clock = 20
	if !s.Read(context.Background(), 10, now, read) || reads != 1 {
		t.Fatalf("a read sent at 10 serves a caller's 10: reads = %d, want 1", reads)
	}
	if s.Read(context.Background(), 11, now, read) || reads != 2 {
		t.Fatalf("a read sent at 10 does not serve a caller's 11: reads = %d, want 2", reads)
	}
}

// TestPutInLoadString: PutIn makes a nil map before it puts; LoadString
// reads "" from a pointer never stored.
func TestPutInLoadString(t *testing.T) {
	var m map[string]int
	PutIn(&m, "a", 1)
	if m["a"] != 1 {
		t.Errorf("PutIn on a nil map: %v", m)
	}
	var p atomic.Pointer[string]
	if LoadString(&p) != "" {
		t.Error("LoadString of nothing stored is not empty")
	}
	s := "x"
	p.Store(&s)
	if LoadString(&p) != "x" {
		t.Error("LoadString does not read what was stored")
	}
}
