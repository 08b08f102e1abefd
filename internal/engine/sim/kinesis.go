package sim

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kpl"
)

// Stream is an in-memory Kinesis stream: shards of records with increasing
// sequence numbers, shard iterators, and the per-shard GetRecords limit of
// Kinesis (5 calls per second, shared by every reader of the shard). It
// serves the three calls kinesisx.Reader needs through Client views, each of
// which may add its own delays and errors.
//
// It reads the time with time.Now and sleeps with timers, so inside a
// testing/synctest bubble it runs on the bubble's virtual clock.
//
// It is safe for concurrent use.
type Stream struct {
	name string

	mu     sync.Mutex
	shards []*fakeShard
	byID   map[string]*fakeShard
	iters  map[string]iterator
	nextIt int64
}

type fakeShard struct {
	id      string
	parents []string
	base    *big.Int // sequence numbers start above it
	next    *big.Int // the next record's sequence number
	step    int64
	closed  bool
	records []stored
	bySeq   map[string]int
	users   int         // user records in all (KPL aggregates count theirs)
	calls   []time.Time // GetRecords calls within the last second
	hashKey string      // its hash key range (one value), for ListShards
	ended   *big.Int    // the ending sequence number of a closed shard
}

// stored is one record and where its user records sit in the shard.
type stored struct {
	rec      types.Record
	seq      *big.Int
	userBase int // index of its first user record in the shard
	users    int // 1, or the number of user records of a KPL aggregate
}

type iterator struct {
	shard  *fakeShard
	pos    int // index of the next record to return
	issued time.Time
}

// IteratorTTL is how long a shard iterator stays valid, as in Kinesis.
const IteratorTTL = 5 * time.Minute

// GetRecordsPerSecond is Kinesis' limit of GetRecords calls per shard.
const GetRecordsPerSecond = 5

// NewStream returns a stream named name with shards open shards, named
// shardId-000000000000 and on. Shard i's sequence numbers are decimal
// integers like Kinesis': most shards use 56 digits, every third shard
// starts just below a power of ten so that its numbers grow a digit, which
// catches any code that compares sequence numbers as strings.
func NewStream(name string, shards int) *Stream {
	s := &Stream{name: name, byID: map[string]*fakeShard{}, iters: map[string]iterator{}}
	for range shards {
		s.addShard(nil)
	}
	return s
}

// Name returns the stream's name.
func (s *Stream) Name() string { return s.name }

func (s *Stream) addShard(parents []string) *fakeShard {
	i := len(s.shards)
	base := new(big.Int)
	if i%3 == 2 {
		// 10^24 - 40: the 40th record crosses into 25 digits.
		base.Exp(big.NewInt(10), big.NewInt(24), nil)
		base.Sub(base, big.NewInt(40))
	} else {
		base.SetString("49590338271490256608559692538361571095921575989136588898", 10)
		base.Add(base, new(big.Int).Mul(big.NewInt(int64(i)), new(big.Int).Exp(big.NewInt(10), big.NewInt(40), nil)))
	}
	sh := &fakeShard{
		id:      fmt.Sprintf("shardId-%012d", i),
		parents: parents,
		base:    base,
		next:    new(big.Int).Add(base, big.NewInt(1)),
		step:    1 + int64(i%4),
		bySeq:   map[string]int{},
		hashKey: strconv.Itoa(i),
	}
	s.shards = append(s.shards, sh)
	s.byID[sh.id] = sh
	return sh
}

// ShardIDs returns the ids of every shard, open or closed, in creation order.
func (s *Stream) ShardIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, len(s.shards))
	for i, sh := range s.shards {
		ids[i] = sh.id
	}
	return ids
}

// Put appends a record to shard id and returns its sequence number. Data
// made by kpl.Aggregate counts as its user records.
func (s *Stream) Put(id, partitionKey string, data []byte) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.byID[id]
	switch {
	case sh == nil:
		return "", &types.ResourceNotFoundException{Message: aws.String("shard " + id + " not found")}
	case sh.closed:
		return "", &types.InvalidArgumentException{Message: aws.String("shard " + id + " is closed")}
	}
	users := 1
	if u, err := kpl.Split(data); err == nil && u != nil {
		users = len(u)
	}
	seq := new(big.Int).Set(sh.next)
	sh.next.Add(sh.next, big.NewInt(sh.step))
	text := seq.String()
	sh.bySeq[text] = len(sh.records)
	sh.records = append(sh.records, stored{
		rec: types.Record{
			SequenceNumber:              aws.String(text),
			PartitionKey:                aws.String(partitionKey),
			Data:                        slices.Clone(data),
			ApproximateArrivalTimestamp: aws.Time(time.Now()),
		},
		seq:      seq,
		userBase: sh.users,
		users:    users,
	})
	sh.users += users
	return text, nil
}

