package kinesislease

import (
	"fmt"

	"github.com/kinesislease/kinesislease/shard"
)

// Hook is any value implementing one or more of the Hook* interfaces; the
// service calls the methods a hook implements, and only those, so adding a
// hook interface later breaks nobody (the design of franz-go's hooks).
// Hooks are called synchronously where the event happens, possibly
// concurrently for different shards: they must be safe for concurrent use
// and return quickly. An event no hook listens to costs one length check.
type Hook = shard.Hook

// Hook interfaces and the values they receive.
type (
	// HookLeaseAcquired: this instance took a lease (From: the previous
	// owner on a takeover).
	HookLeaseAcquired = shard.HookLeaseAcquired
	// HookLeaseReleased: this instance released a lease after its final
	// checkpoint (a planned move or shutdown): it could still commit.
	HookLeaseReleased = shard.HookLeaseReleased
	// HookLeaseLost: another instance holds a lease this one held; nothing
	// more was written.
	HookLeaseLost = shard.HookLeaseLost
	// HookShardStarted: a worker starts reading a shard.
	HookShardStarted = shard.HookShardStarted
	// HookShardEnded: a closed shard was read to its end (SHARD_END written).
	HookShardEnded = shard.HookShardEnded
	// HookBatchFetched: a GetRecords answer held records (count, bytes,
	// MillisBehindLatest).
	HookBatchFetched = shard.HookBatchFetched
	// HookRecordHandled: a record was acknowledged, dropped or dead-lettered
	// (attempts, duration from first delivery, outcome).
	HookRecordHandled = shard.HookRecordHandled
	// HookCheckpointWritten: a checkpoint write, successful or not.
	HookCheckpointWritten = shard.HookCheckpointWritten
	// HookThrottled: a read was throttled and will be retried.
	HookThrottled = shard.HookThrottled
	// HookDeadLettered: a dead-letter sink confirmed a record.
	HookDeadLettered = shard.HookDeadLettered
	// HookCall: every lease store call and Kinesis read call, timed.
	HookCall = shard.HookCall

	LeaseInfo      = shard.LeaseInfo
	ShardInfo      = shard.ShardInfo
	BatchInfo      = shard.BatchInfo
	RecordInfo     = shard.RecordInfo
	CheckpointInfo = shard.CheckpointInfo
	ThrottleInfo   = shard.ThrottleInfo
	CallInfo       = shard.CallInfo
	// Outcome is what became of a record: Acked, Dropped or DeadLettered.
	Outcome = shard.Outcome
)

// Record outcomes reported to HookRecordHandled.
const (
	Acked        = shard.Acked
	Dropped      = shard.Dropped
	DeadLettered = shard.DeadLettered
)

// WithHooks registers hooks (see Hook). A value implementing none of the
// Hook* interfaces is refused.
func WithHooks(hooks ...Hook) Option {
	return serviceOption(func(c *config) {
		for i, h := range hooks {
			if !isHook(h) {
				c.errs = append(c.errs, fmt.Errorf("%w: WithHooks: hook %d (%T) implements no Hook interface", ErrInvalidOption, i, h))
			}
		}
		c.hooks = append(c.hooks, hooks...)
	})
}

func isHook(h any) bool {
	switch h.(type) {
	case HookLeaseAcquired, HookLeaseReleased, HookLeaseLost, HookShardStarted, HookShardEnded, HookBatchFetched,
		HookRecordHandled, HookCheckpointWritten, HookThrottled, HookDeadLettered, HookCall:
		return true
	}
	return false
}
