package backoff

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestDelay(t *testing.T) {
	base, ceiling := 100*time.Millisecond, time.Second
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 50: time.Second} {
		for range 100 {
			if d := Delay(n, base, ceiling); d < want/2 || d > want {
				t.Fatalf("Delay(%d) = %v, want in [%v, %v]", n, d, want/2, want)
			}
		}
	}
	for range 100 {
		if d := Jitter(time.Second); d < 900*time.Millisecond || d > 1100*time.Millisecond {
			t.Fatalf("Jitter(1s) = %v", d)
		}
	}
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if err := Sleep(ctx, time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep after cancel = %v, want context.Canceled", err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(0) after cancel = %v", err)
	}
}
