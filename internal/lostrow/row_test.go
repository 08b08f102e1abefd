package lostrow

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

func cp(seq string) leases.Checkpoint { return leases.Checkpoint{Sequence: seq} }

var (
	trim        = cp(leases.RewindTrimHorizon)
	errTimeout  = errors.New("context deadline exceeded") // a call with no answer
	errConflict = fmt.Errorf("dynamo: %w", leases.ErrConflict)
	errNotFound = fmt.Errorf("dynamo: %w", leases.ErrNotFound)
	t0          = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	olderRewind = driver.NewRewindID(t0)
	laterRewind = driver.NewRewindID(t0.Add(20 * time.Second))
)

// TestReportCovers: one vanished report sent since a row was first found
// missing covers it; one sent before does not.
func TestReportCovers(t *testing.T) {
	r := Row{Missing: true, MissingSince: 100}
	for _, tc := range []struct {
		name string
		sent int64
		any  bool
		want bool
	}{
		{"none sent", 0, false, false},
		{"sent before the row was found missing", 99, true, false},
		{"sent as it was found missing", 100, true, true},
		{"sent since", 150, true, true},
	} {
		if got := r.ReportCovers(tc.sent, tc.any); got != tc.want {
			t.Errorf("%s: ReportCovers = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestNote: what this instance keeps of a row it released or read.
func TestNote(t *testing.T) {
	kept := leases.Lease{Checkpoint: cp("80"), Rewind: laterRewind}
	for _, tc := range []struct {
		name     string
		l, prev  leases.Lease
		had      bool
		want     leases.Lease
		wantKept bool
	}{
		{"a checkpoint", leases.Lease{Checkpoint: cp("300")}, leases.Lease{}, false, leases.Lease{Checkpoint: cp("300")}, true},
		{"a rewind pending and no checkpoint: kept at the rewind, replacing an older note (seed 722403)",
			leases.Lease{RewindTo: cp("26"), Rewind: "x"}, leases.Lease{Checkpoint: cp("300")}, true, leases.Lease{Checkpoint: cp("26"), Rewind: "x"}, true},
		{"no checkpoint: nothing to keep", leases.Lease{Counter: 1}, leases.Lease{Checkpoint: cp("300")}, true, leases.Lease{}, false},
		{"a recovery at TRIM_HORIZON by a member that knew none (TestRecoveredTrimHorizonKeepsWhatThisInstanceKnew)",
			leases.Lease{Recovered: "r", Checkpoint: trim}, leases.Lease{Checkpoint: cp("300")}, true, leases.Lease{}, false},
		{"a recovery carrying an older rewind than the note: the note stands (seed 98328216)",
			leases.Lease{Recovered: "r", Checkpoint: trim, Rewind: olderRewind}, kept, true, leases.Lease{}, false},
		{"the same recovery with no note before: kept",
			leases.Lease{Recovered: "r", Checkpoint: trim, Rewind: olderRewind}, leases.Lease{}, false, leases.Lease{Recovered: "r", Checkpoint: trim, Rewind: olderRewind}, true},
	} {
		got, ok := Note(tc.l, tc.prev, tc.had)
		if got != tc.want || ok != tc.wantKept {
			t.Errorf("%s: Note = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.wantKept)
		}
	}
}

// TestRecheck: a row this instance kept, read again after a vanished
// report.
func TestRecheck(t *testing.T) {
	known := leases.Lease{Checkpoint: cp("139")}
	for _, tc := range []struct {
		name  string
		l     leases.Lease
		known leases.Lease
		err   error
		ours  bool
		want  Found
	}{
		{"missing: an orphan, recreated from what is kept", leases.Lease{}, known, errNotFound, false, FoundLost},
		{"restarted at the start by a fresh process that never knew it (seed 99005019)",
			leases.Lease{Recovered: "r2", Counter: 1}, known, nil, false, FoundLost},
		{"recovered from an older copy (TestOutdatedRecoveryKeepsWhatThisInstanceKnew)",
			leases.Lease{Recovered: "r2", Checkpoint: cp("100")}, known, nil, false, FoundLost},
		{"the read failed", leases.Lease{}, known, errTimeout, false, FoundFailed},
		{"someone else's, further on", leases.Lease{Owner: "b", Counter: 9, Checkpoint: cp("200")}, known, nil, false, FoundNewer},
		{"someone else's, a rewind pending", leases.Lease{Owner: "b", Counter: 9, RewindTo: cp("5")}, known, nil, false, FoundNewer},
		{"ours", leases.Lease{Owner: "a", Counter: 9, Checkpoint: cp("200")}, known, nil, true, FoundNothing},
		{"held, nothing written yet", leases.Lease{Owner: "b", Counter: 9}, known, nil, false, FoundNothing},
	} {
		if got := Recheck(tc.l, tc.known, tc.err, tc.ours); got != tc.want {
			t.Errorf("%s: Recheck = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestFill: what a take to read writes on a row, from what this instance
// knows of it.
func TestFill(t *testing.T) {
	o := &Orphan{Inc: "0.A", Known: leases.Lease{Owner: "a", Incarnation: "0.A", Checkpoint: cp("500"), Rewind: "x"}}
	for _, tc := range []struct {
		name       string
		l          leases.Lease
		knew       leases.Checkpoint
		released   *leases.Lease
		o          *Orphan
		want       leases.Lease
		wantFilled bool
	}{
		{"a row with a checkpoint older than kept, which may follow a rewind: taken from it (seeds 1504412, 1510881, 1520568)",
			leases.Lease{Counter: 3, Checkpoint: cp("100"), Rewind: "y"}, leases.Checkpoint{}, &leases.Lease{Checkpoint: cp("300")}, nil,
			leases.Lease{Counter: 3, Checkpoint: cp("100"), Rewind: "y"}, false},
		{"a recovery carrying an older rewind than kept: the kept checkpoint and its rewind (seed 98328216)",
			leases.Lease{Recovered: "r", Counter: 1, Checkpoint: trim, Rewind: olderRewind}, leases.Checkpoint{}, &leases.Lease{Checkpoint: cp("80"), Rewind: laterRewind}, nil,
			leases.Lease{Recovered: "r", Counter: 1, Checkpoint: cp("80"), Rewind: laterRewind}, true},
		{"the fill writes the rewind it follows over the recovery's (seed 98521710)",
			leases.Lease{Recovered: "r", Counter: 1, Rewind: olderRewind}, leases.Checkpoint{}, &leases.Lease{Checkpoint: cp("26"), Rewind: laterRewind}, nil,
			leases.Lease{Recovered: "r", Counter: 1, Checkpoint: cp("26"), Rewind: laterRewind}, true},
		{"a fill with no rewind known keeps the row's",
			leases.Lease{Counter: 1, Rewind: "y"}, leases.Checkpoint{}, &leases.Lease{Checkpoint: cp("26")}, nil,
			leases.Lease{Counter: 1, Checkpoint: cp("26"), Rewind: "y"}, true},
		{"no checkpoint, one seen before the recreation",
			leases.Lease{Counter: 1}, cp("300"), nil, nil, leases.Lease{Counter: 1, Checkpoint: cp("300")}, true},
		{"no checkpoint, an orphan's known since: it wins (as last held or read)",
			leases.Lease{Counter: 1}, cp("300"), &leases.Lease{Checkpoint: cp("400")}, o, leases.Lease{Counter: 1, Checkpoint: cp("500"), Rewind: "x"}, true},
		{"an orphan does not fill a row with a checkpoint",
			leases.Lease{Counter: 3, Checkpoint: cp("100")}, leases.Checkpoint{}, nil, o, leases.Lease{Counter: 3, Checkpoint: cp("100")}, false},
		{"nothing known: the start position", leases.Lease{Counter: 1}, leases.Checkpoint{}, nil, nil, leases.Lease{Counter: 1}, false},
	} {
		got, filled := Fill(tc.l, tc.knew, tc.released, tc.o)
		if got != tc.want || filled != tc.wantFilled {
			t.Errorf("%s:\n got %+v, %v\nwant %+v, %v", tc.name, got, filled, tc.want, tc.wantFilled)
		}
	}
}

// TestLateCreate: a row as Create made it, and one made again by a Create
// applied late after it was taken and deleted (seed 93032236: a holder cut
// off from the table still delivered, and the member that found the row
// "new" took it at once).
func TestLateCreate(t *testing.T) {
	created := leases.Lease{Counter: 1, Token: "c1"}
	for _, tc := range []struct {
		name        string
		l           leases.Lease
		asCreated   bool
		lateCreated bool
	}{
		{"as created", created, true, false},
		{"as created, known with a checkpoint (read before): made again late (seed 93032236)", leases.Lease{Counter: 1, Token: "c1", Checkpoint: cp("139")}, true, true},
		{"written since", leases.Lease{Counter: 2}, false, false},
		{"held", leases.Lease{Counter: 1, Owner: "b"}, false, false},
		{"recovered", leases.Lease{Counter: 1, Recovered: "r"}, false, false},
	} {
		if AsCreated(tc.l) != tc.asCreated || LateCreated(tc.l) != tc.lateCreated {
			t.Errorf("%s: AsCreated %v, LateCreated %v; want %v, %v", tc.name, AsCreated(tc.l), LateCreated(tc.l), tc.asCreated, tc.lateCreated)
		}
	}
	if LateMark(created) == "" || LateMark(created) == LateMark(leases.Lease{Token: "c2"}) {
		t.Error("LateMark does not tell the versions apart")
	}
	for _, tc := range []struct {
		name  string
		l     leases.Lease
		known Row
		rec   leases.RewindRecord
		want  leases.Checkpoint
	}{
		{"the taker's fill stays", leases.Lease{Counter: 1, Checkpoint: cp("50")}, Row{Lease: leases.Lease{Checkpoint: cp("139")}}, leases.RewindRecord{}, cp("50")},
		{"the checkpoint known (seed 93032236)", created, Row{Lease: leases.Lease{Checkpoint: cp("139")}}, leases.RewindRecord{}, cp("139")},
		{"the one known before the row was recreated", created, Row{Lease: leases.Lease{Counter: 1}, Knew: cp("120")}, leases.RewindRecord{}, cp("120")},
		{"nothing known, a rewind recorded: the rewind", created, Row{}, leases.RewindRecord{ID: "r", To: cp("5")}, cp("5")},
		{"nothing known: TRIM_HORIZON, never the start position", created, Row{}, leases.RewindRecord{}, trim},
	} {
		got := LateFill(tc.l, tc.known, tc.rec)
		if got.Checkpoint != tc.want || got.Recovered != LateMark(tc.l) {
			t.Errorf("%s: LateFill = %+v, want at %v, recovered %q", tc.name, got, tc.want, LateMark(tc.l))
		}
	}
}

// TestNotFirst: a take of a row as Create made it whose mark was not the
// row's first is undone; nothing is read from the row before the recovery
// wait (seed 93032236).
func TestNotFirst(t *testing.T) {
	for _, tc := range []struct {
		name       string
		take, mark error
		want       Undo
	}{
		{"taken, another's mark: made again late, released recovered (seed 93032236)", nil, errConflict, UndoRelease},
		{"taken, the mark unanswered: released recovered all the same", nil, errTimeout, UndoRelease},
		{"the take unanswered: its orphan waits the recovery wait", errTimeout, errConflict, UndoOrphan},
		{"the take failed, another's mark: taken and released recovered (TestLateCreateAfterTakeWaitsTheRecovery)", errConflict, errConflict, UndoTakeRelease},
		{"the take found no row, another's mark", errNotFound, errConflict, UndoTakeRelease},
		{"the take failed, the mark too: another took the row first, nothing to undo", errConflict, errTimeout, UndoNothing},
	} {
		if got := NotFirst(tc.take, tc.mark); got != tc.want {
			t.Errorf("%s: NotFirst = %d, want %d", tc.name, got, tc.want)
		}
	}
	if Unanswered(nil) || Unanswered(errConflict) || Unanswered(errNotFound) || !Unanswered(errTimeout) {
		t.Error("Unanswered: not only for errors that tell nothing of the row")
	}
}
