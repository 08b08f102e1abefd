// Package leasestest is the conformance suite of leases.Store: every
// implementation, in this module or outside it, runs it from a test:
//
//	func TestConformance(t *testing.T) {
//		leasestest.Run(t, func(t *testing.T) leases.Store { return memory.New() })
//	}
//
// The suite checks the contract documented on leases.Store,
// leases.Membership and in the "Writing a Store" section of package leases:
// conditional creation, a counter bumped by every write, conflicts that
// change nothing, holder writes fenced by owner and incarnation, exactly one
// winner among racing takers, the holder kept by the writes of others, the
// context honoured, and, for a Store that implements leases.Checker, a Check
// that passes on a working store and honours its context. The subtests of
// Membership check the membership rows (joins bounded by
// driver.RowCapacity, with the count kept through removals and resent
// joins; heartbeats conditional on an existing entry; replacements and
// removals; one winner among racing incarnations of an owner; rows kept
// apart from lease rows), the header (per-row roster versions and the
// vanished counter, whose increments are never lost), TakeAs and CreateAs.
//
// Those subtests are in package membershiptest
// (leases/leasestest/membershiptest), which Run runs as its subtest
// Membership: a Store's tests call only Run. The helpers both use are in
// the internal package kit, below both.
package leasestest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/leasestest/internal/kit"
	"github.com/kinesislease/kinesislease/leases/leasestest/membershiptest"
)

// Run runs the conformance suite as subtests of t. newStore is called once
// per subtest; it may return the same store each time (every subtest uses
// keys of its own) or a fresh one. Every store must implement
// leases.Membership (leases are taken with TakeAs): Run fails at once for
// one that does not. The subtest Checker is skipped for a store that does
// not implement leases.Checker.
//
// Membership rows have fixed keys and hold at most driver.RowCapacity
// entries, so each Membership subtest uses rows of its own (rows 0 to 63,
// handed out in turn, and the highest row, driver.MaxMemberRows-1), and
// owner ids of its own; the membership header is shared, and the subtests
// that share a store check only how their own calls change it. The
// store's membership rows and header must start empty, as on a fresh
// table: Membership/UntouchedRowsAreEmpty and
// Membership/UntouchedHeaderIsZero check that they read as no members and
// no versions.
func Run(t *testing.T, newStore func(t *testing.T) leases.Store) {
	t.Helper()
	if s := newStore(t); !isMembership(s) {
		t.Fatalf("%T does not implement leases.Membership: a Store takes leases with TakeAs, and the consumer refuses a Store without it", s)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s leases.Store)
	}{
		{"CreateWhenAbsent", testCreateWhenAbsent},
		{"CreateWhenPresentConflicts", testCreateWhenPresent},
		{"WriteBeforeCreateIsNotFound", testWriteBeforeCreate},
		{"EveryWriteBumpsCounter", testEveryWriteBumpsCounter},
		{"StaleCounterConflictsAndChangesNothing", testStaleCounter},
		{"OtherTokenConflictsAndChangesNothing", testOtherToken},
		{"HolderWritesByNonOwnerConflict", testNonOwner},
		{"HolderWritesByAnotherIncarnationConflict", testOtherIncarnation},
		{"ReleaseKeepsCheckpoint", testReleaseKeepsCheckpoint},
		{"ReleaseWritesFinalCheckpoint", testReleaseFinalCheckpoint},
		{"CheckpointValues", testCheckpointValues},
		{"ThroughputRoundTrips", testThroughput},
		{"RewindFreeRow", testRewindFree},
		{"RewindHeldRow", testRewindHeld},
		{"OthersWritesKeepTheHolder", testOthersKeepHolder},
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
	t.Run("Membership", func(t *testing.T) { membershiptest.Run(t, newStore) })
}

func isMembership(s leases.Store) bool {
	_, ok := s.(leases.Membership)
	return ok
}

