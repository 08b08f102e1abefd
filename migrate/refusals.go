package migrate

import (
	"fmt"
	"strings"
	"time"
)

// RunningError says that an application still writes a table: items (or,
// for kinesislease, rows and membership heartbeats) changed between two reads
// Interval apart. It matches ErrStillRunning.
type RunningError struct {
	// Table is the foreign table that changed; empty when the kinesislease
	// service of Stream is the one running.
	Table string
	// Stream is our stream.
	Stream string
	// Changed names what changed: item keys, or "member <owner>" and row
	// keys for kinesislease.
	Changed []string
	// Interval is the time between the two reads.
	Interval time.Duration
}

// Error names the table (or our service), what changed and what to do.
func (e *RunningError) Error() string {
	what := strings.Join(firstN(e.Changed, 5), ", ")
	if len(e.Changed) > 5 {
		what += fmt.Sprintf(" and %d more", len(e.Changed)-5)
	}
	if e.Table != "" {
		return fmt.Sprintf("table %q is still being written (%s changed within %v): stop the application that uses it first", e.Table, what, e.Interval)
	}
	return fmt.Sprintf("the kinesislease service of stream %q is still running (%s changed within %v): stop it first", e.Stream, what, e.Interval)
}

// Is makes errors.Is(err, ErrStillRunning) true.
func (e *RunningError) Is(target error) bool { return target == ErrStillRunning }

// BackwardsError refuses to move a shard's checkpoint back. It matches
// ErrBackwards.
type BackwardsError struct {
	// Table is the table whose row would move (empty: ours).
	Table string
	// Key is the row's key.
	Key string
	// From is the row's checkpoint, To the one that would replace it, each
	// in its table's notation.
	From, To string
}

// Error names the row and both checkpoints.
func (e *BackwardsError) Error() string {
	where := "our row"
	if e.Table != "" {
		where = fmt.Sprintf("table %q, item", e.Table)
	}
	return fmt.Sprintf("%s %s: would move the checkpoint back from %s to %s, replaying what was processed", where, e.Key, e.From, e.To)
}

// Is makes errors.Is(err, ErrBackwards) true.
func (e *BackwardsError) Is(target error) bool { return target == ErrBackwards }

// HeldError refuses to write a row held by a live member: its holder
// heartbeated (or its row changed) between the two reads. It matches ErrHeld.
type HeldError struct {
	Key                string // our row
	Owner, Incarnation string // its holder
}

// Error names the row and its holder, and what to do.
func (e *HeldError) Error() string {
	inc := ""
	if e.Incarnation != "" {
		inc = " (incarnation " + e.Incarnation + ")"
	}
	return fmt.Sprintf("our row %s is held by %s%s, which is alive: stop the service, or force a rewind request that it applies", e.Key, e.Owner, inc)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }
