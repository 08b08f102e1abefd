package kinesisfake

import (
	"cmp"
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// hashKey returns the hash key of a record: its explicit hash key, else the
// MD5 of its partition key read as a big-endian 128-bit number.
func hashKey(partitionKey string, explicit *string) (*big.Int, error) {
	if partitionKey == "" || utf8.RuneCountInString(partitionKey) > 256 {
		return nil, invalidArg("PartitionKey %q: want 1 to 256 characters", partitionKey)
	}
	if explicit != nil {
		h, ok := new(big.Int).SetString(*explicit, 10)
		if !ok || h.Sign() < 0 || h.Cmp(maxHashKey) > 0 {
			return nil, invalidArg("ExplicitHashKey %q: want a decimal number from 0 to 2^128-1", *explicit)
		}
		return h, nil
	}
	sum := md5.Sum([]byte(partitionKey))
	return new(big.Int).SetBytes(sum[:]), nil
}

// route returns the open shard whose hash key range holds h.
func (s *stream) route(h *big.Int) *shard {
	for _, sh := range s.shards {
		if !sh.closed && sh.contains(h) {
			return sh
		}
	}
	panic("kinesisfake: no open shard holds hash key " + h.String()) // the open shards cover the space
}

// put appends a record to the shard h routes to and returns that shard and
// the record's sequence number.
func (s *stream) put(h *big.Int, key string, data []byte, now time.Time) (*shard, string) {
	sh := s.route(h)
	s.last++
	arrival := now.Round(0) // no monotonic reading: it is data
	if n := len(sh.records); n > 0 && arrival.Before(sh.records[n-1].arrival) {
		arrival = sh.records[n-1].arrival
	}
	sh.records = append(sh.records, record{counter: s.last, key: key, data: slices.Clone(data), arrival: arrival})
	s.records++
	return sh, sh.seq(len(sh.records) - 1)
}

// PutRecords implements kinesislease.Kinesis and kinesislease.Producer: it
// puts each entry (at most 500, 1 MiB each with its partition key, 5 MiB in
// all) on the open shard whose hash key range holds the MD5 of its
// partition key, or its ExplicitHashKey, and returns each entry's shard and
// sequence number, in order. A missing stream fails with
// ResourceNotFoundException, an invalid request with
// InvalidArgumentException; a throttled call (Throttle) fails every entry
// with ErrorCode ProvisionedThroughputExceededException.
func (k *Kinesis) PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	throttled := k.begin(OpPutRecords)
	s, err := k.resolve(in.StreamName, in.StreamARN)
	if err != nil {
		return nil, err
	}
	if n := len(in.Records); n < 1 || n > maxPutRecords {
		return nil, invalidArg("Records: %d entries, want 1 to %d", n, maxPutRecords)
	}
	hashes := make([]*big.Int, len(in.Records))
	total := 0
	for i, e := range in.Records {
		key := aws.ToString(e.PartitionKey)
		h, err := hashKey(key, e.ExplicitHashKey)
		if err != nil {
			return nil, err
		}
		size := len(e.Data) + len(key)
		if size > maxRecordBytes {
			return nil, invalidArg("Records[%d]: %d bytes with its partition key, more than 1 MiB", i, size)
		}
		total += size
		hashes[i] = h
	}
	if total > maxPutBytes {
		return nil, invalidArg("Records: %d bytes in all, more than 5 MiB", total)
	}
	out := &kinesis.PutRecordsOutput{Records: make([]types.PutRecordsResultEntry, len(in.Records)), EncryptionType: types.EncryptionTypeNone}
	now := time.Now()
	if throttled {
		for i := range out.Records {
			out.Records[i] = types.PutRecordsResultEntry{
				ErrorCode:    aws.String("ProvisionedThroughputExceededException"),
				ErrorMessage: aws.String(fmt.Sprintf("Rate exceeded for shard %s in stream %s under account %s.", s.route(hashes[i]).id, s.name, account)),
			}
		}
		out.FailedRecordCount = aws.Int32(int32(len(in.Records)))
		return out, nil
	}
	for i, e := range in.Records {
		sh, seq := s.put(hashes[i], aws.ToString(e.PartitionKey), e.Data, now)
		out.Records[i] = types.PutRecordsResultEntry{SequenceNumber: aws.String(seq), ShardId: aws.String(sh.id)}
	}
	out.FailedRecordCount = aws.Int32(0)
	k.notifyLocked()
	return out, nil
}

// PutRecord puts one record as PutRecords does; a throttled call (Throttle
// with OpPutRecord) fails with ProvisionedThroughputExceededException.
// SequenceNumberForOrdering is accepted and needs no effect: sequence
// numbers of a shard always increase.
func (k *Kinesis) PutRecord(ctx context.Context, in *kinesis.PutRecordInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	throttled := k.begin(OpPutRecord)
	s, err := k.resolve(in.StreamName, in.StreamARN)
	if err != nil {
		return nil, err
	}
	key := aws.ToString(in.PartitionKey)
	h, err := hashKey(key, in.ExplicitHashKey)
	if err != nil {
		return nil, err
	}
	if size := len(in.Data) + len(key); size > maxRecordBytes {
		return nil, invalidArg("%d bytes with its partition key, more than 1 MiB", size)
	}
	if throttled {
		return nil, throttleErr(fmt.Sprintf("shard %s in stream %s", s.route(h).id, s.name))
	}
	sh, seq := s.put(h, key, in.Data, time.Now())
	k.notifyLocked()
	return &kinesis.PutRecordOutput{SequenceNumber: aws.String(seq), ShardId: aws.String(sh.id), EncryptionType: types.EncryptionTypeNone}, nil
}

