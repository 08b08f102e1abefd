package leasestest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// suiteRows bounds the membership rows the subtests use: rowSource hands
// out rows 0 to suiteRows-1, and UntouchedRowsAreEmpty checks that they
// (and the highest row, driver.MaxMemberRows-1, which HighestRow uses)
// start empty.
const suiteRows = 64

// rowSource hands out the membership rows of one run of the suite, each to
// one subtest: rows hold at most driver.RowCapacity entries, so subtests
// sharing a store cannot share rows.
type rowSource struct{ next atomic.Int64 }

// fresh returns a membership row no other subtest of this run uses.
func (rs *rowSource) fresh(t *testing.T) int {
	t.Helper()
	r := int(rs.next.Add(1) - 1)
	if r >= suiteRows {
		t.Fatalf("leasestest: the membership subtests use more than %d rows; raise suiteRows", suiteRows)
	}
	return r
}

type memberTest func(t *testing.T, s leases.Store, m leases.Membership, rows *rowSource)

// runMembership runs the subtests of leases.Membership, in order: the first
// two check rows and a header nobody has written yet.
func runMembership(t *testing.T, newStore func(t *testing.T) leases.Store) {
	rows := &rowSource{}
	tests := []struct {
		name string
		fn   memberTest
	}{
		{"UntouchedRowsAreEmpty", testUntouchedRows},
		{"UntouchedHeaderIsZero", testUntouchedHeader},
		{"JoinWritesEntry", testJoinWritesEntry},
		{"JoinIsIdempotent", testJoinIdempotent},
		{"JoinCapacity", testJoinCapacity},
		{"ConcurrentJoinsRespectCapacity", testConcurrentJoins},
		{"HeartbeatWritesEntry", testHeartbeatWritesEntry},
		{"HeartbeatNeedsAnEntry", testHeartbeatNeedsEntry},
		{"HeartbeatOnlyMovesForward", testHeartbeatForward},
		{"RowMatesSeeEachOther", testRowMates},
		{"HeartbeatOfAnotherIncarnationConflicts", testHeartbeatOtherIncarnation},
		{"HeartbeatFailsOnBumpedNotice", testHeartbeatBumpedNotice},
		{"EndedRoundTrips", testEndedRoundTrips},
		{"ListingRoundTrips", testListingRoundTrips},
		{"ReplaceMemberOnlyIfSeen", testReplaceMember},
		{"ReplaceMemberRemoves", testReplaceMemberRemoves},
		{"NoticeBump", testNoticeBump},
		{"ReturnedSlicesAreCopies", testMemberCopies},
		{"ConcurrentOwnersKeepTheirEntries", testConcurrentOwners},
		{"RacingIncarnationsOneWins", testRacingIncarnations},
		{"OwnerIDsAreOpaque", testOpaqueOwners},
		{"HighestRow", testHighestRow},
		{"HeaderBumps", testHeaderBumps},
		{"ConcurrentBumpsAllCount", testConcurrentBumps},
		{"MembershipRowsAreNotLeases", testMemberRowsNotLeases},
		{"TakeAs", testTakeAs},
		{"TakeAsConditionalOnCounter", testTakeAsCounter},
		{"TakeAsFillWritesItsRewind", testTakeAsFillRewind},
		{"ReleaseClearsIncarnation", testReleaseClearsIncarnation},
		{"CreateAs", testCreateAs},
		{"CreateAsOnlyIfAbsent", testCreateAsOnlyIfAbsent},
		{"CreateAsFreeIsRecovered", testCreateAsFree},
		{"TakeAsWritesItsCheckpoint", testTakeAsCheckpoint},
		{"RewindIsRecorded", testRewindRecorded},
		{"StreamMarkFirstWins", testStreamMark},
		{"TakenMarkFirstWins", testTakenMark},
		{"InvalidArguments", testMemberInvalidArguments},
		{"CancelledContext", testMemberCancelledContext},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			m, ok := s.(leases.Membership)
			if !ok {
				t.Fatalf("newStore returned %T, which does not implement leases.Membership", s)
			}
			tc.fn(t, s, m, rows)
		})
	}
}

// newOwner returns an owner id no other subtest uses.
func newOwner(t *testing.T, label string) string {
	t.Helper()
	name := testName(t)
	if len(name) > 100 {
		name = name[len(name)-100:]
	}
	return fmt.Sprintf("%s-%s-%d-%d", name, label, time.Now().UnixNano(), seq.Add(1))
}

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
	ms, err := m.Members(ctx(t), row)
	must(t, ms, err, "Members(%d)", row)
	checkRow(t, fmt.Sprintf("Members(%d)", row), ms)
	return ms
}

func mustJoin(t *testing.T, m leases.Membership, row int, e leases.Member) []leases.Member {
	t.Helper()
	ms, err := m.Join(ctx(t), row, e)
	return mustEntry(t, "Join", ms, err, row, e)
}

// mustEntry is ms, the answer of a write op of entry e on row row, once
// checked to hold e.
func mustEntry(t *testing.T, op string, ms []leases.Member, err error, row int, e leases.Member) []leases.Member {
	t.Helper()
	must(t, ms, err, "%s(%d, %+v)", op, row, e)
	wantEntry(t, op, ms, e)
	return ms
}

func mustHeartbeat(t *testing.T, m leases.Membership, row int, e leases.Member) []leases.Member {
	t.Helper()
	ms, err := m.Heartbeat(ctx(t), row, e)
	return mustEntry(t, "Heartbeat", ms, err, row, e)
}

func mustReplace(t *testing.T, m leases.Membership, row int, seen, next leases.Member) []leases.Member {
	t.Helper()
	ms, err := m.ReplaceMember(ctx(t), row, seen, next)
	must(t, ms, err, "ReplaceMember(%d, %+v, %+v)", row, seen, next)
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
	h, err := m.Header(ctx(t))
	return must(t, h, err, "Header")
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

func testUntouchedRows(t *testing.T, _ leases.Store, m leases.Membership, _ *rowSource) {
	check := make([]int, 0, suiteRows+1)
	for r := range suiteRows {
		check = append(check, r)
	}
	for _, r := range append(check, driver.MaxMemberRows-1) {
		ms, err := m.Members(ctx(t), r)
		if err != nil {
			t.Fatalf("Members(%d) of a row nobody wrote: %v, want no error", r, err)
		}
		if len(ms) != 0 {
			t.Fatalf("Members(%d) of a row nobody wrote: %+v, want no entries "+
				"(leasestest needs a store whose membership rows start empty, such as a fresh table)", r, ms)
		}
	}
}

func testUntouchedHeader(t *testing.T, _ leases.Store, m leases.Membership, _ *rowSource) {
	for range 2 {
		h, err := m.Header(ctx(t))
		if err != nil {
			t.Fatalf("Header of a store nobody wrote: %v, want no error", err)
		}
		if len(h.Rows) != 0 || h.Vanished != 0 {
			t.Fatalf("Header of a store nobody wrote: %+v, want no roster versions and Vanished 0 "+
				"(leasestest needs a store whose membership header starts empty, such as a fresh table)", h)
		}
	}
}

// testJoinWritesEntry: Join writes the entry as given, returns the row,
// and leaves other rows alone; a joined entry heartbeats.
func testJoinWritesEntry(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r, other := rows.fresh(t), rows.fresh(t)
	a, b, c := newOwner(t, "a"), newOwner(t, "b"), newOwner(t, "c")
	ea := leases.Member{Owner: a, Incarnation: driver.NewIncarnation(r, "a1"), Heartbeat: 1}
	eb := leases.Member{Owner: b, Incarnation: "opaque-b", Heartbeat: 7, Notice: 3, Ended: 2, Held: 4, Streams: "digest-b", Listing: "listing-b", Proof: 10250 * time.Millisecond, Young: true}
	wantStoredExactly(t, "before the first join", m, r, nil)
	wantExactly(t, "the first Join's answer", mustJoin(t, m, r, ea), []leases.Member{ea})
	wantStoredExactly(t, "after the first join", m, r, []leases.Member{ea})
	wantExactly(t, "the second Join's answer", mustJoin(t, m, r, eb), []leases.Member{ea, eb})
	wantStoredExactly(t, "after the second join", m, r, []leases.Member{ea, eb})

	// Another row: its own entries only.
	ec := leases.Member{Owner: c, Incarnation: "inc-c", Heartbeat: 1}
	wantExactly(t, "a Join in another row", mustJoin(t, m, other, ec), []leases.Member{ec})
	wantStoredExactly(t, "after a join in another row", m, r, []leases.Member{ea, eb})

	// The joined entries heartbeat (young, then not).
	ea.Heartbeat++
	ea.Young = true
	wantExactly(t, "a heartbeat after the join", mustHeartbeat(t, m, r, ea), []leases.Member{ea, eb})
	eb.Heartbeat++
	eb.Young = false
	wantExactly(t, "a heartbeat after the join", mustHeartbeat(t, m, r, eb), []leases.Member{ea, eb})
}

// testJoinIdempotent: a Join that meets exactly its own entry (a resent
// call whose first answer was lost) succeeds and writes nothing; one that
// meets another entry of the owner fails, carrying it, and writes nothing.
func testJoinIdempotent(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a := newOwner(t, "a")
	e := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 3}
	mustJoin(t, m, r, e)
	for i := range 2 {
		wantExactly(t, fmt.Sprintf("Join %d of the same entry", i+2), mustJoin(t, m, r, e), []leases.Member{e})
		wantStoredExactly(t, "after the same Join again", m, r, []leases.Member{e})
	}
	for _, other := range []leases.Member{
		{Owner: a, Incarnation: "inc-2", Heartbeat: 3},
		{Owner: a, Incarnation: "inc-2", Heartbeat: 0},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 4},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 3, Leaving: true},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 3, Notice: 1},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 3, Ended: 1},
	} {
		op := fmt.Sprintf("Join of %+v over the entry %+v", other, e)
		ms, err := m.Join(ctx(t), r, other)
		wantMemberConflict(t, op, err, r, a, e)
		if ms != nil {
			t.Fatalf("%s: a failed Join returned entries %+v", op, ms)
		}
		wantStoredExactly(t, op, m, r, []leases.Member{e})
	}
	// The entry moved on: the Join that wrote it no longer finds its own
	// entry, and fails.
	alive := e
	alive.Heartbeat++
	mustHeartbeat(t, m, r, alive)
	_, err := m.Join(ctx(t), r, e)
	wantMemberConflict(t, "Join of an entry that heartbeated since", err, r, a, alive)
	wantStoredExactly(t, "after the refused Join", m, r, []leases.Member{alive})

	// The entry joined three times counts once: the row still takes
	// RowCapacity-1 other owners.
	want := []leases.Member{alive}
	for i := 1; i < driver.RowCapacity; i++ {
		o := leases.Member{Owner: newOwner(t, fmt.Sprint(i)), Incarnation: "inc", Heartbeat: 1}
		if _, err := m.Join(ctx(t), r, o); err != nil {
			t.Fatalf("Join of owner %d of %d in a row whose first owner joined three times: %v; a Join that found its own entry counted as an entry", i+1, driver.RowCapacity, err)
		}
		want = append(want, o)
	}
	wantStoredExactly(t, "after filling the row", m, r, want)
}

