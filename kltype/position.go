package kltype

import (
	"errors"
	"fmt"
	"time"
)

// PositionType says where a shard without a checkpoint starts.
type PositionType int

// Position types, Kinesis' shard iterator types.
const (
	// PositionLatest starts after the newest record (LATEST).
	PositionLatest PositionType = iota
	// PositionTrimHorizon starts at the oldest record still kept
	// (TRIM_HORIZON).
	PositionTrimHorizon
	// PositionAtTimestamp starts at the first record that arrived at or
	// after Time (AT_TIMESTAMP).
	PositionAtTimestamp
	// PositionAtSequenceNumber starts at the record with sequence number
	// Sequence (AT_SEQUENCE_NUMBER).
	PositionAtSequenceNumber
	// PositionAfterSequenceNumber starts right after the record with
	// sequence number Sequence (AFTER_SEQUENCE_NUMBER).
	PositionAfterSequenceNumber
)

// StartPosition is a position in a shard: where a shard without a
// checkpoint starts (kinesislease.WithStartPosition). Build one with Latest,
// TrimHorizon, AtTimestamp, AtSequenceNumber or AfterSequenceNumber.
type StartPosition struct {
	// Type is the kind of position.
	Type PositionType
	// Time is the arrival time of PositionAtTimestamp.
	Time time.Time
	// Sequence is the sequence number of PositionAtSequenceNumber and
	// PositionAfterSequenceNumber.
	Sequence string
}

// Start positions without a parameter.
var (
	// Latest starts after the newest record: only records put from now on.
	Latest = StartPosition{Type: PositionLatest}
	// TrimHorizon starts at the oldest record the stream still keeps.
	TrimHorizon = StartPosition{Type: PositionTrimHorizon}
)

// AtTimestamp starts at the first record that arrived at or after t.
func AtTimestamp(t time.Time) StartPosition {
	return StartPosition{Type: PositionAtTimestamp, Time: t}
}

// AtSequenceNumber starts at the record with sequence number seq.
func AtSequenceNumber(seq string) StartPosition {
	return StartPosition{Type: PositionAtSequenceNumber, Sequence: seq}
}

// AfterSequenceNumber starts right after the record with sequence number seq.
func AfterSequenceNumber(seq string) StartPosition {
	return StartPosition{Type: PositionAfterSequenceNumber, Sequence: seq}
}

// Validate reports whether p names a position Kinesis can start from.
func (p StartPosition) Validate() error {
	switch {
	case p.Type < PositionLatest || p.Type > PositionAfterSequenceNumber:
		return fmt.Errorf("unknown start position %v", p)
	case p.Type == PositionAtTimestamp && p.Time.IsZero():
		return fmt.Errorf("AtTimestamp with a zero time")
	case (p.Type == PositionAtSequenceNumber || p.Type == PositionAfterSequenceNumber) && p.Sequence == "":
		return fmt.Errorf("%v with an empty sequence number", p)
	}
	return nil
}

// String returns the Kinesis iterator type, with its time or sequence
// number.
func (p StartPosition) String() string {
	switch p.Type {
	case PositionLatest:
		return "LATEST"
	case PositionTrimHorizon:
		return "TRIM_HORIZON"
	case PositionAtTimestamp:
		return "AT_TIMESTAMP " + p.Time.Format(time.RFC3339Nano)
	case PositionAtSequenceNumber:
		return "AT_SEQUENCE_NUMBER " + p.Sequence
	case PositionAfterSequenceNumber:
		return "AFTER_SEQUENCE_NUMBER " + p.Sequence
	}
	return fmt.Sprintf("StartPosition(%d)", int(p.Type))
}

// ErrCheckpointNotInShard: Kinesis refused to read a shard from its
// checkpoint (InvalidArgumentException on GetShardIterator): the sequence
// number is not in the shard, as after the stream was deleted and
// recreated under the same name. The shard is set aside (the rest of the
// service goes on); move its checkpoint with `kinesislease rewind` (to
// TRIM_HORIZON, LATEST, a time or a sequence number of the new shard) and
// it is read from there at its next retry. A *CheckpointError carries the
// details.
var ErrCheckpointNotInShard = errors.New("kinesislease: the checkpoint is not in the shard")

// ErrConsumerLimit: Kinesis refused to register a subscription's stream
// consumer (enhanced fan-out) with LimitExceededException, and no consumer
// of that name appeared meanwhile: the stream has as many registered
// consumers as its account allows (20 by default). Deregister one that is
// no longer used, or share a consumer name between the applications that
// may share one.
var ErrConsumerLimit = errors.New("kinesislease: stream consumer limit reached")

// CheckpointError is a shard whose checkpoint Kinesis refused; it matches
// ErrCheckpointNotInShard.
type CheckpointError struct {
	Stream, ShardID string
	// Position is the position asked for: after (or at) the checkpoint.
	Position StartPosition
	// Err is Kinesis' error.
	Err error
}

func (e *CheckpointError) Error() string {
	return fmt.Sprintf("kinesislease: stream %q shard %s: the checkpoint %s is not in the shard (was the stream deleted and recreated?): "+
		"rewind it, e.g. kinesislease rewind --table TABLE --stream %s --shard %s --to TRIM_HORIZON: %v",
		e.Stream, e.ShardID, e.Position, e.Stream, e.ShardID, e.Err)
}

// Is matches ErrCheckpointNotInShard.
func (e *CheckpointError) Is(target error) bool { return target == ErrCheckpointNotInShard }

// Unwrap returns Kinesis' error.
func (e *CheckpointError) Unwrap() error { return e.Err }