func testCreateWhenAbsent(t *testing.T, s leases.Store) {
	k := kit.NewKey(t)
	if _, err := s.Get(kit.Ctx(t), k); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Get before Create: %v, want ErrNotFound", err)
	}
	l := kit.MustCreate(t, s, k)
	if l.Key != k || l.Owner != "" || l.Incarnation != "" || l.Counter != 1 || !l.Checkpoint.IsZero() || !l.RewindTo.IsZero() || l.Token == "" || l.Held() {
		t.Fatalf("Create returned %+v, want a free row at counter 1 with a token and no checkpoint", l)
	}
	if got := kit.MustGet(t, s, k); !kit.Same(got, l) {
		t.Fatalf("Get after Create = %+v, want %+v", got, l)
	}
}

func testCreateWhenPresent(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	_, err := s.Create(kit.Ctx(t), k)
	kit.WantConflict(t, "second Create", err)
	kit.WantRow(t, s, k, l, "second Create changed the row")
}

func testWriteBeforeCreate(t *testing.T, s leases.Store) {
	k := kit.NewKey(t)
	ghost := leases.Lease{Key: k, Owner: "a", Incarnation: kit.IncOf("a"), Counter: 1}
	for op, err := range writeAll(t, s, ghost) {
		if !errors.Is(err, leases.ErrNotFound) && !errors.Is(err, leases.ErrConflict) {
			t.Errorf("%s on a missing row: %v, want ErrNotFound or ErrConflict", op, err)
		}
	}
	if _, err := s.Get(kit.Ctx(t), k); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("writes on a missing row created it: Get = %v", err)
	}
}

// writeAll attempts every write with l as the expected state and returns
// each error.
func writeAll(t *testing.T, s leases.Store, l leases.Lease) map[string]error {
	t.Helper()
	errs := map[string]error{}
	_, errs["TakeAs"] = kit.Take(t, s, l, "other")
	_, errs["Checkpoint"] = s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "999"})
	_, errs["Release"] = s.Release(kit.Ctx(t), l, leases.Checkpoint{})
	_, errs["Rewind"] = s.Rewind(kit.Ctx(t), l, leases.Checkpoint{Sequence: "1"})
	_, errs["ApplyRewind"] = s.ApplyRewind(kit.Ctx(t), l)
	return errs
}

func testEveryWriteBumpsCounter(t *testing.T, s leases.Store) {
	k := kit.NewKey(t)
	l := kit.MustCreate(t, s, k)
	steps := []struct {
		op string
		do func(leases.Lease) (leases.Lease, error)
	}{
		{"TakeAs", func(l leases.Lease) (leases.Lease, error) { return kit.Take(t, s, l, "a") }},
		{"Checkpoint", func(l leases.Lease) (leases.Lease, error) {
			return s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "200"})
		}},
		{"Rewind of a held row", func(l leases.Lease) (leases.Lease, error) {
			return s.Rewind(kit.Ctx(t), l, leases.Checkpoint{Sequence: "100"})
		}},
		{"ApplyRewind", func(l leases.Lease) (leases.Lease, error) { return s.ApplyRewind(kit.Ctx(t), l) }},
		{"Release", func(l leases.Lease) (leases.Lease, error) { return s.Release(kit.Ctx(t), l, leases.Checkpoint{}) }},
		{"Rewind of a free row", func(l leases.Lease) (leases.Lease, error) {
			return s.Rewind(kit.Ctx(t), l, leases.Checkpoint{Sequence: "100"})
		}},
		{"TakeAs by b", func(l leases.Lease) (leases.Lease, error) { return kit.Take(t, s, l, "b") }},
		{"TakeAs over by c", func(l leases.Lease) (leases.Lease, error) { return kit.Take(t, s, l, "c") }},
	}
	for _, st := range steps {
		got, err := st.do(l)
		if err != nil {
			t.Fatalf("%s at counter %d: %v", st.op, l.Counter, err)
		}
		kit.CheckWritten(t, s, st.op, l, got)
		l = got
	}
	if l.Owner != "c" || l.Checkpoint.Sequence != "100" {
		t.Fatalf("final row %+v, want owner c and checkpoint 100", l)
	}
}

