package kltype

import (
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
