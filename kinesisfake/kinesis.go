package kinesisfake

import (
	"cmp"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Kinesis is an in-memory Amazon Kinesis Data Streams for tests of a whole
// service without AWS or emulators: it implements kinesislease.Kinesis (and
// so kinesislease.Producer) with the SDK's request and response types and
// errors, so a test can hand it to kinesislease.WithKinesisClient and
// kinesislease.NewPublisherFromClient:
//
//	k := kinesisfake.New()
//	k.CreateStream("orders", 4)
//	svc, _ := kinesislease.New(aws.Config{},
//		kinesislease.WithKinesisClient(k),
//		kinesislease.WithLeaseStore(memory.New()))
//
// It keeps what Kinesis' API shows a consumer: shards with hash key ranges
// splitting the 128-bit space evenly, records routed by the MD5 of their
// partition key (or their explicit hash key) to the open shard whose range
// holds it, 56-digit sequence numbers increasing in each shard (and across
// the stream), shard iterators that expire after 5 minutes, paging, and
// resharding (SplitShard, MergeShards) with closed parents whose readers
// reach their end and are told of the children. Throttle injects
// ProvisionedThroughputExceededException; New's options add Kinesis'
// GetRecords rate limit per shard and shorter ListShards pages.
//
// It reads the time with time.Now only, so inside a testing/synctest bubble
// it runs on the bubble's clock. It keeps every record (no retention
// period); its account is 000000000000 in region us-east-1 (see ARN). The
// options of each call (optFns) are ignored.
//
// A Kinesis is safe for concurrent use. Its answers never share memory with
// its state or with the requests: records' data are copied in and out.
type Kinesis struct {
	id uint64

	mu        sync.Mutex
	streams   map[string]*stream
	gen       uint64
	throttles map[string]int
	calls     map[string]int
	// listPage and readLimit are set by New's options
	// (options.go).
	listPage  int
	readLimit bool
	// Enhanced fan-out (fanout.go): the rules, the registered consumers by
	// ARN, the SubscribeToShard calls by consumer and shard, and the
	// channel closed at the next change a subscription waits for.
	rules     FanOutRules
	consumers map[string]*consumer
	subs      map[subKey]*subCalls
	changed   chan struct{}
	subStats  SubscribeStats
	// wireOps serves ServeHTTP's calls (wire.go).
	opsOnce sync.Once
	wireOps map[string]operation
}

// The operations Throttle and Calls name.
const (
	OpListShards       = "ListShards"
	OpGetShardIterator = "GetShardIterator"
	OpGetRecords       = "GetRecords"
	OpPutRecords       = "PutRecords"
	OpPutRecord        = "PutRecord"
)

// The enhanced fan-out operations that Throttle and Calls name. A
// throttled SubscribeToShard fails with LimitExceededException, as Kinesis'
// per-second limit does.
const (
	OpDescribeStreamSummary    = "DescribeStreamSummary"
	OpRegisterStreamConsumer   = "RegisterStreamConsumer"
	OpDescribeStreamConsumer   = "DescribeStreamConsumer"
	OpListStreamConsumers      = "ListStreamConsumers"
	OpDeregisterStreamConsumer = "DeregisterStreamConsumer"
	OpSubscribeToShard         = "SubscribeToShard"
)

var ops = []string{OpListShards, OpGetShardIterator, OpGetRecords, OpPutRecords, OpPutRecord,
	OpDescribeStreamSummary, OpRegisterStreamConsumer, OpDescribeStreamConsumer, OpListStreamConsumers,
	OpDeregisterStreamConsumer, OpSubscribeToShard}

// Kinesis' limits that the fake enforces.
const (
	// IteratorTTL is how long a shard iterator stays valid.
	IteratorTTL = 5 * time.Minute
	// NextTokenTTL is how long a ListShards NextToken stays valid.
	NextTokenTTL = 300 * time.Second
	// DefaultGetRecordsLimit is how many records GetRecords returns at most
	// when its Limit is not set (and the most any Limit may ask for).
	DefaultGetRecordsLimit = 10000
	// maxGetRecordsBytes is the most data (and partition keys) one
	// GetRecords answer carries, whatever its Limit.
	maxGetRecordsBytes = 10 << 20
	// maxPutRecords, maxPutBytes, maxRecordBytes: PutRecords' limits.
	maxPutRecords  = 500
	maxPutBytes    = 5 << 20
	maxRecordBytes = 1 << 20
	// listPageMax is the most shards one ListShards answer lists.
	listPageMax = 1000
	// maxShards bounds the shards of one stream, parents included: the
	// shard's index is the last 6 digits of its sequence numbers.
	maxShards = 1_000_000
)

// account and region of every ARN.
const (
	account   = "000000000000"
	arnPrefix = "arn:aws:kinesis:us-east-1:" + account + ":stream/"
)

var kinesisIDs atomic.Uint64

// Option configures a Kinesis; pass options to New.
type Option interface{ apply(*Kinesis) }

type option func(*Kinesis)

func (f option) apply(k *Kinesis) { f(k) }

// New returns an empty Kinesis: create streams with CreateStream.
// Its options (WithListShardsPage, WithGetRecordsRateLimit) make it stricter
// than its defaults.
func New(opts ...Option) *Kinesis {
	k := &Kinesis{
		id:        kinesisIDs.Add(1),
		streams:   map[string]*stream{},
		throttles: map[string]int{},
		calls:     map[string]int{},
		listPage:  listPageMax,
		rules:     FanOutRules{}.withDefaults(),
	}
	for _, o := range opts {
		o.apply(k)
	}
	return k
}

type stream struct {
	name    string
	gen     uint64 // distinguishes a stream from one of the same name deleted before
	created time.Time
	// last is the counter of the newest sequence number given out.
	last    uint64
	shards  []*shard // by index: shard i is shardId-%012d of i
	records int
}

type shard struct {
	idx              int
	id               string
	lo, hi           *big.Int // hash key range, inclusive
	parent, adjacent string
	// firstCounter is the counter of the shard's StartingSequenceNumber;
	// endCounter that of its EndingSequenceNumber once closed.
	firstCounter, endCounter uint64
	created, closedAt        time.Time
	closed                   bool
	initial                  bool // created with the stream: open at its trim horizon
	children                 []string
	records                  []record
	reads                    []time.Time // GetRecords calls of the last second, with WithGetRecordsRateLimit
	// loText, hiText and firstSeq are lo, hi and the StartingSequenceNumber
	// in text, made once: every listing of a large stream by many readers
	// shares their (immutable) bytes.
	loText, hiText, firstSeq string
}

type record struct {
	counter uint64
	key     string
	data    []byte
	arrival time.Time
}

func shardID(i int) string { return fmt.Sprintf("shardId-%012d", i) }

// seqNumber is the sequence number of counter c in shard idx: "49", the
// counter in 48 digits, the shard's index in 6; 56 digits in all.
func seqNumber(c uint64, idx int) string { return fmt.Sprintf("49%048d%06d", c, idx) }

// parseSeq returns the counter and shard index of a sequence number made by
// seqNumber.
func parseSeq(s string) (c uint64, idx int, ok bool) {
	if len(s) != 56 || !strings.HasPrefix(s, "49") {
		return 0, 0, false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, 0, false
		}
	}
	head := strings.TrimLeft(s[2:50], "0")
	if head == "" {
		head = "0"
	}
	c, err := strconv.ParseUint(head, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	idx, err = strconv.Atoi(s[50:])
	return c, idx, err == nil
}

func (sh *shard) seq(i int) string { return seqNumber(sh.records[i].counter, sh.idx) }

func (sh *shard) contains(h *big.Int) bool { return sh.lo.Cmp(h) <= 0 && h.Cmp(sh.hi) <= 0 }

// maxHashKey is 2^128 - 1, the largest hash key.
var maxHashKey = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))

var streamNameRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

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

func (s *stream) shard(id string) *shard {
	i, ok := shardIndex(id)
	if !ok || i >= len(s.shards) {
		return nil
	}
	return s.shards[i]
}

// shardIndex returns i of "shardId-%012d" (Kinesis also accepts fewer
// digits).
func shardIndex(id string) (int, bool) {
	n, ok := strings.CutPrefix(id, "shardId-")
	if !ok || n == "" || len(n) > 12 || strings.Trim(n, "0123456789") != "" {
		return 0, false
	}
	i, err := strconv.Atoi(n)
	return i, err == nil
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

// begin counts a call of op and reports whether it is throttled. It is
// called with k.mu held.
func (k *Kinesis) begin(op string) (throttled bool) {
	k.calls[op]++
	if k.throttles[op] > 0 {
		k.throttles[op]--
		return true
	}
	return false
}

func throttleErr(what string) error {
	return &types.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for " + what + " under account " + account + ".")}
}

func invalidArg(format string, args ...any) error {
	return &types.InvalidArgumentException{Message: aws.String(fmt.Sprintf(format, args...))}
}

func streamNotFound(name string) error {
	return &types.ResourceNotFoundException{Message: aws.String(fmt.Sprintf("Stream %s under account %s not found.", name, account))}
}

func shardNotFound(s *stream, id string) error {
	return &types.ResourceNotFoundException{Message: aws.String(fmt.Sprintf("Shard %s in stream %s under account %s does not exist", id, s.name, account))}
}

// lookup returns the stream a name or an ARN names. k.mu is held.
func (k *Kinesis) lookup(nameOrARN string) (*stream, error) {
	name := nameOrARN
	if strings.HasPrefix(nameOrARN, "arn:") {
		var ok bool
		if name, ok = strings.CutPrefix(nameOrARN, arnPrefix); !ok {
			return nil, streamNotFound(nameOrARN)
		}
	}
	s := k.streams[name]
	if s == nil {
		return nil, streamNotFound(name)
	}
	return s, nil
}

// resolve returns the stream a request names by StreamName or StreamARN.
// k.mu is held.
func (k *Kinesis) resolve(name, arn *string) (*stream, error) {
	n, a := aws.ToString(name), aws.ToString(arn)
	switch {
	case n == "" && a == "":
		return nil, invalidArg("Either StreamName or StreamARN should be provided.")
	case n != "" && a != "" && a != arnPrefix+n:
		return nil, invalidArg("StreamARN %s and StreamName %s name different streams.", a, n)
	case n != "":
		return k.lookup(n)
	}
	if !strings.HasPrefix(a, "arn:") {
		return nil, invalidArg("StreamARN %q is not an ARN.", a)
	}
	return k.lookup(a)
}

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

// FanOutRules are the timings of enhanced fan-out. A zero field takes the
// default given with it, which is Kinesis' own where Kinesis has one.
type FanOutRules struct {
	// TakeoverAfter is the 5-second rule: SubscribeToShard for a consumer
	// and shard less than this after the last successful call fails with
	// ResourceInUseException; a later call takes the subscription over and
	// the old one ends with ResourceInUseException (default 5s).
	TakeoverAfter time.Duration
	// CallInterval is the limit of one SubscribeToShard call per consumer
	// and shard a second: a call less than this after the previous one,
	// successful or not, fails with LimitExceededException (default 1s).
	CallInterval time.Duration
	// Lifetime is how long a subscription streams before it ends cleanly,
	// its event channel closed with no error (default 5 minutes).
	Lifetime time.Duration
	// EventInterval is how long a subscription with nothing new goes
	// before it sends an event without records (default 1s).
	EventInterval time.Duration
	// ActivateAfter is how long a registered consumer stays CREATING
	// before it is ACTIVE (default 0: at once; Kinesis takes seconds).
	ActivateAfter time.Duration
	// MaxEventRecords is the most records one event carries (default
	// 1,000).
	MaxEventRecords int
	// EventGap is the least time from an event with records to the next
	// (default 0: each put is pushed at once, alone). Records put
	// meanwhile come together in one event, as a stream's records put one
	// by one reach a Kinesis subscriber in events of several: a bench of
	// the consumer's cost per record sets it.
	EventGap time.Duration
}

func (r FanOutRules) withDefaults() FanOutRules {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&r.TakeoverAfter, 5*time.Second)
	def(&r.CallInterval, time.Second)
	def(&r.Lifetime, 5*time.Minute)
	def(&r.EventInterval, time.Second)
	if r.MaxEventRecords <= 0 {
		r.MaxEventRecords = 1000
	}
	return r
}

