// Package leasestest is the conformance suite of leases.Store: every
// implementation, in this module or outside it, runs it from a test:
//
//	func TestConformance(t *testing.T) {
//		leasestest.Run(t, func(t *testing.T) leases.Store { return memory.New() })
//	}
//
// The suite checks the contract documented on leases.Store and in the
// "Writing a Store" section of package leases: conditional creation, a
// counter bumped by every write, conflicts that change nothing, fencing of
// holders' writes, exactly one winner among racing takers, a Renew that
// always moves ExpiresAt later (the sign of life takers watch) while requests
// leave Owner and ExpiresAt alone, the context honoured, and, for a Store
// that implements leases.Checker, a Check that passes on a working store and
// honours its context. For a Store that implements leases.Membership, the
// subtests of Membership check the membership rows (conditional heartbeats,
// replacements and removals, one winner among racing incarnations of an
// owner, rows kept apart from lease rows) and TakeAs.
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

// Run runs the conformance suite as subtests of t. newStore is called once
// per subtest; it may return the same store each time (every subtest uses
// keys of its own) or a fresh one. The subtest Checker is skipped for a
// store that does not implement leases.Checker, the subtests of Membership
// for one that does not implement leases.Membership.
//
// Membership rows have fixed keys, so subtests that share a store share
// them (each uses owner ids of its own): the store's membership rows must
// start empty, as on a fresh table, since Membership/UntouchedRowsAreEmpty
// checks that rows nobody wrote read as no members.
func Run(t *testing.T, newStore func(t *testing.T) leases.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s leases.Store)
	}{
		{"CreateWhenAbsent", testCreateWhenAbsent},
		{"CreateWhenPresentConflicts", testCreateWhenPresent},
		{"WriteBeforeCreateIsNotFound", testWriteBeforeCreate},
		{"EveryWriteBumpsCounter", testEveryWriteBumpsCounter},
		{"StaleCounterConflictsAndChangesNothing", testStaleCounter},
		{"HolderWritesByNonOwnerConflict", testNonOwner},
		{"ReleaseKeepsCheckpoint", testReleaseKeepsCheckpoint},
		{"ReleaseWritesFinalCheckpoint", testReleaseFinalCheckpoint},
		{"CheckpointValues", testCheckpointValues},
		{"HandoffRequest", testHandoff},
		{"RewindFreeRow", testRewindFree},
		{"RewindHeldRow", testRewindHeld},
		{"ExpiresAt", testExpiresAt},
		{"RenewMovesExpiresAtLater", testRenewMovesExpiresAt},
		{"RequestsAreNoSignOfLife", testRequestsKeepSignOfLife},
		{"RacingTakersOneWins", testTakeRace},
		{"StreamsAreIndependent", testStreamsIndependent},
		{"StreamARNKeys", testStreamARN},
		{"InvalidArguments", testInvalidArguments},
		{"CancelledContext", testCancelledContext},
		{"Checker", testChecker},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
	t.Run("Membership", func(t *testing.T) { runMembership(t, newStore) })
}

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

const ttl = 10 * time.Second

func mustCreate(t *testing.T, s leases.Store, k leases.Key) leases.Lease {
	t.Helper()
	l, err := s.Create(ctx(t), k)
	if err != nil {
		t.Fatalf("Create(%s): %v", k, err)
	}
	return l
}

func mustGet(t *testing.T, s leases.Store, k leases.Key) leases.Lease {
	t.Helper()
	l, err := s.Get(ctx(t), k)
	if err != nil {
		t.Fatalf("Get(%s): %v", k, err)
	}
	return l
}

func mustTake(t *testing.T, s leases.Store, l leases.Lease, owner string) leases.Lease {
	t.Helper()
	got, err := s.Take(ctx(t), l, owner, ttl)
	if err != nil {
		t.Fatalf("Take(%s, %q) at counter %d: %v", l.Key, owner, l.Counter, err)
	}
	return got
}