// iterToken is the state a shard iterator carries.
type iterToken struct {
	kinesis uint64
	gen     uint64
	stream  string
	shard   int
	pos     int // index of the next record to read
	issued  time.Time
}

func (t iterToken) String() string {
	raw := fmt.Sprintf("v1|%d|%d|%d|%d|%d|%s", t.kinesis, t.gen, t.shard, t.pos, t.issued.UnixNano(), t.stream)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func parseIterator(s string) (iterToken, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return iterToken{}, false
	}
	f := strings.SplitN(string(raw), "|", 7)
	if len(f) != 7 || f[0] != "v1" {
		return iterToken{}, false
	}
	var t iterToken
	var nanos int64
	var errs [5]error
	t.kinesis, errs[0] = strconv.ParseUint(f[1], 10, 64)
	t.gen, errs[1] = strconv.ParseUint(f[2], 10, 64)
	t.shard, errs[2] = strconv.Atoi(f[3])
	t.pos, errs[3] = strconv.Atoi(f[4])
	nanos, errs[4] = strconv.ParseInt(f[5], 10, 64)
	for _, err := range errs {
		if err != nil {
			return iterToken{}, false
		}
	}
	t.issued, t.stream = time.Unix(0, nanos), f[6]
	return t, t.shard >= 0 && t.pos >= 0
}

// GetShardIterator implements kinesislease.Kinesis: an iterator of shard
// ShardId of the stream named by StreamName or StreamARN at TRIM_HORIZON
// (its first record), LATEST (after its newest), AT_SEQUENCE_NUMBER or
// AFTER_SEQUENCE_NUMBER (StartingSequenceNumber, which must be in the
// shard's sequence number range, else InvalidArgumentException) or
// AT_TIMESTAMP (the first record that arrived at or after Timestamp). A
// missing stream or shard fails with ResourceNotFoundException. The
// iterator expires after IteratorTTL.
func (k *Kinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.begin(OpGetShardIterator) {
		return nil, throttleErr(fmt.Sprintf("GetShardIterator on shard %s", aws.ToString(in.ShardId)))
	}
	s, err := k.resolve(in.StreamName, in.StreamARN)
	if err != nil {
		return nil, err
	}
	id := aws.ToString(in.ShardId)
	sh := s.shard(id)
	if sh == nil {
		return nil, shardNotFound(s, id)
	}
	pos, err := sh.position(s, in)
	if err != nil {
		return nil, err
	}
	tok := iterToken{kinesis: k.id, gen: s.gen, stream: s.name, shard: sh.idx, pos: pos, issued: time.Now()}
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(tok.String())}, nil
}

// position returns the index of the first record an iterator of in reads.
func (sh *shard) position(s *stream, in *kinesis.GetShardIteratorInput) (int, error) {
	typ := in.ShardIteratorType
	if (in.StartingSequenceNumber != nil) != (typ == types.ShardIteratorTypeAtSequenceNumber || typ == types.ShardIteratorTypeAfterSequenceNumber) ||
		(in.Timestamp != nil) != (typ == types.ShardIteratorTypeAtTimestamp) {
		return 0, invalidArg("ShardIteratorType %s: StartingSequenceNumber is for AT_SEQUENCE_NUMBER and AFTER_SEQUENCE_NUMBER, Timestamp for AT_TIMESTAMP, and they need them", typ)
	}
	switch typ {
	case types.ShardIteratorTypeTrimHorizon:
		return 0, nil
	case types.ShardIteratorTypeLatest:
		return len(sh.records), nil
	case types.ShardIteratorTypeAtTimestamp:
		t := *in.Timestamp
		// The first record that arrived at or after t (arrivals never decrease).
		i, _ := slices.BinarySearchFunc(sh.records, t, func(r record, t time.Time) int { return r.arrival.Compare(t) })
		return i, nil
	case types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber:
		seq := *in.StartingSequenceNumber
		c, idx, ok := parseSeq(seq)
		if !ok || idx != sh.idx || c < sh.firstCounter || (sh.closed && c > sh.endCounter) {
			return 0, invalidArg("StartingSequenceNumber %s used in GetShardIterator on shard %s in stream %s under account %s is invalid because it did not come from this stream.", seq, sh.id, s.name, account)
		}
		i, found := slices.BinarySearchFunc(sh.records, c, func(r record, c uint64) int { return cmp.Compare(r.counter, c) })
		if found && typ == types.ShardIteratorTypeAfterSequenceNumber {
			i++
		}
		return i, nil
	}
	return 0, invalidArg("ShardIteratorType %q: want TRIM_HORIZON, LATEST, AT_SEQUENCE_NUMBER, AFTER_SEQUENCE_NUMBER or AT_TIMESTAMP", typ)
}

