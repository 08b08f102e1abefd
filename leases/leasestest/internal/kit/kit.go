// Package kit holds the helpers both halves of the conformance suite use:
// package leasestest (the lease rows) and package membershiptest (the
// subtests of leases.Membership, which leasestest.Run runs as its subtest
// Membership). It sits below both, so that neither imports the other for
// them: keys and owner ids no other subtest uses, a context per test, the
// Must* calls that fail the test on an error, TakeAs as an owner's
// incarnation, the checks of a write, of a conflict, of a row, of a
// validation error and of calls with a dead context, and Together, which
// releases goroutines at once.
package kit

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

// NewKey returns a key no other subtest uses.
func NewKey(t *testing.T) leases.Key {
	t.Helper()
	name := TestName(t)
	stream := fmt.Sprintf("%s-%d-%d", name, time.Now().UnixNano(), seq.Add(1))
	k, err := leases.NewKey(stream, "shardId-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// NewOwner returns an owner id no other subtest uses.
func NewOwner(t *testing.T, label string) string {
	t.Helper()
	name := TestName(t)
	if len(name) > 100 {
		name = name[len(name)-100:]
	}
	return fmt.Sprintf("%s-%s-%d-%d", name, label, time.Now().UnixNano(), seq.Add(1))
}

// Ctx is a context for a call of t: done 30 seconds on, or when t ends.
func Ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// MustCreate is Create of k, or the test's end.
func MustCreate(t *testing.T, s leases.Store, k leases.Key) leases.Lease {
	t.Helper()
	l, err := s.Create(Ctx(t), k)
	return Must(t, l, err, "Create(%s)", k)
}

// MustGet is Get of k, or the test's end.
func MustGet(t *testing.T, s leases.Store, k leases.Key) leases.Lease {
	t.Helper()
	l, err := s.Get(Ctx(t), k)
	return Must(t, l, err, "Get(%s)", k)
}

// Must is v, or the test's end with what (a format of args) and err.
func Must[T any](t *testing.T, v T, err error, what string, args ...any) T {
	t.Helper()
	if err != nil {
		t.Fatalf(what+": %v", append(args, err)...)
	}
	return v
}

// Take is TakeAs by owner's incarnation IncOf(owner).
func Take(t *testing.T, s leases.Store, l leases.Lease, owner string) (leases.Lease, error) {
	t.Helper()
	return s.(leases.Membership).TakeAs(Ctx(t), l, owner, IncOf(owner))
}

// IncOf is the incarnation MustTake and Take name for owner.
func IncOf(owner string) string { return "inc-" + owner }

// MustTake is Take, or the test's end.
func MustTake(t *testing.T, s leases.Store, l leases.Lease, owner string) leases.Lease {
	t.Helper()
	got, err := Take(t, s, l, owner)
	return Must(t, got, err, "TakeAs(%s, %q, %q) at counter %d", l.Key, owner, IncOf(owner), l.Counter)
}

// Same compares the fields a store persists.
func Same(a, b leases.Lease) bool { return a == b }

// CheckWritten checks that a write returned the row now stored, one counter
// past before, with a new token.
func CheckWritten(t *testing.T, s leases.Store, op string, before, got leases.Lease) {
	t.Helper()
	if got.Counter != before.Counter+1 {
		t.Errorf("%s: counter %d, want %d", op, got.Counter, before.Counter+1)
	}
	if got.Token == "" || got.Token == before.Token {
		t.Errorf("%s: token %q after %q: want a new non-empty token", op, got.Token, before.Token)
	}
	if stored := MustGet(t, s, got.Key); !Same(stored, got) {
		t.Errorf("%s returned %+v, but the store holds %+v", op, got, stored)
	}
}

// WantConflict fails the test unless err matches leases.ErrConflict and is
// a *leases.ConflictError.
func WantConflict(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, leases.ErrConflict) {
		t.Fatalf("%s: error %v, want one matching leases.ErrConflict", op, err)
	}
	var ce *leases.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: error %v (%T) is not a *leases.ConflictError", op, err, err)
	}
}

// TestName returns the name of t with its slashes and spaces made dashes.
func TestName(t *testing.T) string {
	return strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
}

// DeadContexts returns, by name, a cancelled context and one past its
// deadline.
func DeadContexts(t *testing.T) map[string]context.Context {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	t.Cleanup(cancel2)
	return map[string]context.Context{"cancelled": cancelled, "past deadline": expired}
}

// WantDeadCalls reports every call, made with the dead context c (named
// name), that does not fail with c's error.
func WantDeadCalls(t *testing.T, name string, c context.Context, calls map[string]func() error) {
	t.Helper()
	want := c.Err()
	for op, call := range calls {
		if err := call(); !errors.Is(err, want) {
			t.Errorf("%s with a %s context: %v, want %v", op, name, err, want)
		}
	}
}

// WantRow fails the test unless the row of k is want (as Same compares it):
// "what: row, want want".
func WantRow(t *testing.T, s leases.Store, k leases.Key, want leases.Lease, what string) {
	t.Helper()
	if got := MustGet(t, s, k); !Same(got, want) {
		t.Fatalf("%s: %+v, want %+v", what, got, want)
	}
}

// WantInvalid reports an error unless err is a validation error: not nil,
// not a conflict.
func WantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || errors.Is(err, leases.ErrConflict) {
		t.Errorf("%s: %v, want a validation error", what, err)
	}
}

// Together runs fn(0) to fn(n-1) in goroutines released at the same moment
// and returns once every one has returned.
func Together(n int, fn func(i int)) {
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
