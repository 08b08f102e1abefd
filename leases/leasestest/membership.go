package leasestest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// runMembership runs the subtests of leases.Membership, in order: the first
// checks rows nobody has written yet.
func runMembership(t *testing.T, newStore func(t *testing.T) leases.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s leases.Store, m leases.Membership)
	}{
		{"UntouchedRowsAreEmpty", testUntouchedRows},
		{"HeartbeatWritesEntry", testHeartbeatWritesEntry},
		{"RowMatesSeeEachOther", testRowMates},
		{"HeartbeatOfAnotherIncarnationConflicts", testHeartbeatOtherIncarnation},
		{"HeartbeatFailsOnBumpedNotice", testHeartbeatBumpedNotice},
		{"EndedRoundTrips", testEndedRoundTrips},
		{"ReplaceMemberOnlyIfSeen", testReplaceMember},
		{"ReplaceMemberRemoves", testReplaceMemberRemoves},
		{"NoticeBump", testNoticeBump},
		{"ReturnedSlicesAreCopies", testMemberCopies},
		{"ConcurrentOwnersKeepTheirEntries", testConcurrentOwners},
		{"RacingIncarnationsOneWins", testRacingIncarnations},
		{"OwnerIDsAreOpaque", testOpaqueOwners},
		{"MembershipRowsAreNotLeases", testMemberRowsNotLeases},
		{"TakeAs", testTakeAs},
		{"TakeAsConditionalOnCounter", testTakeAsCounter},
		{"ReleaseClearsIncarnation", testReleaseClearsIncarnation},
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
			tc.fn(t, s, m)
		})
	}
}