// GetRecords implements kinesislease.Kinesis: up to Limit records (1 to
// 10,000, default DefaultGetRecordsLimit; at most 10 MiB) from the
// iterator, with their ApproximateArrivalTimestamp, the next iterator and
// MillisBehindLatest (0 once the answer reaches the shard's newest record).
// The answer that reaches the end of a closed shard has no
// NextShardIterator and lists the shard's ChildShards. An iterator older
// than IteratorTTL fails with ExpiredIteratorException, a malformed one
// with InvalidArgumentException, one of a deleted stream with
// ResourceNotFoundException.
func (k *Kinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	tok, ok := parseIterator(aws.ToString(in.ShardIterator))
	if k.begin(OpGetRecords) {
		what := "GetRecords"
		if ok {
			what = fmt.Sprintf("shard %s in stream %s", shardID(tok.shard), tok.stream)
		}
		return nil, throttleErr(what)
	}
	if !ok || tok.kinesis != k.id {
		return nil, invalidArg("Invalid ShardIterator.")
	}
	limit := DefaultGetRecordsLimit
	if in.Limit != nil {
		if l := *in.Limit; l < 1 || l > DefaultGetRecordsLimit {
			return nil, invalidArg("Limit %d: want 1 to %d", l, DefaultGetRecordsLimit)
		}
		limit = int(*in.Limit)
	}
	s := k.streams[tok.stream]
	if s == nil || s.gen != tok.gen {
		return nil, streamNotFound(tok.stream)
	}
	if arn := aws.ToString(in.StreamARN); arn != "" && arn != arnPrefix+s.name {
		return nil, invalidArg("StreamARN %s is not the stream of the ShardIterator.", arn)
	}
	if tok.shard >= len(s.shards) || tok.pos > len(s.shards[tok.shard].records) {
		return nil, invalidArg("Invalid ShardIterator.")
	}
	now := time.Now()
	if now.Sub(tok.issued) >= IteratorTTL {
		return nil, &types.ExpiredIteratorException{Message: aws.String(fmt.Sprintf(
			"Iterator expired. The iterator was created at time %s while right now it is %s which is further in the future than the tolerated delay of 300000 milliseconds.",
			tok.issued.UTC().Format(time.RFC1123), now.UTC().Format(time.RFC1123)))}
	}
	sh := s.shards[tok.shard]
	if k.readLimit && !sh.read(now) {
		return nil, throttleErr(fmt.Sprintf("shard %s in stream %s", sh.id, s.name))
	}
	end, bytes := tok.pos, 0
	for end < len(sh.records) && end-tok.pos < limit {
		r := sh.records[end]
		size := len(r.data) + len(r.key)
		if end > tok.pos && bytes+size > maxGetRecordsBytes {
			break
		}
		bytes += size
		end++
	}
	out := &kinesis.GetRecordsOutput{Records: make([]types.Record, 0, end-tok.pos)}
	for i := tok.pos; i < end; i++ {
		r := sh.records[i]
		out.Records = append(out.Records, types.Record{
			Data:                        slices.Clone(r.data),
			PartitionKey:                aws.String(r.key),
			SequenceNumber:              aws.String(sh.seq(i)),
			ApproximateArrivalTimestamp: aws.Time(r.arrival),
			EncryptionType:              types.EncryptionTypeNone,
		})
	}
	behind := int64(0)
	if end < len(sh.records) {
		behind = max(1, now.Sub(sh.records[end].arrival).Milliseconds())
	}
	out.MillisBehindLatest = aws.Int64(behind)
	if sh.closed && end == len(sh.records) {
		out.ChildShards = s.childShards(sh)
		return out, nil
	}
	next := tok
	next.pos, next.issued = end, now
	out.NextShardIterator = aws.String(next.String())
	return out, nil
}

// childShards returns the children of a closed shard as Kinesis lists
// them. k.mu is held.
func (s *stream) childShards(sh *shard) []types.ChildShard {
	var out []types.ChildShard
	for _, id := range sh.children {
		c := s.shard(id)
		parents := []string{c.parent}
		if c.adjacent != "" {
			parents = append(parents, c.adjacent)
		}
		out = append(out, types.ChildShard{
			ShardId:      aws.String(c.id),
			ParentShards: parents,
			HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String(c.lo.String()), EndingHashKey: aws.String(c.hi.String())},
		})
	}
	return out
}

// IteratorShard returns the stream and shard a shard iterator that k
// handed out (GetShardIterator's or GetRecords' NextShardIterator) reads,
// expired or not; ok is false for any other string. A test that disturbs
// the calls of one shard tells GetRecords' shard by it.
func (k *Kinesis) IteratorShard(iterator string) (stream, shard string, ok bool) {
	tok, ok := parseIterator(iterator)
	if !ok || tok.kinesis != k.id {
		return "", "", false
	}
	return tok.stream, shardID(tok.shard), true
}