// same compares the fields a store persists. ExpiresAt is compared at
// millisecond precision, the precision stores are required to keep.
func same(a, b leases.Lease) bool {
	return a.Key == b.Key && a.Owner == b.Owner && a.Incarnation == b.Incarnation && a.Counter == b.Counter &&
		a.ExpiresAt.UnixMilli() == b.ExpiresAt.UnixMilli() && a.Checkpoint == b.Checkpoint &&
		a.HandoffTo == b.HandoffTo && a.RewindTo == b.RewindTo && a.Token == b.Token
}

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

func testCreateWhenAbsent(t *testing.T, s leases.Store) {
	k := newKey(t)
	if _, err := s.Get(ctx(t), k); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Get before Create: %v, want ErrNotFound", err)
	}
	l := mustCreate(t, s, k)
	if l.Key != k || l.Owner != "" || l.Counter != 1 || !l.Checkpoint.IsZero() || l.HandoffTo != "" || l.Token == "" || l.Held() {
		t.Fatalf("Create returned %+v, want a free row at counter 1 with a token and no checkpoint", l)
	}
	if got := mustGet(t, s, k); !same(got, l) {
		t.Fatalf("Get after Create = %+v, want %+v", got, l)
	}
}

func testCreateWhenPresent(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	_, err := s.Create(ctx(t), k)
	wantConflict(t, "second Create", err)
	wantRow(t, s, k, l, "second Create changed the row")
}

func testWriteBeforeCreate(t *testing.T, s leases.Store) {
	k := newKey(t)
	ghost := leases.Lease{Key: k, Owner: "a", Counter: 1}
	for op, err := range writeAll(t, s, ghost) {
		if !errors.Is(err, leases.ErrNotFound) && !errors.Is(err, leases.ErrConflict) {
			t.Errorf("%s on a missing row: %v, want ErrNotFound or ErrConflict", op, err)
		}
	}
	if _, err := s.Get(ctx(t), k); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("writes on a missing row created it: Get = %v", err)
	}
}

// writeAll attempts every write with l as the expected state and returns
// each error.
func writeAll(t *testing.T, s leases.Store, l leases.Lease) map[string]error {
	t.Helper()
	errs := map[string]error{}
	_, errs["Take"] = s.Take(ctx(t), l, "other", ttl)
	_, errs["Renew"] = s.Renew(ctx(t), l, ttl)
	_, errs["Checkpoint"] = s.Checkpoint(ctx(t), l, leases.Checkpoint{Sequence: "999"})
	_, errs["Release"] = s.Release(ctx(t), l, leases.Checkpoint{})
	_, errs["RequestHandoff"] = s.RequestHandoff(ctx(t), l, "other")
	_, errs["Rewind"] = s.Rewind(ctx(t), l, leases.Checkpoint{Sequence: "1"})
	_, errs["ApplyRewind"] = s.ApplyRewind(ctx(t), l)
	return errs
}

func testEveryWriteBumpsCounter(t *testing.T, s leases.Store) {
	k := newKey(t)
	l := mustCreate(t, s, k)
	steps := []struct {
		op string
		do func(leases.Lease) (leases.Lease, error)
	}{
		{"Take", func(l leases.Lease) (leases.Lease, error) { return s.Take(ctx(t), l, "a", ttl) }},
		{"Renew", func(l leases.Lease) (leases.Lease, error) { return s.Renew(ctx(t), l, ttl) }},
		{"Checkpoint", func(l leases.Lease) (leases.Lease, error) {
			return s.Checkpoint(ctx(t), l, leases.Checkpoint{Sequence: "100"})
		}},
		{"RequestHandoff", func(l leases.Lease) (leases.Lease, error) { return s.RequestHandoff(ctx(t), l, "b") }},
		{"Renew after handoff request", func(l leases.Lease) (leases.Lease, error) { return s.Renew(ctx(t), l, ttl) }},
		{"Release", func(l leases.Lease) (leases.Lease, error) { return s.Release(ctx(t), l, leases.Checkpoint{}) }},
		{"Take by b", func(l leases.Lease) (leases.Lease, error) { return s.Take(ctx(t), l, "b", ttl) }},
		{"Take over by c", func(l leases.Lease) (leases.Lease, error) { return s.Take(ctx(t), l, "c", ttl) }},
	}
	for _, st := range steps {
		got, err := st.do(l)
		if err != nil {
			t.Fatalf("%s at counter %d: %v", st.op, l.Counter, err)
		}
		checkWritten(t, s, st.op, l, got)
		l = got
	}
	if l.Owner != "c" || l.Checkpoint.Sequence != "100" {
		t.Fatalf("final row %+v, want owner c and checkpoint 100", l)
	}
}