// testJoinCapacity: a row takes RowCapacity entries; a Join beyond fails
// as full and writes nothing; entries removed make room again, and nothing
// else does.
func testJoinCapacity(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	var entries []leases.Member
	for i := range driver.RowCapacity {
		e := leases.Member{Owner: newOwner(t, fmt.Sprint(i)), Incarnation: fmt.Sprintf("inc-%d", i), Heartbeat: 1}
		ms, err := m.Join(ctx(t), r, e)
		if err != nil {
			t.Fatalf("Join %d of %d in an empty row: %v", i+1, driver.RowCapacity, err)
		}
		entries = append(entries, e)
		wantExactly(t, fmt.Sprintf("Join %d's answer", i+1), ms, entries)
	}
	refused := func(what string) {
		t.Helper()
		x := leases.Member{Owner: newOwner(t, "x"), Incarnation: "inc-x", Heartbeat: 1}
		op := fmt.Sprintf("Join in a full row (%s)", what)
		ms, err := m.Join(ctx(t), r, x)
		wantFull(t, op, err, r, x.Owner)
		if ms != nil {
			t.Fatalf("%s: a failed Join returned entries %+v", op, ms)
		}
		wantStoredExactly(t, op, m, r, entries)
	}
	joined := func(what string) leases.Member {
		t.Helper()
		e := leases.Member{Owner: newOwner(t, "y"), Incarnation: "inc-y", Heartbeat: 1}
		if _, err := m.Join(ctx(t), r, e); err != nil {
			t.Fatalf("Join after %s: %v, want room for it", what, err)
		}
		return e
	}
	refused("RowCapacity entries")
	refused("again")

	// The last joiner resends its Join (its answer was lost): it finds its
	// own entry and succeeds, full row and all.
	wantExactly(t, "the last joiner's Join again", mustJoin(t, m, r, entries[len(entries)-1]), entries)
	// Another entry of a member in the full row: a conflict carrying it.
	_, err := m.Join(ctx(t), r, leases.Member{Owner: entries[0].Owner, Incarnation: "inc-other", Heartbeat: 1})
	if ce := memberConflict(t, "Join of another incarnation in a full row", err, r, entries[0].Owner); ce.Current != entries[0] {
		t.Fatalf("Join of another incarnation in a full row: conflict carries %+v, want the entry %+v", ce.Current, entries[0])
	}
	// Members of a full row heartbeat.
	e0 := entries[0]
	e0.Heartbeat++
	mustHeartbeat(t, m, r, e0)
	entries[0] = e0
	refused("heartbeats")

	// Replacing an entry (a new incarnation, a notice bump) makes no room.
	next := leases.Member{Owner: e0.Owner, Incarnation: "inc-0b", Heartbeat: 1}
	mustReplace(t, m, r, e0, next)
	entries[0] = next
	n := next
	n.Notice = 1
	mustReplace(t, m, r, next, n)
	entries[0] = n
	refused("replacements")
	// A removal that fails makes no room.
	stale := entries[1]
	stale.Heartbeat--
	_, err = m.ReplaceMember(ctx(t), r, stale, leases.Member{})
	wantMemberConflict(t, "removal having seen an older heartbeat", err, r, stale.Owner, entries[1])
	refused("a refused removal")

	// A removal makes room for one Join.
	mustReplace(t, m, r, entries[1], leases.Member{})
	entries = slices.Delete(entries, 1, 2)
	wantStoredExactly(t, "after a removal", m, r, entries)
	entries = append(entries, joined("a removal"))
	refused("a removal and a join")

	// A removal repeated (its answer was lost) counts once.
	gone := entries[1]
	mustReplace(t, m, r, gone, leases.Member{})
	mustReplace(t, m, r, gone, leases.Member{})
	entries = slices.Delete(entries, 1, 2)
	entries = append(entries, joined("a removal sent twice"))
	refused("a removal sent twice and a join")

	// Empty again: RowCapacity Joins fit, and no more.
	for _, e := range slices.Clone(entries) {
		mustReplace(t, m, r, e, leases.Member{})
	}
	entries = nil
	wantStoredExactly(t, "after removing every entry", m, r, nil)
	for i := range driver.RowCapacity {
		entries = append(entries, joined(fmt.Sprintf("emptying the row (join %d)", i+1)))
	}
	refused("emptying and filling the row")
}

// testConcurrentJoins: more owners than a row takes race to join it:
// exactly RowCapacity win, every loser fails as full, and the row holds the
// winners; emptied by racing removals, it takes RowCapacity again.
func testConcurrentJoins(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	const racers = 2*driver.RowCapacity + 3
	r := rows.fresh(t)
	for round := range 2 {
		entries := make([]leases.Member, racers)
		for i := range entries {
			entries[i] = leases.Member{Owner: newOwner(t, fmt.Sprint(i)), Incarnation: fmt.Sprintf("inc-%d-%d", round, i), Heartbeat: 1}
		}
		errs := make([]error, racers)
		together(racers, func(i int) { _, errs[i] = m.Join(ctx(t), r, entries[i]) })
		var won []leases.Member
		for i, err := range errs {
			if err == nil {
				won = append(won, entries[i])
				continue
			}
			wantFull(t, fmt.Sprintf("round %d: a Join that lost the race for the row", round), err, r, entries[i].Owner)
		}
		if len(won) != driver.RowCapacity {
			t.Fatalf("round %d: %d of %d racing Joins in an empty row succeeded, want exactly %d (driver.RowCapacity)", round, len(won), racers, driver.RowCapacity)
		}
		wantStoredExactly(t, fmt.Sprintf("round %d: after the race", round), m, r, won)
		together(len(won), func(i int) { _, errs[i] = m.ReplaceMember(ctx(t), r, won[i], leases.Member{}) })
		for i := range won {
			if errs[i] != nil {
				t.Fatalf("round %d: concurrent removal of %+v: %v", round, won[i], errs[i])
			}
		}
		wantStoredExactly(t, fmt.Sprintf("round %d: after the concurrent removals", round), m, r, nil)
	}
}

func testHeartbeatWritesEntry(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a := newOwner(t, "a")
	stored := leases.Member{Owner: a, Incarnation: "inc-1"}
	mustJoin(t, m, r, stored)
	steps := []leases.Member{
		{Owner: a, Incarnation: "inc-1", Heartbeat: 1},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 2},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 2}, // the same heartbeat again (a resent one)
		{Owner: a, Incarnation: "inc-1", Heartbeat: 3, Notice: 7},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 4}, // Notice back to its zero value
		{Owner: a, Incarnation: "inc-1", Heartbeat: 5, Streams: "d1", Held: 3},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 6, Streams: "d2"}, // another digest, Held back to 0
		{Owner: a, Incarnation: "inc-1", Heartbeat: 7},                // no digest
		{Owner: a, Incarnation: "inc-1", Heartbeat: 8, Listing: "l1"},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 9, Listing: "l2", Streams: "d2"},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 10}, // no listing
		{Owner: a, Incarnation: "inc-1", Heartbeat: 1 << 62, Leaving: true},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 1<<62 + 1, Leaving: true}, // leaving, it may still write
	}
	for i, e := range steps {
		op := fmt.Sprintf("heartbeat %d in row %d", i+1, r)
		// A heartbeat carries the stored notice: a step with another
		// one has it bumped first, as a requester would.
		if e.Notice != stored.Notice {
			bumped := stored
			bumped.Notice = e.Notice
			mustReplace(t, m, r, stored, bumped)
		}
		wantExactly(t, op, mustHeartbeat(t, m, r, e), []leases.Member{e})
		wantStoredExactly(t, op, m, r, []leases.Member{e})
		stored = e
	}
	// Once marked leaving, the incarnation never comes back: a heartbeat
	// that does not say leaving fails and writes nothing.
	back := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 5}
	_, err := m.Heartbeat(ctx(t), r, back)
	wantMemberConflict(t, "a heartbeat back from leaving", err, r, a, stored)
	wantStoredExactly(t, "after the refused heartbeat back from leaving", m, r, []leases.Member{stored})
}

// testHeartbeatForward: a heartbeat whose value is not above the stored
// one (a request held up in the network and applied after later ones
// landed) fails with a conflict carrying the stored entry and writes
// nothing, so that it never puts back a value a taker has timed; the same
// heartbeat again (a resent attempt) succeeds.
func testHeartbeatForward(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a := newOwner(t, "a")
	mustJoin(t, m, r, leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 1})
	stored := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 5, Held: 2}
	mustHeartbeat(t, m, r, stored)
	for _, late := range []leases.Member{
		{Owner: a, Incarnation: "inc-1", Heartbeat: 4, Held: 1},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 5, Held: 1},
	} {
		op := fmt.Sprintf("a heartbeat of value %d over a stored %d", late.Heartbeat, stored.Heartbeat)
		_, err := m.Heartbeat(ctx(t), r, late)
		wantMemberConflict(t, op, err, r, a, stored)
		wantStoredExactly(t, "after "+op, m, r, []leases.Member{stored})
	}
	wantExactly(t, "the same heartbeat again", mustHeartbeat(t, m, r, stored), []leases.Member{stored})
}

