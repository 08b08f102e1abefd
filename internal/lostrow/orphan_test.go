package lostrow

import (
	"testing"

	"github.com/kinesislease/kinesislease/leases"
)

// TestPresume: the orphan an unanswered take leaves keeps what the one it
// replaces knew.
func TestPresume(t *testing.T) {
	row := leases.Lease{Counter: 4, Token: "v4"}
	for _, tc := range []struct {
		name     string
		l        leases.Lease
		prev     Orphan
		released leases.Checkpoint
		want     Orphan
	}{
		{"known as the take would have left it",
			row, Orphan{}, leases.Checkpoint{},
			Orphan{Inc: "0.B", Known: leases.Lease{Owner: "a", Incarnation: "0.B", Counter: 5, Token: "v4"}, Presumed: true}},
		{"a take with the checkpoint it knew (a fill), unanswered: the orphan knows it (seed 98123718)",
			leases.Lease{Counter: 1, Token: "v1", Recovered: "r", Checkpoint: cp("315")}, Orphan{Inc: "0.A", Vanished: true, Known: leases.Lease{Counter: 2, Checkpoint: cp("257")}}, leases.Checkpoint{},
			Orphan{Inc: "0.B", Known: leases.Lease{Owner: "a", Incarnation: "0.B", Counter: 2, Token: "v1", Recovered: "r", Checkpoint: cp("315")}, Presumed: true, Vanished: true}},
		{"no checkpoint on the row: what the orphan replaced knew, not the kept one",
			row, Orphan{Inc: "0.A", Known: leases.Lease{Counter: 3, Checkpoint: cp("300")}}, cp("200"),
			Orphan{Inc: "0.B", Known: leases.Lease{Owner: "a", Incarnation: "0.B", Counter: 5, Token: "v4"}, Presumed: true, Knew: cp("300")}},
		{"no checkpoint, no orphan before: the kept one, the fill the take would have written",
			row, Orphan{}, cp("200"),
			Orphan{Inc: "0.B", Known: leases.Lease{Owner: "a", Incarnation: "0.B", Counter: 5, Token: "v4"}, Presumed: true, Knew: cp("200")}},
		{"the counter went back since the orphan replaced: the row was recreated",
			row, Orphan{Inc: "0.A", Known: leases.Lease{Counter: 9}}, leases.Checkpoint{},
			Orphan{Inc: "0.B", Known: leases.Lease{Owner: "a", Incarnation: "0.B", Counter: 5, Token: "v4"}, Presumed: true, Vanished: true}},
		{"a take that did not wait stays one (TestRepairedRowRetakenOnlyAfterTheWait)",
			row, Orphan{Inc: "0.A", Known: leases.Lease{Counter: 3}, Unwaited: true}, leases.Checkpoint{},
			Orphan{Inc: "0.B", Known: leases.Lease{Owner: "a", Incarnation: "0.B", Counter: 5, Token: "v4"}, Presumed: true, Unwaited: true}},
	} {
		if got := Presume(tc.l, "a", "0.B", tc.prev, tc.released); got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

// TestOrphanBest: the checkpoint an orphan knows, and the rewind it follows.
func TestOrphanBest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		o          Orphan
		want       leases.Checkpoint
		wantRewind string
	}{
		{"its row's", Orphan{Known: leases.Lease{Checkpoint: cp("40"), Rewind: "x"}}, cp("40"), "x"},
		{"a rewind pending on it (seed 722403)", Orphan{Known: leases.Lease{Checkpoint: cp("40"), RewindTo: cp("26"), Rewind: "y"}}, cp("26"), "y"},
		{"none on its row: what the one it replaced knew", Orphan{Known: leases.Lease{Rewind: "x"}, Knew: cp("30")}, cp("30"), ""},
	} {
		if got, r := tc.o.Best(), tc.o.BestRewind(); got != tc.want || r != tc.wantRewind {
			t.Errorf("%s: Best, BestRewind = %v, %q; want %v, %q", tc.name, got, r, tc.want, tc.wantRewind)
		}
	}
}

