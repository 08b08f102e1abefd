package lostrow

import (
	"cmp"
	"errors"

	"github.com/kinesislease/kinesislease/leases"
)

// Row is what an instance last knew of a lease row. Instants are on its
// monotonic clock. Recovery is the last recovery (Lease.Recovered) an
// answer showed, RecoveredAt when the first such answer came, Earlier the
// ones before it with theirs; MarkTok the token of its MarkTaken of the
// version whose Token is MarkFor.
type Row struct {
	Lease        leases.Lease // as last read or written, kept when it vanished
	Missing      bool         // the last read found no row, and every read since MissingSince
	MissingSince int64
	Reported     bool // reported vanished (ReportVanished) since found missing
	Seen         bool // this instance saw the row exist
	Recovery     string
	RecoveredAt  int64
	Earlier      [3]Sighting       // most recent first
	ReportDue    bool              // recovered Blind here, not reported since
	Created      bool              // created free here as a new stream's, untouched since
	Knew         leases.Checkpoint // an earlier version's, while Lease (recreated) has none
	MarkTok      string
	MarkFor      string
}

// Done reports whether the row is at its shard's end with no rewind pending.
func (r Row) Done() bool {
	return r.Lease.Checkpoint.Sequence == leases.ShardEnd && r.Lease.RewindTo.IsZero()
}

// Best is the checkpoint this instance knows the row was read to.
func (r Row) Best() leases.Checkpoint {
	if NoStart(r.Lease) {
		return r.Knew
	}
	return r.Lease.Checkpoint
}

// Sighting is when an instance first saw recovery Rec of a row.
type Sighting struct {
	Rec string
	At  int64
}

// ReportCovers reports whether a vanished report sent at sent (any: one
// was) covers the missing row: one sent since it was first found missing.
func (r Row) ReportCovers(sent int64, any bool) bool { return any && sent >= r.MissingSince }

// Note returns what this instance keeps of row l, which it released or
// read (prev: kept before, if had), and whether it keeps it: a rewind
// pending at its position (seed 722403: a note from before it recreated
// the row past it); nothing NoStart, or Outdated by prev (seed 98328216).
func Note(l, prev leases.Lease, had bool) (leases.Lease, bool) {
	l = Resume(l)
	if NoStart(l) || had && Outdated(l, prev) {
		return leases.Lease{}, false
	}
	return l, true
}

// Found is what a re-read of a row kept by Note tells.
type Found int

const (
	FoundNothing Found = iota // nothing to change
	FoundFailed               // the read failed: again
	FoundLost                 // missing, or recreated from less: an orphan known as kept, recreated or written from it
	FoundNewer                // someone else's, at a checkpoint: kept so from now on
)

// Recheck decides what a re-read of a row kept as known tells after a
// vanished report: l the row read, err the read's error, ours whether l
// names this process (seed 99005019: a member that recovered a row kept
// it, and repaired it once a fresh process restarted it at the start).
func Recheck(l, known leases.Lease, err error, ours bool) Found {
	switch {
	case errors.Is(err, leases.ErrNotFound) || err == nil && Outdated(l, known) && !known.Checkpoint.IsZero():
		return FoundLost
	case err != nil:
		return FoundFailed
	case !Resume(l).Checkpoint.IsZero() && !ours:
		return FoundNewer
	}
	return FoundNothing
}

// Fill returns what a take of row l to read writes, and whether it fills a
// checkpoint known: knew (Row.Knew), released (Note's, or nil), o (or nil).
// A row with none goes on from the best known; one with a checkpoint from
// it, even older (seeds 1504412, 1510881), unless Outdated (seed 98328216).
// The fill carries its rewind's id (seed 98521710).
func Fill(l leases.Lease, knew leases.Checkpoint, released *leases.Lease, o *Orphan) (leases.Lease, bool) {
	var fill leases.Checkpoint
	var rewind string
	noStart := NoStart(l)
	if released != nil && (noStart || Outdated(l, *released)) {
		fill, rewind = released.Checkpoint, released.Rewind
	}
	if noStart && fill.IsZero() {
		fill = knew
	}
	if o != nil && noStart && !o.Best().IsZero() {
		fill, rewind = o.Best(), o.BestRewind()
	}
	if fill.IsZero() {
		return l, false
	}
	l.Checkpoint, l.Rewind = fill, cmp.Or(rewind, l.Rewind)
	return l, true
}

// AsCreated reports whether row l is as Create made it: free, not
// recovered, counter 1. A late Create may make a row again after it was
// taken and deleted, while a holder cut off still delivers (seed 93032236):
// a take of such a row marks it taken (MarkTaken) to read from it.
func AsCreated(l leases.Lease) bool {
	return l.Counter == 1 && !l.Held() && l.Recovered == ""
}

// LateCreated reports whether row l is as Create made it but known with a
// checkpoint: read before, so made again by a late Create (LateMark).
func LateCreated(l leases.Lease) bool { return AsCreated(l) && !l.Checkpoint.IsZero() }

// LateMark is the Recovered mark of row l made again by a late Create.
func LateMark(l leases.Lease) string { return "late:" + l.Token }

// LateFill returns row l, made again by a late Create, recovered: at its
// checkpoint (its taker's fill), else where a recovery from known would
// start (Point, as a row seen; rec the shard's last rewind), never at the start.
func LateFill(l leases.Lease, known Row, rec leases.RewindRecord) leases.Lease {
	if l.Checkpoint.IsZero() {
		l.Checkpoint, l.Rewind, _ = Point(known.Lease, known.Best(), true, rec)
	}
	l.Recovered = LateMark(l)
	return l
}

// Undo is how a take of a row as Create made it is undone.
type Undo int

const (
	UndoNothing     Undo = iota // the take failed on its own: another took the row first
	UndoRelease                 // the take landed: release the row recovered
	UndoOrphan                  // no answer: the orphan waits the recovery wait (Orphan.Unwaited)
	UndoTakeRelease             // the row was made again late: take it, release it recovered
)

// NotFirst decides how to undo a take of a row as Create made it whose
// mark did not show it the row's first: take and mark are the calls'
// errors. Another's mark (ErrConflict) means a late Create made the row
// again; one that failed proves nothing: the row is not read yet either.
func NotFirst(take, mark error) Undo {
	switch {
	case take == nil:
		return UndoRelease
	case Unanswered(take):
		return UndoOrphan
	case errors.Is(mark, leases.ErrConflict):
		return UndoTakeRelease
	}
	return UndoNothing
}
