package observe

import (
	"context"
	"fmt"

	"github.com/kinesislease/kinesislease/kltype"
)

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

// String names t: "acquired", "released", "lost" or "ended".
func (t LeaseEventType) String() string {
	if t > 0 && int(t) < len(leaseEventNames) {
		return leaseEventNames[t]
	}
	return fmt.Sprintf("LeaseEventType(%d)", int(t))
}

var leaseEventNames = [...]string{LeaseAcquired: "acquired", LeaseReleased: "released", LeaseLost: "lost", ShardEnded: "ended"}

// LeaseEvent is a lease move seen by this instance
// (engine.GroupConfig.Events, for the simulations; services use the lease
// hooks).
type LeaseEvent struct {
	// Type is what happened.
	Type LeaseEventType
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// ShardID is the shard whose lease moved.
	ShardID string
}

// Emit tells events and the hooks of a lease event.
func Emit(h *Hooks, events func(LeaseEvent), t LeaseEventType, info kltype.LeaseInfo) {
	if events != nil {
		events(LeaseEvent{Type: t, Stream: info.Stream, ShardID: info.ShardID})
	}
	ctx := context.Background()
	switch t {
	case LeaseAcquired:
		for _, x := range h.acquired {
			x.OnLeaseAcquired(ctx, info)
		}
	case LeaseReleased:
		for _, x := range h.released {
			x.OnLeaseReleased(ctx, info)
		}
	case LeaseLost:
		for _, x := range h.lost {
			x.OnLeaseLost(ctx, info)
		}
	case ShardEnded:
		for _, x := range h.ended {
			x.OnShardEnded(kltype.ShardInfo{Stream: info.Stream, ShardID: info.ShardID})
		}
	}
}
