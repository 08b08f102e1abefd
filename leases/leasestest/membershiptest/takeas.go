package membershiptest

// The Membership subtests of the lease rows an incarnation takes and
// creates: TakeAs (conditional on the counter, writing its checkpoint and a
// fill's rewind), Release clearing the incarnation, CreateAs (only if
// absent, free rows recovered), and the rewinds recorded.

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/leasestest/internal/kit"
)

func testTakeAs(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	// A free row: owner and incarnation written.
	k := kit.NewKey(t)
	free := kit.MustCreate(t, s, k)
	got, err := m.TakeAs(kit.Ctx(t), free, "a", "inc-a")
	if err != nil {
		t.Fatalf("TakeAs of a free row: %v", err)
	}
	kit.CheckWritten(t, s, "TakeAs of a free row", free, got)
	if got.Owner != "a" || got.Incarnation != "inc-a" || !got.Held() || got.Checkpoint != free.Checkpoint {
		t.Fatalf("TakeAs of a free row: %+v, want owner a, incarnation inc-a", got)
	}

	// A row held by another owner, with a checkpoint and a pending rewind:
	// owner and incarnation written, checkpoint and rewind kept.
	k2 := leases.Key{Stream: k.Stream, Shard: "shardId-000000000001"}
	l, err := m.TakeAs(kit.Ctx(t), kit.MustCreate(t, s, k2), "a", "inc-a")
	if err != nil {
		t.Fatal(err)
	}
	if l, err = s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "42", SubSequence: 3}); err != nil {
		t.Fatal(err)
	}
	if l, err = s.Rewind(kit.Ctx(t), l, leases.Checkpoint{Sequence: "40"}); err != nil {
		t.Fatal(err)
	}
	got, err = m.TakeAs(kit.Ctx(t), l, "b", "inc-b")
	if err != nil {
		t.Fatalf("TakeAs of a held row: %v", err)
	}
	kit.CheckWritten(t, s, "TakeAs of a held row", l, got)
	switch {
	case got.Owner != "b" || got.Incarnation != "inc-b":
		t.Fatalf("TakeAs: owner %q, incarnation %q; want b, inc-b", got.Owner, got.Incarnation)
	case got.Checkpoint != l.Checkpoint || got.RewindTo != l.RewindTo:
		t.Fatalf("TakeAs: checkpoint %v, rewind %v; want %v and %v kept", got.Checkpoint, got.RewindTo, l.Checkpoint, l.RewindTo)
	}

	// A new incarnation of the same owner takes the row from the old one.
	next, err := m.TakeAs(kit.Ctx(t), got, "b", "inc-b2")
	if err != nil {
		t.Fatalf("TakeAs by a new incarnation of the holder: %v", err)
	}
	kit.CheckWritten(t, s, "TakeAs by a new incarnation", got, next)
	if next.Owner != "b" || next.Incarnation != "inc-b2" {
		t.Fatalf("TakeAs by a new incarnation: %+v", next)
	}
}

