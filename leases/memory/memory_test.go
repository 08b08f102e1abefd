package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/testkit/leakcheck"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/leasestest"
	"github.com/kinesislease/kinesislease/leases/memory"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestConformance(t *testing.T) {
	leasestest.Run(t, func(*testing.T) leases.Store { return memory.New() })
}

func TestConformanceSharedStore(t *testing.T) {
	s := memory.New()
	leasestest.Run(t, func(*testing.T) leases.Store { return s })
}

// TestRewindOutlivesItsRow: Delete removes the row but not its rewind
// record, and Create then starts the row at the rewind's position with its
// Rewind id; Clear (a table recreated) removes the records too.
func TestRewindOutlivesItsRow(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	k := leases.Key{Stream: "orders", Shard: "shardId-7"}
	l, err := s.Create(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	to := leases.RewindAtSequence("1234")
	r, err := s.Rewind(ctx, l, to)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Delete(k) {
		t.Fatal("no row to delete")
	}
	again, err := s.Create(ctx, k)
	if err != nil || again.Checkpoint != to || again.Rewind != r.Rewind {
		t.Fatalf("Create after the rewound row was deleted: %+v, %v; want it at %v with Rewind id %q", again, err, to, r.Rewind)
	}
	s.Clear()
	if rec, err := s.LastRewind(ctx, k); err != nil || rec != (leases.RewindRecord{}) {
		t.Fatalf("LastRewind after Clear: %+v, %v; want none", rec, err)
	}
	fresh, err := s.Create(ctx, k)
	if err != nil || !fresh.Checkpoint.IsZero() || fresh.Rewind != "" {
		t.Fatalf("Create after Clear: %+v, %v; want no checkpoint and no Rewind id", fresh, err)
	}
}

// TestTakenMarkOutlivesItsRow: Delete removes the row but not its taken
// mark (MarkTaken), so that a row a late Create makes again is told from a
// new one; Clear (a table recreated) removes the marks too.
func TestTakenMarkOutlivesItsRow(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	k := leases.Key{Stream: "orders", Shard: "shardId-7"}
	if _, err := s.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	if got, err := s.MarkTaken(ctx, k, "first"); err != nil || got != "first" {
		t.Fatalf("MarkTaken of a new row: %q, %v; want its own token", got, err)
	}
	if !s.Delete(k) {
		t.Fatal("no row to delete")
	}
	if _, err := s.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	if got, err := s.MarkTaken(ctx, k, "second"); err != nil || got != "first" {
		t.Fatalf("MarkTaken after the row was deleted and created again: %q, %v; want the first token", got, err)
	}
	s.Clear()
	if got, err := s.MarkTaken(ctx, k, "third"); err != nil || got != "third" {
		t.Fatalf("MarkTaken after Clear: %q, %v; want its own token", got, err)
	}
}

// TestBorn: a Store from New never had an earlier table
// (leases.BornNoPredecessor); Clear recreates it, born then.
func TestBorn(t *testing.T) {
	s := memory.New()
	if h, err := s.Header(context.Background()); err != nil || h.Born != leases.BornNoPredecessor {
		t.Fatalf("New: Header = %+v, %v; want Born %d", h, err, leases.BornNoPredecessor)
	}
	before := time.Now().UnixMilli()
	s.Clear()
	after := time.Now().UnixMilli()
	if h, err := s.Header(context.Background()); err != nil || h.Born < before || h.Born > after {
		t.Fatalf("after Clear: Header = %+v, %v; want Born between %d and %d", h, err, before, after)
	}
}