// newOwner returns an owner id no other subtest uses whose membership row
// (leases.MemberRow) is row.
func newOwner(t *testing.T, row int, label string) string {
	t.Helper()
	name := testName(t)
	if len(name) > 100 {
		name = name[len(name)-100:]
	}
	base := fmt.Sprintf("%s-%s-%d-%d", name, label, time.Now().UnixNano(), seq.Add(1))
	for i := 0; ; i++ {
		if o := fmt.Sprintf("%s-%d", base, i); leases.MemberRow(o) == row {
			return o
		}
	}
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
// sorted by owner, one entry per owner, every entry with an incarnation.
func checkRow(t *testing.T, op string, ms []leases.Member) {
	t.Helper()
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

func mustMembers(t *testing.T, m leases.Membership, row int) []leases.Member {
	t.Helper()
	ms, err := m.Members(ctx(t), row)
	if err != nil {
		t.Fatalf("Members(%d): %v", row, err)
	}
	checkRow(t, fmt.Sprintf("Members(%d)", row), ms)
	return ms
}

func mustHeartbeat(t *testing.T, m leases.Membership, e leases.Member) []leases.Member {
	t.Helper()
	row := leases.MemberRow(e.Owner)
	ms, err := m.Heartbeat(ctx(t), row, e)
	if err != nil {
		t.Fatalf("Heartbeat(%d, %+v): %v", row, e, err)
	}
	wantEntry(t, "Heartbeat", ms, e)
	return ms
}

func mustReplace(t *testing.T, m leases.Membership, seen, next leases.Member) []leases.Member {
	t.Helper()
	row := leases.MemberRow(seen.Owner)
	ms, err := m.ReplaceMember(ctx(t), row, seen, next)
	if err != nil {
		t.Fatalf("ReplaceMember(%d, %+v, %+v): %v", row, seen, next, err)
	}
	if next.Owner == "" {
		wantNoEntry(t, "ReplaceMember removing", ms, seen.Owner)
	} else {
		wantEntry(t, "ReplaceMember", ms, next)
	}
	return ms
}

// wantMemberConflict checks that err is a *leases.MemberConflictError of
// op on owner's entry in row, which found current.
func wantMemberConflict(t *testing.T, op string, err error, row int, owner string, current leases.Member) {
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
	if ce.Current != current {
		t.Fatalf("%s: conflict carries the entry %+v, want the entry found, %+v", op, ce.Current, current)
	}
}

func wantStored(t *testing.T, op string, m leases.Membership, want leases.Member) {
	t.Helper()
	wantEntry(t, op+": Members", mustMembers(t, m, leases.MemberRow(want.Owner)), want)
}

func wantNotStored(t *testing.T, op string, m leases.Membership, owner string) {
	t.Helper()
	wantNoEntry(t, op+": Members", mustMembers(t, m, leases.MemberRow(owner)), owner)
}

func testUntouchedRows(t *testing.T, _ leases.Store, m leases.Membership) {
	for r := range leases.MemberRows {
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

func testHeartbeatWritesEntry(t *testing.T, _ leases.Store, m leases.Membership) {
	for r := range leases.MemberRows {
		a := newOwner(t, r, "a")
		wantNotStored(t, "before the first heartbeat", m, a)
		steps := []leases.Member{
			{Owner: a, Incarnation: "inc-1", Heartbeat: 1},
			{Owner: a, Incarnation: "inc-1", Heartbeat: 2},
			{Owner: a, Incarnation: "inc-1", Heartbeat: 3, Notice: 7},
			{Owner: a, Incarnation: "inc-1", Heartbeat: 4}, // Notice back to its zero value
			{Owner: a, Incarnation: "inc-1", Heartbeat: 1 << 62, Leaving: true},
		}
		var stored leases.Member
		for i, e := range steps {
			op := fmt.Sprintf("heartbeat %d in row %d", i+1, r)
			// A heartbeat carries the stored notice: a step with another
			// one has it bumped first, as a requester would.
			if i > 0 && e.Notice != stored.Notice {
				bumped := stored
				bumped.Notice = e.Notice
				mustReplace(t, m, stored, bumped)
			}
			mustHeartbeat(t, m, e)
			wantStored(t, op, m, e)
			stored = e
		}
		// Once marked leaving, the incarnation never comes back: a heartbeat
		// that does not say leaving fails and writes nothing.
		back := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 5}
		_, err := m.Heartbeat(ctx(t), r, back)
		wantMemberConflict(t, "a heartbeat back from leaving", err, r, a, stored)
		wantStored(t, "after the refused heartbeat back from leaving", m, stored)
	}
}

func testRowMates(t *testing.T, _ leases.Store, m leases.Membership) {
	for r := range leases.MemberRows {
		a, b := newOwner(t, r, "a"), newOwner(t, r, "b")
		ea := leases.Member{Owner: a, Incarnation: "inc-a", Heartbeat: 1}
		eb := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1, Notice: 2}
		mustHeartbeat(t, m, ea)
		ms := mustHeartbeat(t, m, eb)
		wantEntry(t, "the second owner's heartbeat", ms, ea)
		ea.Heartbeat = 2
		ms = mustHeartbeat(t, m, ea)
		wantEntry(t, "the first owner's next heartbeat", ms, eb)
		ms = mustMembers(t, m, r)
		wantEntry(t, "Members", ms, ea)
		wantEntry(t, "Members", ms, eb)
		// An owner of another row is not in this one.
		if leases.MemberRows > 1 {
			other := (r + 1) % leases.MemberRows
			c := newOwner(t, other, "c")
			ec := leases.Member{Owner: c, Incarnation: "inc-c", Heartbeat: 1}
			wantNoEntry(t, "the heartbeat of an owner of another row", mustHeartbeat(t, m, ec), a)
			wantNoEntry(t, fmt.Sprintf("Members(%d)", r), mustMembers(t, m, r), c)
		}
	}
}

func testHeartbeatOtherIncarnation(t *testing.T, _ leases.Store, m leases.Membership) {
	r := 0
	a := newOwner(t, r, "a")
	first := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 5}
	mustHeartbeat(t, m, first)
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
		wantStored(t, "after the refused heartbeat", m, first)
	}
	// The incarnation that owns the entry heartbeats on.
	next := first
	next.Heartbeat++
	mustHeartbeat(t, m, next)
}

