package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/kpl"
)

// shardInfo is one shard the stream lists.
type shardInfo struct {
	id       string
	parents  []string
	children []string // listed shards naming it as a parent
	closed   bool
	startKey string
	endKey   string
}

// listShards lists the stream's shards, sorted by id, with their children.
func listShards(ctx context.Context, kin Kinesis, stream string) ([]*shardInfo, map[string]*shardInfo, error) {
	shards, err := kinesisx.ListShards(ctx, kin, stream)
	if err != nil {
		return nil, nil, err
	}
	byID := map[string]*shardInfo{}
	var list []*shardInfo
	for _, s := range shards {
		si := &shardInfo{id: aws.ToString(s.ShardId), parents: kinesisx.Parents(s)}
		if r := s.SequenceNumberRange; r != nil && r.EndingSequenceNumber != nil {
			si.closed = true
		}
		if h := s.HashKeyRange; h != nil {
			si.startKey, si.endKey = aws.ToString(h.StartingHashKey), aws.ToString(h.EndingHashKey)
		}
		byID[si.id] = si
		list = append(list, si)
	}
	for _, si := range list {
		for _, p := range si.parents {
			if ps, ok := byID[p]; ok {
				ps.children = append(ps.children, si.id)
			}
		}
	}
	slices.SortFunc(list, func(a, b *shardInfo) int { return strings.Compare(a.id, b.id) })
	for _, si := range list {
		slices.Sort(si.children)
	}
	return list, byID, nil
}

// hasDescendantIn reports whether a listed descendant of shard id has a row
// in rows.
func hasDescendantIn(byID map[string]*shardInfo, id string, rows map[string]*foreignRow) bool {
	seen := map[string]bool{}
	var walk func(string) bool
	walk = func(id string) bool {
		for _, c := range byID[id].children {
			if seen[c] {
				continue
			}
			seen[c] = true
			if rows[c] != nil || walk(c) {
				return true
			}
		}
		return false
	}
	return walk(id)
}

// maxLookupReads bounds the GetRecords calls that look for one record.
const maxLookupReads = 5

// userRecords returns how many user records the record seq of shard holds:
// n for a KPL aggregate of n, 1 for a plain record, a corrupt aggregate
// (which both the KCL and kinesislease hand over whole) or a record no longer
// in the shard.
func userRecords(ctx context.Context, kin Kinesis, stream, shard, seq string) (int, error) {
	it, err := kin.GetShardIterator(ctx, kinesisx.IteratorInput(stream, shard, kltype.AtSequenceNumber(seq)))
	if err != nil {
		var (
			invalid  *ktypes.InvalidArgumentException
			notFound *ktypes.ResourceNotFoundException
		)
		if errors.As(err, &invalid) || errors.As(err, &notFound) {
			return 1, nil // not in the shard any more: nothing of it can be read again
		}
		return 0, fmt.Errorf("stream %q, shard %s: GetShardIterator AT_SEQUENCE_NUMBER %s: %w", stream, shard, seq, err)
	}
	iter := it.ShardIterator
	for i := 0; i < maxLookupReads && iter != nil; i++ {
		if i > 0 {
			// Kinesis allows 5 GetRecords per second per shard.
			if err := backoff.Sleep(ctx, 200*time.Millisecond); err != nil {
				return 0, err
			}
		}
		out, err := kin.GetRecords(ctx, kinesisx.GetRecordsInput(stream, aws.ToString(iter), 1))
		if err != nil {
			return 0, fmt.Errorf("stream %q, shard %s: GetRecords: %w", stream, shard, err)
		}
		if len(out.Records) > 0 {
			r := out.Records[0]
			if aws.ToString(r.SequenceNumber) != seq {
				return 1, nil // trimmed: the shard starts after it now
			}
			users, err := kpl.Split(r.Data)
			if err != nil || users == nil {
				return 1, nil
			}
			return len(users), nil
		}
		if aws.ToInt64(out.MillisBehindLatest) == 0 {
			break
		}
		iter = out.NextShardIterator
	}
	return 1, nil
}

// countUserRecords returns userRecords of the record seq(si) of each shard
// si, by shard id, reading a few shards at a time.
func countUserRecords(ctx context.Context, o Ours, shards []*shardInfo, seq func(*shardInfo) string) (map[string]int, error) {
	counts := make([]int, len(shards))
	errs := make([]error, len(shards))
	bounded(len(shards), func(i int) {
		counts[i], errs[i] = userRecords(ctx, o.Kinesis, o.Stream, shards[i].id, seq(shards[i]))
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := make(map[string]int, len(shards))
	for i, si := range shards {
		out[si.id] = counts[i]
	}
	return out, nil
}
