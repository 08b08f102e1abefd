// Package membershiptest is the part of the conformance suite of
// leases.Store that checks leases.Membership: the membership rows (joins
// bounded by driver.RowCapacity, with the count kept through removals and
// resent joins; heartbeats conditional on an existing entry; replacements
// and removals; one winner among racing incarnations of an owner; rows
// kept apart from lease rows), the header (per-row roster versions and the
// vanished counter, whose increments are never lost), the first-wins
// marks, TakeAs and CreateAs.
//
// A Store's tests need not call it: leasestest.Run runs its Run as the
// subtest Membership, so that every Store passes it:
//
//	func TestConformance(t *testing.T) {
//		leasestest.Run(t, func(t *testing.T) leases.Store { return memory.New() })
//	}
package membershiptest

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/leasestest/internal/kit"
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

// Run runs the subtests of leases.Membership, in order: the first
// two check rows and a header nobody has written yet. leasestest.Run runs
// it as its subtest Membership, after checking that the store implements
// leases.Membership; a store's tests call leasestest.Run, which runs all
// of the suite. newStore is called once per subtest, as by leasestest.Run.
//
// Membership rows have fixed keys and hold at most driver.RowCapacity
// entries, so each subtest uses rows of its own (rows 0 to 63, handed out
// in turn, and the highest row, driver.MaxMemberRows-1), and owner ids of
// its own; the membership header is shared, and the subtests that share a
// store check only how their own calls change it. The store's membership
// rows and header must start empty, as on a fresh table:
// UntouchedRowsAreEmpty and UntouchedHeaderIsZero check that they read as
// no members and no versions.
func Run(t *testing.T, newStore func(t *testing.T) leases.Store) {
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
		{"BalanceRoundTrips", testBalanceRoundTrips},
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
		{"StreamMarkSinceFirstWins", testStreamMarkSince},
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

func testUntouchedRows(t *testing.T, _ leases.Store, m leases.Membership, _ *rowSource) {
	check := make([]int, 0, suiteRows+1)
	for r := range suiteRows {
		check = append(check, r)
	}
	for _, r := range append(check, driver.MaxMemberRows-1) {
		ms, err := m.Members(kit.Ctx(t), r)
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
		h, err := m.Header(kit.Ctx(t))
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
	a, b, c := kit.NewOwner(t, "a"), kit.NewOwner(t, "b"), kit.NewOwner(t, "c")
	ea := leases.Member{Owner: a, Incarnation: driver.NewIncarnation(r, "a1"), Heartbeat: 1}
	eb := leases.Member{Owner: b, Incarnation: "opaque-b", Heartbeat: 7, Notice: 3, Ended: 2, Held: 4, Streams: "digest-b", Listing: "listing-b", Proof: 10250 * time.Millisecond, Young: true, Capacity: 1500, MaxLeases: 9, Load: 42_000, Hot: "h1:41e3"}
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
	a := kit.NewOwner(t, "a")
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
		ms, err := m.Join(kit.Ctx(t), r, other)
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
	_, err := m.Join(kit.Ctx(t), r, e)
	wantMemberConflict(t, "Join of an entry that heartbeated since", err, r, a, alive)
	wantStoredExactly(t, "after the refused Join", m, r, []leases.Member{alive})

	// The entry joined three times counts once: the row still takes
	// RowCapacity-1 other owners.
	want := []leases.Member{alive}
	for i := 1; i < driver.RowCapacity; i++ {
		o := leases.Member{Owner: kit.NewOwner(t, fmt.Sprint(i)), Incarnation: "inc", Heartbeat: 1}
		if _, err := m.Join(kit.Ctx(t), r, o); err != nil {
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
		e := leases.Member{Owner: kit.NewOwner(t, fmt.Sprint(i)), Incarnation: fmt.Sprintf("inc-%d", i), Heartbeat: 1}
		ms, err := m.Join(kit.Ctx(t), r, e)
		if err != nil {
			t.Fatalf("Join %d of %d in an empty row: %v", i+1, driver.RowCapacity, err)
		}
		entries = append(entries, e)
		wantExactly(t, fmt.Sprintf("Join %d's answer", i+1), ms, entries)
	}
	refused := func(what string) {
		t.Helper()
		x := leases.Member{Owner: kit.NewOwner(t, "x"), Incarnation: "inc-x", Heartbeat: 1}
		op := fmt.Sprintf("Join in a full row (%s)", what)
		ms, err := m.Join(kit.Ctx(t), r, x)
		wantFull(t, op, err, r, x.Owner)
		if ms != nil {
			t.Fatalf("%s: a failed Join returned entries %+v", op, ms)
		}
		wantStoredExactly(t, op, m, r, entries)
	}
	joined := func(what string) leases.Member {
		t.Helper()
		e := leases.Member{Owner: kit.NewOwner(t, "y"), Incarnation: "inc-y", Heartbeat: 1}
		if _, err := m.Join(kit.Ctx(t), r, e); err != nil {
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
	_, err := m.Join(kit.Ctx(t), r, leases.Member{Owner: entries[0].Owner, Incarnation: "inc-other", Heartbeat: 1})
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
	_, err = m.ReplaceMember(kit.Ctx(t), r, stale, leases.Member{})
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
			entries[i] = leases.Member{Owner: kit.NewOwner(t, fmt.Sprint(i)), Incarnation: fmt.Sprintf("inc-%d-%d", round, i), Heartbeat: 1}
		}
		errs := make([]error, racers)
		kit.Together(racers, func(i int) { _, errs[i] = m.Join(kit.Ctx(t), r, entries[i]) })
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
		kit.Together(len(won), func(i int) { _, errs[i] = m.ReplaceMember(kit.Ctx(t), r, won[i], leases.Member{}) })
		for i := range won {
			if errs[i] != nil {
				t.Fatalf("round %d: concurrent removal of %+v: %v", round, won[i], errs[i])
			}
		}
		wantStoredExactly(t, fmt.Sprintf("round %d: after the concurrent removals", round), m, r, nil)
	}
}
