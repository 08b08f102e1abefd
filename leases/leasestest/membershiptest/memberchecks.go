package membershiptest

// The helpers of the Membership subtests (fresh owner ids, like the helpers
// shared with package leasestest, are in package kit): the checks of a
// row as a Membership method returns it (entries, exactly these entries,
// as stored), the must* calls that fail the test on an error, the checks of
// a member conflict and of a full row, and the checks of the header's
// roster versions.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/leasestest/internal/kit"
)

// entryOf returns owner's entry in ms.
func entryOf(ms []leases.Member, owner string) (leases.Member, bool) {
	for _, m := range ms {
		if m.Owner == owner {
			return m, true
		}
	}
	return leases.Member{}, false
}

// checkRow checks that ms is a row as returned by a Membership method:
// sorted by owner, one entry per owner, every entry with an incarnation,
// at most driver.RowCapacity entries.
func checkRow(t *testing.T, op string, ms []leases.Member) {
	t.Helper()
	if len(ms) > driver.RowCapacity {
		t.Fatalf("%s returned %d entries, more than a row holds (driver.RowCapacity, %d): %+v", op, len(ms), driver.RowCapacity, ms)
	}
	for i, m := range ms {
		if m.Owner == "" || m.Incarnation == "" {
			t.Fatalf("%s returned an entry without owner or incarnation: %+v", op, m)
		}
		if i > 0 && ms[i-1].Owner >= m.Owner {
			t.Fatalf("%s returned entries not sorted by owner (or an owner twice): %q before %q", op, ms[i-1].Owner, m.Owner)
		}
	}
}

// wantEntry checks that ms holds want as its owner's entry.
func wantEntry(t *testing.T, op string, ms []leases.Member, want leases.Member) {
	t.Helper()
	checkRow(t, op, ms)
	got, ok := entryOf(ms, want.Owner)
	if !ok {
		t.Fatalf("%s: the row has no entry of %q, want %+v", op, want.Owner, want)
	}
	if got != want {
		t.Fatalf("%s: entry of %q is %+v, want %+v", op, want.Owner, got, want)
	}
}

// wantNoEntry checks that ms holds no entry of owner.
func wantNoEntry(t *testing.T, op string, ms []leases.Member, owner string) {
	t.Helper()
	checkRow(t, op, ms)
	if got, ok := entryOf(ms, owner); ok {
		t.Fatalf("%s: the row has an entry of %q: %+v, want none", op, owner, got)
	}
}

// sortedByOwner returns a copy of ms sorted by owner.
func sortedByOwner(ms []leases.Member) []leases.Member {
	out := slices.Clone(ms)
	slices.SortFunc(out, func(a, b leases.Member) int { return strings.Compare(a.Owner, b.Owner) })
	return out
}

// wantExactly checks that the row ms holds exactly the entries want (in
// any order).
func wantExactly(t *testing.T, op string, ms, want []leases.Member) {
	t.Helper()
	checkRow(t, op, ms)
	if w := sortedByOwner(want); !slices.Equal(ms, w) {
		t.Fatalf("%s: the row holds %+v, want exactly %+v", op, ms, w)
	}
}

// wantStoredExactly checks that row holds exactly the entries want.
func wantStoredExactly(t *testing.T, op string, m leases.Membership, row int, want []leases.Member) {
	t.Helper()
	wantExactly(t, fmt.Sprintf("%s: Members(%d)", op, row), mustMembers(t, m, row), want)
}

func mustMembers(t *testing.T, m leases.Membership, row int) []leases.Member {
	t.Helper()
	ms, err := m.Members(kit.Ctx(t), row)
	kit.Must(t, ms, err, "Members(%d)", row)
	checkRow(t, fmt.Sprintf("Members(%d)", row), ms)
	return ms
}

func mustJoin(t *testing.T, m leases.Membership, row int, e leases.Member) []leases.Member {
	t.Helper()
	ms, err := m.Join(kit.Ctx(t), row, e)
	return mustEntry(t, "Join", ms, err, row, e)
}

// mustEntry is ms, the answer of a write op of entry e on row row, once
// checked to hold e.
func mustEntry(t *testing.T, op string, ms []leases.Member, err error, row int, e leases.Member) []leases.Member {
	t.Helper()
	kit.Must(t, ms, err, "%s(%d, %+v)", op, row, e)
	wantEntry(t, op, ms, e)
	return ms
}