// Split closes shard id and opens two children of it; it returns their ids.
// Readers of the parent reach its end (a GetRecords answer without a next
// iterator) once they have read its last record.
func (s *Stream) Split(id string) ([2]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.byID[id]
	if sh == nil || sh.closed {
		return [2]string{}, &types.InvalidArgumentException{Message: aws.String("shard " + id + " cannot be split")}
	}
	sh.closed = true
	sh.ended = new(big.Int).Sub(sh.next, big.NewInt(1))
	a, b := s.addShard([]string{id}), s.addShard([]string{id})
	return [2]string{a.id, b.id}, nil
}

// UserRecords returns how many user records shard id holds (a KPL aggregate
// counts as its user records), or -1 if there is no such shard.
func (s *Stream) UserRecords(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh := s.byID[id]; sh != nil {
		return sh.users
	}
	return -1
}

// UserIndex returns the index, in shard id, of the user record at seq and
// sub (sub is 0 for a record that is not an aggregate).
func (s *Stream) UserIndex(id, seq string, sub int64) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.byID[id]
	if sh == nil {
		return 0, false
	}
	i, ok := sh.bySeq[seq]
	if !ok || sub < 0 || int(sub) >= sh.records[i].users {
		return 0, false
	}
	return sh.records[i].userBase + int(sub), true
}

// RecordAt returns the sequence number of the record of shard id that
// holds its user record number idx.
func (s *Stream) RecordAt(id string, idx int) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.byID[id]
	if sh == nil || idx < 0 || idx >= sh.users {
		return "", false
	}
	i, _ := slices.BinarySearchFunc(sh.records, idx, func(r stored, idx int) int {
		switch {
		case r.userBase+r.users <= idx:
			return -1
		case r.userBase > idx:
			return 1
		}
		return 0
	})
	return aws.ToString(sh.records[i].rec.SequenceNumber), true
}

// Covered returns how many user records of shard id a checkpoint at seq and
// sub covers (every user record before the returned index is done), as the
// consumer means it: sub 0 covers the whole record at seq, sub k > 0 its
// first k user records. ShardEnd covers every record of a closed shard.
func (s *Stream) Covered(id, seq string, sub int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.byID[id]
	switch {
	case sh == nil:
		return 0, fmt.Errorf("no shard %s", id)
	case seq == "":
		return 0, nil
	case seq == "SHARD_END":
		if !sh.closed {
			return 0, fmt.Errorf("SHARD_END on open shard %s", id)
		}
		return sh.users, nil
	}
	i, ok := sh.bySeq[seq]
	if !ok {
		return 0, fmt.Errorf("shard %s has no record %s", id, seq)
	}
	r := sh.records[i]
	if sub < 0 || int(sub) >= r.users {
		return 0, fmt.Errorf("shard %s record %s has %d user records; sub-sequence %d", id, seq, r.users, sub)
	}
	if sub == 0 {
		return r.userBase + r.users, nil
	}
	return r.userBase + int(sub), nil
}

// ParseSequence parses a Kinesis sequence number, a decimal integer of up
// to 128 bits.
func ParseSequence(seq string) (*big.Int, bool) {
	n, ok := new(big.Int).SetString(seq, 10)
	return n, ok && n.Sign() >= 0
}

// KinesisHooks lets a test disturb the calls of one Client view. Every hook
// may be nil.
type KinesisHooks struct {
	// Decide is asked at the start of each call (op is "ListShards",
	// "GetShardIterator" or "GetRecords"; shardID is empty for
	// ListShards): the call sleeps delay (or until ctx ends), then fails with
	// err if it is not nil.
	Decide func(op, shardID string) (delay time.Duration, err error)
	// Stall blocks while the caller's process is stalled (a GC pause): it is
	// called before the call is served and before its answer is returned.
	Stall func()
	// Dead reports whether the caller's process is dead: its calls fail.
	Dead func() bool
}

// Client returns a view of s that implements kinesisx.Reader, disturbed by
// hooks.
func (s *Stream) Client(hooks KinesisHooks) kinesisx.Reader {
	return &Client{s: s, hooks: hooks}
}

// Client is a view of a Stream implementing kinesisx.Reader.
type Client struct {
	s     *Stream
	hooks KinesisHooks
}

var _ kinesisx.Reader = (*Client)(nil)

// ErrDead is returned by every call of a dead process's view.
var ErrDead = fmt.Errorf("sim: the calling process is dead")

