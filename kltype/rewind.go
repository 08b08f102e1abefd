package kltype

import (
	"errors"
	"fmt"
	"time"
)

// ErrShardNotFound: a rewind named a shard the stream does not list (a
// shard whose records all aged out is no longer listed).
var ErrShardNotFound = errors.New("kinesislease: shard not found")

// ErrPositionNotInShard: Kinesis refused the position a rewind asked for in
// a shard: a sequence number of another shard, or of none. A
// *PositionError carries the details.
var ErrPositionNotInShard = errors.New("kinesislease: position not in the shard")

// PositionError is a rewind's position that Kinesis refused for a shard; it
// matches ErrPositionNotInShard.
type PositionError struct {
	Stream, ShardID string
	// Position is the position asked for.
	Position StartPosition
	// Err is Kinesis' error.
	Err error
}

func (e *PositionError) Error() string {
	return fmt.Sprintf("kinesislease: stream %q, shard %s: %v is not a position of the shard: %v", e.Stream, e.ShardID, e.Position, e.Err)
}

// Is matches ErrPositionNotInShard.
func (e *PositionError) Is(target error) bool { return target == ErrPositionNotInShard }

// Unwrap returns Kinesis' error.
func (e *PositionError) Unwrap() error { return e.Err }

// RewindResult is what a rewind did to the lease row of one shard
// (kinesislease.Service.Rewind; `kinesislease rewind` prints it).
//
// A free row (Holder empty) was rewritten at once: the next holder reads
// the shard from To. A held row carries the request: its holder, told
// through its membership entry, finishes the record in flight, moves its
// checkpoint to To and reads on from there within a heartbeat or two,
// keeping its lease (no second reader).
type RewindResult struct {
	// ShardID is the shard.
	ShardID string
	// From is the row's checkpoint before the rewind; zero when it had none.
	From Checkpoint
	// To is where the shard is read from next: a checkpoint a rewind
	// writes (leases.RewindTrimHorizon, RewindLatest, RewindAtSequence,
	// RewindAtTimestamp) or, after kltype.AfterSequenceNumber, the sequence
	// number itself.
	To Checkpoint
	// Arrival is, for a rewind to a time, when the first record at or after
	// that time arrived (To names that record); zero when none was found,
	// and To is the time itself.
	Arrival time.Time
	// Replaced is the pending rewind request this one replaced, if any.
	Replaced Checkpoint
	// Created: the shard had no row; it was created, free.
	Created bool
	// Holder is the owner holding the row, which applies the rewind; empty
	// when the row was free and was rewritten at once.
	Holder string
	// NotifyErr is why telling Holder failed, if it did: Holder then
	// applies the rewind when it next re-reads its rows (at a checkpoint, or
	// its periodic reconciliation).
	NotifyErr error
	// Unchanged: nothing was written, because the shard is closed, was
	// read to its end, and holds no record at or after the position.
	Unchanged bool
}
