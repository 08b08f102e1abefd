package kltype

import (
	"context"
	"time"
)

// Hook is any value implementing one or more of the Hook* interfaces below
// (kinesislease.WithHooks). The service calls the methods a hook
// implements, and only those, so adding a hook interface later breaks
// nobody (the design of franz-go's hooks). Hooks are called synchronously
// from the goroutine where the event happens, possibly concurrently for
// different shards: they must be safe for concurrent use and return
// quickly. An event no hook listens to costs one length check.
type Hook any

// LeaseInfo describes a lease event.
type LeaseInfo struct {
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// ShardID is the shard whose lease moved.
	ShardID string
	// Owner is this instance's owner id.
	Owner string
	// Checkpoint is the lease's checkpoint at the event.
	Checkpoint Checkpoint
	// From is the previous owner on a takeover, else empty.
	From string
}

// HookLeaseAcquired is called when this instance took a lease (From: the
// previous owner on a takeover), before its shard starts.
type HookLeaseAcquired interface {
	OnLeaseAcquired(ctx context.Context, l LeaseInfo)
}

// HookLeaseReleased is called when this instance released a lease after its
// final checkpoint (a planned move or a shutdown): it could still commit.
type HookLeaseReleased interface {
	OnLeaseReleased(ctx context.Context, l LeaseInfo)
}

// HookLeaseLost is called when this instance found another owner holding a
// lease it held: nothing more was written.
type HookLeaseLost interface {
	OnLeaseLost(ctx context.Context, l LeaseInfo)
}

// ShardInfo describes a shard reader starting or a shard ending.
type ShardInfo struct {
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// ShardID is the shard.
	ShardID string
	// Start is where reading starts (HookShardStarted only).
	Start StartPosition
}

// HookShardStarted is called when a worker starts reading a shard.
type HookShardStarted interface{ OnShardStarted(s ShardInfo) }

// HookShardEnded is called when a closed shard was read to its end and its
// SHARD_END checkpoint written.
type HookShardEnded interface{ OnShardEnded(s ShardInfo) }

// FailureInfo describes a shard or stream that failed for a reason no
// retry inside the reader can cure (HookFailed): access denied on one
// stream, a checkpoint that is not in its shard, a stream deleted. The
// other subscriptions and shards go on; this one is tried again after
// RetryIn.
type FailureInfo struct {
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// ShardID is the shard; "" when the whole stream failed (listing its
	// shards).
	ShardID string
	// Err is the failure.
	Err error
	// Failures counts this shard's (or stream's) failures in a row.
	Failures int
	// RetryIn is how long until it is tried again.
	RetryIn time.Duration
}

// HookFailed is called when a shard or a stream fails for good for now and
// is set aside to be tried again later.
type HookFailed interface{ OnFailed(f FailureInfo) }

// BatchInfo describes one GetRecords answer that held records, or one
// SubscribeToShard event that did (enhanced fan-out).
type BatchInfo struct {
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// ShardID is the shard read.
	ShardID string
	// Records counts the Kinesis records of the answer (an aggregate counts
	// once).
	Records int
	// Bytes sums their data.
	Bytes int
	// MillisBehindLatest is Kinesis' measure of how far the reader lags.
	MillisBehindLatest int64
}

// HookBatchFetched is called for every batch read that held records.
type HookBatchFetched interface{ OnBatchFetched(b BatchInfo) }

// RecordInfo describes a record that reached an outcome.
type RecordInfo struct {
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// ShardID is the shard the record was read from.
	ShardID string
	// SequenceNumber and SubSequence name the record.
	SequenceNumber string
	SubSequence    int64
	// Bytes is the size of its data.
	Bytes int
	// Attempts counts its deliveries to the handler.
	Attempts int
	// Outcome is what became of it.
	Outcome Outcome
	// Duration runs from the first delivery to the outcome.
	Duration time.Duration
}

// HookRecordHandled is called when a record was acknowledged, dropped or
// dead-lettered.
type HookRecordHandled interface{ OnRecordHandled(r RecordInfo) }

// CheckpointInfo describes a checkpoint write.
type CheckpointInfo struct {
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// ShardID is the shard checkpointed.
	ShardID string
	// Checkpoint is what was written.
	Checkpoint Checkpoint
	// Err is nil when the write landed.
	Err error
}

// HookCheckpointWritten is called after every checkpoint write (also the
// final one of a release), successful or not.
type HookCheckpointWritten interface{ OnCheckpointWritten(c CheckpointInfo) }

// ThrottleInfo describes a throttled Kinesis read.
type ThrottleInfo struct {
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// ShardID is the shard read.
	ShardID string
	// Op is GetRecords, GetShardIterator, or SubscribeToShard (enhanced
	// fan-out: LimitExceededException, one call a second per shard).
	Op string
	// Delay is the wait before the retry.
	Delay time.Duration
	// Err is the throttling error.
	Err error
}

// HookThrottled is called when a read was throttled
// (ProvisionedThroughputExceededException, or LimitExceededException on
// SubscribeToShard) and will be retried after Delay.
type HookThrottled interface{ OnThrottled(t ThrottleInfo) }

// HookDeadLettered is called when a sink confirmed a dead letter.
type HookDeadLettered interface{ OnDeadLettered(dl *DeadLetterRecord) }

// FilterInfo describes the user records of one KPL aggregate that were not
// delivered because their hash keys lie outside the hash key range of the
// shard the aggregate was read from (HookUserRecordsFiltered). After a
// reshard, a KPL with a stale shard map can put an aggregate on a shard that
// does not own every user record in it; the KPL puts each such user record
// again, and Kinesis routes that copy to the shard owning its hash key,
// where it is delivered. See package kpl.
type FilterInfo struct {
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// ShardID is the shard the aggregate was read from.
	ShardID string
	// SequenceNumber is the aggregate's.
	SequenceNumber string
	// Filtered counts the user records not delivered.
	Filtered int
	// UserRecords counts the user records of the aggregate.
	UserRecords int
}

// HookUserRecordsFiltered is called for every KPL aggregate some of whose
// user records were not delivered because they hash outside the shard.
type HookUserRecordsFiltered interface{ OnUserRecordsFiltered(f FilterInfo) }

// CallInfo describes one call to the lease store or Kinesis.
type CallInfo struct {
	// Service is "dynamodb" (the lease store, whatever it is) or "kinesis".
	Service string
	// Op is the operation, e.g. Heartbeat or GetRecords.
	Op string
	// Duration is how long the call took.
	Duration time.Duration
	// Err is the call's error, nil on success.
	Err error
}

// HookCall is called after every lease store and Kinesis read call.
type HookCall interface{ OnCall(c CallInfo) }

// HookHealth is given, once, when the service is built
// (kinesislease.New), the service's Health method, for a hook to sample
// when it likes: otelkl reads it at each metrics collection for the age
// of each shard's oldest unresolved record. health may be called from any
// goroutine, not from within OnHealthSource.
type HookHealth interface{ OnHealthSource(health func() Health) }

// IsHook reports whether h implements at least one Hook interface.
func IsHook(h Hook) bool {
	switch h.(type) {
	case HookLeaseAcquired, HookLeaseReleased, HookLeaseLost, HookShardStarted, HookShardEnded, HookBatchFetched,
		HookRecordHandled, HookCheckpointWritten, HookThrottled, HookDeadLettered, HookCall, HookFailed, HookUserRecordsFiltered,
		HookHealth:
		return true
	}
	return false
}