func (c *Client) begin(ctx context.Context, op, shardID string) error {
	if c.hooks.Stall != nil {
		c.hooks.Stall()
	}
	if c.hooks.Dead != nil && c.hooks.Dead() {
		return ErrDead
	}
	if c.hooks.Decide != nil {
		delay, err := c.hooks.Decide(op, shardID)
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		if c.hooks.Stall != nil {
			c.hooks.Stall()
		}
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (c *Client) end() error {
	if c.hooks.Stall != nil {
		c.hooks.Stall()
	}
	if c.hooks.Dead != nil && c.hooks.Dead() {
		return ErrDead
	}
	return nil
}

func (s *Stream) checkStream(name, arn *string) error {
	got := aws.ToString(name)
	if got == "" {
		got = aws.ToString(arn)
	}
	if got != s.name {
		return &types.ResourceNotFoundException{Message: aws.String(fmt.Sprintf("Stream %s under account 000000000000 not found.", got))}
	}
	return nil
}

// listPage is how many shards ListShards returns per call, so that callers
// must follow NextToken.
const listPage = 3

// ListShards implements kinesisx.Reader. It returns listPage shards per call
// and, as Kinesis does, refuses a NextToken together with a stream name.
func (c *Client) ListShards(ctx context.Context, in *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	if err := c.begin(ctx, "ListShards", ""); err != nil {
		return nil, err
	}
	s := c.s
	start := 0
	if in.NextToken != nil {
		if in.StreamName != nil || in.StreamARN != nil {
			return nil, &types.InvalidArgumentException{Message: aws.String("NextToken and StreamName cannot be provided together.")}
		}
		tok := aws.ToString(in.NextToken)
		name, n, ok := strings.Cut(tok, "|")
		i, err := strconv.Atoi(n)
		if !ok || err != nil || name != s.name {
			return nil, &types.InvalidArgumentException{Message: aws.String("invalid NextToken")}
		}
		start = i
	} else if err := s.checkStream(in.StreamName, in.StreamARN); err != nil {
		return nil, err
	}
	s.mu.Lock()
	out := &kinesis.ListShardsOutput{}
	end := min(start+listPage, len(s.shards))
	for _, sh := range s.shards[start:end] {
		ks := types.Shard{
			ShardId:      aws.String(sh.id),
			HashKeyRange: &types.HashKeyRange{StartingHashKey: aws.String(sh.hashKey), EndingHashKey: aws.String(sh.hashKey)},
			SequenceNumberRange: &types.SequenceNumberRange{
				StartingSequenceNumber: aws.String(new(big.Int).Add(sh.base, big.NewInt(1)).String()),
			},
		}
		if sh.ended != nil {
			ks.SequenceNumberRange.EndingSequenceNumber = aws.String(sh.ended.String())
		}
		if len(sh.parents) > 0 {
			ks.ParentShardId = aws.String(sh.parents[0])
		}
		if len(sh.parents) > 1 {
			ks.AdjacentParentShardId = aws.String(sh.parents[1])
		}
		out.Shards = append(out.Shards, ks)
	}
	if end < len(s.shards) {
		out.NextToken = aws.String(s.name + "|" + strconv.Itoa(end))
	}
	s.mu.Unlock()
	return out, c.end()
}

// GetShardIterator implements kinesisx.Reader.
func (c *Client) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	id := aws.ToString(in.ShardId)
	if err := c.begin(ctx, "GetShardIterator", id); err != nil {
		return nil, err
	}
	s := c.s
	if err := s.checkStream(in.StreamName, in.StreamARN); err != nil {
		return nil, err
	}
	s.mu.Lock()
	sh := s.byID[id]
	if sh == nil {
		s.mu.Unlock()
		return nil, &types.ResourceNotFoundException{Message: aws.String("Shard " + id + " in stream " + s.name + " not found.")}
	}
	pos, err := sh.position(in)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	tok := s.issue(sh, pos)
	s.mu.Unlock()
	return &kinesis.GetShardIteratorOutput{ShardIterator: aws.String(tok)}, c.end()
}

// position returns the index of the first record an iterator of in reads.
func (sh *fakeShard) position(in *kinesis.GetShardIteratorInput) (int, error) {
	bad := func(msg string) error { return &types.InvalidArgumentException{Message: aws.String(msg)} }
	switch in.ShardIteratorType {
	case types.ShardIteratorTypeTrimHorizon:
		return 0, nil
	case types.ShardIteratorTypeLatest:
		return len(sh.records), nil
	case types.ShardIteratorTypeAtTimestamp:
		if in.Timestamp == nil {
			return 0, bad("AT_TIMESTAMP needs a Timestamp")
		}
		i, _ := slices.BinarySearchFunc(sh.records, *in.Timestamp, func(r stored, t time.Time) int {
			return r.rec.ApproximateArrivalTimestamp.Compare(t)
		})
		return i, nil
	case types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber:
		seq, ok := ParseSequence(aws.ToString(in.StartingSequenceNumber))
		if !ok {
			return 0, bad(fmt.Sprintf("StartingSequenceNumber %q is not a sequence number", aws.ToString(in.StartingSequenceNumber)))
		}
		if seq.Cmp(sh.base) <= 0 || seq.Cmp(sh.next) >= 0 {
			return 0, bad(fmt.Sprintf("StartingSequenceNumber %s used in GetShardIterator on shard %s in stream is invalid because it did not come from this stream.", seq, sh.id))
		}
		// The first record at or after seq: sequence numbers compare as integers.
		i, found := slices.BinarySearchFunc(sh.records, seq, func(r stored, n *big.Int) int { return r.seq.Cmp(n) })
		if found && in.ShardIteratorType == types.ShardIteratorTypeAfterSequenceNumber {
			i++
		}
		return i, nil
	}
	return 0, bad(fmt.Sprintf("ShardIteratorType %q", in.ShardIteratorType))
}

func (s *Stream) issue(sh *fakeShard, pos int) string {
	s.nextIt++
	if s.nextIt%4096 == 0 {
		now := time.Now()
		for tok, it := range s.iters {
			if now.Sub(it.issued) > IteratorTTL {
				delete(s.iters, tok)
			}
		}
	}
	tok := fmt.Sprintf("it-%s-%d-%d", sh.id, pos, s.nextIt)
	s.iters[tok] = iterator{shard: sh, pos: pos, issued: time.Now()}
	return tok
}

// GetRecords implements kinesisx.Reader: it returns up to Limit records
// (default 10,000) from the iterator and the next iterator, none once a
// closed shard was read to its end. More than GetRecordsPerSecond calls on
// one shard within a second fail with ProvisionedThroughputExceededException.
func (c *Client) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	s := c.s
	tok := aws.ToString(in.ShardIterator)
	s.mu.Lock()
	it, ok := s.iters[tok]
	s.mu.Unlock()
	id := ""
	if ok {
		id = it.shard.id
	}
	if err := c.begin(ctx, "GetRecords", id); err != nil {
		return nil, err
	}
	if !ok {
		return nil, &types.InvalidArgumentException{Message: aws.String("Invalid ShardIterator.")}
	}
	out, err := s.getRecords(tok, it, in.Limit)
	if err != nil {
		return nil, err
	}
	if err := c.end(); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Stream) getRecords(tok string, it iterator, limitIn *int32) (*kinesis.GetRecordsOutput, error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(it.issued) > IteratorTTL {
		delete(s.iters, tok)
		return nil, &types.ExpiredIteratorException{Message: aws.String("Iterator expired. The iterator was created at time " + it.issued.String())}
	}
	sh := it.shard
	recent := sh.calls[:0]
	for _, t := range sh.calls {
		if now.Sub(t) < time.Second {
			recent = append(recent, t)
		}
	}
	sh.calls = recent
	if len(sh.calls) >= GetRecordsPerSecond {
		return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard " + sh.id + " in stream " + s.name + ".")}
	}
	sh.calls = append(sh.calls, now)
	limit := 10000
	if limitIn != nil {
		if *limitIn < 1 || *limitIn > 10000 {
			return nil, &types.InvalidArgumentException{Message: aws.String("Limit must be between 1 and 10000")}
		}
		limit = int(*limitIn)
	}
	end := min(it.pos+limit, len(sh.records))
	out := &kinesis.GetRecordsOutput{Records: make([]types.Record, 0, end-it.pos)}
	for _, r := range sh.records[it.pos:end] {
		rec := r.rec
		rec.Data = slices.Clone(rec.Data)
		out.Records = append(out.Records, rec)
	}
	if end < len(sh.records) {
		last := sh.records[len(sh.records)-1].rec.ApproximateArrivalTimestamp
		next := sh.records[end].rec.ApproximateArrivalTimestamp
		out.MillisBehindLatest = aws.Int64(max(1, last.Sub(*next).Milliseconds()))
	} else {
		out.MillisBehindLatest = aws.Int64(0)
	}
	if !(sh.closed && end == len(sh.records)) {
		out.NextShardIterator = aws.String(s.issue(sh, end))
	} else {
		for _, child := range s.shards {
			if slices.Contains(child.parents, sh.id) {
				out.ChildShards = append(out.ChildShards, types.ChildShard{ShardId: aws.String(child.id), ParentShards: child.parents})
			}
		}
	}
	return out, nil
}
