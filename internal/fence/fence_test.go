package fence

import (
	"testing"
	"time"
)

const sec = int64(time.Second)

func TestFenceArithmetic(t *testing.T) {
	t.Parallel()
	if got := After(10*sec, 5*time.Second, time.Second); got != 14*sec {
		t.Fatalf("After(10s) = %v, want 14s (timeout less margin after the send)", time.Duration(got))
	}
	cases := []struct {
		name        string
		fence, sent int64
		passed      bool
	}{
		{"sent before the fence", 14 * sec, 13 * sec, false},
		{"sent at the fence: takers may act", 14 * sec, 14 * sec, true},
		{"sent after the fence", 14 * sec, 20 * sec, true},
		{"a new incarnation holds nothing: no fence yet", Fenced, 100 * sec, false},
	}
	for _, c := range cases {
		if got := PassedBefore(c.fence, c.sent); got != c.passed {
			t.Errorf("%s: PassedBefore = %v, want %v", c.name, got, c.passed)
		}
	}
}

// TestHeartbeatDeadline: a heartbeat may take half the time left before the
// fence, never less than half the interval (none left, fenced, or an
// instance that holds nothing yet).
func TestHeartbeatDeadline(t *testing.T) {
	hb := 150 * time.Millisecond
	cases := []struct {
		name       string
		now, fence int64
		want       time.Duration
	}{
		{"right after a heartbeat: half of what is left", 0, int64(350 * time.Millisecond), 175 * time.Millisecond},
		{"much left", 0, int64(2750 * time.Millisecond), 1375 * time.Millisecond},
		{"little left: half the interval", 0, int64(100 * time.Millisecond), hb / 2},
		{"the fence passed", int64(time.Second), int64(500 * time.Millisecond), hb / 2},
		{"fenced", 0, Fenced, hb / 2},
	}
	for _, c := range cases {
		if got := HeartbeatDeadline(c.now, c.fence, hb); got != c.want {
			t.Errorf("%s: HeartbeatDeadline(%d, %d, %v) = %v, want %v", c.name, c.now, c.fence, hb, got, c.want)
		}
	}
}

// TestFenceRunsThroughSuspend: the monotonic clock stops while the machine
// is suspended and the wall clock does not. A process resumed after a
// suspend longer than what was left of its fence must find the fence
// passed, although its monotonic clock says seconds are left (takers,
// whose clocks ran, may have taken its leases meanwhile); a heartbeat sent
// then comes too late to extend it. A wall clock stepped back leaves the
// monotonic instant in charge.
func TestFenceRunsThroughSuspend(t *testing.T) {
	t.Parallel()
	var f Fence
	now := time.Now()
	m, w := int64(now.Sub(epoch)), now.UnixNano()
	f.Store(m + int64(4*time.Second))
	cases := []struct {
		name   string
		dm, dw time.Duration // how far each clock moved since the Store
		passed bool
	}{
		{"both clocks 1s on", time.Second, time.Second, false},
		{"suspended a minute: the monotonic clock 1s on, the wall clock 61s", time.Second, 61 * time.Second, true},
		{"both clocks past the fence", 5 * time.Second, 5 * time.Second, true},
		{"the wall clock stepped back an hour, the monotonic clock past the fence", 5 * time.Second, -time.Hour, true},
		{"the wall clock stepped back an hour, 1s on", time.Second, -time.Hour, false},
	}
	for _, c := range cases {
		// The wall instant of the Store is read a moment after now: allow
		// for it with a millisecond.
		if got := f.PassedAt(m+int64(c.dm), w+int64(c.dw)-int64(time.Millisecond)); got != c.passed {
			t.Errorf("%s: passedAt = %v, want %v", c.name, got, c.passed)
		}
	}
	if l := f.Left(); l <= 0 || l > 4*time.Second {
		t.Errorf("left() right after the Store = %v, want about 4s", l)
	}
	f.Store(Fenced)
	if !f.Passed() || f.Left() > 0 {
		t.Errorf("fenced: passed() = %v, left() = %v; want passed, nothing left", f.Passed(), f.Left())
	}
}
