// Package lostrow holds what an instance knows of its lease rows (Row, kept
// by package rowbook; Orphan) and the lost-row protocol's decisions on it,
// each a pure function of facts apart from the store calls that carry it out
// (package engine): docs/lease-protocol.md, "Lost rows".
package lostrow

import (
	"cmp"
	"errors"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// Unanswered reports whether err, a store call's error, tells nothing of
// the row (neither ErrConflict nor ErrNotFound): a write may have landed.
func Unanswered(err error) bool {
	return err != nil && !errors.Is(err, leases.ErrConflict) && !errors.Is(err, leases.ErrNotFound)
}

// Facts is what Decide needs to know of a row found missing.
type Facts struct {
	Seen     bool // this instance saw the row exist
	Creating bool // this instance is creating the stream's rows (the engine's createAll)
	SawRows  bool // this instance saw a row of the stream exist
	// Mark is what it knows of the stream's mark (MarkStream), MarkedFor
	// for how long it has known another's; RecoveryWait the recovery wait.
	Mark                    Mark
	MarkedFor, RecoveryWait time.Duration
}

// Mark is what an instance knows of a stream's mark.
type Mark int

const (
	// MarkUnknown: not read, a read failed, or none found in a table not
	// known older than a timeout, where an absent mark proves nothing (the
	// table may be recreated under a holder that delivers until its fence).
	MarkUnknown Mark = iota
	MarkNone         // none, in a table older than a timeout this instance's entry is in since: a new stream
	MarkOurs         // this incarnation made it
	MarkOther        // another made it: the rows exist, are being created by the marker, or vanished
)

// Action is what this instance does about a row found missing.
type Action int

const (
	Wait      Action = iota // nothing yet; a later round reads the row again
	CreateNew               // mark the stream; if the mark is the first, create its rows free, read at once
	Report                  // report it (ReportVanished: its holders and knowers read it again), and wait
	Recover                 // report it and recreate it free and recovered
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
	// Vanished before this instance saw it (a mark known for the wait, or
	// rows of an unmarked stream seen: a tool's): recovered, so that a
	// holder it may have had stops before anyone else reads it.
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

// Blind reports whether a row recovered from f says nothing its creator
// knew: it reports the row again once it exists, for the knowers to write
// theirs on it (seed 96101881: the row vanished again after the first).
func (f From) Blind() bool { return f == FromStart || f == FromTrimHorizon }

// Point returns the checkpoint and Rewind id to recreate a vanished row
// with, from known (this instance's copy), best (its best checkpoint), seen
// (it saw the row) and rec (the shard's last rewind): a rewind pending on
// known counts as applied, one recorded since wins; a row seen with no
// checkpoint known starts at TRIM_HORIZON (NoStart), never LATEST.
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

// Vanished reports whether a holder's row, read again as l (err: the
// read's error), vanished: missing, or back free and recovered (Reclaim).
func Vanished(l leases.Lease, err error) bool {
	return errors.Is(err, leases.ErrNotFound) || err == nil && !l.Held() && l.Recovered != ""
}

// Back is what a holder does with its vanished row (Reclaim).
type Back int

const (
	BackLater Back = iota // recovered, held a moment by a member writing its checkpoint, while the holder's proof runs: next round
	BackLost              // taken by another: not the holder's any more
	BackOn                // made by an earlier attempt of the holder: go on with it, proved as of the read
	BackFill              // the holder's take landed unanswered on a row recovered with no checkpoint: write its own
	BackTake              // free: take it back at once, writing the holder's checkpoint in the take
)

// Reclaim decides what a holder does with its vanished row, found as cur
// once it recreated it free and recovered (or met another's recovery):
// known is its copy, cp and rewind what it recreated it with (Point),
// within whether its proof runs. Free, then taken: a late copy of the
// creation is read by nobody before the recovery wait (seeds 40002590,
// 60012559). rewound: rewound since known; taken at the rewind, not cp.
func Reclaim(cur, known leases.Lease, cp leases.Checkpoint, rewind string, within bool) (act Back, rewound bool) {
	ours := cur.Owner == known.Owner && cur.Incarnation == known.Incarnation
	switch {
	case cur.Held() && !ours && cur.Recovered != "" && within:
		return BackLater, false
	case cur.Held() && !ours:
		return BackLost, false
	case ours && (!NoStart(cur) || cp.IsZero()):
		return BackOn, false
	case ours:
		return BackFill, false
	}
	return BackTake, cur.Rewind != "" && cur.Rewind != rewind
}

// Resume returns row l as a recreation must resume it: at the position of
// an operator's rewind pending on it (never past what the operator asked
// to read again), else at its checkpoint.
func Resume(l leases.Lease) leases.Lease {
	if !l.RewindTo.IsZero() {
		l.Checkpoint, l.RewindTo = l.RewindTo, leases.Checkpoint{}
	}
	return l
}

// NoStart reports whether row l says nothing of where its shard was read
// to: no rewind pending, and no checkpoint, or the TRIM_HORIZON of a
// recovery by a member that knew none (Point: FromTrimHorizon, no Rewind
// id). A member that knows a checkpoint of the row writes it before anyone
// reads.
func NoStart(l leases.Lease) bool {
	return l.RewindTo.IsZero() && (l.Checkpoint.IsZero() || l.Recovered != "" && l.Rewind == "" && l.Checkpoint.Sequence == leases.RewindTrimHorizon)
}

// Outdated reports whether row l, free and recovered (or as Create made it,
// Counter 1: known is then of the row before a late Create made it again),
// was recovered from a copy older than known, this instance's copy: l says
// nothing (NoStart); or carries no operator's rewind while known does
// (every write keeps the last rewind's id, a recovery its copy's); or the
// same rewind, none pending, and a checkpoint before known's (recovered
// from a copy read before known's holder wrote on); or an older rewind
// (driver.RewindAfter; seed 98328216). A member that knows such a copy
// writes its checkpoint on the row before anyone reads it.
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
