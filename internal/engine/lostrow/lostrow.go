// Package lostrow decides what an instance does about a lease row it found
// missing (deleted, or the table recreated empty), and where a recovered
// row starts: the lost-row protocol's decisions, pure, apart from the
// store calls that carry them out (package engine). The protocol:
// docs/lease-protocol.md, "Lost rows".
package lostrow

import (
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// Facts is what Decide needs to know of a row found missing.
type Facts struct {
	Seen       bool // this instance saw the row exist
	Creating   bool // the stream's rows are being created (the engine's createAll)
	IsNew      bool // the stream is new (the engine's newStream), and no other row of it exists
	SawRows    bool // this instance saw a row of the stream exist
	TableInUse bool // a fleet read the table when this instance joined
	AllRead    bool // every row of the first listing was read
	// MissingFor is how long the row has been found missing;
	// RecoveryWait is the recovery wait.
	MissingFor, RecoveryWait time.Duration
}

// Action is what this instance does about a row found missing.
type Action int

const (
	// Wait: nothing yet; a later round reads the row again.
	Wait Action = iota
	// CreateNew: create the new stream's rows free, to be read at once.
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
	case f.IsNew:
		return CreateNew
	case f.SawRows || f.TableInUse:
		// A row that vanished before this instance saw it, or a stream new
		// to a table in use: recovered, so that a holder it may have had
		// has stopped before anyone else reads it.
		return Recover
	case !f.AllRead:
		return Wait // rows of the stream still unread: one that exists would make it not new
	case f.MissingFor < f.RecoveryWait:
		// Perhaps a new stream, whose one creator (the engine's newStream) creates its
		// rows free, to be read at once: a recovered row would wait. Or a
		// table emptied under its fleet, whose members know the
		// checkpoints and recreate the rows first.
		return Report
	}
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
	cp := best
	if !known.RewindTo.IsZero() {
		cp = known.RewindTo
	}
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

// Outdated reports whether row l, free and recovered, was recovered from a
// copy older than known, a copy of the row this instance knows: the row
// says nothing of where its shard was read (NoStart), or it carries no
// operator's rewind while known does (every write keeps the id of the last
// rewind, and a recovery carries its copy's: a copy without one predates
// the rewind, which went with the table's rewind records if the table was
// recreated). A member that knows such a copy writes its checkpoint on the
// row before anyone reads it.
func Outdated(l, known leases.Lease) bool {
	return !l.Held() && l.Recovered != "" && (NoStart(l) || l.Rewind == "" && known.Rewind != "")
}