// testHeartbeatBumpedNotice: a heartbeat carrying a notice other than the
// stored one (someone bumped it with ReplaceMember) fails, carrying the
// stored entry, and writes nothing; one carrying the stored notice succeeds
// and keeps it.
func testHeartbeatBumpedNotice(t *testing.T, _ leases.Store, m leases.Membership) {
	for r := range leases.MemberRows {
		a, b := newOwner(t, r, "a"), newOwner(t, r, "b")
		e := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 4}
		mate := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1}
		mustHeartbeat(t, m, e)
		mustHeartbeat(t, m, mate)

		// Nobody bumped the notice: a heartbeat carrying one fails too.
		ms, err := m.Heartbeat(ctx(t), r, leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: e.Heartbeat + 1, Notice: 1})
		wantMemberConflict(t, fmt.Sprintf("row %d: Heartbeat with notice 1 over an entry without one", r), err, r, a, e)
		if ms != nil {
			t.Fatalf("a failed Heartbeat returned entries %+v", ms)
		}
		wantStored(t, "after the refused heartbeat", m, e)

		// Bumped from none to 1, then from 1 to 2: a heartbeat with a notice
		// other than the stored one (the one it saw before, or any other)
		// fails, whatever else it carries.
		for _, notice := range []int64{1, 2} {
			bumped := e
			bumped.Notice = notice
			mustReplace(t, m, e, bumped)
			for _, stale := range []leases.Member{
				{Owner: a, Incarnation: "inc-1", Heartbeat: e.Heartbeat + 1, Notice: e.Notice},
				{Owner: a, Incarnation: "inc-1", Heartbeat: e.Heartbeat + 1, Notice: e.Notice, Leaving: true, Ended: 3},
				{Owner: a, Incarnation: "inc-1", Heartbeat: e.Heartbeat, Notice: notice + 1},
				{Owner: a, Incarnation: "inc-1", Heartbeat: e.Heartbeat + 1, Notice: 0},
			} {
				op := fmt.Sprintf("row %d: Heartbeat with notice %d over the bumped notice %d (%+v)", r, stale.Notice, notice, stale)
				ms, err := m.Heartbeat(ctx(t), r, stale)
				wantMemberConflict(t, op, err, r, a, bumped)
				if ms != nil {
					t.Fatalf("%s: a failed Heartbeat returned entries %+v", op, ms)
				}
				wantStored(t, op, m, bumped)
				wantStored(t, op, m, mate)
			}
			e = bumped
		}

		// The member heartbeats again with the notice it learnt: it
		// succeeds, and keeps the notice.
		for range 2 {
			e.Heartbeat++
			ms := mustHeartbeat(t, m, e)
			wantEntry(t, "a heartbeat with the bumped notice", ms, mate)
			wantStored(t, fmt.Sprintf("row %d: after a heartbeat with the bumped notice", r), m, e)
		}
		// The row-mate, whose notice nobody bumped, heartbeats on.
		mate.Heartbeat++
		wantEntry(t, "the row-mate's heartbeat", mustHeartbeat(t, m, mate), e)
	}
}