func testTakeAsCounter(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	k := kit.NewKey(t)
	l, err := m.TakeAs(kit.Ctx(t), kit.MustCreate(t, s, k), "a", "inc-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, stale := range []int64{l.Counter - 1, l.Counter + 1, 0} {
		old := l
		old.Counter = stale
		_, err := m.TakeAs(kit.Ctx(t), old, "b", "inc-b")
		kit.WantConflict(t, fmt.Sprintf("TakeAs with counter %d (row at %d)", stale, l.Counter), err)
		kit.WantRow(t, s, k, l, fmt.Sprintf("TakeAs with stale counter %d changed the row", stale))
	}
	// The counter alone is not the row: a row recreated after it vanished
	// restarts at counter 1, so a row known with another holder, or none,
	// at the same counter is another row. With a token the token tells
	// (OtherTokenConflictsAndChangesNothing); a Lease with none (not read
	// from a Store) is compared by its holder.
	for _, other := range []struct{ owner, inc string }{{"x", "inc-x"}, {"a", "inc-a-old"}, {"a", ""}, {"", ""}} {
		old := l
		old.Owner, old.Incarnation, old.Token = other.owner, other.inc, ""
		_, err := m.TakeAs(kit.Ctx(t), old, "b", "inc-b")
		kit.WantConflict(t, fmt.Sprintf("TakeAs of the row known held by %q/%q at its counter (held by a/inc-a)", other.owner, other.inc), err)
		kit.WantRow(t, s, k, l, fmt.Sprintf("TakeAs of the row known held by %q/%q changed it", other.owner, other.inc))
	}
	free, err := s.Release(kit.Ctx(t), l, leases.Checkpoint{Sequence: "7"})
	if err != nil {
		t.Fatal(err)
	}
	held := free
	held.Owner, held.Incarnation, held.Token = "a", "inc-a", ""
	_, err = m.TakeAs(kit.Ctx(t), held, "b", "inc-b")
	kit.WantConflict(t, "TakeAs of a free row known held at its counter", err)
	kit.WantRow(t, s, k, free, "TakeAs of a free row known held changed it")
	// A missing row is not created.
	ghost := leases.Lease{Key: leases.Key{Stream: k.Stream, Shard: "shardId-000000000009"}, Counter: 1}
	if _, err := m.TakeAs(kit.Ctx(t), ghost, "b", "inc-b"); !errors.Is(err, leases.ErrNotFound) && !errors.Is(err, leases.ErrConflict) {
		t.Fatalf("TakeAs of a missing row: %v, want ErrNotFound or ErrConflict", err)
	}
	if _, err := s.Get(kit.Ctx(t), ghost.Key); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("TakeAs of a missing row created it: Get = %v", err)
	}
}

func testReleaseClearsIncarnation(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	k := kit.NewKey(t)
	l, err := m.TakeAs(kit.Ctx(t), kit.MustCreate(t, s, k), "a", "inc-a")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Release(kit.Ctx(t), l, leases.Checkpoint{Sequence: "99"})
	if err != nil {
		t.Fatal(err)
	}
	kit.CheckWritten(t, s, "Release after TakeAs", l, got)
	if got.Held() || got.Incarnation != "" || got.Checkpoint.Sequence != "99" {
		t.Fatalf("Release after TakeAs: %+v, want free, no incarnation, checkpoint 99", got)
	}
	// The next holder's TakeAs names its own incarnation.
	next, err := m.TakeAs(kit.Ctx(t), got, "a", "inc-a2")
	if err != nil {
		t.Fatal(err)
	}
	if next.Owner != "a" || next.Incarnation != "inc-a2" {
		t.Fatalf("TakeAs of a released row: %+v, want owner a, incarnation inc-a2", next)
	}
}

// testCreateAs: CreateAs creates a missing row, in one write, held by the
// caller's incarnation with the checkpoint given: counter 1, a new token,
// no rewind pending. The holder writes it at once; others cannot.
func testCreateAs(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	base := kit.NewKey(t)
	tokens := map[string]bool{}
	for i, cp := range []leases.Checkpoint{
		{Sequence: "49590338271490256608559692538361571095921575989136588898", SubSequence: 3},
		{Sequence: "49590338271490256608559692538361571095921575989136588899"},
		{}, // no checkpoint: the holder starts where the subscription says
		{Sequence: leases.ShardEnd},
		leases.RewindAtSequence("1234"),
	} {
		k := leases.Key{Stream: base.Stream, Shard: fmt.Sprintf("shardId-%012d", i)}
		owner, inc := fmt.Sprintf("owner-%d", i), driver.NewIncarnation(i, "abc")
		rewind := ""
		if i%2 == 1 {
			rewind = fmt.Sprintf("rewind-%d", i) // the Rewind id of the copy cp comes from
		}
		l, err := m.CreateAs(kit.Ctx(t), k, owner, inc, cp, rewind)
		if err != nil {
			t.Fatalf("CreateAs(%s, %q, %q, %v) of a missing row: %v", k, owner, inc, cp, err)
		}
		want := leases.Lease{Key: k, Owner: owner, Incarnation: inc, Counter: 1, Checkpoint: cp, Rewind: rewind, Token: l.Token}
		if l != want || l.Token == "" || !l.Held() {
			t.Fatalf("CreateAs(%s, %q, %q, %v): %+v, want %+v with a token", k, owner, inc, cp, l, want)
		}
		if tokens[l.Token] {
			t.Fatalf("CreateAs(%s) wrote the token %q of another write", k, l.Token)
		}
		tokens[l.Token] = true
		kit.WantRow(t, s, k, l, fmt.Sprintf("after CreateAs(%s)", k))

		// Another incarnation of the owner, and another owner, cannot
		// write the row; its holder can.
		for _, fake := range []leases.Lease{
			func() leases.Lease { f := l; f.Incarnation = inc + "-old"; return f }(),
			func() leases.Lease { f := l; f.Owner = owner + "-other"; return f }(),
		} {
			_, err := s.Checkpoint(kit.Ctx(t), fake, leases.Checkpoint{Sequence: "5"})
			kit.WantConflict(t, fmt.Sprintf("Checkpoint by (%q, %q) of a row CreateAs made for (%q, %q)", fake.Owner, fake.Incarnation, owner, inc), err)
		}
		kit.WantRow(t, s, k, l, "writes by others changed the row CreateAs made")
		got, err := s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "5"})
		if err != nil {
			t.Fatalf("Checkpoint by the incarnation CreateAs made the holder: %v", err)
		}
		kit.CheckWritten(t, s, "Checkpoint after CreateAs", l, got)
		if got.Owner != owner || got.Incarnation != inc {
			t.Fatalf("Checkpoint after CreateAs: %+v, want the holder kept", got)
		}
		tokens[got.Token] = true
	}
}