func testReleaseKeepsCheckpoint(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	cp := leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588898", SubSequence: 3}
	l, err := s.Checkpoint(kit.Ctx(t), l, cp)
	if err != nil {
		t.Fatal(err)
	}
	l, err = s.Release(kit.Ctx(t), l, leases.Checkpoint{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Owner != "" || l.Incarnation != "" || l.Held() || l.Checkpoint != cp {
		t.Fatalf("after Release: %+v, want free with checkpoint %v", l, cp)
	}
	// A released lease can be taken at once, and the taker sees the checkpoint.
	l = kit.MustTake(t, s, kit.MustGet(t, s, k), "b")
	if l.Checkpoint != cp {
		t.Fatalf("after TakeAs of a released lease: checkpoint %v, want %v", l.Checkpoint, cp)
	}
}

func testReleaseFinalCheckpoint(t *testing.T, s leases.Store) {
	_, l := heldRow(t, s)
	final := leases.Checkpoint{Sequence: leases.ShardEnd}
	got, err := s.Release(kit.Ctx(t), l, final)
	if err != nil {
		t.Fatal(err)
	}
	kit.CheckWritten(t, s, "Release with final checkpoint", l, got)
	if got.Checkpoint != final || got.Held() {
		t.Fatalf("after Release with %v: %+v", final, got)
	}
}

// testThroughput: the holder writes write Throughput as given (zero
// clears it), Get reads it back, and the others' writes keep it.
func testThroughput(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	hot := leases.Throughput{BytesPerSecond: 1 << 40, RecordsPerSecond: 1234}
	want := func(what string, got leases.Lease, tp leases.Throughput) {
		t.Helper()
		if got.Throughput != tp {
			t.Fatalf("%s: returned throughput %+v, want %+v", what, got.Throughput, tp)
		}
		if row := kit.MustGet(t, s, k); row.Throughput != tp {
			t.Fatalf("%s: the store holds throughput %+v, want %+v", what, row.Throughput, tp)
		}
	}
	l.Throughput = hot
	l = mustWrite(t, "Checkpoint")(s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "10"}))
	want("after Checkpoint", l, hot)
	l.Throughput = leases.Throughput{BytesPerSecond: 5}
	l = mustWrite(t, "Checkpoint")(s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "11"}))
	want("after a second Checkpoint", l, leases.Throughput{BytesPerSecond: 5})
	l.Throughput = hot
	l = mustWrite(t, "Release")(s.Release(kit.Ctx(t), l, leases.Checkpoint{Sequence: "12"}))
	want("after Release", l, hot)
	// A take and a rewind of the free row keep it: a new holder starts
	// from it.
	l = kit.MustTake(t, s, l, "b")
	want("after TakeAs", l, hot)
	l.Throughput = leases.Throughput{}
	l = mustWrite(t, "Checkpoint")(s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "13"}))
	want("after a Checkpoint with none", l, leases.Throughput{})
}

// mustWrite returns a function that returns a write's lease, or ends the
// test with what and the error.
func mustWrite(t *testing.T, what string) func(leases.Lease, error) leases.Lease {
	return func(l leases.Lease, err error) leases.Lease {
		t.Helper()
		return kit.Must(t, l, err, what)
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
		l, err = s.Checkpoint(kit.Ctx(t), l, cp)
		if err != nil {
			t.Fatalf("Checkpoint(%v): %v", cp, err)
		}
		if got := kit.MustGet(t, s, k); got.Checkpoint != cp {
			t.Fatalf("after Checkpoint(%v) the store holds %v", cp, got.Checkpoint)
		}
	}
}

func testRewindFree(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	l, err := s.Release(kit.Ctx(t), l, leases.Checkpoint{Sequence: "900"})
	if err != nil {
		t.Fatal(err)
	}
	to := leases.Checkpoint{Sequence: "100", SubSequence: 2}
	got, err := s.Rewind(kit.Ctx(t), l, to)
	if err != nil {
		t.Fatalf("Rewind of a free row: %v", err)
	}
	kit.CheckWritten(t, s, "Rewind of a free row", l, got)
	if got.Checkpoint != to || !got.RewindTo.IsZero() || got.Held() {
		t.Fatalf("after Rewind of a free row: %+v, want checkpoint %v at once", got, to)
	}
	// A row taken since it was read is not rewritten as free.
	taken := kit.MustTake(t, s, got, "b")
	free := taken
	free.Owner = ""
	_, err = s.Rewind(kit.Ctx(t), free, leases.Checkpoint{Sequence: "5"})
	kit.WantConflict(t, "Rewind as free of a held row", err)
	if cur := kit.MustGet(t, s, k); !kit.Same(cur, taken) {
		t.Fatalf("the refused Rewind changed the row: %+v", cur)
	}
	if _, err := s.Rewind(kit.Ctx(t), taken, leases.Checkpoint{}); err == nil || errors.Is(err, leases.ErrConflict) {
		t.Fatalf("Rewind to a zero checkpoint: %v, want a validation error", err)
	}
}

