package kltype

import "time"

// Record is one Kinesis record with where it came from, as a handler sees
// it through kinesislease.RecordFrom. A user record of a KPL aggregate is a
// Record of its own: it shares the aggregate's SequenceNumber and has its
// index in SubSequence.
type Record struct {
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// ShardID is the shard the record was read from.
	ShardID string
	// SequenceNumber is the Kinesis record's sequence number.
	SequenceNumber string
	// SubSequence is the record's index in a KPL aggregate, else 0.
	SubSequence int64
	// PartitionKey is the record's partition key (a KPL user record's own).
	PartitionKey string
	// ExplicitHashKey is a KPL user record's explicit hash key, if any.
	ExplicitHashKey string
	// ArrivalTime is Kinesis' ApproximateArrivalTimestamp.
	ArrivalTime time.Time
	// Data is the record's payload, as put.
	Data []byte
	// Attempt counts deliveries of this record to the handler by this
	// instance: 1 the first time, 2 on the first retry, and so on.
	Attempt int
}
