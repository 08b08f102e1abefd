package membershiptest

// The Membership subtests of an entry's life after its join: Heartbeat
// (conditional on an entry of the same incarnation, only forward, failing
// on a bumped notice), row-mates' answers, Ended and Listing as written and
// read back, ReplaceMember (replacing and removing, only if seen), the
// notice bump, and answers that are copies.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/leasestest/internal/kit"
)

func testHeartbeatWritesEntry(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a := kit.NewOwner(t, "a")
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
	_, err := m.Heartbeat(kit.Ctx(t), r, back)
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
	a := kit.NewOwner(t, "a")
	mustJoin(t, m, r, leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 1})
	stored := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 5, Held: 2}
	mustHeartbeat(t, m, r, stored)
	for _, late := range []leases.Member{
		{Owner: a, Incarnation: "inc-1", Heartbeat: 4, Held: 1},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 5, Held: 1},
	} {
		op := fmt.Sprintf("a heartbeat of value %d over a stored %d", late.Heartbeat, stored.Heartbeat)
		_, err := m.Heartbeat(kit.Ctx(t), r, late)
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
	a, b := kit.NewOwner(t, "a"), kit.NewOwner(t, "b")
	absent := func(what string, want []leases.Member) {
		t.Helper()
		for _, e := range []leases.Member{
			{Owner: a, Incarnation: "inc-a", Heartbeat: 1},
			{Owner: a, Incarnation: "inc-a", Heartbeat: 2, Leaving: true},
			{Owner: a, Incarnation: "inc-a", Heartbeat: 3, Notice: 1, Ended: 2},
		} {
			op := fmt.Sprintf("Heartbeat of %+v %s", e, what)
			ms, err := m.Heartbeat(kit.Ctx(t), r, e)
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
	a, b := kit.NewOwner(t, "a"), kit.NewOwner(t, "b")
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
	c := kit.NewOwner(t, "c")
	ec := leases.Member{Owner: c, Incarnation: "inc-c", Heartbeat: 1}
	wantExactly(t, "the join of an owner of another row", mustJoin(t, m, other, ec), []leases.Member{ec})
	ec.Heartbeat++
	wantExactly(t, "the heartbeat of an owner of another row", mustHeartbeat(t, m, other, ec), []leases.Member{ec})
	wantStoredExactly(t, fmt.Sprintf("Members(%d)", r), m, r, []leases.Member{ea, eb})
}

func testHeartbeatOtherIncarnation(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a := kit.NewOwner(t, "a")
	first := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 5}
	mustJoin(t, m, r, first)
	for _, e := range []leases.Member{
		{Owner: a, Incarnation: "inc-2", Heartbeat: 1},
		{Owner: a, Incarnation: "inc-2", Heartbeat: 6},
		{Owner: a, Incarnation: "inc-2", Heartbeat: 5, Leaving: true},
	} {
		ms, err := m.Heartbeat(kit.Ctx(t), r, e)
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
	a, b := kit.NewOwner(t, "a"), kit.NewOwner(t, "b")
	e := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 4}
	mate := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1}
	mustJoin(t, m, r, e)
	mustJoin(t, m, r, mate)

	// Nobody bumped the notice: a heartbeat carrying one fails too.
	ms, err := m.Heartbeat(kit.Ctx(t), r, leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: e.Heartbeat + 1, Notice: 1})
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
			ms, err := m.Heartbeat(kit.Ctx(t), r, stale)
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
	a, b := kit.NewOwner(t, "a"), kit.NewOwner(t, "b")
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
	_, err := m.Heartbeat(kit.Ctx(t), r, leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 6, Ended: 1 << 62})
	wantMemberConflict(t, "Heartbeat of the replaced incarnation", err, r, a, next)
	_, err = m.ReplaceMember(kit.Ctx(t), r, bumped, leases.Member{})
	wantMemberConflict(t, "ReplaceMember having seen the replaced entry", err, r, a, next)
	_, err = m.Join(kit.Ctx(t), r, leases.Member{Owner: a, Incarnation: "inc-3", Heartbeat: 1})
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
	a, b := kit.NewOwner(t, "a"), kit.NewOwner(t, "b")
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
	_, err := m.Heartbeat(kit.Ctx(t), r, leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 6, Listing: "d9"})
	wantMemberConflict(t, "Heartbeat of the replaced incarnation", err, r, a, next)
	wantStoredExactly(t, "after the refused heartbeat", m, r, []leases.Member{next, mate})
}