func testRewindHeld(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	l, err := s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "900"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ApplyRewind(kit.Ctx(t), l)
	kit.WantConflict(t, "ApplyRewind with no rewind pending", err)

	to := leases.Checkpoint{Sequence: "100"}
	asked, err := s.Rewind(kit.Ctx(t), l, to)
	if err != nil {
		t.Fatalf("Rewind of a held row: %v", err)
	}
	kit.CheckWritten(t, s, "Rewind of a held row", l, asked)
	if asked.RewindTo != to || asked.Checkpoint.Sequence != "900" || asked.Owner != "a" {
		t.Fatalf("after Rewind of a held row: %+v, want RewindTo %v, checkpoint and owner kept", asked, to)
	}
	// The holder's next write with the counter it knew conflicts; it re-reads
	// and applies the rewind.
	_, err = s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "920"})
	kit.WantConflict(t, "Checkpoint after a rewind request", err)
	// A normal checkpoint keeps the pending rewind.
	cp, err := s.Checkpoint(kit.Ctx(t), kit.MustGet(t, s, k), leases.Checkpoint{Sequence: "950"})
	if err != nil || cp.RewindTo != to {
		t.Fatalf("Checkpoint with a rewind pending: %+v, %v; want RewindTo kept", cp, err)
	}
	// Release and TakeAs keep it too, for the next holder to apply.
	rel, err := s.Release(kit.Ctx(t), cp, leases.Checkpoint{})
	if err != nil || rel.RewindTo != to {
		t.Fatalf("Release with a rewind pending: %+v, %v; want RewindTo kept", rel, err)
	}
	next := kit.MustTake(t, s, rel, "b")
	if next.RewindTo != to {
		t.Fatalf("TakeAs with a rewind pending: %+v, want RewindTo kept", next)
	}
	// A non-holder cannot apply it.
	fake := next
	fake.Owner, fake.Incarnation = "a", kit.IncOf("a")
	_, err = s.ApplyRewind(kit.Ctx(t), fake)
	kit.WantConflict(t, "ApplyRewind by a non-holder", err)
	applied, err := s.ApplyRewind(kit.Ctx(t), next)
	if err != nil {
		t.Fatalf("ApplyRewind: %v", err)
	}
	kit.CheckWritten(t, s, "ApplyRewind", next, applied)
	if applied.Checkpoint != to || !applied.RewindTo.IsZero() || applied.Owner != "b" {
		t.Fatalf("after ApplyRewind: %+v, want checkpoint %v and no rewind pending", applied, to)
	}
}

// testTakeRace: 50 takers race for one row, 20 times over. Each round is a
// race of its own (all takers released at once on the row as last read),
// so the rounds only repeat the check: 100 of them took 48s of the
// DynamoDB store's suite under -race on two busy cores, 20 take a fifth.
func testTakeRace(t *testing.T, s leases.Store) {
	const takers, rounds = 50, 20
	k := kit.NewKey(t)
	l := kit.MustCreate(t, s, k)
	for round := range rounds {
		_, l = raceTake(t, s, k, l, round, takers, "TakeAs", func(i int) (leases.Lease, error) {
			return s.(leases.Membership).TakeAs(kit.Ctx(t), l, fmt.Sprintf("owner-%d", i), fmt.Sprintf("inc-%d-%d", round, i))
		})
	}
}

