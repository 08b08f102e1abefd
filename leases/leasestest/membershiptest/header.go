package membershiptest

// The Membership subtests of the header and the marks: BumpRow and
// ReportVanished, alone and concurrent, and the first-wins stream and
// taken marks (a stream mark's time included).

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/leasestest/internal/kit"
)

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
		if err := m.BumpRow(kit.Ctx(t), r); err != nil {
			t.Fatalf("BumpRow(%d): %v", r, err)
		}
		h = bumped(h, r, 1)
		wantHeader(t, fmt.Sprintf("after BumpRow(%d)", r), m, h)
	}
	vanish := func() {
		t.Helper()
		if err := m.ReportVanished(kit.Ctx(t)); err != nil {
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
	e := leases.Member{Owner: kit.NewOwner(t, "a"), Incarnation: "inc", Heartbeat: 1}
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
	kit.Together(goroutines, func(int) {
		for i := range bumps1 {
			if err := m.BumpRow(kit.Ctx(t), r1); err != nil {
				errs <- err
			}
			if i < bumps2 {
				if err := m.BumpRow(kit.Ctx(t), r2); err != nil {
					errs <- err
				}
			}
			if i < vanished {
				if err := m.ReportVanished(kit.Ctx(t)); err != nil {
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

// testStreamMark: a stream has no mark until MarkStream; the first mark
// written stays (a later MarkStream returns it and writes nothing), a
// resent call returns its own; marks of other streams are apart, and a
// mark is not a lease row.
func testStreamMark(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	stream, other := kit.NewKey(t).Stream, kit.NewKey(t).Stream
	t1 := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	first := leases.Mark{Token: "first", Since: t1}
	wantMark(t, "StreamMark of a stream nobody marked", readMark(t, m, stream), leases.Mark{})
	wantMark(t, "the first MarkStream", writeMark(t, m, stream, first), first)
	wantMark(t, "MarkStream resent", writeMark(t, m, stream, first), first)
	wantMark(t, "a second MarkStream", writeMark(t, m, stream, leases.Mark{Token: "second", Since: t1.Add(time.Second)}), first)
	wantMark(t, "StreamMark", readMark(t, m, stream), first)
	wantMark(t, "StreamMark of another stream", readMark(t, m, other), leases.Mark{})
	if _, err := s.Get(kit.Ctx(t), leases.Key{Stream: stream, Shard: "shardId-000000000000"}); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Get of a row of a marked stream nobody created: %v, want ErrNotFound", err)
	}
	for _, bad := range []leases.Mark{{}, {Since: t1}, {Token: "t", Since: time.Unix(-1, 0)}} {
		if _, err := m.MarkStream(kit.Ctx(t), stream, bad); err == nil || errors.Is(err, leases.ErrConflict) {
			t.Fatalf("MarkStream(%+v): %v, want a validation error", bad, err)
		}
	}
	if _, err := m.StreamMark(kit.Ctx(t), ""); err == nil || errors.Is(err, leases.ErrConflict) {
		t.Fatalf("StreamMark of no stream: %v, want a validation error", err)
	}
}

// testStreamMarkSince: a mark's Since is kept to the millisecond, and the
// first one written stays, whoever marks next and with whatever time (its
// own token with another time included); a mark written with no time (as
// versions before Since wrote it) reads back with a zero Since, and a
// later call with a time adds none.
func testStreamMarkSince(t *testing.T, _ leases.Store, m leases.Membership, _ *rowSource) {
	stream, untimed := kit.NewKey(t).Stream, kit.NewKey(t).Stream
	t1 := time.Date(2026, 3, 1, 12, 0, 0, 987654321, time.UTC)
	first := leases.Mark{Token: "a", Since: t1}
	wantMark(t, "the first MarkStream", writeMark(t, m, stream, first), first)
	wantMark(t, "MarkStream of its own token with a later time", writeMark(t, m, stream, leases.Mark{Token: "a", Since: t1.Add(3 * time.Second)}), first)
	wantMark(t, "MarkStream of another with an earlier time", writeMark(t, m, stream, leases.Mark{Token: "b", Since: t1.Add(-3 * time.Second)}), first)
	wantMark(t, "StreamMark", readMark(t, m, stream), first)

	old := leases.Mark{Token: "old"}
	wantMark(t, "MarkStream with no time", writeMark(t, m, untimed, old), old)
	wantMark(t, "StreamMark of a mark with no time", readMark(t, m, untimed), old)
	wantMark(t, "MarkStream of another with a time, on a mark with none", writeMark(t, m, untimed, leases.Mark{Token: "new", Since: t1}), old)
	wantMark(t, "MarkStream of its own token with a time, on a mark with none", writeMark(t, m, untimed, leases.Mark{Token: "old", Since: t1}), old)
	wantMark(t, "StreamMark of a mark with no time, after calls with one", readMark(t, m, untimed), old)
}

// writeMark calls MarkStream and returns the mark it returned.
func writeMark(t *testing.T, m leases.Membership, stream string, mk leases.Mark) leases.Mark {
	t.Helper()
	got, err := m.MarkStream(kit.Ctx(t), stream, mk)
	if err != nil {
		t.Fatalf("MarkStream(%s, %+v): %v", stream, mk, err)
	}
	return got
}

// readMark calls StreamMark and returns the mark it read.
func readMark(t *testing.T, m leases.Membership, stream string) leases.Mark {
	t.Helper()
	got, err := m.StreamMark(kit.Ctx(t), stream)
	if err != nil {
		t.Fatalf("StreamMark(%s): %v", stream, err)
	}
	return got
}

// wantMark fails t unless got is want, its Since to the millisecond (a
// zero Since: zero).
func wantMark(t *testing.T, what string, got, want leases.Mark) {
	t.Helper()
	if !want.Since.IsZero() {
		want.Since = time.UnixMilli(want.Since.UnixMilli())
	}
	if got.Token != want.Token || !got.Since.Equal(want.Since) || got.Since.IsZero() != want.Since.IsZero() {
		t.Fatalf("%s: token %q since %v, want token %q since %v", what, got.Token, got.Since, want.Token, want.Since)
	}
}

// testTakenMark: the first token MarkTaken writes for a row stays (a
// later call returns it and writes nothing), a resent call returns its own;
// marks of other rows and the stream's mark are apart, and a mark neither
// creates nor changes the row.
func testTakenMark(t *testing.T, s leases.Store, m leases.Membership, _ *rowSource) {
	k, other := kit.NewKey(t), kit.NewKey(t)
	mark := func(k leases.Key, token string) string {
		t.Helper()
		got, err := m.MarkTaken(kit.Ctx(t), k, token)
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
	if got, err := m.StreamMark(kit.Ctx(t), k.Stream); err != nil || got != (leases.Mark{}) {
		t.Fatalf("StreamMark of a stream whose row was marked taken: %+v, %v; want none", got, err)
	}
	if _, err := s.Get(kit.Ctx(t), k); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("Get of a row marked taken that nobody created: %v, want ErrNotFound", err)
	}
	l, err := s.Create(kit.Ctx(t), k)
	if err != nil {
		t.Fatalf("Create of a row marked taken: %v", err)
	}
	if got := mark(k, "third"); got != "first" {
		t.Fatalf("MarkTaken of a created row returned %q, want the first token", got)
	}
	kit.WantRow(t, s, k, l, "MarkTaken changed the row")
	if _, err := m.MarkTaken(kit.Ctx(t), k, ""); err == nil || errors.Is(err, leases.ErrConflict) {
		t.Fatalf("MarkTaken with no token: %v, want a validation error", err)
	}
}
