package kinesisfake

import (
	"context"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
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

func consumerNotFound(what string) error {
	return &types.ResourceNotFoundException{Message: aws.String(fmt.Sprintf("Consumer %s under account %s not found.", what, account))}
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
