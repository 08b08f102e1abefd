package leasestest

// The subtests of the lease rows' fencing: a write on a stale counter or
// another token conflicts and changes nothing, holder writes by another
// owner or another incarnation conflict, and the writes of others
// (Rewind, Checkpoint, ApplyRewind) keep the holder.

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/leasestest/internal/kit"
)

func testStaleCounter(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	l, err := s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "5"})
	if err != nil {
		t.Fatal(err)
	}
	for _, stale := range []int64{l.Counter - 1, l.Counter + 1, 0} {
		old := l
		old.Counter = stale
		for op, err := range writeAll(t, s, old) {
			kit.WantConflict(t, fmt.Sprintf("%s with counter %d (row at %d)", op, stale, l.Counter), err)
		}
		kit.WantRow(t, s, k, l, fmt.Sprintf("writes with stale counter %d changed the row", stale))
	}
}

// testOtherToken: a write naming the row's counter, owner and incarnation
// but another token is a write of another version of the row (one deleted
// and created again, whose counter restarted and came back to the same
// value, or a late copy of a write sent before): it conflicts and changes
// nothing, whatever the write.
func testOtherToken(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	l, err := s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "5"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Token == "" {
		t.Fatalf("Checkpoint returned the row with no Token: every write makes a new one")
	}
	old := l
	old.Token = l.Token + "x"
	for op, err := range writeAll(t, s, old) {
		kit.WantConflict(t, fmt.Sprintf("%s with another token at the row's counter", op), err)
	}
	kit.WantRow(t, s, k, l, "writes with another token changed the row")
}

func testNonOwner(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	l, err := s.Rewind(kit.Ctx(t), l, leases.Checkpoint{Sequence: "3"}) // so that ApplyRewind has something to apply
	if err != nil {
		t.Fatal(err)
	}
	for _, impostor := range []string{"b", ""} {
		fake := l
		fake.Owner = impostor
		for op, err := range holderWrites(t, s, fake) {
			kit.WantConflict(t, fmt.Sprintf("%s by %q", op, impostor), err)
		}
	}
	kit.WantRow(t, s, k, l, "non-owner writes changed the row")

	// A holder whose lease was taken over can no longer write, even with
	// the counter it last saw.
	taken := kit.MustTake(t, s, l, "b")
	for op, err := range holderWrites(t, s, l) {
		kit.WantConflict(t, op+" by the previous holder", err)
	}
	kit.WantRow(t, s, k, taken, "the previous holder's writes changed the row")

	// A free lease has no holder to write as.
	free, err := s.Release(kit.Ctx(t), taken, leases.Checkpoint{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Checkpoint(kit.Ctx(t), free, leases.Checkpoint{Sequence: "9"})
	kit.WantConflict(t, "Checkpoint of a free lease", err)
	_, err = s.Release(kit.Ctx(t), free, leases.Checkpoint{})
	kit.WantConflict(t, "Release of a free lease", err)
	_, err = s.ApplyRewind(kit.Ctx(t), free)
	kit.WantConflict(t, "ApplyRewind of a free lease", err)
	kit.WantRow(t, s, k, free, "writes as the holder of a free lease changed the row")
}

// holderWrites attempts every holder write with l as the expected state (a
// Rewind with l held, so a Rewind of a held row) and returns each error.
func holderWrites(t *testing.T, s leases.Store, l leases.Lease) map[string]error {
	t.Helper()
	errs := map[string]error{}
	_, errs["Checkpoint"] = s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "7"})
	_, errs["Release"] = s.Release(kit.Ctx(t), l, leases.Checkpoint{Sequence: "7"})
	_, errs["ApplyRewind"] = s.ApplyRewind(kit.Ctx(t), l)
	_, errs["Rewind of a held row"] = s.Rewind(kit.Ctx(t), l, leases.Checkpoint{Sequence: "1"})
	return errs
}

