package memory_test

import (
	"context"
	"testing"
	"time"

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

// TestConformanceClockStandsStill: with a clock that never moves, every
// Renew still writes a later ExpiresAt.
func TestConformanceClockStandsStill(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	leasestest.Run(t, func(*testing.T) leases.Store {
		return memory.New(memory.WithClock(func() time.Time { return now }))
	})
}

func TestClock(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := memory.New(memory.WithClock(func() time.Time { return now }))
	ctx := context.Background()
	k := leases.Key{Stream: "orders", Shard: "shardId-000000000000"}
	l, err := s.Create(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	l, err = s.Take(ctx, l, "a", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Add(10 * time.Second); !l.ExpiresAt.Equal(want) {
		t.Fatalf("ExpiresAt %v, want %v from the injected clock", l.ExpiresAt, want)
	}
	// The clock stands still: each renewal moves ExpiresAt one millisecond.
	for i := range 3 {
		if l, err = s.Renew(ctx, l, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if want := now.Add(10*time.Second + time.Duration(i+1)*time.Millisecond); !l.ExpiresAt.Equal(want) {
			t.Fatalf("renewal %d with a clock that stands still: ExpiresAt %v, want %v", i+1, l.ExpiresAt, want)
		}
	}
	// The clock moves on: ExpiresAt is now+ttl again.
	now = now.Add(time.Minute)
	if l, err = s.Renew(ctx, l, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if want := now.Add(10 * time.Second); !l.ExpiresAt.Equal(want) {
		t.Fatalf("after the clock moved: ExpiresAt %v, want %v", l.ExpiresAt, want)
	}
}