// testHeartbeatNeedsEntry: a Heartbeat of an owner without an entry in the
// row (never joined, removed, joined elsewhere) fails with a conflict
// carrying no entry, and writes nothing: only Join creates an entry.
func testHeartbeatNeedsEntry(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r, other := rows.fresh(t), rows.fresh(t)
	a, b := newOwner(t, "a"), newOwner(t, "b")
	absent := func(what string, want []leases.Member) {
		t.Helper()
		for _, e := range []leases.Member{
			{Owner: a, Incarnation: "inc-a", Heartbeat: 1},
			{Owner: a, Incarnation: "inc-a", Heartbeat: 2, Leaving: true},
			{Owner: a, Incarnation: "inc-a", Heartbeat: 3, Notice: 1, Ended: 2},
		} {
			op := fmt.Sprintf("Heartbeat of %+v %s", e, what)
			ms, err := m.Heartbeat(ctx(t), r, e)
			wantMemberConflict(t, op, err, r, a, leases.Member{})
			if ms != nil {
				t.Fatalf("%s: a failed Heartbeat returned entries %+v", op, ms)
			}
			wantStoredExactly(t, op, m, r, want)
		}
	}
	absent("in a row nobody wrote", nil)

	eb := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1}
	mustJoin(t, m, r, eb)
	absent("in a row without its entry", []leases.Member{eb})

	mustJoin(t, m, other, leases.Member{Owner: a, Incarnation: "inc-a", Heartbeat: 1})
	absent("in a row other than the one it joined", []leases.Member{eb})

	ea := leases.Member{Owner: a, Incarnation: "inc-a", Heartbeat: 1}
	mustJoin(t, m, r, ea)
	ea.Heartbeat++
	mustHeartbeat(t, m, r, ea)
	mustReplace(t, m, r, ea, leases.Member{})
	absent("after its entry was removed", []leases.Member{eb})
}

func testRowMates(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r, other := rows.fresh(t), rows.fresh(t)
	a, b := newOwner(t, "a"), newOwner(t, "b")
	ea := leases.Member{Owner: a, Incarnation: "inc-a", Heartbeat: 1}
	eb := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1, Notice: 2}
	mustJoin(t, m, r, ea)
	ms := mustJoin(t, m, r, eb)
	wantEntry(t, "the second owner's join", ms, ea)
	eb.Heartbeat++
	wantEntry(t, "the second owner's heartbeat", mustHeartbeat(t, m, r, eb), ea)
	ea.Heartbeat = 2
	ms = mustHeartbeat(t, m, r, ea)
	wantEntry(t, "the first owner's next heartbeat", ms, eb)
	wantStoredExactly(t, "Members", m, r, []leases.Member{ea, eb})
	// An owner of another row is not in this one.
	c := newOwner(t, "c")
	ec := leases.Member{Owner: c, Incarnation: "inc-c", Heartbeat: 1}
	wantExactly(t, "the join of an owner of another row", mustJoin(t, m, other, ec), []leases.Member{ec})
	ec.Heartbeat++
	wantExactly(t, "the heartbeat of an owner of another row", mustHeartbeat(t, m, other, ec), []leases.Member{ec})
	wantStoredExactly(t, fmt.Sprintf("Members(%d)", r), m, r, []leases.Member{ea, eb})
}

func testHeartbeatOtherIncarnation(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a := newOwner(t, "a")
	first := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 5}
	mustJoin(t, m, r, first)
	for _, e := range []leases.Member{
		{Owner: a, Incarnation: "inc-2", Heartbeat: 1},
		{Owner: a, Incarnation: "inc-2", Heartbeat: 6},
		{Owner: a, Incarnation: "inc-2", Heartbeat: 5, Leaving: true},
	} {
		ms, err := m.Heartbeat(ctx(t), r, e)
		wantMemberConflict(t, fmt.Sprintf("Heartbeat of incarnation inc-2 over inc-1 (%+v)", e), err, r, a, first)
		if ms != nil {
			t.Fatalf("a failed Heartbeat returned entries %+v", ms)
		}
		wantStoredExactly(t, "after the refused heartbeat", m, r, []leases.Member{first})
	}
	// The incarnation that owns the entry heartbeats on.
	next := first
	next.Heartbeat++
	mustHeartbeat(t, m, r, next)
}

// testHeartbeatBumpedNotice: a heartbeat carrying a notice other than the
// stored one (someone bumped it with ReplaceMember) fails, carrying the
// stored entry, and writes nothing; one carrying the stored notice succeeds
// and keeps it.
func testHeartbeatBumpedNotice(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a, b := newOwner(t, "a"), newOwner(t, "b")
	e := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 4}
	mate := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1}
	mustJoin(t, m, r, e)
	mustJoin(t, m, r, mate)

	// Nobody bumped the notice: a heartbeat carrying one fails too.
	ms, err := m.Heartbeat(ctx(t), r, leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: e.Heartbeat + 1, Notice: 1})
	wantMemberConflict(t, "Heartbeat with notice 1 over an entry without one", err, r, a, e)
	if ms != nil {
		t.Fatalf("a failed Heartbeat returned entries %+v", ms)
	}
	wantStoredExactly(t, "after the refused heartbeat", m, r, []leases.Member{e, mate})

	// Bumped from none to 1, then from 1 to 2: a heartbeat with a notice
	// other than the stored one (the one it saw before, or any other)
	// fails, whatever else it carries.
	for _, notice := range []int64{1, 2} {
		bumped := e
		bumped.Notice = notice
		mustReplace(t, m, r, e, bumped)
		for _, stale := range []leases.Member{
			{Owner: a, Incarnation: "inc-1", Heartbeat: e.Heartbeat + 1, Notice: e.Notice},
			{Owner: a, Incarnation: "inc-1", Heartbeat: e.Heartbeat + 1, Notice: e.Notice, Leaving: true, Ended: 3},
			{Owner: a, Incarnation: "inc-1", Heartbeat: e.Heartbeat, Notice: notice + 1},
			{Owner: a, Incarnation: "inc-1", Heartbeat: e.Heartbeat + 1, Notice: 0},
		} {
			op := fmt.Sprintf("Heartbeat with notice %d over the bumped notice %d (%+v)", stale.Notice, notice, stale)
			ms, err := m.Heartbeat(ctx(t), r, stale)
			wantMemberConflict(t, op, err, r, a, bumped)
			if ms != nil {
				t.Fatalf("%s: a failed Heartbeat returned entries %+v", op, ms)
			}
			wantStoredExactly(t, op, m, r, []leases.Member{bumped, mate})
		}
		e = bumped
	}

	// The member heartbeats again with the notice it learnt: it
	// succeeds, and keeps the notice.
	for range 2 {
		e.Heartbeat++
		ms := mustHeartbeat(t, m, r, e)
		wantEntry(t, "a heartbeat with the bumped notice", ms, mate)
		wantStored(t, "after a heartbeat with the bumped notice", m, r, e)
	}
	// The row-mate, whose notice nobody bumped, heartbeats on.
	mate.Heartbeat++
	wantEntry(t, "the row-mate's heartbeat", mustHeartbeat(t, m, r, mate), e)
}

// testEndedRoundTrips: Ended, as Join and Heartbeat write it, is read back
// by Members, returned by Join, Heartbeat and ReplaceMember (in the entry
// written and in a row-mate's), and carried by a conflict.
func testEndedRoundTrips(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a, b := newOwner(t, "a"), newOwner(t, "b")
	steps := []leases.Member{
		{Owner: a, Incarnation: "inc-1", Heartbeat: 1, Ended: 1},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 2, Ended: 3},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 3, Ended: 3},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 4}, // Ended back to 0
		{Owner: a, Incarnation: "inc-1", Heartbeat: 5, Ended: 1 << 62, Leaving: true},
	}
	mustJoin(t, m, r, steps[0])
	wantStored(t, "after the join", m, r, steps[0])
	for i, e := range steps[1:] {
		op := fmt.Sprintf("heartbeat %d", i+1)
		mustHeartbeat(t, m, r, e)
		wantStored(t, op, m, r, e)
	}
	e := steps[len(steps)-1]
	// A row-mate's join and heartbeat return the entry with its Ended.
	mate := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1, Ended: 2}
	wantEntry(t, "the row-mate's join", mustJoin(t, m, r, mate), e)
	mate.Heartbeat++
	wantEntry(t, "the row-mate's heartbeat", mustHeartbeat(t, m, r, mate), e)
	wantStored(t, "after the row-mate's heartbeat", m, r, mate)

	// ReplaceMember writes and returns Ended: a notice bump keeps it, a
	// new incarnation writes its own.
	bumped := e
	bumped.Notice = 1
	wantEntry(t, "ReplaceMember bumping the notice", mustReplace(t, m, r, e, bumped), mate)
	wantStored(t, "after the notice bump", m, r, bumped)
	next := leases.Member{Owner: a, Incarnation: "inc-2", Heartbeat: 1, Ended: 5}
	wantEntry(t, "ReplaceMember by a new incarnation", mustReplace(t, m, r, bumped, next), mate)
	wantStored(t, "after ReplaceMember", m, r, next)

	// A conflict carries the entry with its Ended.
	_, err := m.Heartbeat(ctx(t), r, leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 6, Ended: 1 << 62})
	wantMemberConflict(t, "Heartbeat of the replaced incarnation", err, r, a, next)
	_, err = m.ReplaceMember(ctx(t), r, bumped, leases.Member{})
	wantMemberConflict(t, "ReplaceMember having seen the replaced entry", err, r, a, next)
	_, err = m.Join(ctx(t), r, leases.Member{Owner: a, Incarnation: "inc-3", Heartbeat: 1})
	wantMemberConflict(t, "Join of another incarnation", err, r, a, next)
	wantStoredExactly(t, "after the refused writes", m, r, []leases.Member{next, mate})

	// The new incarnation heartbeats with an Ended of its own.
	next.Heartbeat, next.Ended = 2, 6
	mustHeartbeat(t, m, r, next)
	wantStored(t, "after the new incarnation's heartbeat", m, r, next)
}

