package syncx

import "testing"

// TestLatest: each Set counts and wakes the channel handed out before it;
// Stop wakes it too and is reported.
func TestLatest(t *testing.T) {
	var l Latest[bool]
	n, v, stopped, next := l.State()
	if n != 0 || v || stopped {
		t.Fatalf("zero Latest: %d, %v, %v", n, v, stopped)
	}
	l.Set(true)
	select {
	case <-next:
	default:
		t.Fatal("Set did not wake the channel handed out before it")
	}
	n, v, _, next = l.State()
	if n != 1 || !v {
		t.Errorf("after Set(true): %d, %v; want 1, true", n, v)
	}
	select {
	case <-next:
		t.Fatal("a channel handed out after the last Set is closed")
	default:
	}
	l.Stop()
	if _, _, stopped, _ := l.State(); !stopped {
		t.Error("Stop not reported")
	}
	select {
	case <-next:
	default:
		t.Fatal("Stop did not wake the waiters")
	}
}