// testEndedRoundTrips: Ended, as a heartbeat writes it, is read back by
// Members, returned by Heartbeat and ReplaceMember (in the entry written
// and in a row-mate's), and carried by a conflict.
func testEndedRoundTrips(t *testing.T, _ leases.Store, m leases.Membership) {
	for r := range leases.MemberRows {
		a, b := newOwner(t, r, "a"), newOwner(t, r, "b")
		steps := []leases.Member{
			{Owner: a, Incarnation: "inc-1", Heartbeat: 1, Ended: 1},
			{Owner: a, Incarnation: "inc-1", Heartbeat: 2, Ended: 3},
			{Owner: a, Incarnation: "inc-1", Heartbeat: 3, Ended: 3},
			{Owner: a, Incarnation: "inc-1", Heartbeat: 4}, // Ended back to 0
			{Owner: a, Incarnation: "inc-1", Heartbeat: 5, Ended: 1 << 62, Leaving: true},
		}
		for i, e := range steps {
			op := fmt.Sprintf("heartbeat %d in row %d", i+1, r)
			mustHeartbeat(t, m, e)
			wantStored(t, op, m, e)
		}
		e := steps[len(steps)-1]
		// A row-mate's heartbeat returns the entry with its Ended.
		mate := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1, Ended: 2}
		wantEntry(t, "the row-mate's heartbeat", mustHeartbeat(t, m, mate), e)
		wantStored(t, "after the row-mate's heartbeat", m, mate)

		// ReplaceMember writes and returns Ended: a notice bump keeps it, a
		// new incarnation writes its own.
		bumped := e
		bumped.Notice = 1
		wantEntry(t, "ReplaceMember bumping the notice", mustReplace(t, m, e, bumped), mate)
		wantStored(t, "after the notice bump", m, bumped)
		next := leases.Member{Owner: a, Incarnation: "inc-2", Heartbeat: 1, Ended: 5}
		wantEntry(t, "ReplaceMember by a new incarnation", mustReplace(t, m, bumped, next), mate)
		wantStored(t, "after ReplaceMember", m, next)

		// A conflict carries the entry with its Ended.
		_, err := m.Heartbeat(ctx(t), r, leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 6, Ended: 1 << 62})
		wantMemberConflict(t, "Heartbeat of the replaced incarnation", err, r, a, next)
		_, err = m.ReplaceMember(ctx(t), r, bumped, leases.Member{})
		wantMemberConflict(t, "ReplaceMember having seen the replaced entry", err, r, a, next)
		wantStored(t, "after the refused writes", m, next)

		// The new incarnation heartbeats with an Ended of its own.
		next.Heartbeat, next.Ended = 2, 6
		mustHeartbeat(t, m, next)
		wantStored(t, "after the new incarnation's heartbeat", m, next)
	}
}

func testReplaceMember(t *testing.T, _ leases.Store, m leases.Membership) {
	r := 1 % leases.MemberRows
	a := newOwner(t, r, "a")
	old := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 3}
	mustHeartbeat(t, m, old)
	next := leases.Member{Owner: a, Incarnation: "inc-2", Heartbeat: 1}

	// A seen entry that is not the stored one: nothing is replaced.
	for _, seen := range []leases.Member{
		{Owner: a, Incarnation: "inc-1", Heartbeat: 2},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 4},
		{Owner: a, Incarnation: "inc-x", Heartbeat: 3},
	} {
		_, err := m.ReplaceMember(ctx(t), r, seen, next)
		wantMemberConflict(t, fmt.Sprintf("ReplaceMember having seen %+v (stored %+v)", seen, old), err, r, a, old)
		wantStored(t, "after the refused ReplaceMember", m, old)
	}
	// The entry moves on after it was seen: the replacement fails.
	alive := old
	alive.Heartbeat++
	mustHeartbeat(t, m, alive)
	_, err := m.ReplaceMember(ctx(t), r, old, next)
	wantMemberConflict(t, "ReplaceMember of an entry that heartbeated since it was seen", err, r, a, alive)
	wantStored(t, "after the refused ReplaceMember", m, alive)

	// Seen as stored: replaced.
	mustReplace(t, m, alive, next)
	wantStored(t, "after ReplaceMember", m, next)
	// The replaced incarnation can no longer heartbeat; the new one can.
	alive.Heartbeat++
	_, err = m.Heartbeat(ctx(t), r, alive)
	wantMemberConflict(t, "Heartbeat of the replaced incarnation", err, r, a, next)
	next.Heartbeat++
	mustHeartbeat(t, m, next)
	// An entry that already is next counts as replaced.
	mustReplace(t, m, alive, next)
	wantStored(t, "after ReplaceMember with the entry already next", m, next)

	// An owner without an entry: nothing to replace, nothing written.
	z := newOwner(t, r, "z")
	_, err = m.ReplaceMember(ctx(t), r, leases.Member{Owner: z, Incarnation: "inc-1", Heartbeat: 1}, leases.Member{Owner: z, Incarnation: "inc-2", Heartbeat: 1})
	wantMemberConflict(t, "ReplaceMember of an absent entry", err, r, z, leases.Member{})
	wantNotStored(t, "after ReplaceMember of an absent entry", m, z)
}