func testReplaceMember(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a := kit.NewOwner(t, "a")
	old := leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 3}
	mustJoin(t, m, r, old)
	next := leases.Member{Owner: a, Incarnation: "inc-2", Heartbeat: 1}

	// A seen entry that is not the stored one: nothing is replaced.
	for _, seen := range []leases.Member{
		{Owner: a, Incarnation: "inc-1", Heartbeat: 2},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 4},
		{Owner: a, Incarnation: "inc-x", Heartbeat: 3},
	} {
		_, err := m.ReplaceMember(kit.Ctx(t), r, seen, next)
		wantMemberConflict(t, fmt.Sprintf("ReplaceMember having seen %+v (stored %+v)", seen, old), err, r, a, old)
		wantStoredExactly(t, "after the refused ReplaceMember", m, r, []leases.Member{old})
	}
	// The entry moves on after it was seen: the replacement fails.
	alive := old
	alive.Heartbeat++
	mustHeartbeat(t, m, r, alive)
	_, err := m.ReplaceMember(kit.Ctx(t), r, old, next)
	wantMemberConflict(t, "ReplaceMember of an entry that heartbeated since it was seen", err, r, a, alive)
	wantStoredExactly(t, "after the refused ReplaceMember", m, r, []leases.Member{alive})

	// Seen as stored: replaced.
	mustReplace(t, m, r, alive, next)
	wantStoredExactly(t, "after ReplaceMember", m, r, []leases.Member{next})
	// The replaced incarnation can no longer heartbeat; the new one can.
	alive.Heartbeat++
	_, err = m.Heartbeat(kit.Ctx(t), r, alive)
	wantMemberConflict(t, "Heartbeat of the replaced incarnation", err, r, a, next)
	next.Heartbeat++
	mustHeartbeat(t, m, r, next)
	// An entry that already is next counts as replaced.
	mustReplace(t, m, r, alive, next)
	wantStoredExactly(t, "after ReplaceMember with the entry already next", m, r, []leases.Member{next})

	// An owner without an entry: nothing to replace, nothing written.
	z := kit.NewOwner(t, "z")
	_, err = m.ReplaceMember(kit.Ctx(t), r, leases.Member{Owner: z, Incarnation: "inc-1", Heartbeat: 1}, leases.Member{Owner: z, Incarnation: "inc-2", Heartbeat: 1})
	wantMemberConflict(t, "ReplaceMember of an absent entry", err, r, z, leases.Member{})
	wantStoredExactly(t, "after ReplaceMember of an absent entry", m, r, []leases.Member{next})
}

func testReplaceMemberRemoves(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a, b := kit.NewOwner(t, "a"), kit.NewOwner(t, "b")
	ea := leases.Member{Owner: a, Incarnation: "inc-a", Heartbeat: 9, Leaving: true}
	eb := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1}
	mustJoin(t, m, r, ea)
	mustJoin(t, m, r, eb)

	// A stale seen entry removes nothing.
	stale := ea
	stale.Heartbeat--
	_, err := m.ReplaceMember(kit.Ctx(t), r, stale, leases.Member{})
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
	_, err = m.ReplaceMember(kit.Ctx(t), r, ea, leases.Member{})
	wantMemberConflict(t, "removal of an entry re-created since", err, r, a, back)
	wantStoredExactly(t, "after the refused removal", m, r, []leases.Member{back, eb})
}

func testNoticeBump(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a := kit.NewOwner(t, "a")
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
	a, b := kit.NewOwner(t, "a"), kit.NewOwner(t, "b")
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

// testBalanceRoundTrips: Capacity, MaxLeases, Load, Hot and Utilization, as Join,
// Heartbeat and ReplaceMember write them, are read back by Members,
// returned in a row-mate's answers, and carried by a conflict.
func testBalanceRoundTrips(t *testing.T, _ leases.Store, m leases.Membership, rows *rowSource) {
	r := rows.fresh(t)
	a, b := kit.NewOwner(t, "a"), kit.NewOwner(t, "b")
	full := strings.Repeat("x", leases.MaxHot-4) + " 9e9"
	steps := []leases.Member{
		{Owner: a, Incarnation: "inc-1", Heartbeat: 1, Capacity: 2000, MaxLeases: 5},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 2, Capacity: 2000, MaxLeases: 5, Load: 1_200_000, Hot: "1a2b3c:52e4", Utilization: 430},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 3, Capacity: 1 << 40, MaxLeases: 1 << 31, Load: 1 << 50, Hot: full, Utilization: 1 << 40},
		{Owner: a, Incarnation: "inc-1", Heartbeat: 4}, // all back to zero
		{Owner: a, Incarnation: "inc-1", Heartbeat: 5, Capacity: 500, Load: 99, Utilization: 1},
	}
	mustJoin(t, m, r, steps[0])
	wantStored(t, "after the join", m, r, steps[0])
	for i, e := range steps[1:] {
		op := fmt.Sprintf("heartbeat %d", i+1)
		mustHeartbeat(t, m, r, e)
		wantStored(t, op, m, r, e)
	}
	e := steps[len(steps)-1]
	mate := leases.Member{Owner: b, Incarnation: "inc-b", Heartbeat: 1, Load: 7, Hot: "k:7"}
	wantEntry(t, "the row-mate's join", mustJoin(t, m, r, mate), e)
	mate.Heartbeat++
	wantEntry(t, "the row-mate's heartbeat", mustHeartbeat(t, m, r, mate), e)

	next := leases.Member{Owner: a, Incarnation: "inc-2", Heartbeat: 1, Capacity: 3000, MaxLeases: 2, Load: 10, Hot: "z:10", Utilization: 2000}
	wantEntry(t, "ReplaceMember by a new incarnation", mustReplace(t, m, r, e, next), mate)
	wantStored(t, "after ReplaceMember", m, r, next)

	_, err := m.Heartbeat(kit.Ctx(t), r, leases.Member{Owner: a, Incarnation: "inc-1", Heartbeat: 6, Load: 1})
	wantMemberConflict(t, "Heartbeat of the replaced incarnation", err, r, a, next)

	// Too long a Hot, or one with a control byte, is refused unsent.
	for _, hot := range []string{full + "x", "a:1\n"} {
		_, err := m.Heartbeat(kit.Ctx(t), r, leases.Member{Owner: a, Incarnation: "inc-2", Heartbeat: 2, Hot: hot})
		if err == nil || errors.Is(err, leases.ErrConflict) {
			t.Fatalf("Heartbeat with Hot %q: %v, want a validation error", hot, err)
		}
	}
	wantStoredExactly(t, "after the refused heartbeats", m, r, []leases.Member{next, mate})
}