// consumer is a registered stream consumer.
type consumer struct {
	name, arn string
	stream    *stream
	created   time.Time
}

// SubscribeStats counts SubscribeToShard calls by how they ended.
type SubscribeStats struct {
	// Subscribed counts the calls that opened a subscription.
	Subscribed int
	// LimitExceeded counts the calls refused by the one-call-a-second
	// limit (FanOutRules.CallInterval), Throttle's included.
	LimitExceeded int
	// ResourceInUse counts the calls refused by the 5-second rule
	// (FanOutRules.TakeoverAfter) or for a consumer not yet ACTIVE.
	ResourceInUse int
	// TakenOver counts the subscriptions ended by a later one.
	TakenOver int
	// Open is how many subscriptions are open now.
	Open int
}

// subKey names the subscriptions of one consumer to one shard.
type subKey struct{ consumerARN, shardID string }

// subCalls is the SubscribeToShard history of one subKey.
type subCalls struct {
	lastCall, lastSuccess time.Time
	active                *subscription
}

// subscription is one SubscribeToShard's event stream: a goroutine reads
// the shard under k.mu and sends events on ch, unbuffered.
type subscription struct {
	k        *Kinesis
	key      subKey
	consumer *consumer
	stream   *stream
	shard    *shard
	pos      int    // the next record to send
	cont     string // the ContinuationSequenceNumber of an event without records
	deadline time.Time

	ch   chan *types.SubscribeToShardEvent
	stop chan struct{} // closed by end
	done chan struct{} // closed when run has returned

	mu    sync.Mutex
	ended bool
	err   error // the reason given to end; nil for a clean end
}

// notifyLocked wakes every subscription waiting for news: records, a
// closed shard, a deleted stream or consumer. k.mu is held.
func (k *Kinesis) notifyLocked() {
	if k.changed != nil {
		close(k.changed)
		k.changed = nil
	}
}

// changedLocked returns a channel closed at the next notifyLocked. k.mu is
// held.
func (k *Kinesis) changedLocked() <-chan struct{} {
	if k.changed == nil {
		k.changed = make(chan struct{})
	}
	return k.changed
}

// operation serves one call: it decodes the request body into the call's
// input and returns its output, or the error to answer.
type operation func(ctx context.Context, body []byte) (any, error)