// testListingRoundTrips: Listing, as Join, Heartbeat and ReplaceMember
// write it, is read back by Members, returned in a row-mate's answers,
// and carried by a conflict.
func testListingRoundTrips(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a, b := newOwner(t, "a"), newOwner(t, "b")
	long := strings.Repeat("0123456789abcdef,", 3) + "0123456789abcdef"
	steps := []leases.Member{
		{Owner: a, Incarnation: "inc-1", Heartbeat: 1, Listing: "d1"},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 2, Listing: long},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 3, Listing: long, Ended: 1},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 4}, // Listing back to empty
		{Owner: a, Incarnation: "inc-1", Heartbeat: 5, Listing: "d2"},
	}
	mustJoin(t, m, r, steps[0])
	wantStored(t, "after the join", m, r, steps[0])
	for i, e := range steps[1:] {
		op := fmt.Sprintf("heartbeat %d", i+1)
		mustHeartbeat(t, m, r, e)
		wantStored(t, op, m, r, e)
	}
	e := steps[len(steps)-1]
	// A row-mate's join and heartbeat return the entry with its Listing.
	mate := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1, Listing: "mate"}
	wantEntry(t, "the row-mate's join", mustJoin(t, m, r, mate), e)
	mate.Heartbeat++
	wantEntry(t, "the row-mate's heartbeat", mustHeartbeat(t, m, r, mate), e)
	wantStored(t, "after the row-mate's heartbeat", m, r, mate)

	// ReplaceMember writes it: a new incarnation with its own.
	next := leases.Member{Owner: a, Incarnation: "inc-2", Heartbeat: 1, Listing: "d3"}
	wantEntry(t, "ReplaceMember by a new incarnation", mustReplace(t, m, r, e, next), mate)
	wantStored(t, "after ReplaceMember", m, r, next)

	// A conflict carries the entry with its Listing.
	_, err := m.Heartbeat(ctx(t), r, leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 6, Listing: "d9"})
	wantMemberConflict(t, "Heartbeat of the replaced incarnation", err, r, a, next)
	wantStoredExactly(t, "after the refused heartbeat", m, r, []leases.Member{next, mate})
}

func testReplaceMember(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a := newOwner(t, "a")
	old := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 3}
	mustJoin(t, m, r, old)
	next := leases.Member{Owner: a, Incarnation: "inc-2", Heartbeat: 1}

	// A seen entry that is not the stored one: nothing is replaced.
	for _, seen := range []leases.Member{
		{Owner: a, Incarnation: "inc-1", Heartbeat: 2},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 4},
		{Owner: a, Incarnation: "inc-x", Heartbeat: 3},
	} {
		_, err := m.ReplaceMember(ctx(t), r, seen, next)
		wantMemberConflict(t, fmt.Sprintf("ReplaceMember having seen %+v (stored %+v)", seen, old), err, r, a, old)
		wantStoredExactly(t, "after the refused ReplaceMember", m, r, []leases.Member{old})
	}
	// The entry moves on after it was seen: the replacement fails.
	alive := old
	alive.Heartbeat++
	mustHeartbeat(t, m, r, alive)
	_, err := m.ReplaceMember(ctx(t), r, old, next)
	wantMemberConflict(t, "ReplaceMember of an entry that heartbeated since it was seen", err, r, a, alive)
	wantStoredExactly(t, "after the refused ReplaceMember", m, r, []leases.Member{alive})

	// Seen as stored: replaced.
	mustReplace(t, m, r, alive, next)
	wantStoredExactly(t, "after ReplaceMember", m, r, []leases.Member{next})
	// The replaced incarnation can no longer heartbeat; the new one can.
	alive.Heartbeat++
	_, err = m.Heartbeat(ctx(t), r, alive)
	wantMemberConflict(t, "Heartbeat of the replaced incarnation", err, r, a, next)
	next.Heartbeat++
	mustHeartbeat(t, m, r, next)
	// An entry that already is next counts as replaced.
	mustReplace(t, m, r, alive, next)
	wantStoredExactly(t, "after ReplaceMember with the entry already next", m, r, []leases.Member{next})

	// An owner without an entry: nothing to replace, nothing written.
	z := newOwner(t, "z")
	_, err = m.ReplaceMember(ctx(t), r, leases.Member{Owner: z, Incarnation: "inc-1", Heartbeat: 1}, leases.Member{Owner: z, Incarnation: "inc-2", Heartbeat: 1})
	wantMemberConflict(t, "ReplaceMember of an absent entry", err, r, z, leases.Member{})
	wantStoredExactly(t, "after ReplaceMember of an absent entry", m, r, []leases.Member{next})
}

func testReplaceMemberRemoves(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a, b := newOwner(t, "a"), newOwner(t, "b")
	ea := leases.Member{Owner: a, Incarnation: "inc-a", Heartbeat: 9, Leaving: true}
	eb := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1}
	mustJoin(t, m, r, ea)
	mustJoin(t, m, r, eb)

	// A stale seen entry removes nothing.
	stale := ea
	stale.Heartbeat--
	_, err := m.ReplaceMember(ctx(t), r, stale, leases.Member{})
	wantMemberConflict(t, "removal having seen an older heartbeat", err, r, a, ea)
	wantStoredExactly(t, "after the refused removal", m, r, []leases.Member{ea, eb})

	ms := mustReplace(t, m, r, ea, leases.Member{})
	wantExactly(t, "the removal's answer", ms, []leases.Member{eb})
	wantStoredExactly(t, "after the removal", m, r, []leases.Member{eb})
	// Removing it again: it is already gone, which counts as removed.
	wantExactly(t, "the second removal's answer", mustReplace(t, m, r, ea, leases.Member{}), []leases.Member{eb})
	wantStoredExactly(t, "after the second removal", m, r, []leases.Member{eb})
	// A removed owner joins afresh, in any incarnation.
	back := leases.Member{Owner: a, Incarnation: "inc-a2", Heartbeat: 1}
	mustJoin(t, m, r, back)
	// A removal of an entry re-created since it was seen fails.
	_, err = m.ReplaceMember(ctx(t), r, ea, leases.Member{})
	wantMemberConflict(t, "removal of an entry re-created since", err, r, a, back)
	wantStoredExactly(t, "after the refused removal", m, r, []leases.Member{back, eb})
}

func testNoticeBump(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a := newOwner(t, "a")
	e := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 6}
	mustJoin(t, m, r, e)
	e.Heartbeat, e.Leaving = 7, true
	mustHeartbeat(t, m, r, e)
	for notice := int64(1); notice <= 3; notice++ {
		bumped := e
		bumped.Notice = notice
		ms := mustReplace(t, m, r, e, bumped)
		got, _ := entryOf(ms, a)
		if got.Owner != e.Owner || got.Incarnation != e.Incarnation || got.Heartbeat != e.Heartbeat || got.Leaving != e.Leaving {
			t.Fatalf("a notice bump changed more than Notice: %+v after %+v", got, e)
		}
		wantStored(t, fmt.Sprintf("after notice bump %d", notice), m, r, bumped)
		e = bumped
	}
}

func testMemberCopies(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a, b := newOwner(t, "a"), newOwner(t, "b")
	ea := leases.Member{Owner: a, Incarnation: "inc-a", Heartbeat: 1}
	eb := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1}
	scribble := func(ms []leases.Member) {
		for i := range ms {
			ms[i].Heartbeat, ms[i].Incarnation = -1, "scribbled"
		}
		slices.Reverse(ms)
	}
	scribble(mustJoin(t, m, r, ea))
	scribble(mustJoin(t, m, r, eb))
	ea.Heartbeat++
	scribble(mustHeartbeat(t, m, r, ea))
	next := eb
	next.Notice = 1
	scribble(mustReplace(t, m, r, eb, next))
	scribble(mustMembers(t, m, r))
	wantStoredExactly(t, "Members after the caller changed earlier answers", m, r, []leases.Member{ea, next})
}

