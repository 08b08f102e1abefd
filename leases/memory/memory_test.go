package memory_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/leasestest"
	"github.com/kinesislease/kinesislease/leases/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
