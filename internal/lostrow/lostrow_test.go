package lostrow

import (
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// TestDecide: the lost-row decision, row by row. The named seeds and
// tests are where each rule was learnt.
func TestDecide(t *testing.T) {
	const wait = 10 * time.Second
	for _, tc := range []struct {
		name string
		f    Facts
		want Action
	}{
		{"a row this instance saw vanished: recovered at once (TestDeletedRowNoSecondReader)",
			Facts{Seen: true, Mark: MarkNone}, Recover},
		{"seen, even while the stream's rows are being created",
			Facts{Seen: true, Creating: true}, Recover},
		{"never seen, being created by createAll: wait",
			Facts{Creating: true, Mark: MarkOurs}, Wait},
		{"no mark, the table older than a timeout: a new stream, marked and created free at once (TestStartNewTable)",
			Facts{Mark: MarkNone}, CreateNew},
		{"no mark found on a table this instance cannot yet tell from one recreated under a holder: wait (seed 95028121)",
			Facts{Mark: MarkUnknown}, Wait},
		{"no mark, but rows of the stream seen (written by a tool): vanished before this instance looked",
			Facts{Mark: MarkNone, SawRows: true}, Recover},
		{"another's mark, known for less than the wait: being created, or vanished (TestNewStreamFewerShardsThanMembers)",
			Facts{Mark: MarkOther, MarkedFor: wait - time.Millisecond}, Report},
		{"another's mark, known for the wait: vanished, recovered (a table emptied under a fleet nobody recreated)",
			Facts{Mark: MarkOther, MarkedFor: wait}, Recover},
		{"another's mark, rows seen, known for less than the wait: still being created",
			Facts{Mark: MarkOther, SawRows: true}, Report},
		{"our own mark, not creating (createAll done): vanished",
			Facts{Mark: MarkOurs}, Recover},
	} {
		tc.f.RecoveryWait = wait
		if got := Decide(tc.f); got != tc.want {
			t.Errorf("%s: Decide(%+v) = %d, want %d", tc.name, tc.f, got, tc.want)
		}
	}
}

// TestPoint: where a recovered row starts.
func TestPoint(t *testing.T) {
	cp := leases.Checkpoint{Sequence: "300"}
	rewindTo := leases.Checkpoint{Sequence: "100"}
	trim := leases.Checkpoint{Sequence: leases.RewindTrimHorizon}
	for _, tc := range []struct {
		name       string
		known      leases.Lease
		best       leases.Checkpoint
		seen       bool
		rec        leases.RewindRecord
		wantCp     leases.Checkpoint
		wantRewind string
		wantFrom   From
	}{
		{"the checkpoint this instance knows (TestDynamoMembership/seed=1: known from a read at the first listing)",
			leases.Lease{Checkpoint: cp, Rewind: "r1"}, cp, true, leases.RewindRecord{ID: "r1", To: rewindTo}, cp, "r1", FromKnown},
		{"a rewind recorded after the copy was read wins (TestDeletedRowAfterRewind)",
			leases.Lease{Checkpoint: cp, Rewind: "r1"}, cp, true, leases.RewindRecord{ID: "r2", To: rewindTo}, rewindTo, "r2", FromRewind},
		{"a rewind pending on the copy counts as applied (seed 1606534)",
			leases.Lease{Checkpoint: cp, RewindTo: rewindTo}, cp, true, leases.RewindRecord{}, rewindTo, "", FromKnown},
		{"seen, no checkpoint known: TRIM_HORIZON with no Rewind id, never LATEST",
			leases.Lease{Rewind: "r1"}, leases.Checkpoint{}, true, leases.RewindRecord{ID: "r1", To: rewindTo}, trim, "", FromTrimHorizon},
		{"never Seen: the start position",
			leases.Lease{}, leases.Checkpoint{}, false, leases.RewindRecord{}, leases.Checkpoint{}, "", FromStart},
		{"never seen, but a rewind recorded: at the rewind",
			leases.Lease{}, leases.Checkpoint{}, false, leases.RewindRecord{ID: "r3", To: rewindTo}, rewindTo, "r3", FromRewind},
	} {
		gotCp, gotRewind, gotFrom := Point(tc.known, tc.best, tc.seen, tc.rec)
		if gotCp != tc.wantCp || gotRewind != tc.wantRewind || gotFrom != tc.wantFrom {
			t.Errorf("%s: Point = %v, %q, %d; want %v, %q, %d", tc.name, gotCp, gotRewind, gotFrom, tc.wantCp, tc.wantRewind, tc.wantFrom)
		}
	}
}

// TestNoStart: what says nothing of where a shard was read to.
func TestNoStart(t *testing.T) {
	trim := leases.Checkpoint{Sequence: leases.RewindTrimHorizon}
	for _, tc := range []struct {
		name string
		l    leases.Lease
		want bool
	}{
		{"no checkpoint", leases.Lease{}, true},
		{"a checkpoint", leases.Lease{Checkpoint: leases.Checkpoint{Sequence: "300"}}, false},
		{"a rewind pending", leases.Lease{RewindTo: trim}, false},
		{"a recovery at TRIM_HORIZON by a member that knew none", leases.Lease{Checkpoint: trim, Recovered: "r"}, true},
		{"an operator's rewind to TRIM_HORIZON, recovered at it", leases.Lease{Checkpoint: trim, Recovered: "r", Rewind: "id"}, false},
		{"TRIM_HORIZON on a row not recovered", leases.Lease{Checkpoint: trim}, false},
	} {
		if got := NoStart(tc.l); got != tc.want {
			t.Errorf("%s: NoStart(%+v) = %v, want %v", tc.name, tc.l, got, tc.want)
		}
	}
}

// TestOutdated: a recovered row is outdated for a member whose copy is
// newer: it says nothing, or carries no operator's rewind the copy carries
// (seed 90017901: the table dropped with the rewind record, a member whose
// copy predated the rewind recovered the row from it, past the rewind).
func TestOutdated(t *testing.T) {
	cp := leases.Checkpoint{Sequence: "139"}
	for _, tc := range []struct {
		name      string
		row, copy leases.Lease
		want      bool
	}{
		{"recovered with no checkpoint", leases.Lease{Recovered: "r"}, leases.Lease{Checkpoint: cp}, true},
		{"recovered from a copy before the rewind the copy here carries", leases.Lease{Recovered: "r", Checkpoint: cp}, leases.Lease{Rewind: "x"}, true},
		{"recovered with the same rewind", leases.Lease{Recovered: "r", Checkpoint: cp, Rewind: "x"}, leases.Lease{Rewind: "x"}, false},
		{"recovered with another rewind (which is newer cannot be told: the row's stands)", leases.Lease{Recovered: "r", Checkpoint: cp, Rewind: "y"}, leases.Lease{Rewind: "x"}, false},
		{"recovered, and the copy here knows no rewind either", leases.Lease{Recovered: "r", Checkpoint: cp}, leases.Lease{}, false},
		{"not recovered", leases.Lease{Checkpoint: cp}, leases.Lease{Rewind: "x"}, false},
		{"as Create made it, a Create landed late after the row was taken and deleted (seed 93032236)", leases.Lease{Counter: 1}, leases.Lease{Checkpoint: cp}, true},
		{"written since it was created", leases.Lease{Counter: 2}, leases.Lease{Checkpoint: cp}, false},
		{"held", leases.Lease{Recovered: "r", Owner: "b"}, leases.Lease{Rewind: "x"}, false},
		{"recovered from an older copy, same rewind: the copy here is later (TestTableRecreatedEmpty: the holder fenced with its entry)",
			leases.Lease{Recovered: "r", Checkpoint: leases.Checkpoint{Sequence: "0281"}, Rewind: "x"}, leases.Lease{Checkpoint: leases.Checkpoint{Sequence: "1139"}, Rewind: "x"}, true},
		{"same sequence, later sub-sequence here", leases.Lease{Recovered: "r", Checkpoint: cp}, leases.Lease{Checkpoint: leases.Checkpoint{Sequence: "139", SubSequence: 2}}, true},
		{"recovered from a later copy than the one here", leases.Lease{Recovered: "r", Checkpoint: cp}, leases.Lease{Checkpoint: leases.Checkpoint{Sequence: "99"}}, false},
		{"a rewind pending on the copy here: its position, not its checkpoint", leases.Lease{Recovered: "r", Checkpoint: cp},
			leases.Lease{Checkpoint: leases.Checkpoint{Sequence: "200"}, RewindTo: leases.Checkpoint{Sequence: "1"}}, false},
		{"recovered at TRIM_HORIZON, same rewind applied here and read on (seed 98110959)", leases.Lease{Recovered: "r", Checkpoint: leases.Checkpoint{Sequence: leases.RewindTrimHorizon}, Rewind: "x"},
			leases.Lease{Checkpoint: cp, Rewind: "x"}, true},
		{"LATEST is not compared", leases.Lease{Recovered: "r", Checkpoint: leases.Checkpoint{Sequence: leases.RewindLatest}, Rewind: "x"},
			leases.Lease{Checkpoint: cp, Rewind: "x"}, false},
		{"TRIM_HORIZON here is not after anything", leases.Lease{Recovered: "r", Checkpoint: cp, Rewind: "x"},
			leases.Lease{Checkpoint: leases.Checkpoint{Sequence: leases.RewindTrimHorizon}, Rewind: "x"}, false},
	} {
		if got := Outdated(tc.row, tc.copy); got != tc.want {
			t.Errorf("%s: Outdated(%+v, %+v) = %v, want %v", tc.name, tc.row, tc.copy, got, tc.want)
		}
	}
}

// TestOutdatedByAnOlderRewind: a row recovered from a copy that carries an
// older operator's rewind than the copy here (which applied a later one and
// read on) is outdated; one that carries the later rewind is not
// (driver.RewindAfter; seed 98328216).
func TestOutdatedByAnOlderRewind(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	older, later := driver.NewRewindID(t0), driver.NewRewindID(t0.Add(20*time.Second))
	th := leases.Checkpoint{Sequence: leases.RewindTrimHorizon}
	here := leases.Lease{Checkpoint: leases.Checkpoint{Sequence: "80"}, Rewind: later}
	if !Outdated(leases.Lease{Recovered: "r", Checkpoint: th, Rewind: older}, here) {
		t.Error("a recovery carrying the older rewind is not outdated by a copy that applied the later one")
	}
	if Outdated(leases.Lease{Recovered: "r", Checkpoint: th, Rewind: later}, leases.Lease{Checkpoint: leases.Checkpoint{Sequence: "80"}, Rewind: older}) {
		t.Error("a recovery carrying the later rewind is outdated by a copy of the older one")
	}
	if !driver.RewindAfter(later, older) || driver.RewindAfter(older, later) || driver.RewindAfter("ABCDEFGHIJKLMNOP", older) {
		t.Error("RewindAfter does not order NewRewindID ids by time, or orders an id of another form")
	}
}

// TestBlind: a recovery that says nothing its creator knew is reported
// again once the row exists (seed 96101881: a knower recovered the row on
// the first report, the row vanished again unseen by the reporter, and
// nobody wrote the checkpoint on the blind recovery).
func TestBlind(t *testing.T) {
	for from, want := range map[From]bool{FromKnown: false, FromRewind: false, FromTrimHorizon: true, FromStart: true} {
		if from.Blind() != want {
			t.Errorf("From(%d).Blind() = %v, want %v", from, !want, want)
		}
	}
}

// TestResume: the rewind rule: a row with an operator's rewind pending
// resumes at the rewind's position, never past what the operator asked to
// read again (seed 722403).
func TestResume(t *testing.T) {
	for _, tc := range []struct {
		name    string
		l, want leases.Lease
	}{
		{"a rewind pending (seed 722403)", leases.Lease{Checkpoint: cp("300"), RewindTo: cp("26"), Rewind: "x"}, leases.Lease{Checkpoint: cp("26"), Rewind: "x"}},
		{"a rewind pending, no checkpoint", leases.Lease{RewindTo: trim, Rewind: "x"}, leases.Lease{Checkpoint: trim, Rewind: "x"}},
		{"none: its checkpoint", leases.Lease{Checkpoint: cp("300"), Rewind: "x"}, leases.Lease{Checkpoint: cp("300"), Rewind: "x"}},
	} {
		if got := Resume(tc.l); got != tc.want {
			t.Errorf("%s: Resume = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestVanished: a holder's row read again: vanished, or not.
func TestVanished(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    leases.Lease
		err  error
		want bool
	}{
		{"missing", leases.Lease{}, errNotFound, true},
		{"recovered free by another member (TestHolderTakesRecoveredRowBackAtOnce)", leases.Lease{Recovered: "r", Checkpoint: cp("40")}, nil, true},
		{"held, recovered: a repairer's moment, or taken", leases.Lease{Recovered: "r", Owner: "b"}, nil, false},
		{"free, not recovered: released, not vanished", leases.Lease{Checkpoint: cp("40")}, nil, false},
		{"the read failed", leases.Lease{}, errTimeout, false},
	} {
		if got := Vanished(tc.l, tc.err); got != tc.want {
			t.Errorf("%s: Vanished = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReclaim: what a holder does with its vanished row once it recreated
// it free and recovered, or met another's recovery.
func TestReclaim(t *testing.T) {
	known := leases.Lease{Owner: "a", Incarnation: "0.A", Counter: 12, Checkpoint: cp("1122"), Rewind: "r1"}
	for _, tc := range []struct {
		name        string
		cur         leases.Lease
		cp          leases.Checkpoint
		within      bool
		want        Back
		wantRewound bool
	}{
		{"its own creation, free and recovered: taken back, never created held (seeds 40002590, 60012559)",
			leases.Lease{Recovered: "c", Counter: 1, Checkpoint: cp("1122"), Rewind: "r1"}, cp("1122"), true, BackTake, false},
		{"another's recovery: taken back at once (TestHolderTakesRecoveredRowBackAtOnce)",
			leases.Lease{Recovered: "c", Counter: 1, Checkpoint: cp("900"), Rewind: "r1"}, cp("1122"), true, BackTake, false},
		{"a recovery carrying an operator's rewind since the holder's copy: taken at the rewind (TestDeletedRowAfterRewind)",
			leases.Lease{Recovered: "c", Counter: 1, Checkpoint: cp("5"), Rewind: "r2"}, cp("1122"), true, BackTake, true},
		{"held a moment by a member writing its checkpoint while the proof runs: next round",
			leases.Lease{Recovered: "c", Owner: "b", Incarnation: "0.B", Counter: 2}, cp("1122"), true, BackLater, false},
		{"the same once the proof ran out: lost",
			leases.Lease{Recovered: "c", Owner: "b", Incarnation: "0.B", Counter: 2}, cp("1122"), false, BackLost, false},
		{"taken by a later incarnation of this process (a fence since): lost to this lease",
			leases.Lease{Owner: "a", Incarnation: "1.A", Counter: 3, Checkpoint: cp("1122")}, cp("1122"), true, BackLost, false},
		{"taken by another after the recovery wait: lost",
			leases.Lease{Owner: "b", Incarnation: "0.B", Counter: 3, Checkpoint: cp("1122")}, cp("1122"), true, BackLost, false},
		{"an earlier attempt's take landed unanswered: go on",
			leases.Lease{Owner: "a", Incarnation: "0.A", Counter: 2, Checkpoint: cp("1122")}, cp("1122"), true, BackOn, false},
		{"its take of a recovery with no checkpoint landed unanswered: write its own",
			leases.Lease{Owner: "a", Incarnation: "0.A", Counter: 2}, cp("1122"), true, BackFill, false},
		{"the same, with no checkpoint of its own: go on",
			leases.Lease{Owner: "a", Incarnation: "0.A", Counter: 2}, leases.Checkpoint{}, true, BackOn, false},
	} {
		act, rewound := Reclaim(tc.cur, known, tc.cp, "r1", tc.within)
		if act != tc.want || rewound != tc.wantRewound {
			t.Errorf("%s: Reclaim = %d, %v; want %d, %v", tc.name, act, rewound, tc.want, tc.wantRewound)
		}
	}
}