func mustHeartbeat(t *testing.T, m leases.Membership, row int, e leases.Member) []leases.Member {
	t.Helper()
	ms, err := m.Heartbeat(kit.Ctx(t), row, e)
	return mustEntry(t, "Heartbeat", ms, err, row, e)
}

func mustReplace(t *testing.T, m leases.Membership, row int, seen, next leases.Member) []leases.Member {
	t.Helper()
	ms, err := m.ReplaceMember(kit.Ctx(t), row, seen, next)
	kit.Must(t, ms, err, "ReplaceMember(%d, %+v, %+v)", row, seen, next)
	if next.Owner == "" {
		wantNoEntry(t, "ReplaceMember removing", ms, seen.Owner)
	} else {
		wantEntry(t, "ReplaceMember", ms, next)
	}
	return ms
}

// memberConflict checks that err is a *leases.MemberConflictError
// (matching leases.ErrConflict) naming row and owner, and returns it.
func memberConflict(t *testing.T, op string, err error, row int, owner string) *leases.MemberConflictError {
	t.Helper()
	if !errors.Is(err, leases.ErrConflict) {
		t.Fatalf("%s: error %v, want one matching leases.ErrConflict", op, err)
	}
	var ce *leases.MemberConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: error %v (%T) is not a *leases.MemberConflictError", op, err, err)
	}
	if ce.Row != row || ce.Owner != owner || ce.Op == "" {
		t.Fatalf("%s: conflict names op %q, row %d, owner %q; want row %d, owner %q", op, ce.Op, ce.Row, ce.Owner, row, owner)
	}
	return ce
}

// wantMemberConflict checks that err is a *leases.MemberConflictError of
// op on owner's entry in row, which found current (zero: no entry), and
// not a full row's.
func wantMemberConflict(t *testing.T, op string, err error, row int, owner string, current leases.Member) {
	t.Helper()
	ce := memberConflict(t, op, err, row, owner)
	if ce.Current != current {
		t.Fatalf("%s: conflict carries the entry %+v, want the entry found, %+v", op, ce.Current, current)
	}
	if ce.Full {
		t.Fatalf("%s: conflict says the row is full; want a conflict on the entry %+v", op, current)
	}
}

// wantFull checks that err is the *leases.MemberConflictError of a Join of
// owner (who has no entry) in the full row row.
func wantFull(t *testing.T, op string, err error, row int, owner string) {
	t.Helper()
	ce := memberConflict(t, op, err, row, owner)
	if !ce.Full {
		t.Fatalf("%s: conflict %v does not say the row is full (Full is false)", op, err)
	}
	if ce.Current != (leases.Member{}) {
		t.Fatalf("%s: a full row's conflict carries the entry %+v; the owner has none", op, ce.Current)
	}
}

func wantStored(t *testing.T, op string, m leases.Membership, row int, want leases.Member) {
	t.Helper()
	wantEntry(t, op+": Members", mustMembers(t, m, row), want)
}

func mustHeader(t *testing.T, m leases.Membership) leases.MemberHeader {
	t.Helper()
	h, err := m.Header(kit.Ctx(t))
	return kit.Must(t, h, err, "Header")
}

// versions returns h's roster versions without the zero ones (a row absent
// has version 0).
func versions(h leases.MemberHeader) map[int]int64 {
	v := maps.Clone(h.Rows)
	maps.DeleteFunc(v, func(_ int, n int64) bool { return n == 0 })
	if v == nil {
		v = map[int]int64{}
	}
	return v
}

// wantHeader checks that the store's header is want (rows of version 0
// and absent rows alike).
func wantHeader(t *testing.T, op string, m leases.Membership, want leases.MemberHeader) {
	t.Helper()
	got := mustHeader(t, m)
	if !maps.Equal(versions(got), versions(want)) || got.Vanished != want.Vanished {
		t.Fatalf("%s: the header is %+v, want %+v", op, got, want)
	}
}

// bumped returns h with row's version plus n.
func bumped(h leases.MemberHeader, row int, n int64) leases.MemberHeader {
	out := leases.MemberHeader{Rows: versions(h), Vanished: h.Vanished}
	out.Rows[row] += n
	return out
}