func testConcurrentOwners(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	const owners, beats = driver.RowCapacity, 5
	r := rows.fresh(t)
	ids := make([]string, owners)
	for i := range ids {
		ids[i] = newOwner(t, fmt.Sprint(i))
	}
	errs := make(chan error, owners*(beats+1))
	together(len(ids), func(i int) {
		id := ids[i]
		if _, err := m.Join(ctx(t), r, leases.Member{Owner: id, Incarnation: "inc"}); err != nil {
			errs <- fmt.Errorf("join of %s: %w", id, err)
			return
		}
		for hb := int64(1); hb <= beats; hb++ {
			if _, err := m.Heartbeat(ctx(t), r, leases.Member{Owner: id, Incarnation: "inc", Heartbeat: hb}); err != nil {
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
	a := newOwner(t, "a")
	race := func(round int, what string, try func(inc string) ([]leases.Member, error)) leases.Member {
		t.Helper()
		var (
			wins   atomic.Int64
			winner atomic.Value
			errs   = make(chan error, racers)
		)
		together(racers, func(i int) {
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
			return m.Join(ctx(t), r, leases.Member{Owner: a, Incarnation: inc, Heartbeat: 1})
		})
		// The entry is seen stale: one new incarnation takes it over.
		taken := race(round, "replace", func(inc string) ([]leases.Member, error) {
			return m.ReplaceMember(ctx(t), r, joined, leases.Member{Owner: a, Incarnation: inc, Heartbeat: 1})
		})
		mustReplace(t, m, r, taken, leases.Member{})
	}
}

// testOpaqueOwners: owner ids are opaque: dots, brackets, colons, hashes,
// non-ASCII, prefixes of each other, the longest allowed, and the names a
// store might use for its own attributes are all one entry each.
func testOpaqueOwners(t *testing.T, s leases.Store, m leases.Membership, rows *rowSource) {
	r1, r2 := rows.fresh(t), rows.fresh(t)
	base := newOwner(t, "x")
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
		k := newKey(t)
		l, err := m.TakeAs(ctx(t), mustCreate(t, s, k), o, "inc")
		if err != nil || l.Owner != o {
			t.Fatalf("TakeAs by owner %q: %+v, %v", o, l, err)
		}
		if got := mustGet(t, s, k); got.Owner != o || got.Incarnation != "inc" || got.Counter != 2 {
			t.Fatalf("TakeAs by owner %q: the store holds %+v", o, got)
		}
	}
}

// testHighestRow: the highest row number, driver.MaxMemberRows-1, is a
// membership row like the others.
func testHighestRow(t *testing.T, _ leases.Store, m leases.Membership, _ *rowSource) {
	r := driver.MaxMemberRows - 1
	a := newOwner(t, "a")
	e := leases.Member{Owner: a, Incarnation: driver.NewIncarnation(r, "x"), Heartbeat: 1}
	mustJoin(t, m, r, e)
	e.Heartbeat++
	mustHeartbeat(t, m, r, e)
	wantStoredExactly(t, "the highest row", m, r, []leases.Member{e})
	h := mustHeader(t, m)
	if err := m.BumpRow(ctx(t), r); err != nil {
		t.Fatalf("BumpRow(%d): %v", r, err)
	}
	wantHeader(t, fmt.Sprintf("after BumpRow(%d)", r), m, bumped(h, r, 1))
	mustReplace(t, m, r, e, leases.Member{})
	wantStoredExactly(t, "the highest row after the removal", m, r, nil)
}

// testHeaderBumps: BumpRow adds one to its row's version and nothing else;
// ReportVanished adds one to Vanished and nothing else; membership writes
// leave the header alone, and bumps leave the rows alone; Header returns a
// map the caller owns.
func testHeaderBumps(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r1, r2 := rows.fresh(t), rows.fresh(t)
	h := mustHeader(t, m)
	if v := h.Rows[r1]; v != 0 {
		t.Fatalf("Header: row %d, which nobody bumped, has version %d, want 0", r1, v)
	}
	bump := func(r int) {
		t.Helper()
		if err := m.BumpRow(ctx(t), r); err != nil {
			t.Fatalf("BumpRow(%d): %v", r, err)
		}
		h = bumped(h, r, 1)
		wantHeader(t, fmt.Sprintf("after BumpRow(%d)", r), m, h)
	}
	vanish := func() {
		t.Helper()
		if err := m.ReportVanished(ctx(t)); err != nil {
			t.Fatalf("ReportVanished: %v", err)
		}
		h.Vanished++
		wantHeader(t, "after ReportVanished", m, h)
	}
	bump(r1)
	bump(r1)
	bump(r2)
	vanish()
	bump(r1)
	vanish()
	vanish()
	if got := mustHeader(t, m); got.Rows[r1] != 3 || got.Rows[r2] != 1 {
		t.Fatalf("Header after three bumps of row %d and one of row %d: %+v", r1, r2, got)
	}

	// Bumps write no membership row.
	wantStoredExactly(t, "a bumped row", m, r1, nil)
	// Membership writes leave the header alone.
	e := leases.Member{Owner: newOwner(t, "a"), Incarnation: "inc", Heartbeat: 1}
	mustJoin(t, m, r1, e)
	next := e
	next.Heartbeat++
	mustHeartbeat(t, m, r1, next)
	mustReplace(t, m, r1, next, leases.Member{})
	wantHeader(t, "after membership writes", m, h)

	// The caller owns Header's map.
	got := mustHeader(t, m)
	if got.Rows == nil {
		t.Fatalf("Header after bumps: %+v, want roster versions", got)
	}
	got.Rows[r1] = 1000
	delete(got.Rows, r2)
	got.Rows[r2+1] = 7
	wantHeader(t, "after the caller changed Header's map", m, h)
}

// testConcurrentBumps: bumps from many goroutines at once all count (the
// increments commute: none may be lost to a read-modify-write).
func testConcurrentBumps(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	const goroutines, bumps1, bumps2, vanished = 8, 6, 3, 2
	r1, r2 := rows.fresh(t), rows.fresh(t)
	before := mustHeader(t, m)
	errs := make(chan error, goroutines*(bumps1+bumps2+2*vanished))
	together(goroutines, func(int) {
		for i := range bumps1 {
			if err := m.BumpRow(ctx(t), r1); err != nil {
				errs <- err
			}
			if i < bumps2 {
				if err := m.BumpRow(ctx(t), r2); err != nil {
					errs <- err
				}
			}
			if i < vanished {
				if err := m.ReportVanished(ctx(t)); err != nil {
					errs <- err
				}
			}
		}
	})
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent bumps: %v", err)
	}
	want := bumped(bumped(before, r1, goroutines*bumps1), r2, goroutines*bumps2)
	want.Vanished += goroutines * vanished
	wantHeader(t, fmt.Sprintf("after %d goroutines bumped row %d %d times, row %d %d times and reported %d vanished rows each",
		goroutines, r1, bumps1, r2, bumps2, vanished), m, want)
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
		leases.Key{Stream: driver.MemberHeaderKey + "-" + testName(t), Shard: "shardId-000000000000"},
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
		e := leases.Member{Owner: newOwner(t, "a"), Incarnation: "inc", Heartbeat: 1}
		mustJoin(t, m, r, e)
		entries[r] = e
	}
	if err := m.BumpRow(ctx(t), r1); err != nil {
		t.Fatal(err)
	}
	header := mustHeader(t, m)
	k := leases.Key{Stream: newKey(t).Stream, Shard: "shardId-0"}
	if _, err := s.Get(ctx(t), k); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Get(%s) of a lease never created, with membership rows written: %v, want ErrNotFound", k, err)
	}
	l := mustTake(t, s, mustCreate(t, s, k), "a")
	for r, e := range entries {
		e.Heartbeat++
		mustHeartbeat(t, m, r, e)
		entries[r] = e
	}
	if err := m.BumpRow(ctx(t), r2); err != nil {
		t.Fatal(err)
	}
	if err := m.ReportVanished(ctx(t)); err != nil {
		t.Fatal(err)
	}
	header = bumped(header, r2, 1)
	header.Vanished++
	wantRow(t, s, k, l, fmt.Sprintf("membership writes changed the lease row %s", k))
	l, err := s.Checkpoint(ctx(t), l, leases.Checkpoint{Sequence: "7"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TakeAs(ctx(t), l, "b", "inc-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateAs(ctx(t), leases.Key{Stream: k.Stream, Shard: "shardId-1"}, "b", "inc-b", leases.Checkpoint{Sequence: "3"}, ""); err != nil {
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
			"Get":                  func() error { _, err := s.Get(ctx(t), mk); return err },
			"Create":               func() error { _, err := s.Create(ctx(t), mk); return err },
			"Checkpoint":           func() error { _, err := s.Checkpoint(ctx(t), ghost, leases.Checkpoint{Sequence: "1"}); return err },
			"Release":              func() error { _, err := s.Release(ctx(t), ghost, leases.Checkpoint{Sequence: "1"}); return err },
			"Rewind of a held row": func() error { _, err := s.Rewind(ctx(t), ghost, leases.Checkpoint{Sequence: "1"}); return err },
			"Rewind of a free row": func() error { _, err := s.Rewind(ctx(t), free, leases.Checkpoint{Sequence: "1"}); return err },
			"ApplyRewind": func() error {
				g := ghost
				g.RewindTo = leases.Checkpoint{Sequence: "1"}
				_, err := s.ApplyRewind(ctx(t), g)
				return err
			},
			"TakeAs": func() error { _, err := m.TakeAs(ctx(t), free, "a", "inc"); return err },
			"CreateAs": func() error {
				_, err := m.CreateAs(ctx(t), mk, "a", "inc", leases.Checkpoint{Sequence: "1"}, "")
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

func testTakeAs(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	// A free row: owner and incarnation written.
	k := newKey(t)
	free := mustCreate(t, s, k)
	got, err := m.TakeAs(ctx(t), free, "a", "inc-a")
	if err != nil {
		t.Fatalf("TakeAs of a free row: %v", err)
	}
	checkWritten(t, s, "TakeAs of a free row", free, got)
	if got.Owner != "a" || got.Incarnation != "inc-a" || !got.Held() || got.Checkpoint != free.Checkpoint {
		t.Fatalf("TakeAs of a free row: %+v, want owner a, incarnation inc-a", got)
	}

	// A row held by another owner, with a checkpoint and a pending rewind:
	// owner and incarnation written, checkpoint and rewind kept.
	k2 := leases.Key{Stream: k.Stream, Shard: "shardId-000000000001"}
	l, err := m.TakeAs(ctx(t), mustCreate(t, s, k2), "a", "inc-a")
	if err != nil {
		t.Fatal(err)
	}
	if l, err = s.Checkpoint(ctx(t), l, leases.Checkpoint{Sequence: "42", SubSequence: 3}); err != nil {
		t.Fatal(err)
	}
	if l, err = s.Rewind(ctx(t), l, leases.Checkpoint{Sequence: "40"}); err != nil {
		t.Fatal(err)
	}
	got, err = m.TakeAs(ctx(t), l, "b", "inc-b")
	if err != nil {
		t.Fatalf("TakeAs of a held row: %v", err)
	}
	checkWritten(t, s, "TakeAs of a held row", l, got)
	switch {
	case got.Owner != "b" || got.Incarnation != "inc-b":
		t.Fatalf("TakeAs: owner %q, incarnation %q; want b, inc-b", got.Owner, got.Incarnation)
	case got.Checkpoint != l.Checkpoint || got.RewindTo != l.RewindTo:
		t.Fatalf("TakeAs: checkpoint %v, rewind %v; want %v and %v kept", got.Checkpoint, got.RewindTo, l.Checkpoint, l.RewindTo)
	}

	// A new incarnation of the same owner takes the row from the old one.
	next, err := m.TakeAs(ctx(t), got, "b", "inc-b2")
	if err != nil {
		t.Fatalf("TakeAs by a new incarnation of the holder: %v", err)
	}
	checkWritten(t, s, "TakeAs by a new incarnation", got, next)
	if next.Owner != "b" || next.Incarnation != "inc-b2" {
		t.Fatalf("TakeAs by a new incarnation: %+v", next)
	}
}

func testTakeAsCounter(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	k := newKey(t)
	l, err := m.TakeAs(ctx(t), mustCreate(t, s, k), "a", "inc-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, stale := range []int64{l.Counter - 1, l.Counter + 1, 0} {
		old := l
		old.Counter = stale
		_, err := m.TakeAs(ctx(t), old, "b", "inc-b")
		wantConflict(t, fmt.Sprintf("TakeAs with counter %d (row at %d)", stale, l.Counter), err)
		wantRow(t, s, k, l, fmt.Sprintf("TakeAs with stale counter %d changed the row", stale))
	}
	// The counter alone is not the row: a row recreated after it vanished
	// restarts at counter 1, so a row known with another holder, or none,
	// at the same counter is another row. With a token the token tells
	// (OtherTokenConflictsAndChangesNothing); a Lease with none (not read
	// from a Store) is compared by its holder.
	for _, other := range []struct{ owner, inc string }{{"x", "inc-x"}, {"a", "inc-a-old"}, {"a", ""}, {"", ""}} {
		old := l
		old.Owner, old.Incarnation, old.Token = other.owner, other.inc, ""
		_, err := m.TakeAs(ctx(t), old, "b", "inc-b")
		wantConflict(t, fmt.Sprintf("TakeAs of the row known held by %q/%q at its counter (held by a/inc-a)", other.owner, other.inc), err)
		wantRow(t, s, k, l, fmt.Sprintf("TakeAs of the row known held by %q/%q changed it", other.owner, other.inc))
	}
	free, err := s.Release(ctx(t), l, leases.Checkpoint{Sequence: "7"})
	if err != nil {
		t.Fatal(err)
	}
	held := free
	held.Owner, held.Incarnation, held.Token = "a", "inc-a", ""
	_, err = m.TakeAs(ctx(t), held, "b", "inc-b")
	wantConflict(t, "TakeAs of a free row known held at its counter", err)
	wantRow(t, s, k, free, "TakeAs of a free row known held changed it")
	// A missing row is not created.
	ghost := leases.Lease{Key: leases.Key{Stream: k.Stream, Shard: "shardId-000000000009"}, Counter: 1}
	if _, err := m.TakeAs(ctx(t), ghost, "b", "inc-b"); !errors.Is(err, leases.ErrNotFound) && !errors.Is(err, leases.ErrConflict) {
		t.Fatalf("TakeAs of a missing row: %v, want ErrNotFound or ErrConflict", err)
	}
	if _, err := s.Get(ctx(t), ghost.Key); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("TakeAs of a missing row created it: Get = %v", err)
	}
}

func testReleaseClearsIncarnation(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	k := newKey(t)
	l, err := m.TakeAs(ctx(t), mustCreate(t, s, k), "a", "inc-a")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Release(ctx(t), l, leases.Checkpoint{Sequence: "99"})
	if err != nil {
		t.Fatal(err)
	}
	checkWritten(t, s, "Release after TakeAs", l, got)
	if got.Held() || got.Incarnation != "" || got.Checkpoint.Sequence != "99" {
		t.Fatalf("Release after TakeAs: %+v, want free, no incarnation, checkpoint 99", got)
	}
	// The next holder's TakeAs names its own incarnation.
	next, err := m.TakeAs(ctx(t), got, "a", "inc-a2")
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
	base := newKey(t)
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
		l, err := m.CreateAs(ctx(t), k, owner, inc, cp, rewind)
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
		wantRow(t, s, k, l, fmt.Sprintf("after CreateAs(%s)", k))

		// Another incarnation of the owner, and another owner, cannot
		// write the row; its holder can.
		for _, fake := range []leases.Lease{
			func() leases.Lease { f := l; f.Incarnation = inc + "-old"; return f }(),
			func() leases.Lease { f := l; f.Owner = owner + "-other"; return f }(),
		} {
			_, err := s.Checkpoint(ctx(t), fake, leases.Checkpoint{Sequence: "5"})
			wantConflict(t, fmt.Sprintf("Checkpoint by (%q, %q) of a row CreateAs made for (%q, %q)", fake.Owner, fake.Incarnation, owner, inc), err)
		}
		wantRow(t, s, k, l, "writes by others changed the row CreateAs made")
		got, err := s.Checkpoint(ctx(t), l, leases.Checkpoint{Sequence: "5"})
		if err != nil {
			t.Fatalf("Checkpoint by the incarnation CreateAs made the holder: %v", err)
		}
		checkWritten(t, s, "Checkpoint after CreateAs", l, got)
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
	k := newKey(t)
	cp := leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588898"}
	l, err := m.CreateAs(ctx(t), k, "", "", cp, "rewind-1")
	if err != nil {
		t.Fatalf("CreateAs(%s) with no owner: %v", k, err)
	}
	want := leases.Lease{Key: k, Counter: 1, Checkpoint: cp, Rewind: "rewind-1", Token: l.Token, Recovered: l.Token}
	if l != want || l.Token == "" || l.Held() {
		t.Fatalf("CreateAs(%s) with no owner: %+v, want %+v: free, recovered by its own token", k, l, want)
	}
	wantRow(t, s, k, l, "after CreateAs with no owner")
	_, err = m.CreateAs(ctx(t), k, "", "", leases.Checkpoint{}, "")
	wantConflict(t, "CreateAs with no owner of a row that exists", err)
	_, err = m.CreateAs(ctx(t), leases.Key{Stream: k.Stream, Shard: k.Shard + "x"}, "", "inc", cp, "")
	wantInvalid(t, "CreateAs with an incarnation and no owner", err)

	inc := driver.NewIncarnation(0, "abc")
	tk, err := m.TakeAs(ctx(t), l, "owner-a", inc)
	if err != nil {
		t.Fatalf("TakeAs of a recovered row: %v", err)
	}
	if tk.Recovered != l.Recovered {
		t.Fatalf("TakeAs of a recovered row: Recovered %q, want %q kept", tk.Recovered, l.Recovered)
	}
	c, err := s.Checkpoint(ctx(t), tk, leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588899"})
	if err != nil || c.Recovered != l.Recovered {
		t.Fatalf("Checkpoint by a holder whose copy is recovered: %+v, %v; want Recovered %q kept", c, err, l.Recovered)
	}
	wantRow(t, s, k, c, "after a Checkpoint that keeps Recovered")
	clear := c
	clear.Recovered = ""
	c2, err := s.Checkpoint(ctx(t), clear, leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588900"})
	if err != nil || c2.Recovered != "" {
		t.Fatalf("Checkpoint by a holder whose copy is not recovered: %+v, %v; want Recovered cleared", c2, err)
	}
	wantRow(t, s, k, c2, "after a Checkpoint that clears Recovered")

	// A row released by a holder that did not wait keeps it.
	k2 := leases.Key{Stream: k.Stream, Shard: k.Shard + "-2"}
	l2, err := m.CreateAs(ctx(t), k2, "", "", leases.Checkpoint{}, "")
	if err != nil || l2.Recovered == "" {
		t.Fatalf("CreateAs(%s) with no owner and no checkpoint: %+v, %v", k2, l2, err)
	}
	t2, err := m.TakeAs(ctx(t), l2, "owner-b", inc)
	if err != nil {
		t.Fatalf("TakeAs: %v", err)
	}
	r2, err := s.Release(ctx(t), t2, leases.Checkpoint{})
	if err != nil || r2.Recovered != l2.Recovered || r2.Held() {
		t.Fatalf("Release by a holder whose copy is recovered: %+v, %v; want free with Recovered %q", r2, err, l2.Recovered)
	}

	// Create and a held CreateAs are not recoveries.
	n, err := s.Create(ctx(t), leases.Key{Stream: k.Stream, Shard: k.Shard + "-3"})
	if err != nil || n.Recovered != "" {
		t.Fatalf("Create: %+v, %v; want no Recovered", n, err)
	}
	h, err := m.CreateAs(ctx(t), leases.Key{Stream: k.Stream, Shard: k.Shard + "-4"}, "owner-c", inc, cp, "")
	if err != nil || h.Recovered != "" {
		t.Fatalf("CreateAs with an owner: %+v, %v; want no Recovered", h, err)
	}
}

// testTakeAsCheckpoint: TakeAs keeps the row's checkpoint when l's is zero
// and writes l's, in the same write, when it is not: a taker that knows
// where the shard was read to writes it as it takes a row recreated
// without it. The counter, token and holder change as for any take.
func testTakeAsCheckpoint(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	k := newKey(t)
	l, err := m.CreateAs(ctx(t), k, "", "", leases.Checkpoint{}, "")
	if err != nil {
		t.Fatal(err)
	}
	mine := leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588898", SubSequence: 2}
	withCp := l
	withCp.Checkpoint = mine
	inc := driver.NewIncarnation(0, "abc")
	got, err := m.TakeAs(ctx(t), withCp, "owner-a", inc)
	if err != nil {
		t.Fatalf("TakeAs carrying a checkpoint: %v", err)
	}
	if got.Checkpoint != mine || got.Owner != "owner-a" || got.Counter != l.Counter+1 || got.Recovered != l.Recovered {
		t.Fatalf("TakeAs carrying %v: %+v; want the checkpoint written, the holder taken, the recovery kept", mine, got)
	}
	wantRow(t, s, k, got, "after TakeAs carrying a checkpoint")
	rl, err := s.Release(ctx(t), got, leases.Checkpoint{})
	if err != nil {
		t.Fatal(err)
	}
	none := rl
	none.Checkpoint = leases.Checkpoint{}
	again, err := m.TakeAs(ctx(t), none, "owner-b", inc)
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
	base := newKey(t)
	key := func(i int) leases.Key { return leases.Key{Stream: base.Stream, Shard: fmt.Sprintf("shardId-%012d", i)} }
	last := func(k leases.Key) leases.RewindRecord {
		t.Helper()
		r, err := m.LastRewind(ctx(t), k)
		if err != nil {
			t.Fatalf("LastRewind(%s): %v", k, err)
		}
		return r
	}
	free := mustCreate(t, s, key(0))
	if r := last(key(0)); r != (leases.RewindRecord{}) {
		t.Fatalf("LastRewind of a row never rewound: %+v, want none", r)
	}
	cp1 := leases.RewindAtSequence("100")
	r1, err := s.Rewind(ctx(t), free, cp1)
	if err != nil {
		t.Fatalf("Rewind of a free row: %v", err)
	}
	if r1.Rewind == "" {
		t.Fatalf("Rewind of a free row: %+v, want a Rewind id on the row", r1)
	}
	wantRow(t, s, key(0), r1, "after Rewind of a free row")
	if r := last(key(0)); r != (leases.RewindRecord{ID: r1.Rewind, To: cp1}) {
		t.Fatalf("LastRewind after a Rewind to %v: %+v, want id %q", cp1, r, r1.Rewind)
	}
	// Every other write keeps the id; a rewind of the held row writes a new one.
	held := mustTake(t, s, r1, "a")
	held, err = s.Checkpoint(ctx(t), held, leases.Checkpoint{Sequence: "120"})
	if err != nil || held.Rewind != r1.Rewind {
		t.Fatalf("Checkpoint after a rewind: %+v, %v; want the Rewind id %q kept", held, err, r1.Rewind)
	}
	cp2 := leases.Checkpoint{Sequence: "50", SubSequence: 2}
	pending, err := s.Rewind(ctx(t), held, cp2)
	if err != nil {
		t.Fatalf("Rewind of a held row: %v", err)
	}
	if pending.Rewind == "" || pending.Rewind == r1.Rewind {
		t.Fatalf("Rewind of a held row: Rewind id %q, want a new one (the last was %q)", pending.Rewind, r1.Rewind)
	}
	if r := last(key(0)); r != (leases.RewindRecord{ID: pending.Rewind, To: cp2}) {
		t.Fatalf("LastRewind after a second Rewind to %v: %+v, want id %q", cp2, r, pending.Rewind)
	}
	applied, err := s.ApplyRewind(ctx(t), pending)
	if err != nil || applied.Rewind != pending.Rewind {
		t.Fatalf("ApplyRewind: %+v, %v; want the Rewind id %q kept", applied, err, pending.Rewind)
	}
	released, err := s.Release(ctx(t), applied, leases.Checkpoint{Sequence: "60"})
	if err != nil || released.Rewind != pending.Rewind {
		t.Fatalf("Release: %+v, %v; want the Rewind id %q kept", released, err, pending.Rewind)
	}
	retaken, err := m.TakeAs(ctx(t), released, "b", incOf("b"))
	if err != nil || retaken.Rewind != pending.Rewind {
		t.Fatalf("TakeAs: %+v, %v; want the Rewind id %q kept", retaken, err, pending.Rewind)
	}
	// A failed rewind changes neither the row nor the record.
	_, err = s.Rewind(ctx(t), released, leases.Checkpoint{Sequence: "1"})
	wantConflict(t, "Rewind at a stale counter", err)
	wantRow(t, s, key(0), retaken, "a failed Rewind changed the row")
	if r := last(key(0)); r != (leases.RewindRecord{ID: pending.Rewind, To: cp2}) {
		t.Fatalf("LastRewind after a failed Rewind: %+v, want the last rewind that landed (id %q)", r, pending.Rewind)
	}
	// Nor does a failed first rewind of a shard leave a record.
	other := mustCreate(t, s, key(2))
	_, err = s.Rewind(ctx(t), leases.Lease{Key: other.Key, Counter: other.Counter + 5}, leases.Checkpoint{Sequence: "1"})
	wantConflict(t, "Rewind of a shard never rewound, at a stale counter", err)
	if r := last(key(2)); r != (leases.RewindRecord{}) {
		t.Fatalf("LastRewind after a failed first Rewind: %+v, want none", r)
	}
	// Records are per shard.
	mustCreate(t, s, key(1))
	if r := last(key(1)); r != (leases.RewindRecord{}) {
		t.Fatalf("LastRewind of another shard: %+v, want none", r)
	}
}

// testCreateAsOnlyIfAbsent: CreateAs on a row that exists, in any state,
// fails with a *leases.ConflictError and changes nothing.
func testCreateAsOnlyIfAbsent(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	base := newKey(t)
	key := func(i int) leases.Key { return leases.Key{Stream: base.Stream, Shard: fmt.Sprintf("shardId-%012d", i)} }
	cp := leases.Checkpoint{Sequence: "77"}

	free := mustCreate(t, s, key(0))
	held, err := s.Checkpoint(ctx(t), mustTake(t, s, mustCreate(t, s, key(1)), "a"), leases.Checkpoint{Sequence: "9"})
	if err != nil {
		t.Fatal(err)
	}
	released, err := s.Release(ctx(t), mustTake(t, s, mustCreate(t, s, key(2)), "a"), leases.Checkpoint{Sequence: "10"})
	if err != nil {
		t.Fatal(err)
	}
	created, err := m.CreateAs(ctx(t), key(3), "a", incOf("a"), leases.Checkpoint{Sequence: "11"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for what, l := range map[string]leases.Lease{"a free row": free, "a held row": held, "a released row": released, "a row CreateAs made": created} {
		for _, by := range [][2]string{{"a", incOf("a")}, {"b", incOf("b")}} {
			op := fmt.Sprintf("CreateAs by (%q, %q) of %s", by[0], by[1], what)
			got, err := m.CreateAs(ctx(t), l.Key, by[0], by[1], cp, "")
			wantConflict(t, op, err)
			if got != (leases.Lease{}) {
				t.Errorf("%s: a failed CreateAs returned %+v, want the zero Lease", op, got)
			}
			wantRow(t, s, l.Key, l, op+" changed the row")
		}
	}
	// Nor does Create create over a row CreateAs made.
	_, err = s.Create(ctx(t), key(3))
	wantConflict(t, "Create of a row CreateAs made", err)
	wantRow(t, s, key(3), created, "Create changed the row CreateAs made")
}

func testMemberInvalidArguments(t *testing.T, s leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a := newOwner(t, "a")
	e := leases.Member{Owner: a, Incarnation: "inc", Heartbeat: 1}
	header := mustHeader(t, m)
	for _, row := range []int{-1, driver.MaxMemberRows, driver.MaxMemberRows + 1, 1 << 20} {
		_, err := m.Join(ctx(t), row, e)
		wantInvalid(t, fmt.Sprintf("Join in row %d", row), err)
		_, err = m.Heartbeat(ctx(t), row, e)
		wantInvalid(t, fmt.Sprintf("Heartbeat in row %d", row), err)
		_, err = m.Members(ctx(t), row)
		wantInvalid(t, fmt.Sprintf("Members(%d)", row), err)
		_, err = m.ReplaceMember(ctx(t), row, e, leases.Member{})
		wantInvalid(t, fmt.Sprintf("ReplaceMember in row %d", row), err)
		wantInvalid(t, fmt.Sprintf("BumpRow(%d)", row), m.BumpRow(ctx(t), row))
	}
	wantHeader(t, "after calls with invalid rows", m, header)

	badEntries := map[string]leases.Member{
		"an empty owner":                {Incarnation: "inc", Heartbeat: 1},
		"an owner longer than 256":      {Owner: a + strings.Repeat("x", 257), Incarnation: "inc", Heartbeat: 1},
		"an empty incarnation":          {Owner: a, Heartbeat: 1},
		"an incarnation longer than 64": {Owner: a, Incarnation: strings.Repeat("i", 65), Heartbeat: 1},
	}
	for what, bad := range badEntries {
		_, err := m.Join(ctx(t), r, bad)
		wantInvalid(t, "Join of an entry with "+what, err)
		_, err = m.Heartbeat(ctx(t), r, bad)
		wantInvalid(t, "Heartbeat of an entry with "+what, err)
	}
	wantStoredExactly(t, "after invalid joins and heartbeats", m, r, nil)

	mustJoin(t, m, r, e)
	for what, c := range map[string]struct{ seen, next leases.Member }{
		"a seen entry without incarnation":  {leases.Member{Owner: a, Heartbeat: 1}, leases.Member{}},
		"a seen entry without owner":        {leases.Member{Incarnation: "inc", Heartbeat: 1}, leases.Member{}},
		"a next entry of another owner":     {e, leases.Member{Owner: a + "-other", Incarnation: "inc-2", Heartbeat: 1}},
		"a next entry without incarnation":  {e, leases.Member{Owner: a, Heartbeat: 1}},
		"a next incarnation longer than 64": {e, leases.Member{Owner: a, Incarnation: strings.Repeat("i", 65), Heartbeat: 1}},
	} {
		_, err := m.ReplaceMember(ctx(t), r, c.seen, c.next)
		wantInvalid(t, "ReplaceMember with "+what, err)
	}
	wantStoredExactly(t, "after invalid replacements", m, r, []leases.Member{e})

	k := newKey(t)
	l := mustCreate(t, s, k)
	missing := leases.Key{Stream: k.Stream, Shard: "shardId-000000000001"}
	for what, c := range map[string][2]string{
		"an empty owner":                {"", "inc"},
		"an owner longer than 256":      {strings.Repeat("o", 257), "inc"},
		"an empty incarnation":          {"a", ""},
		"an incarnation longer than 64": {"a", strings.Repeat("i", 65)},
	} {
		_, err := m.TakeAs(ctx(t), l, c[0], c[1])
		wantInvalid(t, "TakeAs with "+what, err)
		_, err = m.CreateAs(ctx(t), missing, c[0], c[1], leases.Checkpoint{Sequence: "1"}, "")
		wantInvalid(t, "CreateAs with "+what, err)
	}
	_, err := m.TakeAs(ctx(t), leases.Lease{Key: leases.Key{Stream: k.Stream}, Counter: 1}, "a", "inc")
	wantInvalid(t, "TakeAs with an empty shard id", err)
	for what, bad := range map[string]leases.Key{
		"an empty shard id":          {Stream: k.Stream},
		"an empty stream":            {Shard: "shardId-000000000001"},
		"a shard id with a colon":    {Stream: k.Stream, Shard: "shard:1"},
		"a control character":        {Stream: k.Stream + "\x00", Shard: "shardId-000000000001"},
		"a shard id longer than 128": {Stream: k.Stream, Shard: strings.Repeat("s", 129)},
		"a stream longer than 2048":  {Stream: strings.Repeat("s", 2049), Shard: "shardId-000000000001"},
	} {
		_, err := m.CreateAs(ctx(t), bad, "a", "inc", leases.Checkpoint{Sequence: "1"}, "")
		wantInvalid(t, "CreateAs with "+what, err)
	}
	wantRow(t, s, k, l, "invalid TakeAs calls changed the row")
	if _, err := s.Get(ctx(t), missing); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("invalid CreateAs calls created %s: Get = %v", missing, err)
	}
}

func testMemberCancelledContext(t *testing.T, s leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a, b := newOwner(t, "a"), newOwner(t, "b")
	e := leases.Member{Owner: a, Incarnation: "inc", Heartbeat: 1}
	mustJoin(t, m, r, e)
	k := newKey(t)
	l := mustCreate(t, s, k)
	missing := leases.Key{Stream: k.Stream, Shard: "shardId-000000000001"}
	header := mustHeader(t, m)
	for name, c := range deadContexts(t) {
		calls := map[string]func() error{
			"Join": func() error {
				_, err := m.Join(c, r, leases.Member{Owner: b, Incarnation: "inc", Heartbeat: 1})
				return err
			},
			"Heartbeat": func() error {
				_, err := m.Heartbeat(c, r, leases.Member{Owner: a, Incarnation: "inc", Heartbeat: 2})
				return err
			},
			"Members": func() error { _, err := m.Members(c, r); return err },
			"ReplaceMember": func() error {
				_, err := m.ReplaceMember(c, r, e, leases.Member{Owner: a, Incarnation: "inc-2", Heartbeat: 1})
				return err
			},
			"ReplaceMember removing": func() error { _, err := m.ReplaceMember(c, r, e, leases.Member{}); return err },
			"Header":                 func() error { _, err := m.Header(c); return err },
			"BumpRow":                func() error { return m.BumpRow(c, r) },
			"ReportVanished":         func() error { return m.ReportVanished(c) },
			"TakeAs":                 func() error { _, err := m.TakeAs(c, l, "a", "inc"); return err },
			"CreateAs": func() error {
				_, err := m.CreateAs(c, missing, "a", "inc", leases.Checkpoint{Sequence: "1"}, "")
				return err
			},
		}
		wantDeadCalls(t, name, c, calls)
	}
	wantStoredExactly(t, "after calls with a dead context", m, r, []leases.Member{e})
	wantHeader(t, "after calls with a dead context", m, header)
	wantRow(t, s, k, l, "TakeAs with a dead context changed the row")
	if _, err := s.Get(ctx(t), missing); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("CreateAs with a dead context created %s: Get = %v", missing, err)
	}
}

// testStreamMark: a stream has no mark until MarkStream; the first token
// written stays (a later MarkStream returns it and writes nothing), a
// resent call returns its own; marks of other streams are apart, and a
// mark is not a lease row.
func testStreamMark(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	stream, other := newKey(t).Stream, newKey(t).Stream
	mark := func(stream, token string) string {
		t.Helper()
		got, err := m.MarkStream(ctx(t), stream, token)
		if err != nil {
			t.Fatalf("MarkStream(%s, %s): %v", stream, token, err)
		}
		return got
	}
	read := func(stream string) string {
		t.Helper()
		got, err := m.StreamMark(ctx(t), stream)
		if err != nil {
			t.Fatalf("StreamMark(%s): %v", stream, err)
		}
		return got
	}
	if got := read(stream); got != "" {
		t.Fatalf("StreamMark of a stream nobody marked: %q, want none", got)
	}
	if got := mark(stream, "first"); got != "first" {
		t.Fatalf("the first MarkStream returned %q, want its own token", got)
	}
	if got := mark(stream, "first"); got != "first" {
		t.Fatalf("MarkStream resent returned %q, want its own token", got)
	}
	if got := mark(stream, "second"); got != "first" {
		t.Fatalf("a second MarkStream returned %q, want the first token", got)
	}
	if got := read(stream); got != "first" {
		t.Fatalf("StreamMark: %q, want the first token", got)
	}
	if got := read(other); got != "" {
		t.Fatalf("StreamMark of another stream: %q, want none", got)
	}
	if _, err := s.Get(ctx(t), leases.Key{Stream: stream, Shard: "shardId-000000000000"}); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Get of a row of a marked stream nobody created: %v, want ErrNotFound", err)
	}
	if _, err := m.MarkStream(ctx(t), stream, ""); err == nil || errors.Is(err, leases.ErrConflict) {
		t.Fatalf("MarkStream with no token: %v, want a validation error", err)
	}
	if _, err := m.StreamMark(ctx(t), ""); err == nil || errors.Is(err, leases.ErrConflict) {
		t.Fatalf("StreamMark of no stream: %v, want a validation error", err)
	}
}

// testTakenMark: the first token MarkTaken writes for a row stays (a
// later call returns it and writes nothing), a resent call returns its own;
// marks of other rows and the stream's mark are apart, and a mark neither
// creates nor changes the row.
func testTakenMark(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	k, other := newKey(t), newKey(t)
	mark := func(k leases.Key, token string) string {
		t.Helper()
		got, err := m.MarkTaken(ctx(t), k, token)
		if err != nil {
			t.Fatalf("MarkTaken(%s, %s): %v", k, token, err)
		}
		return got
	}
	if got := mark(k, "first"); got != "first" {
		t.Fatalf("the first MarkTaken returned %q, want its own token", got)
	}
	if got := mark(k, "first"); got != "first" {
		t.Fatalf("MarkTaken resent returned %q, want its own token", got)
	}
	if got := mark(k, "second"); got != "first" {
		t.Fatalf("a second MarkTaken returned %q, want the first token", got)
	}
	if got := mark(other, "second"); got != "second" {
		t.Fatalf("MarkTaken of another row returned %q, want its own token", got)
	}
	if got, err := m.StreamMark(ctx(t), k.Stream); err != nil || got != "" {
		t.Fatalf("StreamMark of a stream whose row was marked taken: %q, %v; want none", got, err)
	}
	if _, err := s.Get(ctx(t), k); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Get of a row marked taken that nobody created: %v, want ErrNotFound", err)
	}
	l, err := s.Create(ctx(t), k)
	if err != nil {
		t.Fatalf("Create of a row marked taken: %v", err)
	}
	if got := mark(k, "third"); got != "first" {
		t.Fatalf("MarkTaken of a created row returned %q, want the first token", got)
	}
	wantRow(t, s, k, l, "MarkTaken changed the row")
	if _, err := m.MarkTaken(ctx(t), k, ""); err == nil || errors.Is(err, leases.ErrConflict) {
		t.Fatalf("MarkTaken with no token: %v, want a validation error", err)
	}
}

// testTakeAsFillRewind: a TakeAs that writes a checkpoint writes l.Rewind
// with it (the operator's rewind that checkpoint follows); one that writes
// none keeps the row's.
func testTakeAsFillRewind(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	k := newKey(t)
	row, err := m.CreateAs(ctx(t), k, "", "", leases.Checkpoint{Sequence: "10"}, "rw-old")
	if err != nil {
		t.Fatal(err)
	}
	fill := row
	fill.Checkpoint, fill.Rewind = leases.Checkpoint{Sequence: leases.RewindTrimHorizon}, "rw-known"
	got, err := m.TakeAs(ctx(t), fill, "a", "inc-a")
	if err != nil {
		t.Fatalf("TakeAs with a checkpoint and a rewind: %v", err)
	}
	if got.Checkpoint != fill.Checkpoint || got.Rewind != "rw-known" {
		t.Fatalf("TakeAs with checkpoint %v and rewind %q: %+v, want both written", fill.Checkpoint, fill.Rewind, got)
	}
	if stored := mustGet(t, s, k); stored.Rewind != "rw-known" {
		t.Fatalf("row after TakeAs with a rewind: %+v, want rewind rw-known", stored)
	}
	k2 := leases.Key{Stream: k.Stream, Shard: "shardId-000000000001"}
	row2, err := m.CreateAs(ctx(t), k2, "", "", leases.Checkpoint{Sequence: "10"}, "rw-old")
	if err != nil {
		t.Fatal(err)
	}
	plain := row2
	plain.Rewind = "rw-other" // no checkpoint written: the row's rewind stays
	plain.Checkpoint = leases.Checkpoint{}
	if got, err = m.TakeAs(ctx(t), plain, "a", "inc-a"); err != nil || got.Rewind != "rw-old" {
		t.Fatalf("TakeAs with no checkpoint: %+v %v, want the row's rewind rw-old kept", got, err)
	}
}