func testReplaceMemberRemoves(t *testing.T, _ leases.Store, m leases.Membership) {
	r := 0
	a, b := newOwner(t, r, "a"), newOwner(t, r, "b")
	ea := leases.Member{Owner: a, Incarnation: "inc-a", Heartbeat: 9, Leaving: true}
	eb := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1}
	mustHeartbeat(t, m, ea)
	mustHeartbeat(t, m, eb)

	// A stale seen entry removes nothing.
	stale := ea
	stale.Heartbeat--
	_, err := m.ReplaceMember(ctx(t), r, stale, leases.Member{})
	wantMemberConflict(t, "removal having seen an older heartbeat", err, r, a, ea)
	wantStored(t, "after the refused removal", m, ea)

	ms := mustReplace(t, m, ea, leases.Member{})
	wantEntry(t, "the removal's answer", ms, eb)
	wantNotStored(t, "after the removal", m, a)
	wantStored(t, "after the removal of a row-mate", m, eb)
	// Removing it again: it is already gone, which counts as removed.
	mustReplace(t, m, ea, leases.Member{})
	wantNotStored(t, "after the second removal", m, a)
	// A removed owner heartbeats afresh, in any incarnation.
	mustHeartbeat(t, m, leases.Member{Owner: a, Incarnation: "inc-a2", Heartbeat: 1})
	// A removal of an entry re-created since it was seen fails.
	_, err = m.ReplaceMember(ctx(t), r, ea, leases.Member{})
	wantMemberConflict(t, "removal of an entry re-created since", err, r, a, leases.Member{Owner: a, Incarnation: "inc-a2", Heartbeat: 1})
}

func testNoticeBump(t *testing.T, _ leases.Store, m leases.Membership) {
	r := 0
	a := newOwner(t, r, "a")
	e := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 7, Leaving: true}
	mustHeartbeat(t, m, e)
	for notice := int64(1); notice <= 3; notice++ {
		bumped := e
		bumped.Notice = notice
		ms := mustReplace(t, m, e, bumped)
		got, _ := entryOf(ms, a)
		if got.Owner != e.Owner || got.Incarnation != e.Incarnation || got.Heartbeat != e.Heartbeat || got.Leaving != e.Leaving {
			t.Fatalf("a notice bump changed more than Notice: %+v after %+v", got, e)
		}
		wantStored(t, fmt.Sprintf("after notice bump %d", notice), m, bumped)
		e = bumped
	}
}

func testMemberCopies(t *testing.T, _ leases.Store, m leases.Membership) {
	r := 0
	a, b := newOwner(t, r, "a"), newOwner(t, r, "b")
	ea := leases.Member{Owner: a, Incarnation: "inc-a", Heartbeat: 1}
	eb := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1}
	mustHeartbeat(t, m, ea)
	scribble := func(ms []leases.Member) {
		for i := range ms {
			ms[i].Heartbeat, ms[i].Incarnation = -1, "scribbled"
		}
		slices.Reverse(ms)
	}
	scribble(mustHeartbeat(t, m, eb))
	scribble(mustMembers(t, m, r))
	ms := mustMembers(t, m, r)
	wantEntry(t, "Members after the caller changed earlier answers", ms, ea)
	wantEntry(t, "Members after the caller changed earlier answers", ms, eb)
}