// testCreateAsFree: CreateAs with no owner creates the row free and
// recovered (Recovered is the creation's token); TakeAs and a holder write
// whose copy carries Recovered keep it, and a holder write whose copy has
// none clears it. Create and a held CreateAs make rows that are not
// recovered.
func testCreateAsFree(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	k := kit.NewKey(t)
	cp := leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588898"}
	l, err := m.CreateAs(kit.Ctx(t), k, "", "", cp, "rewind-1")
	if err != nil {
		t.Fatalf("CreateAs(%s) with no owner: %v", k, err)
	}
	want := leases.Lease{Key: k, Counter: 1, Checkpoint: cp, Rewind: "rewind-1", Token: l.Token, Recovered: l.Token}
	if l != want || l.Token == "" || l.Held() {
		t.Fatalf("CreateAs(%s) with no owner: %+v, want %+v: free, recovered by its own token", k, l, want)
	}
	kit.WantRow(t, s, k, l, "after CreateAs with no owner")
	_, err = m.CreateAs(kit.Ctx(t), k, "", "", leases.Checkpoint{}, "")
	kit.WantConflict(t, "CreateAs with no owner of a row that exists", err)
	_, err = m.CreateAs(kit.Ctx(t), leases.Key{Stream: k.Stream, Shard: k.Shard + "x"}, "", "inc", cp, "")
	kit.WantInvalid(t, "CreateAs with an incarnation and no owner", err)

	inc := driver.NewIncarnation(0, "abc")
	tk, err := m.TakeAs(kit.Ctx(t), l, "owner-a", inc)
	if err != nil {
		t.Fatalf("TakeAs of a recovered row: %v", err)
	}
	if tk.Recovered != l.Recovered {
		t.Fatalf("TakeAs of a recovered row: Recovered %q, want %q kept", tk.Recovered, l.Recovered)
	}
	c, err := s.Checkpoint(kit.Ctx(t), tk, leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588899"})
	if err != nil || c.Recovered != l.Recovered {
		t.Fatalf("Checkpoint by a holder whose copy is recovered: %+v, %v; want Recovered %q kept", c, err, l.Recovered)
	}
	kit.WantRow(t, s, k, c, "after a Checkpoint that keeps Recovered")
	clear := c
	clear.Recovered = ""
	c2, err := s.Checkpoint(kit.Ctx(t), clear, leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588900"})
	if err != nil || c2.Recovered != "" {
		t.Fatalf("Checkpoint by a holder whose copy is not recovered: %+v, %v; want Recovered cleared", c2, err)
	}
	kit.WantRow(t, s, k, c2, "after a Checkpoint that clears Recovered")

	// A row released by a holder that did not wait keeps it.
	k2 := leases.Key{Stream: k.Stream, Shard: k.Shard + "-2"}
	l2, err := m.CreateAs(kit.Ctx(t), k2, "", "", leases.Checkpoint{}, "")
	if err != nil || l2.Recovered == "" {
		t.Fatalf("CreateAs(%s) with no owner and no checkpoint: %+v, %v", k2, l2, err)
	}
	t2, err := m.TakeAs(kit.Ctx(t), l2, "owner-b", inc)
	if err != nil {
		t.Fatalf("TakeAs: %v", err)
	}
	r2, err := s.Release(kit.Ctx(t), t2, leases.Checkpoint{})
	if err != nil || r2.Recovered != l2.Recovered || r2.Held() {
		t.Fatalf("Release by a holder whose copy is recovered: %+v, %v; want free with Recovered %q", r2, err, l2.Recovered)
	}

	// Create and a held CreateAs are not recoveries.
	n, err := s.Create(kit.Ctx(t), leases.Key{Stream: k.Stream, Shard: k.Shard + "-3"})
	if err != nil || n.Recovered != "" {
		t.Fatalf("Create: %+v, %v; want no Recovered", n, err)
	}
	h, err := m.CreateAs(kit.Ctx(t), leases.Key{Stream: k.Stream, Shard: k.Shard + "-4"}, "owner-c", inc, cp, "")
	if err != nil || h.Recovered != "" {
		t.Fatalf("CreateAs with an owner: %+v, %v; want no Recovered", h, err)
	}
}

// testTakeAsCheckpoint: TakeAs keeps the row's checkpoint when l's is zero
// and writes l's, in the same write, when it is not: a taker that knows
// where the shard was read to writes it as it takes a row recreated
// without it. The counter, token and holder change as for any take.
func testTakeAsCheckpoint(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	k := kit.NewKey(t)
	l, err := m.CreateAs(kit.Ctx(t), k, "", "", leases.Checkpoint{}, "")
	if err != nil {
		t.Fatal(err)
	}
	mine := leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588898", SubSequence: 2}
	withCp := l
	withCp.Checkpoint = mine
	inc := driver.NewIncarnation(0, "abc")
	got, err := m.TakeAs(kit.Ctx(t), withCp, "owner-a", inc)
	if err != nil {
		t.Fatalf("TakeAs carrying a checkpoint: %v", err)
	}
	if got.Checkpoint != mine || got.Owner != "owner-a" || got.Counter != l.Counter+1 || got.Recovered != l.Recovered {
		t.Fatalf("TakeAs carrying %v: %+v; want the checkpoint written, the holder taken, the recovery kept", mine, got)
	}
	kit.WantRow(t, s, k, got, "after TakeAs carrying a checkpoint")
	rl, err := s.Release(kit.Ctx(t), got, leases.Checkpoint{})
	if err != nil {
		t.Fatal(err)
	}
	none := rl
	none.Checkpoint = leases.Checkpoint{}
	again, err := m.TakeAs(kit.Ctx(t), none, "owner-b", inc)
	if err != nil {
		t.Fatalf("TakeAs carrying no checkpoint: %v", err)
	}
	if again.Checkpoint != mine {
		t.Fatalf("TakeAs carrying no checkpoint: %+v; want the row's %v kept", again, mine)
	}
}

// testRewindRecorded: Rewind gives the row a new Rewind id, which every
// other write keeps, and records the rewind (its id and checkpoint) for
// LastRewind, apart from the row: one record per shard, the last rewind's;
// none for a shard never rewound.
func testRewindRecorded(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	base := kit.NewKey(t)
	key := func(i int) leases.Key { return leases.Key{Stream: base.Stream, Shard: fmt.Sprintf("shardId-%012d", i)} }
	last := func(k leases.Key) leases.RewindRecord {
		t.Helper()
		r, err := m.LastRewind(kit.Ctx(t), k)
		if err != nil {
			t.Fatalf("LastRewind(%s): %v", k, err)
		}
		return r
	}
	free := kit.MustCreate(t, s, key(0))
	if r := last(key(0)); r != (leases.RewindRecord{}) {
		t.Fatalf("LastRewind of a row never rewound: %+v, want none", r)
	}
	cp1 := leases.RewindAtSequence("100")
	r1, err := s.Rewind(kit.Ctx(t), free, cp1)
	if err != nil {
		t.Fatalf("Rewind of a free row: %v", err)
	}
	if r1.Rewind == "" {
		t.Fatalf("Rewind of a free row: %+v, want a Rewind id on the row", r1)
	}
	kit.WantRow(t, s, key(0), r1, "after Rewind of a free row")
	if r := last(key(0)); r != (leases.RewindRecord{ID: r1.Rewind, To: cp1}) {
		t.Fatalf("LastRewind after a Rewind to %v: %+v, want id %q", cp1, r, r1.Rewind)
	}
	// Every other write keeps the id; a rewind of the held row writes a new one.
	held := kit.MustTake(t, s, r1, "a")
	held, err = s.Checkpoint(kit.Ctx(t), held, leases.Checkpoint{Sequence: "120"})
	if err != nil || held.Rewind != r1.Rewind {
		t.Fatalf("Checkpoint after a rewind: %+v, %v; want the Rewind id %q kept", held, err, r1.Rewind)
	}
	cp2 := leases.Checkpoint{Sequence: "50", SubSequence: 2}
	pending, err := s.Rewind(kit.Ctx(t), held, cp2)
	if err != nil {
		t.Fatalf("Rewind of a held row: %v", err)
	}
	if pending.Rewind == "" || pending.Rewind == r1.Rewind {
		t.Fatalf("Rewind of a held row: Rewind id %q, want a new one (the last was %q)", pending.Rewind, r1.Rewind)
	}
	if r := last(key(0)); r != (leases.RewindRecord{ID: pending.Rewind, To: cp2}) {
		t.Fatalf("LastRewind after a second Rewind to %v: %+v, want id %q", cp2, r, pending.Rewind)
	}
	applied, err := s.ApplyRewind(kit.Ctx(t), pending)
	if err != nil || applied.Rewind != pending.Rewind {
		t.Fatalf("ApplyRewind: %+v, %v; want the Rewind id %q kept", applied, err, pending.Rewind)
	}
	released, err := s.Release(kit.Ctx(t), applied, leases.Checkpoint{Sequence: "60"})
	if err != nil || released.Rewind != pending.Rewind {
		t.Fatalf("Release: %+v, %v; want the Rewind id %q kept", released, err, pending.Rewind)
	}
	retaken, err := m.TakeAs(kit.Ctx(t), released, "b", kit.IncOf("b"))
	if err != nil || retaken.Rewind != pending.Rewind {
		t.Fatalf("TakeAs: %+v, %v; want the Rewind id %q kept", retaken, err, pending.Rewind)
	}
	// A failed rewind changes neither the row nor the record.
	_, err = s.Rewind(kit.Ctx(t), released, leases.Checkpoint{Sequence: "1"})
	kit.WantConflict(t, "Rewind at a stale counter", err)
	kit.WantRow(t, s, key(0), retaken, "a failed Rewind changed the row")
	if r := last(key(0)); r != (leases.RewindRecord{ID: pending.Rewind, To: cp2}) {
		t.Fatalf("LastRewind after a failed Rewind: %+v, want the last rewind that landed (id %q)", r, pending.Rewind)
	}
	// Nor does a failed first rewind of a shard leave a record.
	other := kit.MustCreate(t, s, key(2))
	_, err = s.Rewind(kit.Ctx(t), leases.Lease{Key: other.Key, Counter: other.Counter + 5}, leases.Checkpoint{Sequence: "1"})
	kit.WantConflict(t, "Rewind of a shard never rewound, at a stale counter", err)
	if r := last(key(2)); r != (leases.RewindRecord{}) {
		t.Fatalf("LastRewind after a failed first Rewind: %+v, want none", r)
	}
	// Records are per shard.
	kit.MustCreate(t, s, key(1))
	if r := last(key(1)); r != (leases.RewindRecord{}) {
		t.Fatalf("LastRewind of another shard: %+v, want none", r)
	}
}

// testCreateAsOnlyIfAbsent: CreateAs on a row that exists, in any state,
// fails with a *leases.ConflictError and changes nothing.
func testCreateAsOnlyIfAbsent(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	base := kit.NewKey(t)
	key := func(i int) leases.Key { return leases.Key{Stream: base.Stream, Shard: fmt.Sprintf("shardId-%012d", i)} }
	cp := leases.Checkpoint{Sequence: "77"}

	free := kit.MustCreate(t, s, key(0))
	held, err := s.Checkpoint(kit.Ctx(t), kit.MustTake(t, s, kit.MustCreate(t, s, key(1)), "a"), leases.Checkpoint{Sequence: "9"})
	if err != nil {
		t.Fatal(err)
	}
	released, err := s.Release(kit.Ctx(t), kit.MustTake(t, s, kit.MustCreate(t, s, key(2)), "a"), leases.Checkpoint{Sequence: "10"})
	if err != nil {
		t.Fatal(err)
	}
	created, err := m.CreateAs(kit.Ctx(t), key(3), "a", kit.IncOf("a"), leases.Checkpoint{Sequence: "11"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for what, l := range map[string]leases.Lease{"a free row": free, "a held row": held, "a released row": released, "a row CreateAs made": created} {
		for _, by := range [][2]string{{"a", kit.IncOf("a")}, {"b", kit.IncOf("b")}} {
			op := fmt.Sprintf("CreateAs by (%q, %q) of %s", by[0], by[1], what)
			got, err := m.CreateAs(kit.Ctx(t), l.Key, by[0], by[1], cp, "")
			kit.WantConflict(t, op, err)
			if got != (leases.Lease{}) {
				t.Errorf("%s: a failed CreateAs returned %+v, want the zero Lease", op, got)
			}
			kit.WantRow(t, s, l.Key, l, op+" changed the row")
		}
	}
	// Nor does Create create over a row CreateAs made.
	_, err = s.Create(kit.Ctx(t), key(3))
	kit.WantConflict(t, "Create of a row CreateAs made", err)
	kit.WantRow(t, s, key(3), created, "Create changed the row CreateAs made")
}

// testTakeAsFillRewind: a TakeAs that writes a checkpoint writes l.Rewind
// with it (the operator's rewind that checkpoint follows); one that writes
// none keeps the row's.
func testTakeAsFillRewind(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	k := kit.NewKey(t)
	row, err := m.CreateAs(kit.Ctx(t), k, "", "", leases.Checkpoint{Sequence: "10"}, "rw-old")
	if err != nil {
		t.Fatal(err)
	}
	fill := row
	fill.Checkpoint, fill.Rewind = leases.Checkpoint{Sequence: leases.RewindTrimHorizon}, "rw-known"
	got, err := m.TakeAs(kit.Ctx(t), fill, "a", "inc-a")
	if err != nil {
		t.Fatalf("TakeAs with a checkpoint and a rewind: %v", err)
	}
	if got.Checkpoint != fill.Checkpoint || got.Rewind != "rw-known" {
		t.Fatalf("TakeAs with checkpoint %v and rewind %q: %+v, want both written", fill.Checkpoint, fill.Rewind, got)
	}
	if stored := kit.MustGet(t, s, k); stored.Rewind != "rw-known" {
		t.Fatalf("row after TakeAs with a rewind: %+v, want rewind rw-known", stored)
	}
	k2 := leases.Key{Stream: k.Stream, Shard: "shardId-000000000001"}
	row2, err := m.CreateAs(kit.Ctx(t), k2, "", "", leases.Checkpoint{Sequence: "10"}, "rw-old")
	if err != nil {
		t.Fatal(err)
	}
	plain := row2
	plain.Rewind = "rw-other" // no checkpoint written: the row's rewind stays
	plain.Checkpoint = leases.Checkpoint{}
	if got, err = m.TakeAs(kit.Ctx(t), plain, "a", "inc-a"); err != nil || got.Rewind != "rw-old" {
		t.Fatalf("TakeAs with no checkpoint: %+v %v, want the row's rewind rw-old kept", got, err)
	}
}