func testStreamsIndependent(t *testing.T, s leases.Store) {
	base := kit.NewKey(t)
	k1 := leases.Key{Stream: base.Stream + "-one", Shard: base.Shard}
	k2 := leases.Key{Stream: base.Stream + "-two", Shard: base.Shard}
	l1 := kit.MustTake(t, s, kit.MustCreate(t, s, k1), "a")
	if _, err := s.Get(kit.Ctx(t), k2); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Get of the other stream's key: %v, want ErrNotFound", err)
	}
	l2 := kit.MustCreate(t, s, k2)
	if _, err := s.Checkpoint(kit.Ctx(t), l1, leases.Checkpoint{Sequence: "11"}); err != nil {
		t.Fatal(err)
	}
	if got := kit.MustGet(t, s, k2); !kit.Same(got, l2) {
		t.Fatalf("writes to %s changed %s: %+v", k1, k2, got)
	}
	// The same counter value on the other key does not make a stale write land.
	kit.MustTake(t, s, l2, "b")
	if got := kit.MustGet(t, s, k1); got.Owner != "a" || got.Checkpoint.Sequence != "11" {
		t.Fatalf("writes to %s changed %s: %+v", k2, k1, got)
	}
}

func testStreamARN(t *testing.T, s leases.Store) {
	base := kit.NewKey(t)
	arn := "arn:aws:kinesis:eu-west-1:123456789012:stream/" + base.Stream
	k, err := leases.ParseKey(arn + ":shardId-000000000007")
	if err != nil {
		t.Fatal(err)
	}
	if k.Stream != arn || k.Shard != "shardId-000000000007" {
		t.Fatalf("ParseKey split an ARN key into %q and %q", k.Stream, k.Shard)
	}
	l := kit.MustTake(t, s, kit.MustCreate(t, s, k), "a")
	if got := kit.MustGet(t, s, k); !kit.Same(got, l) || got.Key != k {
		t.Fatalf("ARN key round trip: %+v", got)
	}
}

func testInvalidArguments(t *testing.T, s leases.Store) {
	k := kit.NewKey(t)
	l := kit.MustCreate(t, s, k)
	bad := leases.Key{Stream: k.Stream, Shard: ""}
	_, err := s.Create(kit.Ctx(t), bad)
	kit.WantInvalid(t, "Create with an empty shard id", err)
	held := kit.MustTake(t, s, l, "a")
	_, err = s.Checkpoint(kit.Ctx(t), held, leases.Checkpoint{})
	kit.WantInvalid(t, "Checkpoint with an empty sequence number", err)
	_, err = s.Checkpoint(kit.Ctx(t), held, leases.Checkpoint{SubSequence: 2})
	kit.WantInvalid(t, "Checkpoint with a sub-sequence and no sequence number", err)
	_, err = s.Rewind(kit.Ctx(t), held, leases.Checkpoint{})
	kit.WantInvalid(t, "Rewind to a zero checkpoint", err)
	kit.WantRow(t, s, k, held, "invalid writes changed the row")
}

func testCancelledContext(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	for name, c := range kit.DeadContexts(t) {
		calls := map[string]func() error{
			"Get": func() error { _, err := s.Get(c, k); return err },
			"Create": func() error {
				_, err := s.Create(c, leases.Key{Stream: k.Stream, Shard: "shardId-000000000001"})
				return err
			},
			"TakeAs": func() error {
				_, err := s.(leases.Membership).TakeAs(c, l, "b", kit.IncOf("b"))
				return err
			},
			"Checkpoint":  func() error { _, err := s.Checkpoint(c, l, leases.Checkpoint{Sequence: "3"}); return err },
			"Release":     func() error { _, err := s.Release(c, l, leases.Checkpoint{}); return err },
			"Rewind":      func() error { _, err := s.Rewind(c, l, leases.Checkpoint{Sequence: "1"}); return err },
			"ApplyRewind": func() error { _, err := s.ApplyRewind(c, l); return err },
		}
		kit.WantDeadCalls(t, name, c, calls)
	}
	kit.WantRow(t, s, k, l, "calls with a dead context changed the row")
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
		if err := ch.Check(kit.Ctx(t)); err != nil {
			t.Fatalf("Check %d on a working store: %v, want nil", i+1, err)
		}
	}
	kit.WantRow(t, s, k, l, "Check changed a row")

	for name, c := range kit.DeadContexts(t) {
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
	kit.WantRow(t, s, k, l, "Check changed a row")
}
