package kinesisfake

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// ARN returns the ARN of the stream named name:
// arn:aws:kinesis:us-east-1:000000000000:stream/NAME. Requests may name a
// stream by it (StreamARN) instead of its name.
func (k *Kinesis) ARN(name string) string { return arnPrefix + name }

// CreateStream creates an active stream named name with shards open shards,
// shardId-000000000000 and on, whose hash key ranges split the 128-bit hash
// key space evenly (the last takes the remainder). It fails with
// InvalidArgumentException for a bad name or shard count (1 to 1,000,000)
// and ResourceInUseException if the stream exists.
func (k *Kinesis) CreateStream(name string, shards int) error {
	if !streamNameRE.MatchString(name) {
		return invalidArg("Stream name %q: want 1 to 128 of a-z, A-Z, 0-9, '_', '-', '.'", name)
	}
	if shards < 1 || shards > maxShards {
		return invalidArg("ShardCount %d: want 1 to %d", shards, maxShards)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.streams[name]; ok {
		return &types.ResourceInUseException{Message: aws.String(fmt.Sprintf("Stream %s under account %s already exists.", name, account))}
	}
	k.gen++
	now := time.Now()
	s := &stream{name: name, gen: k.gen, created: now}
	space := new(big.Int).Add(maxHashKey, big.NewInt(1))
	width := new(big.Int).Div(space, big.NewInt(int64(shards)))
	for i := range shards {
		lo := new(big.Int).Mul(width, big.NewInt(int64(i)))
		hi := new(big.Int).Sub(new(big.Int).Add(lo, width), big.NewInt(1))
		if i == shards-1 {
			hi.Set(maxHashKey)
		}
		s.addShard(lo, hi, "", "", now).initial = true
	}
	k.streams[name] = s
	return nil
}

// DeleteStream deletes the stream named name (a name or an ARN) and its
// records at once: later calls naming it, and iterators of it, fail with
// ResourceNotFoundException, and a stream created again under its name is a
// new one.
func (k *Kinesis) DeleteStream(name string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, err := k.lookup(name)
	if err != nil {
		return err
	}
	delete(k.streams, s.name)
	k.notifyLocked()
	return nil
}

func (s *stream) addShard(lo, hi *big.Int, parent, adjacent string, now time.Time) *shard {
	i := len(s.shards)
	// The shard's StartingSequenceNumber is one no record has: resuming
	// after it (a subscription's continuation before any record) skips
	// nothing.
	s.last++
	sh := &shard{idx: i, id: shardID(i), lo: lo, hi: hi, parent: parent, adjacent: adjacent,
		firstCounter: s.last, created: now}
	sh.loText, sh.hiText, sh.firstSeq = lo.String(), hi.String(), seqNumber(sh.firstCounter, i)
	s.shards = append(s.shards, sh)
	return sh
}

func (s *stream) close(sh *shard, now time.Time) {
	sh.closed, sh.closedAt = true, now
	sh.endCounter = max(s.last, sh.firstCounter)
}

// SplitShard splits the open shard shardID of stream (a name or an ARN) at
// the middle of its hash key range, as SplitShard with that
// NewStartingHashKey does: the shard is closed (its readers reach its end
// once they read its last record) and two children open, the first with the
// lower half of its range. It returns the children's ids.
func (k *Kinesis) SplitShard(stream, shardID string) ([2]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, sh, err := k.openShard(stream, shardID)
	if err != nil {
		return [2]string{}, err
	}
	mid := new(big.Int).Sub(sh.hi, sh.lo)
	mid.Add(mid, big.NewInt(1)).Rsh(mid, 1).Add(mid, sh.lo)
	return k.split(s, sh, mid)
}

// SplitShardAt splits the open shard shardID of stream so that its second
// child starts at newStartingHashKey (a decimal 128-bit number strictly
// inside the shard's range), as Kinesis' SplitShard does. It returns the
// children's ids, the lower range first.
func (k *Kinesis) SplitShardAt(stream, shardID, newStartingHashKey string) ([2]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, sh, err := k.openShard(stream, shardID)
	if err != nil {
		return [2]string{}, err
	}
	mid, ok := new(big.Int).SetString(newStartingHashKey, 10)
	if !ok {
		return [2]string{}, invalidArg("NewStartingHashKey %q is not a decimal number", newStartingHashKey)
	}
	return k.split(s, sh, mid)
}

func (k *Kinesis) split(s *stream, sh *shard, mid *big.Int) ([2]string, error) {
	if mid.Cmp(sh.lo) <= 0 || mid.Cmp(sh.hi) > 0 {
		return [2]string{}, invalidArg("NewStartingHashKey %s is not inside the hash key range %s-%s of shard %s", mid, sh.lo, sh.hi, sh.id)
	}
	if len(s.shards)+2 > maxShards {
		return [2]string{}, &types.LimitExceededException{Message: aws.String("too many shards")}
	}
	now := time.Now()
	s.close(sh, now)
	k.notifyLocked()
	a := s.addShard(sh.lo, new(big.Int).Sub(mid, big.NewInt(1)), sh.id, "", now)
	b := s.addShard(new(big.Int).Set(mid), sh.hi, sh.id, "", now)
	sh.children = []string{a.id, b.id}
	return [2]string{a.id, b.id}, nil
}

// MergeShards merges the open shards a and b of stream (a name or an ARN),
// whose hash key ranges must be adjacent, as Kinesis' MergeShards with
// ShardToMerge a and AdjacentShardToMerge b does: both are closed and one
// child opens over both ranges, with ParentShardId a and
// AdjacentParentShardId b. It returns the child's id.
func (k *Kinesis) MergeShards(stream, a, b string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, sa, err := k.openShard(stream, a)
	if err != nil {
		return "", err
	}
	_, sb, err := k.openShard(stream, b)
	if err != nil {
		return "", err
	}
	one := big.NewInt(1)
	var lo, hi *big.Int
	switch {
	case new(big.Int).Add(sa.hi, one).Cmp(sb.lo) == 0:
		lo, hi = sa.lo, sb.hi
	case new(big.Int).Add(sb.hi, one).Cmp(sa.lo) == 0:
		lo, hi = sb.lo, sa.hi
	default:
		return "", invalidArg("shards %s and %s are not adjacent", sa.id, sb.id)
	}
	if len(s.shards)+1 > maxShards {
		return "", &types.LimitExceededException{Message: aws.String("too many shards")}
	}
	now := time.Now()
	s.close(sa, now)
	s.close(sb, now)
	k.notifyLocked()
	c := s.addShard(lo, hi, sa.id, sb.id, now)
	sa.children, sb.children = []string{c.id}, []string{c.id}
	return c.id, nil
}

func (k *Kinesis) openShard(name, id string) (*stream, *shard, error) {
	s, err := k.lookup(name)
	if err != nil {
		return nil, nil, err
	}
	sh := s.shard(id)
	switch {
	case sh == nil:
		return nil, nil, shardNotFound(s, id)
	case sh.closed:
		return nil, nil, invalidArg("shard %s in stream %s under account %s is closed", sh.id, s.name, account)
	}
	return s, sh, nil
}

// listToken is the state a ListShards NextToken carries.
type listToken struct {
	Kinesis uint64    `json:"k"`
	Stream  string    `json:"s"`
	Gen     uint64    `json:"g"`
	After   int       `json:"a"` // the index of the last shard listed
	Filter  string    `json:"f,omitempty"`
	At      time.Time `json:"t,omitzero"`
	Issued  time.Time `json:"i"`
}

// ListShards implements kinesislease.Kinesis: it lists the shards of the
// stream named by StreamName or StreamARN, in id order, at most MaxResults
// (1 to 10,000; at most 1,000, or WithListShardsPage's, are returned) per
// call, with a NextToken (valid for 300 seconds) while more remain.
// ExclusiveStartShardId and
// ShardFilter (AFTER_SHARD_ID, AT_TRIM_HORIZON, FROM_TRIM_HORIZON — the
// default —, AT_LATEST, AT_TIMESTAMP, FROM_TIMESTAMP) choose which; the
// trim horizon is the stream's creation, as no record ever expires. A call
// with a NextToken goes on with the first call's filter and may not name
// the stream (InvalidArgumentException). A throttled call (Throttle) fails
// with ProvisionedThroughputExceededException (Kinesis itself says
// LimitExceededException for ListShards; both are throttling to the SDK's
// retryer and to kinesislease).
func (k *Kinesis) ListShards(ctx context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.begin(OpListShards) {
		return nil, throttleErr("ListShards")
	}
	limit := k.listPage
	if in.MaxResults != nil {
		if m := *in.MaxResults; m < 1 || m > 10000 {
			return nil, invalidArg("MaxResults %d: want 1 to 10000", m)
		}
		limit = min(int(*in.MaxResults), k.listPage)
	}
	now := time.Now()
	var tok listToken
	var s *stream
	if in.NextToken != nil {
		if in.StreamName != nil || in.StreamARN != nil || in.ExclusiveStartShardId != nil || in.StreamCreationTimestamp != nil {
			return nil, invalidArg("NextToken cannot be given with StreamName, StreamARN, ExclusiveStartShardId or StreamCreationTimestamp.")
		}
		raw, err := base64.RawURLEncoding.DecodeString(*in.NextToken)
		if err != nil || json.Unmarshal(raw, &tok) != nil || tok.Kinesis != k.id {
			return nil, invalidArg("Invalid NextToken.")
		}
		if now.Sub(tok.Issued) >= NextTokenTTL {
			return nil, &types.ExpiredNextTokenException{Message: aws.String("The NextToken has expired.")}
		}
		if s = k.streams[tok.Stream]; s == nil || s.gen != tok.Gen {
			return nil, streamNotFound(tok.Stream)
		}
	} else {
		var err error
		if s, err = k.resolve(in.StreamName, in.StreamARN); err != nil {
			return nil, err
		}
		if t := in.StreamCreationTimestamp; t != nil && !t.Equal(s.created) {
			return nil, streamNotFound(s.name)
		}
		tok = listToken{Kinesis: k.id, Stream: s.name, Gen: s.gen, After: -1}
		if id := aws.ToString(in.ExclusiveStartShardId); id != "" {
			i, ok := shardIndex(id)
			if !ok {
				return nil, invalidArg("ExclusiveStartShardId %q is not a shard id", id)
			}
			tok.After = i
		}
		if f := in.ShardFilter; f != nil {
			tok.Filter = string(f.Type)
			switch f.Type {
			case types.ShardFilterTypeAfterShardId:
				i, ok := shardIndex(aws.ToString(f.ShardId))
				if !ok {
					return nil, invalidArg("ShardFilter AFTER_SHARD_ID needs a ShardId")
				}
				tok.After = max(tok.After, i)
			case types.ShardFilterTypeAtTimestamp, types.ShardFilterTypeFromTimestamp:
				if f.Timestamp == nil {
					return nil, invalidArg("ShardFilter %s needs a Timestamp", f.Type)
				}
				tok.At = *f.Timestamp
				if tok.At.Before(s.created) {
					tok.At = s.created // corrected to the trim horizon
				}
			case types.ShardFilterTypeAtTrimHorizon, types.ShardFilterTypeFromTrimHorizon, types.ShardFilterTypeAtLatest:
			default:
				return nil, invalidArg("ShardFilter Type %q", f.Type)
			}
			if f.ShardId != nil && f.Type != types.ShardFilterTypeAfterShardId || f.Timestamp != nil && tok.At.IsZero() {
				return nil, invalidArg("ShardFilter %s: ShardId is for AFTER_SHARD_ID, Timestamp for AT_TIMESTAMP and FROM_TIMESTAMP", f.Type)
			}
		}
	}
	out := &kinesis.ListShardsOutput{Shards: []types.Shard{}}
	for _, sh := range s.shards[min(tok.After+1, len(s.shards)):] {
		if !tok.keeps(sh) {
			continue
		}
		if len(out.Shards) == limit {
			tok.Issued = now
			raw, _ := json.Marshal(tok)
			out.NextToken = aws.String(base64.RawURLEncoding.EncodeToString(raw))
			break
		}
		out.Shards = append(out.Shards, sh.describe())
		tok.After = sh.idx
	}
	return out, nil
}

// keeps reports whether the token's ShardFilter lists sh.
func (t *listToken) keeps(sh *shard) bool {
	switch types.ShardFilterType(t.Filter) {
	case types.ShardFilterTypeAtTrimHorizon:
		return sh.initial
	case types.ShardFilterTypeAtLatest:
		return !sh.closed
	case types.ShardFilterTypeAtTimestamp:
		return !sh.created.After(t.At) && (!sh.closed || !sh.closedAt.Before(t.At))
	case types.ShardFilterTypeFromTimestamp:
		return !sh.closed || !sh.closedAt.Before(t.At)
	}
	return true
}

func (sh *shard) describe() types.Shard {
	d := types.Shard{
		ShardId:      aws.String(sh.id),
		HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String(sh.loText), EndingHashKey: aws.String(sh.hiText)},
		SequenceNumberRange: &types.SequenceNumberRange{
			StartingSequenceNumber: aws.String(sh.firstSeq),
		},
	}
	if sh.closed {
		d.SequenceNumberRange.EndingSequenceNumber = aws.String(seqNumber(sh.endCounter, sh.idx))
	}
	if sh.parent != "" {
		d.ParentShardId = aws.String(sh.parent)
	}
	if sh.adjacent != "" {
		d.AdjacentParentShardId = aws.String(sh.adjacent)
	}
	return d
}