// TestDisproved: a read that shows an unanswered take has not landed, so
// that this instance takes the row before the take's late copy can
// (TestLateTakeAfterDisproof: the row named a live incarnation that never
// read it).
func TestDisproved(t *testing.T) {
	o := Orphan{Inc: "0.B", Known: leases.Lease{Owner: "a", Incarnation: "0.B", Counter: 5, Token: "v4"}, Presumed: true}
	for _, tc := range []struct {
		name string
		o    Orphan
		cur  leases.Lease
		want bool
	}{
		{"the version the take was conditional on: not landed (TestLateTakeAfterDisproof)", o, leases.Lease{Counter: 4, Token: "v4"}, true},
		{"another version: landed, or someone wrote", o, leases.Lease{Counter: 5, Token: "v5"}, false},
		{"a version naming the orphan's incarnation: its own", o, leases.Lease{Owner: "a", Incarnation: "0.B", Counter: 6, Token: "v4"}, false},
		{"not presumed: no take to disprove", Orphan{Inc: "0.B", Known: o.Known}, leases.Lease{Counter: 4, Token: "v4"}, false},
		{"no token known", Orphan{Inc: "0.B", Known: leases.Lease{Owner: "a"}, Presumed: true}, leases.Lease{}, false},
	} {
		if got := tc.o.Disproved(tc.cur); got != tc.want {
			t.Errorf("%s: Disproved = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRecreated: an orphan's row recreated from less than it knows, which
// it writes on the row.
func TestRecreated(t *testing.T) {
	knows := Orphan{Inc: "0.A", Known: leases.Lease{Owner: "a", Incarnation: "0.A", Counter: 7, Checkpoint: cp("4900")}}
	vanished := knows
	vanished.Vanished = true
	for _, tc := range []struct {
		name string
		o    Orphan
		l    leases.Lease
		now  Orphan
		want bool
	}{
		{"back with no checkpoint (TestInvalidateKeepsTheCheckpoint)", knows, leases.Lease{Counter: 1}, Orphan{}, true},
		{"recovered from an older copy, its counter back", knows, leases.Lease{Recovered: "r", Counter: 1, Checkpoint: cp("4000")}, Orphan{}, true},
		{"recovered from an older copy, found missing", vanished, leases.Lease{Recovered: "r", Counter: 9, Checkpoint: cp("4000")}, Orphan{}, true},
		{"recovered from an older copy, the orphan held now found it missing", knows, leases.Lease{Recovered: "r", Counter: 9, Checkpoint: cp("4000")}, vanished, true},
		{"the same, but the orphan held now is of another incarnation", knows, leases.Lease{Recovered: "r", Counter: 9, Checkpoint: cp("4000")}, Orphan{Inc: "0.B", Vanished: true}, false},
		{"recovered from an older copy, nothing says it vanished", knows, leases.Lease{Recovered: "r", Counter: 9, Checkpoint: cp("4000")}, Orphan{}, false},
		{"recovered from a later copy", vanished, leases.Lease{Recovered: "r", Counter: 1, Checkpoint: cp("5000")}, Orphan{}, false},
		{"the orphan knows no checkpoint", Orphan{Inc: "0.A", Vanished: true}, leases.Lease{Counter: 1}, Orphan{}, false},
	} {
		if got := tc.o.Recreated(tc.l, tc.now); got != tc.want {
			t.Errorf("%s: Recreated = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRetake: what a retake of an orphan waits for and writes.
func TestRetake(t *testing.T) {
	o := Orphan{Inc: "0.A", Known: leases.Lease{Owner: "a", Incarnation: "0.A", Counter: 7, Checkpoint: cp("40"), Rewind: "x", Recovered: "late:v1"}}
	for _, tc := range []struct {
		name string
		o    Orphan
		l    leases.Lease
		read bool
		want leases.Lease
	}{
		{"known, not read: the row's own checkpoint, which a rewind may have moved", o, o.Known, false,
			leases.Lease{Owner: "a", Incarnation: "0.A", Counter: 7, Rewind: "x", Recovered: "late:v1"}},
		{"read, recreated with none: the orphan's, with its rewind", o, leases.Lease{Counter: 1}, true, leases.Lease{Counter: 1, Checkpoint: cp("40"), Rewind: "x"}},
		{"read, with a checkpoint, even an older one: as read", o, leases.Lease{Counter: 9, Checkpoint: cp("30")}, true, leases.Lease{Counter: 9, Checkpoint: cp("30")}},
		{"known as a version recreated with nothing, not read: what it knew (seed 95903527)",
			Orphan{Inc: "0.A", Known: leases.Lease{Counter: 1, Token: "t1"}, Knew: cp("86"), Vanished: true}, leases.Lease{Counter: 1, Token: "t1"}, false,
			leases.Lease{Counter: 1, Token: "t1", Checkpoint: cp("86")}},
	} {
		if got := tc.o.RetakeFrom(tc.l, tc.read, Orphan{}); got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
	unwaited := o
	unwaited.Unwaited = true
	if got := unwaited.Awaited(leases.Lease{Owner: "a"}).Recovered; got != "late:v1" {
		t.Errorf("an orphan of a take that did not wait waits for %q, want the recovery it took (TestRepairedRowRetakenOnlyAfterTheWait)", got)
	}
	if got := o.Awaited(leases.Lease{Owner: "a"}).Recovered; got != "" {
		t.Errorf("an orphan that waited waits for %q, want nothing", got)
	}
}

// TestAdoptRewind: an orphan that reads its row carrying a later operator's
// rewind than its copy knows the row at the rewind (seed 98915512: the
// orphan's copy from before a rewind of the free row recreated it past the
// rewind after the table was dropped).
func TestAdoptRewind(t *testing.T) {
	o := Orphan{Inc: "0.OLD", Known: leases.Lease{Owner: "a", Counter: 7, Checkpoint: cp("40")}, Knew: cp("35")}
	for _, tc := range []struct {
		name string
		o    Orphan
		cur  leases.Lease
		ours bool
		want bool
	}{
		{"a rewind the copy does not carry, pending on the free row (seed 98915512)", o, leases.Lease{Counter: 8, Checkpoint: cp("40"), RewindTo: cp("26"), Rewind: olderRewind}, false, true},
		{"a later rewind than the copy's", Orphan{Known: leases.Lease{Rewind: olderRewind}}, leases.Lease{Rewind: laterRewind}, false, true},
		{"an older rewind than the copy's", Orphan{Known: leases.Lease{Rewind: laterRewind}}, leases.Lease{Rewind: olderRewind}, false, false},
		{"the copy's rewind", Orphan{Known: leases.Lease{Rewind: olderRewind}}, leases.Lease{Rewind: olderRewind}, false, false},
		{"no rewind", o, leases.Lease{Counter: 8, Checkpoint: cp("50")}, false, false},
		{"ours", o, leases.Lease{Rewind: olderRewind}, true, false},
	} {
		if got := tc.o.LaterRewind(tc.cur, tc.ours); got != tc.want {
			t.Errorf("%s: LaterRewind = %v, want %v", tc.name, got, tc.want)
		}
	}
	got := o.Adopt(leases.Lease{Counter: 8, Checkpoint: cp("40"), RewindTo: cp("26"), Rewind: olderRewind})
	if got.Best() != cp("26") || got.BestRewind() != olderRewind || got.Known.Counter != 7 {
		t.Errorf("adopted: %+v; want it to know the rewind's position 26 and its id, its counter kept", got)
	}
}

// TestForgotten: what is kept of an orphan's row someone else holds now.
func TestForgotten(t *testing.T) {
	o := Orphan{Inc: "0.A", Known: leases.Lease{Owner: "a", Incarnation: "0.A", Counter: 8, Checkpoint: cp("40")}, Presumed: true}
	for _, tc := range []struct {
		name      string
		cur, want leases.Lease
	}{
		{"someone else's, with a checkpoint: as read", leases.Lease{Owner: "b", Counter: 9, Checkpoint: cp("50")}, leases.Lease{Owner: "b", Counter: 9, Checkpoint: cp("50")}},
		{"recreated, no checkpoint yet: the orphan's, at the real counter",
			leases.Lease{Owner: "b", Counter: 2}, leases.Lease{Owner: "a", Incarnation: "0.A", Counter: 7, Checkpoint: cp("40")}},
	} {
		if got := o.Forgotten(tc.cur); got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

// TestOrphanFills: what the release of an orphan, and the take that
// invalidates an unanswered take, write on its row.
func TestOrphanFills(t *testing.T) {
	knows := Orphan{Inc: "0.A", Known: leases.Lease{Owner: "a", Incarnation: "0.A", Counter: 5, Checkpoint: cp("315"), Token: "v4"}, Presumed: true}
	vanished := knows
	vanished.Vanished = true
	recovered := leases.Lease{Recovered: "r", Counter: 1, Checkpoint: cp("257"), Token: "v4"}
	for _, tc := range []struct {
		name       string
		o          Orphan
		l          leases.Lease
		release    leases.Checkpoint
		invalidate leases.Checkpoint
	}{
		{"a row of ours as known: the row's stays", knows, knows.Known, leases.Checkpoint{}, cp("315")},
		{"recreated with none (TestInvalidateKeepsTheCheckpoint)", knows, leases.Lease{Counter: 1, Token: "v4"}, cp("315"), cp("315")},
		{"recovered from an older copy, found missing: the one it knows, never the older (seed 98123718)", vanished, recovered, cp("315"), cp("315")},
		{"the same, not found missing: released as it is", knows, recovered, leases.Checkpoint{}, cp("257")},
		{"a rewind pending: the rewind stands", vanished, leases.Lease{Counter: 1, RewindTo: cp("5")}, leases.Checkpoint{}, leases.Checkpoint{}},
	} {
		if got := tc.o.ReleaseFill(tc.l); got != tc.release {
			t.Errorf("%s: ReleaseFill = %v, want %v", tc.name, got, tc.release)
		}
		if got := tc.o.InvalidateFrom(tc.l); got.Checkpoint != tc.invalidate {
			t.Errorf("%s: InvalidateFrom writes %v, want %v", tc.name, got.Checkpoint, tc.invalidate)
		}
	}
}

// TestAfterRelease: what an orphan does once its release did not land.
func TestAfterRelease(t *testing.T) {
	presumed := Orphan{Inc: "0.CUR", Known: leases.Lease{Owner: "a", Incarnation: "0.CUR", Counter: 2, Token: "v1"}, Presumed: true, Knew: cp("4900"), Vanished: true}
	old := Orphan{Inc: "0.OLD", Known: leases.Lease{Owner: "a", Incarnation: "0.OLD", Counter: 7, Checkpoint: cp("40"), Token: "v7"}}
	for _, tc := range []struct {
		name string
		o    Orphan
		err  error
		cur  leases.Lease
		ours bool
		want Step
	}{
		{"the row is missing: recovered from what the orphan knew", old, errNotFound, leases.Lease{}, false, StepRecover},
		{"the release failed unanswered: next round", old, errTimeout, leases.Lease{}, false, StepLater},
		{"met a row again on the second attempt: next round", old, errConflict, leases.Lease{}, false, StepLater},
		{"our take has not landed and may: invalidated (TestLateTakeAfterDisproof)", presumed, nil, leases.Lease{Counter: 1, Token: "v1"}, false, StepInvalidate},
		{"recreated free with none: repaired (TestKnowerWritesItsCheckpointOnRecoveredRow)", old, nil, leases.Lease{Recovered: "r", Counter: 1, Token: "w1"}, false, StepRepair},
		{"held by another: forgotten", old, nil, leases.Lease{Owner: "b", Incarnation: "0.B", Counter: 8, Checkpoint: cp("40")}, false, StepForget},
		{"free with a checkpoint, not recreated: forgotten", old, nil, leases.Lease{Counter: 8, Checkpoint: cp("40")}, false, StepForget},
		{"ours under a later incarnation: released again", old, nil, leases.Lease{Owner: "a", Incarnation: "1.NEW", Counter: 8, Checkpoint: cp("40")}, true, StepAgain},
	} {
		if got := tc.o.AfterRelease(tc.err, tc.cur, tc.ours, Orphan{}); got != tc.want {
			t.Errorf("%s: AfterRelease = %d, want %d", tc.name, got, tc.want)
		}
	}
}