func testStaleCounter(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	l, err := s.Checkpoint(ctx(t), l, leases.Checkpoint{Sequence: "5"})
	if err != nil {
		t.Fatal(err)
	}
	for _, stale := range []int64{l.Counter - 1, l.Counter + 1, 0} {
		old := l
		old.Counter = stale
		for op, err := range writeAll(t, s, old) {
			wantConflict(t, fmt.Sprintf("%s with counter %d (row at %d)", op, stale, l.Counter), err)
		}
		wantRow(t, s, k, l, fmt.Sprintf("writes with stale counter %d changed the row", stale))
	}
}

func testNonOwner(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	for _, impostor := range []string{"b", ""} {
		fake := l
		fake.Owner = impostor
		_, err := s.Renew(ctx(t), fake, ttl)
		wantConflict(t, fmt.Sprintf("Renew by %q", impostor), err)
		_, err = s.Checkpoint(ctx(t), fake, leases.Checkpoint{Sequence: "7"})
		wantConflict(t, fmt.Sprintf("Checkpoint by %q", impostor), err)
		_, err = s.Release(ctx(t), fake, leases.Checkpoint{Sequence: "7"})
		wantConflict(t, fmt.Sprintf("Release by %q", impostor), err)
		_, err = s.RequestHandoff(ctx(t), fake, "x")
		wantConflict(t, fmt.Sprintf("RequestHandoff naming holder %q", impostor), err)
	}
	wantRow(t, s, k, l, "non-owner writes changed the row")

	// A holder whose lease was taken over can no longer checkpoint, even
	// with the counter it last saw.
	taken := mustTake(t, s, l, "b")
	_, err := s.Checkpoint(ctx(t), l, leases.Checkpoint{Sequence: "8"})
	wantConflict(t, "Checkpoint by the previous holder", err)
	if got := mustGet(t, s, k); !same(got, taken) {
		t.Fatalf("previous holder's checkpoint changed the row: %+v", got)
	}

	// A free lease has no holder to write as.
	free, err := s.Release(ctx(t), taken, leases.Checkpoint{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Renew(ctx(t), free, ttl)
	wantConflict(t, "Renew of a free lease", err)
	_, err = s.Checkpoint(ctx(t), free, leases.Checkpoint{Sequence: "9"})
	wantConflict(t, "Checkpoint of a free lease", err)
}

func testReleaseKeepsCheckpoint(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	cp := leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588898", SubSequence: 3}
	l, err := s.Checkpoint(ctx(t), l, cp)
	if err != nil {
		t.Fatal(err)
	}
	l, err = s.Release(ctx(t), l, leases.Checkpoint{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Owner != "" || l.Held() || l.Checkpoint != cp || l.HandoffTo != "" {
		t.Fatalf("after Release: %+v, want free with checkpoint %v", l, cp)
	}
	// A released lease can be taken at once, and the taker sees the checkpoint.
	l = mustTake(t, s, mustGet(t, s, k), "b")
	if l.Checkpoint != cp {
		t.Fatalf("after Take of a released lease: checkpoint %v, want %v", l.Checkpoint, cp)
	}
}

func testReleaseFinalCheckpoint(t *testing.T, s leases.Store) {
	_, l := heldRow(t, s)
	final := leases.Checkpoint{Sequence: leases.ShardEnd}
	got, err := s.Release(ctx(t), l, final)
	if err != nil {
		t.Fatal(err)
	}
	checkWritten(t, s, "Release with final checkpoint", l, got)
	if got.Checkpoint != final || got.Held() {
		t.Fatalf("after Release with %v: %+v", final, got)
	}
}

func testCheckpointValues(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	for _, cp := range []leases.Checkpoint{
		{Sequence: "1"},
		{Sequence: "49590338271490256608559692538361571095921575989136588898", SubSequence: 0},
		{Sequence: "49590338271490256608559692538361571095921575989136588899", SubSequence: 41},
		{Sequence: "49590338271490256608559692538361571095921575989136588899"}, // sub-sequence cleared
		{Sequence: "2"}, // a checkpoint may move back (rewind); the store does not judge
		{Sequence: leases.ShardEnd},
	} {
		var err error
		l, err = s.Checkpoint(ctx(t), l, cp)
		if err != nil {
			t.Fatalf("Checkpoint(%v): %v", cp, err)
		}
		if got := mustGet(t, s, k); got.Checkpoint != cp {
			t.Fatalf("after Checkpoint(%v) the store holds %v", cp, got.Checkpoint)
		}
	}
}

func testHandoff(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	asked, err := s.RequestHandoff(ctx(t), l, "b")
	if err != nil {
		t.Fatal(err)
	}
	if asked.HandoffTo != "b" || asked.Owner != "a" {
		t.Fatalf("after RequestHandoff: %+v, want owner a, handoff to b", asked)
	}
	// The holder's renewal with the counter it knew conflicts; re-read, it
	// still holds the lease and sees the request.
	_, err = s.Renew(ctx(t), l, ttl)
	wantConflict(t, "Renew after a handoff request", err)
	cur := mustGet(t, s, k)
	if cur.Owner != "a" || cur.HandoffTo != "b" {
		t.Fatalf("re-read after handoff request: %+v", cur)
	}
	renewed, err := s.Renew(ctx(t), cur, ttl)
	if err != nil || renewed.HandoffTo != "b" {
		t.Fatalf("Renew at the current counter: %+v, %v; want success keeping the request", renewed, err)
	}
	released, err := s.Release(ctx(t), renewed, leases.Checkpoint{Sequence: "77"})
	if err != nil {
		t.Fatal(err)
	}
	if released.HandoffTo != "" || released.Held() {
		t.Fatalf("after Release: %+v, want free with no handoff", released)
	}
	// A request on a free lease conflicts: there is nobody to hand over.
	_, err = s.RequestHandoff(ctx(t), released, "b")
	wantConflict(t, "RequestHandoff on a free lease", err)
	// Take clears a pending request.
	taken := mustTake(t, s, mustTake(t, s, mustGet(t, s, k), "a"), "c")
	if taken.HandoffTo != "" {
		t.Fatal("Take kept HandoffTo")
	}
	asked, err = s.RequestHandoff(ctx(t), taken, "b")
	if err != nil {
		t.Fatal(err)
	}
	if took := mustTake(t, s, asked, "b"); took.HandoffTo != "" || took.Owner != "b" {
		t.Fatalf("Take after a request: %+v", took)
	}
}

func testRewindFree(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	l, err := s.Release(ctx(t), l, leases.Checkpoint{Sequence: "900"})
	if err != nil {
		t.Fatal(err)
	}
	to := leases.Checkpoint{Sequence: "100", SubSequence: 2}
	got, err := s.Rewind(ctx(t), l, to)
	if err != nil {
		t.Fatalf("Rewind of a free row: %v", err)
	}
	checkWritten(t, s, "Rewind of a free row", l, got)
	if got.Checkpoint != to || !got.RewindTo.IsZero() || got.Held() {
		t.Fatalf("after Rewind of a free row: %+v, want checkpoint %v at once", got, to)
	}
	// A row taken since it was read is not rewritten as free.
	taken := mustTake(t, s, got, "b")
	free := taken
	free.Owner = ""
	_, err = s.Rewind(ctx(t), free, leases.Checkpoint{Sequence: "5"})
	wantConflict(t, "Rewind as free of a held row", err)
	if cur := mustGet(t, s, k); !same(cur, taken) {
		t.Fatalf("the refused Rewind changed the row: %+v", cur)
	}
	if _, err := s.Rewind(ctx(t), taken, leases.Checkpoint{}); err == nil || errors.Is(err, leases.ErrConflict) {
		t.Fatalf("Rewind to a zero checkpoint: %v, want a validation error", err)
	}
}

func testRewindHeld(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	l, err := s.Checkpoint(ctx(t), l, leases.Checkpoint{Sequence: "900"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ApplyRewind(ctx(t), l)
	wantConflict(t, "ApplyRewind with no rewind pending", err)

	to := leases.Checkpoint{Sequence: "100"}
	asked, err := s.Rewind(ctx(t), l, to)
	if err != nil {
		t.Fatalf("Rewind of a held row: %v", err)
	}
	checkWritten(t, s, "Rewind of a held row", l, asked)
	if asked.RewindTo != to || asked.Checkpoint.Sequence != "900" || asked.Owner != "a" {
		t.Fatalf("after Rewind of a held row: %+v, want RewindTo %v, checkpoint and owner kept", asked, to)
	}
	// The holder's next write with the counter it knew conflicts; it re-reads
	// and applies the rewind.
	_, err = s.Renew(ctx(t), l, ttl)
	wantConflict(t, "Renew after a rewind request", err)
	// A normal checkpoint keeps the pending rewind.
	cp, err := s.Checkpoint(ctx(t), mustGet(t, s, k), leases.Checkpoint{Sequence: "950"})
	if err != nil || cp.RewindTo != to {
		t.Fatalf("Checkpoint with a rewind pending: %+v, %v; want RewindTo kept", cp, err)
	}
	// Release and Take keep it too, for the next holder to apply.
	rel, err := s.Release(ctx(t), cp, leases.Checkpoint{})
	if err != nil || rel.RewindTo != to {
		t.Fatalf("Release with a rewind pending: %+v, %v; want RewindTo kept", rel, err)
	}
	next := mustTake(t, s, rel, "b")
	if next.RewindTo != to {
		t.Fatalf("Take with a rewind pending: %+v, want RewindTo kept", next)
	}
	// A non-holder cannot apply it.
	fake := next
	fake.Owner = "a"
	_, err = s.ApplyRewind(ctx(t), fake)
	wantConflict(t, "ApplyRewind by a non-holder", err)
	applied, err := s.ApplyRewind(ctx(t), next)
	if err != nil {
		t.Fatalf("ApplyRewind: %v", err)
	}
	checkWritten(t, s, "ApplyRewind", next, applied)
	if applied.Checkpoint != to || !applied.RewindTo.IsZero() || applied.Owner != "b" {
		t.Fatalf("after ApplyRewind: %+v, want checkpoint %v and no rewind pending", applied, to)
	}
}

func testExpiresAt(t *testing.T, s leases.Store) {
	k := newKey(t)
	l := mustCreate(t, s, k)
	if !l.ExpiresAt.IsZero() {
		t.Fatalf("a new row expires at %v, want zero", l.ExpiresAt)
	}
	l = mustTake(t, s, l, "a")
	if l.ExpiresAt.IsZero() {
		t.Fatal("Take wrote no ExpiresAt")
	}
	first := l.ExpiresAt
	l, err := s.Renew(ctx(t), l, 2*ttl)
	if err != nil {
		t.Fatal(err)
	}
	// Renewing with twice the duration moves the expiry by at least one
	// duration, whatever the clock did in between (stores may use a fake one).
	if d := l.ExpiresAt.Sub(first); d < ttl-time.Millisecond {
		t.Fatalf("Renew(2×%v) moved ExpiresAt by %v", ttl, d)
	}
	l, err = s.Release(ctx(t), l, leases.Checkpoint{})
	if err != nil {
		t.Fatal(err)
	}
	if !l.ExpiresAt.IsZero() {
		t.Fatalf("a released row expires at %v, want zero", l.ExpiresAt)
	}
}

func testTakeRace(t *testing.T, s leases.Store) {
	const takers, rounds = 50, 100
	k := newKey(t)
	l := mustCreate(t, s, k)
	for round := range rounds {
		_, l = raceTake(t, s, k, l, round, takers, "Take", func(i int) (leases.Lease, error) {
			return s.Take(ctx(t), l, fmt.Sprintf("owner-%d", i), ttl)
		})
	}
}

func testStreamsIndependent(t *testing.T, s leases.Store) {
	base := newKey(t)
	k1 := leases.Key{Stream: base.Stream + "-one", Shard: base.Shard}
	k2 := leases.Key{Stream: base.Stream + "-two", Shard: base.Shard}
	l1 := mustTake(t, s, mustCreate(t, s, k1), "a")
	if _, err := s.Get(ctx(t), k2); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Get of the other stream's key: %v, want ErrNotFound", err)
	}
	l2 := mustCreate(t, s, k2)
	if _, err := s.Checkpoint(ctx(t), l1, leases.Checkpoint{Sequence: "11"}); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, k2); !same(got, l2) {
		t.Fatalf("writes to %s changed %s: %+v", k1, k2, got)
	}
	// The same counter value on the other key does not make a stale write land.
	l2, err := s.Take(ctx(t), l2, "b", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, k1); got.Owner != "a" || got.Checkpoint.Sequence != "11" {
		t.Fatalf("writes to %s changed %s: %+v", k2, k1, got)
	}
	_ = l2
}

func testStreamARN(t *testing.T, s leases.Store) {
	base := newKey(t)
	arn := "arn:aws:kinesis:eu-west-1:123456789012:stream/" + base.Stream
	k, err := leases.ParseKey(arn + ":shardId-000000000007")
	if err != nil {
		t.Fatal(err)
	}
	if k.Stream != arn || k.Shard != "shardId-000000000007" {
		t.Fatalf("ParseKey split an ARN key into %q and %q", k.Stream, k.Shard)
	}
	l := mustTake(t, s, mustCreate(t, s, k), "a")
	if got := mustGet(t, s, k); !same(got, l) || got.Key != k {
		t.Fatalf("ARN key round trip: %+v", got)
	}
}

func testInvalidArguments(t *testing.T, s leases.Store) {
	k := newKey(t)
	l := mustCreate(t, s, k)
	bad := leases.Key{Stream: k.Stream, Shard: ""}
	_, err := s.Create(ctx(t), bad)
	wantInvalid(t, "Create with an empty shard id", err)
	_, err = s.Take(ctx(t), l, "", ttl)
	wantInvalid(t, "Take with an empty owner", err)
	_, err = s.Take(ctx(t), l, "a", 0)
	wantInvalid(t, "Take with a zero lease duration", err)
	held := mustTake(t, s, l, "a")
	_, err = s.Checkpoint(ctx(t), held, leases.Checkpoint{})
	wantInvalid(t, "Checkpoint with an empty sequence number", err)
	_, err = s.RequestHandoff(ctx(t), held, "")
	wantInvalid(t, "RequestHandoff to nobody", err)
	wantRow(t, s, k, held, "invalid writes changed the row")
}

func testCancelledContext(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	for name, c := range deadContexts(t) {
		calls := map[string]func() error{
			"Get": func() error { _, err := s.Get(c, k); return err },
			"Create": func() error {
				_, err := s.Create(c, leases.Key{Stream: k.Stream, Shard: "shardId-000000000001"})
				return err
			},
			"Take":           func() error { _, err := s.Take(c, l, "b", ttl); return err },
			"Renew":          func() error { _, err := s.Renew(c, l, ttl); return err },
			"Checkpoint":     func() error { _, err := s.Checkpoint(c, l, leases.Checkpoint{Sequence: "3"}); return err },
			"Release":        func() error { _, err := s.Release(c, l, leases.Checkpoint{}); return err },
			"RequestHandoff": func() error { _, err := s.RequestHandoff(c, l, "b"); return err },
			"Rewind":         func() error { _, err := s.Rewind(c, l, leases.Checkpoint{Sequence: "1"}); return err },
			"ApplyRewind":    func() error { _, err := s.ApplyRewind(c, l); return err },
		}
		wantDeadCalls(t, name, c, calls)
	}
	wantRow(t, s, k, l, "calls with a dead context changed the row")
}

// sameSignOfLife reports whether a and b show the same holder, not renewed
// in between: the (Owner, ExpiresAt) pair takers compare, at the millisecond
// precision stores keep.
func sameSignOfLife(a, b leases.Lease) bool {
	return a.Owner == b.Owner && a.ExpiresAt.UnixMilli() == b.ExpiresAt.UnixMilli()
}

// testRenewMovesExpiresAt: every Renew writes an ExpiresAt later than the one
// it replaces, at millisecond precision, whatever the store's clock does.
// Takers see a renewal only as a change of (Owner, ExpiresAt), and the holder
// counts its lease only from a renewal that changed ExpiresAt, so a Renew
// that repeats it (renewals in one millisecond, a clock that stood still)
// makes the holder stop delivering, and one that goes back can repeat a value
// a taker saw earlier, which makes it take a live lease.
func testRenewMovesExpiresAt(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	renew := func(op string, d time.Duration) {
		t.Helper()
		got, err := s.Renew(ctx(t), l, d)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		checkWritten(t, s, op, l, got)
		if got.Owner != l.Owner {
			t.Fatalf("%s changed the owner from %q to %q", op, l.Owner, got.Owner)
		}
		if got.ExpiresAt.UnixMilli() <= l.ExpiresAt.UnixMilli() {
			t.Fatalf("%s wrote ExpiresAt %v over %v: every Renew must write a later one (at millisecond precision), "+
				"or takers cannot tell it from no renewal at all", op, got.ExpiresAt, l.ExpiresAt)
		}
		l = got
	}
	// Back to back: several renewals fall in one millisecond of a store
	// that is fast enough.
	for i := range 5 {
		renew(fmt.Sprintf("Renew %d of 5 back to back", i+1), ttl)
	}
	// A duration shorter than what is left: now+ttl is earlier than the
	// current ExpiresAt, as after a clock stepped back.
	for i := range 3 {
		renew(fmt.Sprintf("Renew %d of 3 with a duration of 1ms, %v before the current expiry", i+1, time.Until(l.ExpiresAt).Round(time.Millisecond)), time.Millisecond)
	}
	// After a request bumped the counter, the holder re-reads and renews.
	asked, err := s.RequestHandoff(ctx(t), l, "b")
	if err != nil {
		t.Fatal(err)
	}
	l = mustGet(t, s, k)
	if !same(l, asked) {
		t.Fatalf("Get after RequestHandoff = %+v, want %+v", l, asked)
	}
	renew("Renew after a handoff request", time.Millisecond)
}

// testRequestsKeepSignOfLife: the writes of others on a held row
// (RequestHandoff, Rewind) and the holder's writes that are not renewals
// (Checkpoint, ApplyRewind) leave Owner and ExpiresAt as they are. A request
// that moved them would look like the holder renewing: a requester asking a
// dead holder for its lease, or an operator rewinding it, would keep that
// lease from being taken over for as long as the requests go on.
func testRequestsKeepSignOfLife(t *testing.T, s leases.Store) {
	_, l := heldRow(t, s)
	steps := []struct {
		op string
		do func(leases.Lease) (leases.Lease, error)
	}{
		{"RequestHandoff", func(l leases.Lease) (leases.Lease, error) { return s.RequestHandoff(ctx(t), l, "b") }},
		{"second RequestHandoff", func(l leases.Lease) (leases.Lease, error) { return s.RequestHandoff(ctx(t), l, "c") }},
		{"Rewind of a held row", func(l leases.Lease) (leases.Lease, error) {
			return s.Rewind(ctx(t), l, leases.Checkpoint{Sequence: "10"})
		}},
		{"Checkpoint", func(l leases.Lease) (leases.Lease, error) {
			return s.Checkpoint(ctx(t), l, leases.Checkpoint{Sequence: "20"})
		}},
		{"ApplyRewind", func(l leases.Lease) (leases.Lease, error) { return s.ApplyRewind(ctx(t), l) }},
	}
	for _, st := range steps {
		// Let the store's clock move, so that a write that stamps ExpiresAt
		// with it shows.
		time.Sleep(3 * time.Millisecond)
		got, err := st.do(l)
		if err != nil {
			t.Fatalf("%s at counter %d: %v", st.op, l.Counter, err)
		}
		checkWritten(t, s, st.op, l, got)
		if !sameSignOfLife(got, l) {
			t.Fatalf("%s changed (Owner, ExpiresAt) from (%q, %v) to (%q, %v): "+
				"takers would take it for a renewal by the holder", st.op, l.Owner, l.ExpiresAt, got.Owner, got.ExpiresAt)
		}
		l = got
	}

	// A Rewind of a free row leaves it free, with no expiry.
	free, err := s.Release(ctx(t), l, leases.Checkpoint{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Rewind(ctx(t), free, leases.Checkpoint{Sequence: "5"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != "" || !got.ExpiresAt.IsZero() {
		t.Fatalf("Rewind of a free row: owner %q, ExpiresAt %v; want it free with a zero ExpiresAt", got.Owner, got.ExpiresAt)
	}
}

// checkDeadline bounds how long Check may take with a context that is
// already done.
const checkDeadline = 5 * time.Second

// testChecker: a Store that implements leases.Checker passes its own Check
// when it works, writes nothing doing so, and honours a context that is
// done. kinesislease.Service.Run returns Check's error as it is: a Check
// that fails on a working store keeps every service from starting, and one
// that reports a cancelled start as ErrMisconfigured (or blocks) tells the
// operator to fix a table that is fine.
func testChecker(t *testing.T, s leases.Store) {
	ch, ok := s.(leases.Checker)
	if !ok {
		t.Skipf("%T does not implement leases.Checker", s)
	}
	k, l := heldRow(t, s)
	for i := range 2 {
		if err := ch.Check(ctx(t)); err != nil {
			t.Fatalf("Check %d on a working store: %v, want nil", i+1, err)
		}
	}
	wantRow(t, s, k, l, "Check changed a row")

	for name, c := range deadContexts(t) {
		done := make(chan error, 1)
		go func() { done <- ch.Check(c) }()
		select {
		case err := <-done:
			switch {
			case err == nil:
				// A Store with nothing to wait for may ignore ctx.
			case errors.Is(err, leases.ErrMisconfigured):
				t.Errorf("Check with a %s context: %v: a done context is not a misconfiguration", name, err)
			case !errors.Is(err, c.Err()):
				t.Errorf("Check with a %s context: %v, want nil or an error matching %v", name, err, c.Err())
			}
		case <-time.After(checkDeadline):
			t.Errorf("Check with a %s context has not returned after %v", name, checkDeadline)
		}
	}
	wantRow(t, s, k, l, "Check changed a row")
}
