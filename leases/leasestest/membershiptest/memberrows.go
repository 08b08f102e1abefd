package membershiptest

// The Membership subtests of rows shared by many writers and of the rows'
// keys: concurrent owners keep their entries, one of racing incarnations
// wins, owner ids are opaque, the highest row works, and membership rows
// are kept apart from lease rows.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/leasestest/internal/kit"
)

func testConcurrentOwners(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	const owners, beats = driver.RowCapacity, 5
	r := rows.fresh(t)
	ids := make([]string, owners)
	for i := range ids {
		ids[i] = kit.NewOwner(t, fmt.Sprint(i))
	}
	errs := make(chan error, owners*(beats+1))
	kit.Together(len(ids), func(i int) {
		id := ids[i]
		if _, err := m.Join(kit.Ctx(t), r, leases.Member{Owner: id, Incarnation: "inc"}); err != nil {
			errs <- fmt.Errorf("join of %s: %w", id, err)
			return
		}
		for hb := int64(1); hb <= beats; hb++ {
			if _, err := m.Heartbeat(kit.Ctx(t), r, leases.Member{Owner: id, Incarnation: "inc", Heartbeat: hb}); err != nil {
				errs <- fmt.Errorf("heartbeat %d of %s: %w", hb, id, err)
			}
		}
	})
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent joins and heartbeats of distinct owners in one row: %v", err)
	}
	var want []leases.Member
	for _, id := range ids {
		want = append(want, leases.Member{Owner: id, Incarnation: "inc", Heartbeat: beats})
	}
	wantStoredExactly(t, "after concurrent heartbeats", m, r, want)
}

// testRacingIncarnations: incarnations of one owner race, for an absent
// entry with Join and for a stale one with ReplaceMember; in each round
// exactly one wins, and every loser's conflict carries the winner's entry.
// Each round ends with the entry removed, so the row is joined and emptied
// many more times than it has room for.
func testRacingIncarnations(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	const racers, rounds = 10, 20
	r := rows.fresh(t)
	a := kit.NewOwner(t, "a")
	race := func(round int, what string, try func(inc string) ([]leases.Member, error)) leases.Member {
		t.Helper()
		var (
			wins   atomic.Int64
			winner atomic.Value
			errs   = make(chan error, racers)
		)
		kit.Together(racers, func(i int) {
			inc := fmt.Sprintf("r%d-%s-%d", round, what, i)
			ms, err := try(inc)
			if err == nil {
				wins.Add(1)
				e, _ := entryOf(ms, a)
				winner.Store(e)
				if e.Incarnation != inc {
					errs <- fmt.Errorf("%s won, but its answer shows the entry %+v", inc, e)
				}
				return
			}
			errs <- err
		})
		close(errs)
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d, %s: %d incarnations won, want exactly 1", round, what, n)
		}
		won := winner.Load().(leases.Member)
		for err := range errs {
			wantMemberConflict(t, fmt.Sprintf("round %d, %s: a loser", round, what), err, r, a, won)
		}
		wantStoredExactly(t, fmt.Sprintf("round %d, %s", round, what), m, r, []leases.Member{won})
		return won
	}
	for round := range rounds {
		// The entry is absent: the Join of one incarnation wins.
		joined := race(round, "join", func(inc string) ([]leases.Member, error) {
			return m.Join(kit.Ctx(t), r, leases.Member{Owner: a, Incarnation: inc, Heartbeat: 1})
		})
		// The entry is seen stale: one new incarnation takes it over.
		taken := race(round, "replace", func(inc string) ([]leases.Member, error) {
			return m.ReplaceMember(kit.Ctx(t), r, joined, leases.Member{Owner: a, Incarnation: inc, Heartbeat: 1})
		})
		mustReplace(t, m, r, taken, leases.Member{})
	}
}