func testConcurrentOwners(t *testing.T, _ leases.Store, m leases.Membership) {
	const owners, beats = 16, 5
	r := 1 % leases.MemberRows
	ids := make([]string, owners)
	for i := range ids {
		ids[i] = newOwner(t, r, fmt.Sprint(i))
	}
	errs := make(chan error, owners*beats)
	together(len(ids), func(i int) {
		id := ids[i]
		for hb := int64(1); hb <= beats; hb++ {
			if _, err := m.Heartbeat(ctx(t), r, leases.Member{Owner: id, Incarnation: "inc", Heartbeat: hb}); err != nil {
				errs <- fmt.Errorf("heartbeat %d of %s: %w", hb, id, err)
			}
		}
	})
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent heartbeats of distinct owners in one row: %v", err)
	}
	ms := mustMembers(t, m, r)
	for _, id := range ids {
		wantEntry(t, "Members after concurrent heartbeats", ms, leases.Member{Owner: id, Incarnation: "inc", Heartbeat: beats})
	}
}

// testRacingIncarnations: incarnations of one owner race, for an absent
// entry with Heartbeat and for a stale one with ReplaceMember; in each round
// exactly one wins, and every loser's conflict carries the winner's entry.
func testRacingIncarnations(t *testing.T, _ leases.Store, m leases.Membership) {
	const racers, rounds = 10, 20
	r := 0
	a := newOwner(t, r, "a")
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
		wantStored(t, fmt.Sprintf("round %d, %s", round, what), m, won)
		return won
	}
	for round := range rounds {
		// The entry is absent: the first heartbeat of one incarnation wins.
		joined := race(round, "heartbeat", func(inc string) ([]leases.Member, error) {
			return m.Heartbeat(ctx(t), r, leases.Member{Owner: a, Incarnation: inc, Heartbeat: 1})
		})
		// The entry is seen stale: one new incarnation takes it over.
		taken := race(round, "replace", func(inc string) ([]leases.Member, error) {
			return m.ReplaceMember(ctx(t), r, joined, leases.Member{Owner: a, Incarnation: inc, Heartbeat: 1})
		})
		mustReplace(t, m, taken, leases.Member{})
	}
}

func testOpaqueOwners(t *testing.T, s leases.Store, m leases.Membership) {
	base := newOwner(t, 0, "x")
	owners := []string{
		base,
		base + ".i",
		base + ".dotted.path",
		base + "[0]",
		base + ":colon",
		base + " #hash :value",
		base + "-ünïcødé-日本",
		"m_" + base,
		base + strings.Repeat("z", 256-len(base)),
	}
	for i, o := range owners {
		mustHeartbeat(t, m, leases.Member{Owner: o, Incarnation: "inc", Heartbeat: int64(i + 1)})
	}
	for i, o := range owners {
		wantStored(t, fmt.Sprintf("owner id %q", o), m, leases.Member{Owner: o, Incarnation: "inc", Heartbeat: int64(i + 1)})
	}
	// Removing one leaves its neighbours (a prefix of it among them) alone.
	mustReplace(t, m, leases.Member{Owner: owners[2], Incarnation: "inc", Heartbeat: 3}, leases.Member{})
	wantNotStored(t, "after removing "+owners[2], m, owners[2])
	wantStored(t, "after removing "+owners[2], m, leases.Member{Owner: base, Incarnation: "inc", Heartbeat: 1})
	wantStored(t, "after removing "+owners[2], m, leases.Member{Owner: owners[1], Incarnation: "inc", Heartbeat: 2})
	// And as a lease holder.
	k := newKey(t)
	l, err := m.TakeAs(ctx(t), mustCreate(t, s, k), owners[5], "inc")
	if err != nil || l.Owner != owners[5] {
		t.Fatalf("TakeAs by owner %q: %+v, %v", owners[5], l, err)
	}
	if got := mustGet(t, s, k); got.Owner != owners[5] || got.Incarnation != "inc" {
		t.Fatalf("TakeAs by owner %q: the store holds %+v", owners[5], got)
	}
}

