package kltype

import "fmt"

// LeaseEventType tells what happened to a lease.
type LeaseEventType int

// Lease events.
const (
	// LeaseAcquired: this instance took the lease.
	LeaseAcquired LeaseEventType = iota + 1
	// LeaseReleased: this instance handed it over after its final
	// checkpoint (it could still commit).
	LeaseReleased
	// LeaseLost: another instance holds it now; nothing more was written.
	LeaseLost
	// ShardEnded: the shard was read to its end (SHARD_END written).
	ShardEnded
)

func (t LeaseEventType) String() string {
	if t > 0 && int(t) < len(leaseEventNames) {
		return leaseEventNames[t]
	}
	return fmt.Sprintf("LeaseEventType(%d)", int(t))
}

var leaseEventNames = [...]string{LeaseAcquired: "acquired", LeaseReleased: "released", LeaseLost: "lost", ShardEnded: "ended"}

// LeaseEvent is a lease move seen by this instance
// (kinesislease.WithLeaseEvents).
type LeaseEvent struct {
	// Type is what happened.
	Type LeaseEventType
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// ShardID is the shard whose lease moved.
	ShardID string
}

// Stats counts the lease store calls of a service, for cost measurements
// (kinesislease.Service.Stats).
type Stats struct {
	// Reads counts strongly consistent reads (GetItems on DynamoDB): of
	// lease rows and of membership rows.
	Reads int64
	// Writes counts conditional writes: creates, takes, checkpoints,
	// releases, rewinds, heartbeats and other membership writes.
	Writes int64
	// Heartbeats counts heartbeats (writes, included in Writes) and
	// MemberReads the reads of membership rows (included in Reads).
	Heartbeats, MemberReads int64
}