// testOpaqueOwners: owner ids are opaque: dots, brackets, colons, hashes,
// non-ASCII, prefixes of each other, the longest allowed, and the names a
// store might use for its own attributes are all one entry each.
func testOpaqueOwners(t *testing.T, s leases.Store, m leases.Membership, rows *rowSource) {
	r1, r2 := rows.fresh(t), rows.fresh(t)
	base := kit.NewOwner(t, "x")
	byRow := map[int][]string{
		r1: {
			base,
			base + ".i",
			base + ".dotted.path",
			base + "[0]",
			base + ":colon",
			base + " #hash :value",
			base + "-ünïcødé-日本",
			"m_" + base,
		},
		// Rows are the subtest's own: these owner ids need no prefix.
		r2: {
			base + strings.Repeat("z", 256-len(base)),
			"n", "i", "h", "m_", "#members", "lease_key", "lease_counter",
		},
	}
	for _, r := range []int{r1, r2} {
		var want []leases.Member
		for i, o := range byRow[r] {
			e := leases.Member{Owner: o, Incarnation: "inc", Heartbeat: int64(i + 1)}
			mustJoin(t, m, r, e)
			want = append(want, e)
		}
		for i := range want {
			want[i].Heartbeat += 100
			mustHeartbeat(t, m, r, want[i])
		}
		wantStoredExactly(t, fmt.Sprintf("row %d of opaque owner ids", r), m, r, want)
		// Removing one leaves its neighbours (a prefix of it among them)
		// alone.
		gone := want[2]
		mustReplace(t, m, r, gone, leases.Member{})
		wantStoredExactly(t, "after removing "+gone.Owner, m, r, slices.Delete(want, 2, 3))
	}
	// And as a lease holder.
	for _, o := range []string{byRow[r1][5], byRow[r2][0], "lease_counter"} {
		k := kit.NewKey(t)
		l, err := m.TakeAs(kit.Ctx(t), kit.MustCreate(t, s, k), o, "inc")
		if err != nil || l.Owner != o {
			t.Fatalf("TakeAs by owner %q: %+v, %v", o, l, err)
		}
		if got := kit.MustGet(t, s, k); got.Owner != o || got.Incarnation != "inc" || got.Counter != 2 {
			t.Fatalf("TakeAs by owner %q: the store holds %+v", o, got)
		}
	}
}

// testHighestRow: the highest row number, driver.MaxMemberRows-1, is a
// membership row like the others.
func testHighestRow(t *testing.T, _ leases.Store, m leases.Membership, _ *rowSource) {
	r := driver.MaxMemberRows - 1
	a := kit.NewOwner(t, "a")
	e := leases.Member{Owner: a, Incarnation: driver.NewIncarnation(r, "x"), Heartbeat: 1}
	mustJoin(t, m, r, e)
	e.Heartbeat++
	mustHeartbeat(t, m, r, e)
	wantStoredExactly(t, "the highest row", m, r, []leases.Member{e})
	h := mustHeader(t, m)
	if err := m.BumpRow(kit.Ctx(t), r); err != nil {
		t.Fatalf("BumpRow(%d): %v", r, err)
	}
	wantHeader(t, fmt.Sprintf("after BumpRow(%d)", r), m, bumped(h, r, 1))
	mustReplace(t, m, r, e, leases.Member{})
	wantStoredExactly(t, "the highest row after the removal", m, r, nil)
}

// memberKeys returns lease keys whose text form is a membership row's key
// or starts like the header's: no lease method may read or write them.
func memberKeys(t *testing.T, rows ...int) []leases.Key {
	t.Helper()
	var ks []leases.Key
	for _, r := range rows {
		k, err := leases.ParseKey(driver.MemberKey(r))
		if err != nil {
			t.Fatalf("ParseKey(%q): %v", driver.MemberKey(r), err)
		}
		ks = append(ks, k)
	}
	ks = append(ks,
		leases.Key{Stream: driver.MemberHeaderKey, Shard: "shardId-000000000000"},
		leases.Key{Stream: driver.MemberHeaderKey + "-" + kit.TestName(t), Shard: "shardId-000000000000"},
		leases.Key{Stream: driver.MemberKey(0), Shard: "shardId-000000000000"},
	)
	for _, k := range ks {
		if err := k.Validate(); err != nil || !driver.IsMemberKey(k.String()) {
			t.Fatalf("leasestest: %q is not a valid key of a membership row (%v)", k, err)
		}
	}
	return ks
}

// wantRefusedKey checks that err is the validation error of a lease method
// given a membership key: not nil, not a conflict, not "not found" (the
// key is refused before anything is read).
func wantRefusedKey(t *testing.T, op string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: no error, want the membership key refused", op)
	case errors.Is(err, leases.ErrConflict), errors.Is(err, leases.ErrNotFound):
		t.Errorf("%s: %v, want a validation error refusing the membership key (leases.ValidateLeaseKey)", op, err)
	}
}