// testMemberRowsNotLeases: membership rows and lease rows share the table
// but never each other's rows: heartbeats leave lease rows alone, lease
// writes leave membership rows alone, and no lease key reads or writes a
// membership row.
func testMemberRowsNotLeases(t *testing.T, s leases.Store, m leases.Membership) {
	var entries []leases.Member
	for r := range leases.MemberRows {
		e := leases.Member{Owner: newOwner(t, r, "a"), Incarnation: "inc", Heartbeat: 1}
		mustHeartbeat(t, m, e)
		entries = append(entries, e)
	}
	k := leases.Key{Stream: newKey(t).Stream, Shard: "shardId-0"}
	if _, err := s.Get(ctx(t), k); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Get(%s) of a lease never created, with membership rows written: %v, want ErrNotFound", k, err)
	}
	l := mustTake(t, s, mustCreate(t, s, k), "a")
	for i := range entries {
		entries[i].Heartbeat++
		mustHeartbeat(t, m, entries[i])
	}
	wantRow(t, s, k, l, fmt.Sprintf("heartbeats changed the lease row %s", k))
	l, err := s.Checkpoint(ctx(t), l, leases.Checkpoint{Sequence: "7"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TakeAs(ctx(t), l, "b", "inc-b"); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		wantStored(t, "after lease writes", m, e)
	}

	for r := range leases.MemberRows {
		mk, err := leases.ParseKey(leases.MemberKey(r))
		if err != nil {
			t.Fatalf("ParseKey(%q): %v", leases.MemberKey(r), err)
		}
		if got, err := s.Get(ctx(t), mk); err == nil {
			t.Errorf("Get(%s) read membership row %d as a lease: %+v", mk, r, got)
		}
		if got, err := s.Create(ctx(t), mk); err == nil {
			t.Errorf("Create(%s) made membership row %d a lease: %+v", mk, r, got)
		}
		ghost := leases.Lease{Key: mk, Owner: "a", Incarnation: "inc", Counter: 1}
		if got, err := s.Checkpoint(ctx(t), ghost, leases.Checkpoint{Sequence: "1"}); err == nil {
			t.Errorf("Checkpoint(%s) wrote membership row %d as a lease: %+v", mk, r, got)
		}
		if got, err := m.TakeAs(ctx(t), ghost, "a", "inc"); err == nil {
			t.Errorf("TakeAs(%s) took membership row %d as a lease: %+v", mk, r, got)
		}
	}
	for _, e := range entries {
		wantStored(t, "after lease calls naming membership rows", m, e)
	}
}

func testTakeAs(t *testing.T, s leases.Store, m leases.Membership) {
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

func testTakeAsCounter(t *testing.T, s leases.Store, m leases.Membership) {
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
	// A missing row is not created.
	ghost := leases.Lease{Key: leases.Key{Stream: k.Stream, Shard: "shardId-000000000009"}, Counter: 1}
	if _, err := m.TakeAs(ctx(t), ghost, "b", "inc-b"); !errors.Is(err, leases.ErrNotFound) && !errors.Is(err, leases.ErrConflict) {
		t.Fatalf("TakeAs of a missing row: %v, want ErrNotFound or ErrConflict", err)
	}
	if _, err := s.Get(ctx(t), ghost.Key); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("TakeAs of a missing row created it: Get = %v", err)
	}
}

