package lostrow

import (
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
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
			Facts{Seen: true, MissingFor: 0}, Recover},
		{"seen, even while the stream's rows are being created",
			Facts{Seen: true, Creating: true}, Recover},
		{"never seen, being created by createAll: wait",
			Facts{Creating: true, IsNew: true}, Wait},
		{"a new stream: created free at once (TestStartNewTable)",
			Facts{IsNew: true, AllRead: true}, CreateNew},
		{"never seen, in a stream whose other rows this instance saw: vanished before it looked",
			Facts{SawRows: true, AllRead: true}, Recover},
		{"never seen, on a table in use: a stream new to it, or a row nobody recreated",
			Facts{TableInUse: true}, Recover},
		{"never seen, rows of the stream still unread: unknown (TestStartManyShardsSlowStore)",
			Facts{AllRead: false}, Wait},
		{"never seen, all read, not the creator: report, give the creator the recovery wait (TestNewStreamFewerShardsThanMembers)",
			Facts{AllRead: true, MissingFor: wait - time.Millisecond}, Report},
		{"never seen, all read, missing for the recovery wait: recovered (a table emptied under a fleet nobody recreated)",
			Facts{AllRead: true, MissingFor: wait}, Recover},
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
		{"held", leases.Lease{Recovered: "r", Owner: "b"}, leases.Lease{Rewind: "x"}, false},
	} {
		if got := Outdated(tc.row, tc.copy); got != tc.want {
			t.Errorf("%s: Outdated(%+v, %+v) = %v, want %v", tc.name, tc.row, tc.copy, got, tc.want)
		}
	}
}