// Records returns how many records stream (a name or an ARN) holds in all
// its shards, open and closed; -1 if there is no such stream.
func (k *Kinesis) Records(stream string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, err := k.lookup(stream)
	if err != nil {
		return -1
	}
	return s.records
}

// ShardRecords returns how many records shard shardID of stream holds; -1
// if there is no such stream or shard.
func (k *Kinesis) ShardRecords(stream, shardID string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	s, err := k.lookup(stream)
	if err != nil {
		return -1
	}
	sh := s.shard(shardID)
	if sh == nil {
		return -1
	}
	return len(sh.records)
}

// Throttle makes the next n calls of op (OpGetRecords, OpPutRecords,
// OpGetShardIterator, OpListShards or OpPutRecord: "GetRecords", ...) fail
// with ProvisionedThroughputExceededException, whatever they ask; n <= 0
// ends a throttle. A throttled PutRecords call does not fail as a whole, as
// Kinesis does not: every entry of its answer has ErrorCode
// ProvisionedThroughputExceededException and FailedRecordCount counts
// them. Throttle panics on an unknown op.
func (k *Kinesis) Throttle(op string, n int) {
	if !slices.Contains(ops, op) {
		panic(fmt.Sprintf("kinesisfake: Throttle(%q): want one of %v", op, ops))
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.throttles[op] = max(n, 0)
}

// Calls returns how many calls of op (as in Throttle) were made, whether
// they succeeded or not.
func (k *Kinesis) Calls(op string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[op]
}
