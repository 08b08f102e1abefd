package shardlist

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// ShardMap indexes shards by id and lists their ids in ListShards' order
// (reusing order's array).
func ShardMap(shards []types.Shard, order []string) (map[string]types.Shard, []string) {
	m := make(map[string]types.Shard, len(shards))
	order = order[:0]
	for _, s := range shards {
		id := aws.ToString(s.ShardId)
		m[id] = s
		order = append(order, id)
	}
	return m, order
}

// StartAt returns where a worker starts reading shard id: after its
// checkpoint cp, else at its own beginning for a child of a split or merge
// (a parent still in the stream), else at the subscription's start
// position.
func StartAt(start kltype.StartPosition, shards map[string]types.Shard, id string, cp leases.Checkpoint) kltype.StartPosition {
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