func testReleaseClearsIncarnation(t *testing.T, s leases.Store, m leases.Membership) {
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

func testMemberInvalidArguments(t *testing.T, s leases.Store, m leases.Membership) {
	a := newOwner(t, 0, "a")
	e := leases.Member{Owner: a, Incarnation: "inc", Heartbeat: 1}
	notValidation := func(err error) bool { return err == nil || errors.Is(err, leases.ErrConflict) }
	for _, row := range []int{-1, leases.MemberRows, 1 << 20} {
		if _, err := m.Heartbeat(ctx(t), row, e); notValidation(err) {
			t.Errorf("Heartbeat in row %d: %v, want a validation error", row, err)
		}
		if _, err := m.Members(ctx(t), row); notValidation(err) {
			t.Errorf("Members(%d): %v, want a validation error", row, err)
		}
		if _, err := m.ReplaceMember(ctx(t), row, e, leases.Member{}); notValidation(err) {
			t.Errorf("ReplaceMember in row %d: %v, want a validation error", row, err)
		}
	}
	wantNotStored(t, "after calls with invalid rows", m, a)

	badEntries := map[string]leases.Member{
		"an empty owner":                {Incarnation: "inc", Heartbeat: 1},
		"an owner longer than 256":      {Owner: a + strings.Repeat("x", 257), Incarnation: "inc", Heartbeat: 1},
		"an empty incarnation":          {Owner: a, Heartbeat: 1},
		"an incarnation longer than 64": {Owner: a, Incarnation: strings.Repeat("i", 65), Heartbeat: 1},
	}
	for what, bad := range badEntries {
		if _, err := m.Heartbeat(ctx(t), leases.MemberRow(bad.Owner), bad); notValidation(err) {
			t.Errorf("Heartbeat of an entry with %s: %v, want a validation error", what, err)
		}
	}
	wantNotStored(t, "after invalid heartbeats", m, a)

	mustHeartbeat(t, m, e)
	r := leases.MemberRow(a)
	for what, c := range map[string]struct{ seen, next leases.Member }{
		"a seen entry without incarnation":  {leases.Member{Owner: a, Heartbeat: 1}, leases.Member{}},
		"a seen entry without owner":        {leases.Member{Incarnation: "inc", Heartbeat: 1}, leases.Member{}},
		"a next entry of another owner":     {e, leases.Member{Owner: a + "-other", Incarnation: "inc-2", Heartbeat: 1}},
		"a next entry without incarnation":  {e, leases.Member{Owner: a, Heartbeat: 1}},
		"a next incarnation longer than 64": {e, leases.Member{Owner: a, Incarnation: strings.Repeat("i", 65), Heartbeat: 1}},
	} {
		if _, err := m.ReplaceMember(ctx(t), r, c.seen, c.next); notValidation(err) {
			t.Errorf("ReplaceMember with %s: %v, want a validation error", what, err)
		}
	}
	wantStored(t, "after invalid replacements", m, e)
	wantNotStored(t, "after invalid replacements", m, a+"-other")

	k := newKey(t)
	l := mustCreate(t, s, k)
	for what, c := range map[string][2]string{
		"an empty owner":                {"", "inc"},
		"an empty incarnation":          {"a", ""},
		"an incarnation longer than 64": {"a", strings.Repeat("i", 65)},
	} {
		if _, err := m.TakeAs(ctx(t), l, c[0], c[1]); notValidation(err) {
			t.Errorf("TakeAs with %s: %v, want a validation error", what, err)
		}
	}
	if _, err := m.TakeAs(ctx(t), leases.Lease{Key: leases.Key{Stream: k.Stream}, Counter: 1}, "a", "inc"); notValidation(err) {
		t.Errorf("TakeAs with an empty shard id: %v, want a validation error", err)
	}
	wantRow(t, s, k, l, "invalid TakeAs calls changed the row")
}

func testMemberCancelledContext(t *testing.T, s leases.Store, m leases.Membership) {
	r := 0
	a, b := newOwner(t, r, "a"), newOwner(t, r, "b")
	e := leases.Member{Owner: a, Incarnation: "inc", Heartbeat: 1}
	mustHeartbeat(t, m, e)
	k := newKey(t)
	l := mustCreate(t, s, k)
	for name, c := range deadContexts(t) {
		calls := map[string]func() error{
			"Heartbeat of a new owner": func() error {
				_, err := m.Heartbeat(c, r, leases.Member{Owner: b, Incarnation: "inc", Heartbeat: 1})
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
			"TakeAs":                 func() error { _, err := m.TakeAs(c, l, "a", "inc"); return err },
		}
		wantDeadCalls(t, name, c, calls)
	}
	wantStored(t, "after calls with a dead context", m, e)
	wantNotStored(t, "after calls with a dead context", m, b)
	wantRow(t, s, k, l, "TakeAs with a dead context changed the row")
}
