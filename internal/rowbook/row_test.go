package rowbook

import (
	"testing"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/leases"
)

// Row and Sighting as the tables moved from package lostrow name them.
type (
	Row      = lostrow.Row
	Sighting = lostrow.Sighting
)

func cp(seq string) leases.Checkpoint { return leases.Checkpoint{Sequence: seq} }

// TestRowAfter: what a read or a write leaves known of a row: existence
// (Seen, Missing since when), the checkpoint seen before a recreation, the
// recoveries seen and the first-take mark.
func TestRowAfter(t *testing.T) {
	held := leases.Lease{Owner: "b", Counter: 7, Checkpoint: cp("300"), Token: "t7"}
	for _, tc := range []struct {
		name     string
		old, got Row
		want     Row
	}{
		{"found missing: the row it was and that it was seen stay, the absence dated now",
			Row{Lease: held, Seen: true}, Row{Missing: true},
			Row{Lease: held, Seen: true, Missing: true, MissingSince: 50}},
		{"missing again: dated from the first read that found it missing, still reported",
			Row{Lease: held, Seen: true, Missing: true, MissingSince: 10, Reported: true}, Row{Missing: true},
			Row{Lease: held, Seen: true, Missing: true, MissingSince: 10, Reported: true}},
		{"never seen, found missing: not seen",
			Row{}, Row{Missing: true}, Row{Missing: true, MissingSince: 50}},
		{"found: seen",
			Row{Missing: true, MissingSince: 10}, Row{Lease: held}, Row{Lease: held, Seen: true}},
		{"back with no checkpoint (recreated): the one seen before stays known (TestRecoveredTrimHorizonKeepsWhatThisInstanceKnew)",
			Row{Lease: held, Seen: true}, Row{Lease: leases.Lease{Counter: 1}},
			Row{Lease: leases.Lease{Counter: 1}, Seen: true, Knew: cp("300")}},
		{"a recovery first shown: dated now (the recovery wait counts from it)",
			Row{Lease: held, Seen: true}, Row{Lease: leases.Lease{Recovered: "r1", Checkpoint: cp("300")}},
			Row{Lease: leases.Lease{Recovered: "r1", Checkpoint: cp("300")}, Seen: true, Recovery: "r1", RecoveredAt: 50}},
		{"the same recovery read again: dated from the first answer",
			Row{Recovery: "r1", RecoveredAt: 20}, Row{Lease: leases.Lease{Recovered: "r1", Checkpoint: cp("300")}},
			Row{Lease: leases.Lease{Recovered: "r1", Checkpoint: cp("300")}, Seen: true, Recovery: "r1", RecoveredAt: 20}},
		{"another recovery: dated now, the one before kept with its first sighting",
			Row{Recovery: "r1", RecoveredAt: 20}, Row{Lease: leases.Lease{Recovered: "r2", Checkpoint: cp("300")}},
			Row{Lease: leases.Lease{Recovered: "r2", Checkpoint: cp("300")}, Seen: true, Recovery: "r2", RecoveredAt: 50, Earlier: [3]Sighting{{Rec: "r1", At: 20}}}},
		{"a recovery seen before another, seen again: its first sighting, not now (seeds 97301047, 97301425)",
			Row{Recovery: "r2", RecoveredAt: 30, Earlier: [3]Sighting{{Rec: "r1", At: 20}}}, Row{Lease: leases.Lease{Recovered: "r1", Checkpoint: cp("300")}},
			Row{Lease: leases.Lease{Recovered: "r1", Checkpoint: cp("300")}, Seen: true, Recovery: "r1", RecoveredAt: 20, Earlier: [3]Sighting{{Rec: "r2", At: 30}}}},
		{"a report due stays due (seed 96101881)",
			Row{ReportDue: true}, Row{Lease: held}, Row{Lease: held, Seen: true, ReportDue: true}},
		{"the first-take mark of the same version stays (a mark sent again finds its own)",
			Row{MarkTok: "m", MarkFor: "t7"}, Row{Lease: held}, Row{Lease: held, Seen: true, MarkTok: "m", MarkFor: "t7"}},
		{"another version: the mark goes",
			Row{MarkTok: "m", MarkFor: "t6"}, Row{Lease: held}, Row{Lease: held, Seen: true}},
	} {
		if got := after(tc.got, tc.old, 50); got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
	if recoveredSince(Row{Recovery: "r1", RecoveredAt: 20}, "r1", 50) != 20 || recoveredSince(Row{Recovery: "r1", RecoveredAt: 20}, "r2", 50) != 50 {
		t.Error("RecoveredSince: not the first answer that showed the recovery, or not now for another")
	}
}

// TestRowSaw: seed 95805621. An orphan whose undone take made the row
// recovered (the late mark, noted then) waits from that note, though
// answers showed a later recovery since: before, the row kept only the
// last, and the orphan's wait began again at every round, the shard unread
// for ever. The book holds the last four recoveries, the oldest dropped.
func TestRowSaw(t *testing.T) {
	r := saw(saw(Row{}, "late:a", 10), "QY22", 40)
	if got := recoveredSince(r, "late:a", 90); got != 10 {
		t.Errorf("the late mark noted at 10, a later recovery seen at 40: waits from %d, want 10", got)
	}
	if got := recoveredSince(r, "QY22", 90); got != 40 {
		t.Errorf("the later recovery: from %d, want 40", got)
	}
	if saw(r, "QY22", 80) != r {
		t.Error("the same recovery seen again changed the book")
	}
	r = saw(saw(saw(r, "r3", 50), "r4", 60), "r5", 70)
	if got := recoveredSince(r, "late:a", 90); got != 90 {
		t.Errorf("five recoveries later, the first still dated %d: the book is not bounded", got)
	}
	if got := recoveredSince(r, "QY22", 90); got != 40 {
		t.Errorf("the fourth most recent: from %d, want 40", got)
	}
}