// testMemberRowsNotLeases: membership rows and lease rows share the table
// but never each other's rows: membership writes leave lease rows alone,
// lease writes leave membership rows and the header alone, and every lease
// method refuses a key that names a membership row or the header.
func testMemberRowsNotLeases(t *testing.T, s leases.Store, m leases.Membership, rows *rowSource) {
	r1, r2 := rows.fresh(t), rows.fresh(t)
	entries := map[int]leases.Member{}
	for _, r := range []int{r1, r2} {
		e := leases.Member{Owner: kit.NewOwner(t, "a"), Incarnation: "inc", Heartbeat: 1}
		mustJoin(t, m, r, e)
		entries[r] = e
	}
	if err := m.BumpRow(kit.Ctx(t), r1); err != nil {
		t.Fatal(err)
	}
	header := mustHeader(t, m)
	k := leases.Key{Stream: kit.NewKey(t).Stream, Shard: "shardId-0"}
	if _, err := s.Get(kit.Ctx(t), k); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Get(%s) of a lease never created, with membership rows written: %v, want ErrNotFound", k, err)
	}
	l := kit.MustTake(t, s, kit.MustCreate(t, s, k), "a")
	for r, e := range entries {
		e.Heartbeat++
		mustHeartbeat(t, m, r, e)
		entries[r] = e
	}
	if err := m.BumpRow(kit.Ctx(t), r2); err != nil {
		t.Fatal(err)
	}
	if err := m.ReportVanished(kit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	header = bumped(header, r2, 1)
	header.Vanished++
	kit.WantRow(t, s, k, l, fmt.Sprintf("membership writes changed the lease row %s", k))
	l, err := s.Checkpoint(kit.Ctx(t), l, leases.Checkpoint{Sequence: "7"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TakeAs(kit.Ctx(t), l, "b", "inc-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateAs(kit.Ctx(t), leases.Key{Stream: k.Stream, Shard: "shardId-1"}, "b", "inc-b", leases.Checkpoint{Sequence: "3"}, ""); err != nil {
		t.Fatal(err)
	}
	for r, e := range entries {
		wantStoredExactly(t, "after lease writes", m, r, []leases.Member{e})
	}
	wantHeader(t, "after lease writes", m, header)

	for _, mk := range memberKeys(t, 0, r1, r2, driver.MaxMemberRows-1) {
		ghost := leases.Lease{Key: mk, Owner: "a", Incarnation: "inc", Counter: 1}
		free := leases.Lease{Key: mk, Counter: 1}
		calls := map[string]func() error{
			"Get":                  func() error { _, err := s.Get(kit.Ctx(t), mk); return err },
			"Create":               func() error { _, err := s.Create(kit.Ctx(t), mk); return err },
			"Checkpoint":           func() error { _, err := s.Checkpoint(kit.Ctx(t), ghost, leases.Checkpoint{Sequence: "1"}); return err },
			"Release":              func() error { _, err := s.Release(kit.Ctx(t), ghost, leases.Checkpoint{Sequence: "1"}); return err },
			"Rewind of a held row": func() error { _, err := s.Rewind(kit.Ctx(t), ghost, leases.Checkpoint{Sequence: "1"}); return err },
			"Rewind of a free row": func() error { _, err := s.Rewind(kit.Ctx(t), free, leases.Checkpoint{Sequence: "1"}); return err },
			"ApplyRewind": func() error {
				g := ghost
				g.RewindTo = leases.Checkpoint{Sequence: "1"}
				_, err := s.ApplyRewind(kit.Ctx(t), g)
				return err
			},
			"TakeAs": func() error { _, err := m.TakeAs(kit.Ctx(t), free, "a", "inc"); return err },
			"CreateAs": func() error {
				_, err := m.CreateAs(kit.Ctx(t), mk, "a", "inc", leases.Checkpoint{Sequence: "1"}, "")
				return err
			},
		}
		for op, call := range calls {
			wantRefusedKey(t, fmt.Sprintf("%s(%s)", op, mk), call())
		}
	}
	for r, e := range entries {
		wantStoredExactly(t, "after lease calls naming membership rows", m, r, []leases.Member{e})
	}
	wantHeader(t, "after lease calls naming membership rows", m, header)
}
