// Package lostrow decides what an instance does about a lease row it found
// missing (deleted, or the table recreated empty), and where a recovered
// row starts: the lost-row protocol's decisions, pure, apart from the
// store calls that carry them out (package engine). The protocol:
// docs/lease-protocol.md, "Lost rows".
package lostrow

import (
	"cmp"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// Facts is what Decide needs to know of a row found missing.
type Facts struct {
	Seen     bool // this instance saw the row exist
	Creating bool // this instance is creating the stream's rows (the engine's createAll)
	SawRows  bool // this instance saw a row of the stream exist
	// Mark is what this instance knows of the stream's mark
	// (leases.Membership.MarkStream), MarkedFor how long it has known
	// another's, RecoveryWait the recovery wait.
	Mark                    Mark
	MarkedFor, RecoveryWait time.Duration
}

// Mark is what an instance knows of a stream's mark.
type Mark int

const (
	// MarkUnknown: not read, a read failed, or none found in a table not
	// known older than a timeout (an absent mark proves nothing there: the
	// table may have been recreated under a holder this instance cannot
	// see, which delivers until its fence).
	MarkUnknown Mark = iota
	// MarkNone: no mark, in a table older than a timeout that this
	// instance's entry has been in since: no row of the stream exists or
	// is held. The stream is new.
	MarkNone
	// MarkOurs: this incarnation made the mark.
	MarkOurs
	// MarkOther: another made it: the stream's rows exist, are being
	// created by the marker, or vanished.
	MarkOther
)

// Action is what this instance does about a row found missing.
type Action int

const (
	// Wait: nothing yet; a later round reads the row again.
	Wait Action = iota
	// CreateNew: mark the stream; if this mark is the first, create the
	// stream's rows free, to be read at once.
	CreateNew
	// Report: report it (ReportVanished: whoever holds, released
	// or read it lately reads it again), and wait.
	Report
	// Recover: report it and recreate it free and recovered.
	Recover
)

// Decide decides what to do about a row found missing: the lost-row
// protocol's one decision, apart from the calls that carry it out.
func Decide(f Facts) Action {
	switch {
	case f.Seen:
		return Recover // vanished
	case f.Creating:
		return Wait // being created
	case f.Mark == MarkUnknown:
		return Wait
	case f.Mark == MarkNone && !f.SawRows:
		return CreateNew
	case f.Mark == MarkOther && f.MarkedFor < f.RecoveryWait:
		// Being created by the marker (within the recovery wait), or
		// vanished: its holder reads it again.
		return Report
	}
	// A row that vanished before this instance saw it (a mark of ours or
	// another's known for the whole wait, or rows of an unmarked stream
	// seen: written by a tool, or by a version before marks): recovered,
	// so that a holder it may have had has stopped before anyone else
	// reads it.
	return Recover
}

// From says where a recovered row starts (Point).
type From int

const (
	FromKnown       From = iota // the best checkpoint this instance knows
	FromRewind                  // the operator's last rewind, which came after that
	FromTrimHorizon             // the row existed and this instance knows no checkpoint
	FromStart                   // never seen: the subscription's start position (no checkpoint)
)

// Point returns the checkpoint and Rewind id to recreate a
// vanished row with, from known (the copy of the row this instance knows),
// best (the best checkpoint it knows of it), seen (whether it saw the row
// exist) and rec (the shard's last operator's rewind). A rewind pending on
// known counts as applied. A rewind recorded after known was read (rec
// names another id) wins: a copy read before an operator's rewind must
// never skip the records it asked to replay. A row that existed and whose
// checkpoint nobody here knows starts at TRIM_HORIZON, never at LATEST,
// with no Rewind id, so that a member that knows a checkpoint writes it
// over (NoStart).
func Point(known leases.Lease, best leases.Checkpoint, seen bool, rec leases.RewindRecord) (leases.Checkpoint, string, From) {
	if rec.ID != "" && rec.ID != known.Rewind {
		return rec.To, rec.ID, FromRewind
	}
	cp := cmp.Or(known.RewindTo, best) // a rewind pending on known counts as applied
	switch {
	case !cp.IsZero():
		return cp, known.Rewind, FromKnown
	case seen:
		return leases.Checkpoint{Sequence: leases.RewindTrimHorizon}, "", FromTrimHorizon
	}
	return leases.Checkpoint{}, known.Rewind, FromStart
}

// NoStart reports whether row l says nothing of where its shard was read
// to: no rewind pending, and no checkpoint, or the TRIM_HORIZON of a
// recovery by a member that knew none (Point: FromTrimHorizon, no Rewind
// id). A member that knows a checkpoint of the row writes it before anyone
// reads.
func NoStart(l leases.Lease) bool {
	return l.RewindTo.IsZero() && (l.Checkpoint.IsZero() || l.Recovered != "" && l.Rewind == "" && l.Checkpoint.Sequence == leases.RewindTrimHorizon)
}

// Outdated reports whether row l, free and recovered (or as Create made
// it, Counter 1: then known is of the row before a Create that landed late
// made it again), was recovered from a
// copy older than known, a copy of the row this instance knows: the row
// says nothing of where its shard was read (NoStart); or it carries no
// operator's rewind while known does (every write keeps the id of the last
// rewind, and a recovery carries its copy's: a copy without one predates
// the rewind, which went with the table's rewind records if the table was
// recreated); or it carries the same rewind as known, none pending on
// either, and a checkpoint before known's (a member recovered it from a
// copy it read before known's holder wrote on: the records between were
// handled, and no operator asked for them again); or it carries an older
// rewind than known (driver.RewindAfter: a copy from before known's rewind
// was asked; seed 98328216). A member that knows such
// a copy writes its checkpoint on the row before anyone reads it.
func Outdated(l, known leases.Lease) bool {
	if l.Held() || l.Recovered == "" && l.Counter != 1 {
		return false
	}
	return NoStart(l) || l.Rewind == "" && known.Rewind != "" || l.RewindTo.IsZero() && driver.RewindAfter(known.Rewind, l.Rewind) ||
		l.Rewind == known.Rewind && l.RewindTo.IsZero() && known.RewindTo.IsZero() && before(l.Checkpoint, known.Checkpoint)
}

// before reports whether checkpoint a comes before b in their shard: both
// sequence numbers, compared as numbers, then by sub-sequence; or a at
// TRIM_HORIZON, which comes before every sequence number (seed 98110959: a
// row recovered at an operator's rewind to TRIM_HORIZON, from a copy with
// the rewind pending, while its holder had applied it and read on). Other
// start positions and the shard's end are not compared.
func before(a, b leases.Checkpoint) bool {
	x, ok1 := digits(a.Sequence)
	y, ok2 := digits(b.Sequence)
	switch {
	case a.Sequence == leases.RewindTrimHorizon && ok2:
		return true
	case !ok1 || !ok2:
		return false
	case len(x) != len(y):
		return len(x) < len(y)
	case x != y:
		return x < y
	}
	return a.SubSequence < b.SubSequence
}

// digits returns seq without leading zeros, and whether it is a sequence
// number (decimal digits only).
func digits(seq string) (string, bool) {
	if seq == "" || strings.ContainsFunc(seq, func(c rune) bool { return c < '0' || c > '9' }) {
		return "", false
	}
	return strings.TrimLeft(seq, "0"), true
}
