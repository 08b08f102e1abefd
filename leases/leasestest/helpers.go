package leasestest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

var seq atomic.Int64

// newKey returns a key no other subtest uses.
func newKey(t *testing.T) leases.Key {
	t.Helper()
	name := testName(t)
	stream := fmt.Sprintf("%s-%d-%d", name, time.Now().UnixNano(), seq.Add(1))
	k, err := leases.NewKey(stream, "shardId-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustCreate(t *testing.T, s leases.Store, k leases.Key) leases.Lease {
	t.Helper()
	l, err := s.Create(ctx(t), k)
	return must(t, l, err, "Create(%s)", k)
}

func mustGet(t *testing.T, s leases.Store, k leases.Key) leases.Lease {
	t.Helper()
	l, err := s.Get(ctx(t), k)
	return must(t, l, err, "Get(%s)", k)
}

// must is v, or the test's end with what (a format of args) and err.
func must[T any](t *testing.T, v T, err error, what string, args ...any) T {
	t.Helper()
	if err != nil {
		t.Fatalf(what+": %v", append(args, err)...)
	}
	return v
}

// take is TakeAs by owner's incarnation incOf(owner).
func take(t *testing.T, s leases.Store, l leases.Lease, owner string) (leases.Lease, error) {
	t.Helper()
	return s.(leases.Membership).TakeAs(ctx(t), l, owner, incOf(owner))
}

// incOf is the incarnation mustTake and take name for owner.
func incOf(owner string) string { return "inc-" + owner }

func mustTake(t *testing.T, s leases.Store, l leases.Lease, owner string) leases.Lease {
	t.Helper()
	got, err := take(t, s, l, owner)
	return must(t, got, err, "TakeAs(%s, %q, %q) at counter %d", l.Key, owner, incOf(owner), l.Counter)
}

// same compares the fields a store persists.
func same(a, b leases.Lease) bool { return a == b }

// checkWritten checks that a write returned the row now stored, one counter
// past before, with a new token.
func checkWritten(t *testing.T, s leases.Store, op string, before, got leases.Lease) {
	t.Helper()
	if got.Counter != before.Counter+1 {
		t.Errorf("%s: counter %d, want %d", op, got.Counter, before.Counter+1)
	}
	if got.Token == "" || got.Token == before.Token {
		t.Errorf("%s: token %q after %q: want a new non-empty token", op, got.Token, before.Token)
	}
	if stored := mustGet(t, s, got.Key); !same(stored, got) {
		t.Errorf("%s returned %+v, but the store holds %+v", op, got, stored)
	}
}

func wantConflict(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, leases.ErrConflict) {
		t.Fatalf("%s: error %v, want one matching leases.ErrConflict", op, err)
	}
	var ce *leases.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: error %v (%T) is not a *leases.ConflictError", op, err, err)
	}
}

// testName returns the name of t with its slashes and spaces made dashes.
func testName(t *testing.T) string {
	return strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
}

// deadContexts returns, by name, a cancelled context and one past its
// deadline.
func deadContexts(t *testing.T) map[string]context.Context {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	t.Cleanup(cancel2)
	return map[string]context.Context{"cancelled": cancelled, "past deadline": expired}
}

// wantDeadCalls reports every call, made with the dead context c (named
// name), that does not fail with c's error.
func wantDeadCalls(t *testing.T, name string, c context.Context, calls map[string]func() error) {
	t.Helper()
	want := c.Err()
	for op, call := range calls {
		if err := call(); !errors.Is(err, want) {
			t.Errorf("%s with a %s context: %v, want %v", op, name, err, want)
		}
	}
}

// heldRow creates a row on a new key and takes it as "a".
func heldRow(t *testing.T, s leases.Store) (leases.Key, leases.Lease) {
	t.Helper()
	k := newKey(t)
	return k, mustTake(t, s, mustCreate(t, s, k), "a")
}

// wantRow fails the test unless the row of k is want (as same compares it):
// "what: row, want want".
func wantRow(t *testing.T, s leases.Store, k leases.Key, want leases.Lease, what string) {
	t.Helper()
	if got := mustGet(t, s, k); !same(got, want) {
		t.Fatalf("%s: %+v, want %+v", what, got, want)
	}
}

// wantInvalid reports an error unless err is a validation error: not nil,
// not a conflict.
func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || errors.Is(err, leases.ErrConflict) {
		t.Errorf("%s: %v, want a validation error", what, err)
	}
}

// together runs fn(0) to fn(n-1) in goroutines released at the same moment
// and returns once every one has returned.
func together(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

// raceTake has takers race for l (the row of k, as read last) in round of a
// race, each with take(i), and checks that exactly one wins, that the
// others fail only with conflicts, and that the store holds the winner's
// answer at the next counter; it returns the winner's answer and the row
// as stored.
func raceTake(t *testing.T, s leases.Store, k leases.Key, l leases.Lease, round, takers int, op string,
	take func(i int) (leases.Lease, error),
) (won, stored leases.Lease) {
	t.Helper()
	var (
		wins      atomic.Int64
		winner    atomic.Value
		otherErrs = make(chan error, takers)
	)
	together(takers, func(i int) {
		got, err := take(i)
		switch {
		case err == nil:
			wins.Add(1)
			winner.Store(got)
		case errors.Is(err, leases.ErrConflict):
		default:
			otherErrs <- err
		}
	})
	close(otherErrs)
	for err := range otherErrs {
		t.Fatalf("round %d: %s failed with a non-conflict error: %v", round, op, err)
	}
	if n := wins.Load(); n != 1 {
		t.Fatalf("round %d: %d takers won, want exactly 1", round, n)
	}
	won = winner.Load().(leases.Lease)
	stored = mustGet(t, s, k)
	if !same(stored, won) || stored.Counter != l.Counter+1 {
		t.Fatalf("round %d: the store holds %+v, the winner got %+v (counter before %d)", round, stored, won, l.Counter)
	}
	return won, stored
}