// testOtherIncarnation: a holder write carrying the right owner and counter
// but another incarnation than the row's conflicts and writes nothing: an
// earlier process of the same owner (fenced, restarted) or a second process
// started with the same owner id cannot write a lease another incarnation
// holds. A write with the row's incarnation lands.
func testOtherIncarnation(t *testing.T, s leases.Store) {
	k, l := heldRow(t, s)
	l, err := s.Rewind(kit.Ctx(t), l, leases.Checkpoint{Sequence: "3"}) // so that ApplyRewind has something to apply
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{kit.IncOf("a") + "-2", "x"} {
		fake := l
		fake.Incarnation = other
		for op, err := range holderWrites(t, s, fake) {
			what := fmt.Sprintf("%s by owner %q, incarnation %q, of a row held by incarnation %q", op, l.Owner, other, l.Incarnation)
			kit.WantConflict(t, what, err)
			var ce *leases.ConflictError
			if errors.As(err, &ce) && ce.ExpectedIncarnation != other {
				t.Errorf("%s: the conflict names expected incarnation %q, want %q", what, ce.ExpectedIncarnation, other)
			}
		}
		kit.WantRow(t, s, k, l, fmt.Sprintf("writes by incarnation %q changed the row", other))
	}

	// A new incarnation of the owner takes the row: the old one's writes,
	// even made with the new counter, conflict.
	next, err := s.(leases.Membership).TakeAs(kit.Ctx(t), l, l.Owner, kit.IncOf("a")+"-new")
	if err != nil {
		t.Fatal(err)
	}
	old := next
	old.Incarnation = l.Incarnation
	for op, err := range holderWrites(t, s, old) {
		kit.WantConflict(t, op+" by the incarnation the row was taken from", err)
	}
	kit.WantRow(t, s, k, next, "the old incarnation's writes changed the row")

	// The holding incarnation writes.
	got, err := s.ApplyRewind(kit.Ctx(t), next)
	if err != nil {
		t.Fatalf("ApplyRewind by the holding incarnation: %v", err)
	}
	kit.CheckWritten(t, s, "ApplyRewind by the holding incarnation", next, got)
	got2, err := s.Checkpoint(kit.Ctx(t), got, leases.Checkpoint{Sequence: "4"})
	if err != nil {
		t.Fatalf("Checkpoint by the holding incarnation: %v", err)
	}
	kit.CheckWritten(t, s, "Checkpoint by the holding incarnation", got, got2)
	got3, err := s.Release(kit.Ctx(t), got2, leases.Checkpoint{})
	if err != nil {
		t.Fatalf("Release by the holding incarnation: %v", err)
	}
	kit.CheckWritten(t, s, "Release by the holding incarnation", got2, got3)
}

// testOthersKeepHolder: a Rewind of a held row (an operator's write) and
// the holder's writes other than Release (Checkpoint, ApplyRewind) leave
// Owner and Incarnation as they are: a write that moved them would hand the
// lease to nobody, or to a holder that is not reading it.
func testOthersKeepHolder(t *testing.T, s leases.Store) {
	_, l := heldRow(t, s)
	steps := []struct {
		op string
		do func(leases.Lease) (leases.Lease, error)
	}{
		{"Rewind of a held row", func(l leases.Lease) (leases.Lease, error) {
			return s.Rewind(kit.Ctx(t), l, leases.Checkpoint{Sequence: "10"})
		}},
		{"second Rewind of a held row", func(l leases.Lease) (leases.Lease, error) {
			return s.Rewind(kit.Ctx(t), l, leases.Checkpoint{Sequence: "8"})
		}},
		{"Checkpoint", func(l leases.Lease) (leases.Lease, error) {
			return s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "20"})
		}},
		{"ApplyRewind", func(l leases.Lease) (leases.Lease, error) { return s.ApplyRewind(kit.Ctx(t), l) }},
	}
	for _, st := range steps {
		got, err := st.do(l)
		if err != nil {
			t.Fatalf("%s at counter %d: %v", st.op, l.Counter, err)
		}
		kit.CheckWritten(t, s, st.op, l, got)
		if got.Owner != l.Owner || got.Incarnation != l.Incarnation {
			t.Fatalf("%s changed the holder from (%q, %q) to (%q, %q)", st.op, l.Owner, l.Incarnation, got.Owner, got.Incarnation)
		}
		l = got
	}
	if l.Checkpoint.Sequence != "8" || !l.RewindTo.IsZero() {
		t.Fatalf("after the steps: %+v, want checkpoint 8 (the second rewind, applied) and no rewind pending", l)
	}

	// A Rewind of a free row leaves it free.
	free, err := s.Release(kit.Ctx(t), l, leases.Checkpoint{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Rewind(kit.Ctx(t), free, leases.Checkpoint{Sequence: "5"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != "" || got.Incarnation != "" {
		t.Fatalf("Rewind of a free row: owner %q, incarnation %q; want it free", got.Owner, got.Incarnation)
	}
}
