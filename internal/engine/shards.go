package engine

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
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

func (t LeaseEventType) String() string {
	if t > 0 && int(t) < len(leaseEventNames) {
		return leaseEventNames[t]
	}
	return fmt.Sprintf("LeaseEventType(%d)", int(t))
}

var leaseEventNames = [...]string{LeaseAcquired: "acquired", LeaseReleased: "released", LeaseLost: "lost", ShardEnded: "ended"}

// LeaseEvent is a lease move seen by this instance
// (GroupConfig.Events, for the simulations; services use the lease hooks).
type LeaseEvent struct {
	// Type is what happened.
	Type LeaseEventType
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// ShardID is the shard whose lease moved.
	ShardID string
}

// emit tells events and the hooks of a lease event.
func emit(h *hooks, events func(LeaseEvent), t LeaseEventType, info kltype.LeaseInfo) {
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

// shardMap indexes shards by id and lists their ids in ListShards' order
// (reusing order's array).
func shardMap(shards []types.Shard, order []string) (map[string]types.Shard, []string) {
	m := make(map[string]types.Shard, len(shards))
	order = order[:0]
	for _, s := range shards {
		id := aws.ToString(s.ShardId)
		m[id] = s
		order = append(order, id)
	}
	return m, order
}

// startAt returns where a worker starts reading shard id: after its
// checkpoint cp, else at its own beginning for a child of a split or merge
// (a parent still in the stream), else at the subscription's start
// position.
func startAt(start kltype.StartPosition, shards map[string]types.Shard, id string, cp leases.Checkpoint) kltype.StartPosition {
	for _, p := range kinesisx.Parents(shards[id]) {
		if _, ok := shards[p]; ok {
			start = kltype.TrimHorizon
		}
	}
	if p, ok := kinesisx.PositionAfter(cp); ok {
		start = p
	}
	return start
}
