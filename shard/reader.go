// Package shard reads the shards of a Kinesis stream under leases: the
// reader (GetShardIterator and GetRecords), the per-shard worker that hands
// records to a handler in order and checkpoints, and the coordinator that
// discovers shards and takes, renews, balances and releases their leases.
//
// Nothing here is generic: records reach the handler as raw bytes with their
// metadata; decoding happens in the caller's typed wrapper.
package shard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/leases"
)

// Kinesis is the part of *kinesis.Client the package uses.
type Kinesis interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

var _ Kinesis = (*kinesis.Client)(nil)

// PositionType says where a shard without a checkpoint starts.
type PositionType int

const (
	// Latest starts after the newest record (Kinesis LATEST).
	Latest PositionType = iota
	// TrimHorizon starts at the oldest record still kept (TRIM_HORIZON).
	TrimHorizon
	// AtTimestamp starts at the first record that arrived at or after Time.
	AtTimestamp
	// AtSequence starts at the record with sequence number Sequence.
	AtSequence
	// AfterSequence starts right after the record with sequence number Sequence.
	AfterSequence
)

// Position is a start position in a shard.
type Position struct {
	Type     PositionType
	Time     time.Time // AtTimestamp
	Sequence string    // AtSequence, AfterSequence
}

func (p Position) String() string {
	switch p.Type {
	case Latest:
		return "LATEST"
	case TrimHorizon:
		return "TRIM_HORIZON"
	case AtTimestamp:
		return "AT_TIMESTAMP " + p.Time.Format(time.RFC3339Nano)
	case AtSequence:
		return "AT_SEQUENCE_NUMBER " + p.Sequence
	case AfterSequence:
		return "AFTER_SEQUENCE_NUMBER " + p.Sequence
	}
	return fmt.Sprintf("Position(%d)", int(p.Type))
}

func (p Position) input(stream, shardID string) *kinesis.GetShardIteratorInput {
	in := &kinesis.GetShardIteratorInput{ShardId: aws.String(shardID)}
	SetStream(stream, &in.StreamName, &in.StreamARN)
	switch p.Type {
	case Latest:
		in.ShardIteratorType = types.ShardIteratorTypeLatest
	case TrimHorizon:
		in.ShardIteratorType = types.ShardIteratorTypeTrimHorizon
	case AtTimestamp:
		in.ShardIteratorType = types.ShardIteratorTypeAtTimestamp
		in.Timestamp = aws.Time(p.Time)
	case AtSequence:
		in.ShardIteratorType = types.ShardIteratorTypeAtSequenceNumber
		in.StartingSequenceNumber = aws.String(p.Sequence)
	case AfterSequence:
		in.ShardIteratorType = types.ShardIteratorTypeAfterSequenceNumber
		in.StartingSequenceNumber = aws.String(p.Sequence)
	}
	return in
}

// PositionAfter returns where to read a shard whose checkpoint is cp, and
// false for no checkpoint. A sequence number resumes after it (at it, to
// skip the done part of a KPL aggregate, when SubSequence is set); the
// positions a rewind writes (leases.TrimHorizon, Latest, AtSequence,
// AtTimestamp) map to theirs.
func PositionAfter(cp leases.Checkpoint) (Position, bool) {
	seq := cp.Sequence
	switch {
	case seq == "":
		return Position{}, false
	case seq == leases.TrimHorizon:
		return Position{Type: TrimHorizon}, true
	case seq == leases.Latest:
		return Position{Type: Latest}, true
	case strings.HasPrefix(seq, leases.AtSequencePrefix):
		return Position{Type: AtSequence, Sequence: strings.TrimPrefix(seq, leases.AtSequencePrefix)}, true
	case strings.HasPrefix(seq, leases.AtTimestampPrefix):
		ms, err := strconv.ParseInt(strings.TrimPrefix(seq, leases.AtTimestampPrefix), 10, 64)
		if err == nil {
			return Position{Type: AtTimestamp, Time: time.UnixMilli(ms)}, true
		}
	case cp.SubSequence > 0:
		// Inside a KPL aggregate: read it again; the worker skips the user
		// records already done.
		return Position{Type: AtSequence, Sequence: seq}, true
	}
	return Position{Type: AfterSequence, Sequence: seq}, true
}

// IsARN reports whether stream is a stream ARN rather than a name.
func IsARN(stream string) bool { return len(stream) > 4 && stream[:4] == "arn:" }

// SetStream fills a request's StreamName or StreamARN.
func SetStream(stream string, name, arn **string) {
	if IsARN(stream) {
		*arn = aws.String(stream)
	} else {
		*name = aws.String(stream)
	}
}

// Batch is what one GetRecords call returned.
type Batch struct {
	Records            []types.Record
	MillisBehindLatest int64
	// End is set on the last batch of a closed shard: every record of the
	// shard has been read.
	End bool
}

// ReaderConfig configures a Reader.
type ReaderConfig struct {
	Client  Kinesis
	Stream  string // name or ARN
	ShardID string
	Start   Position
	// Limit is GetRecords' Limit; 0 means Kinesis' default (10,000).
	Limit int32
	// MinInterval is the least time between two GetRecords calls on the
	// shard. Kinesis allows 5 calls per second per shard, shared by every
	// consumer of the stream; the default is 200ms.
	MinInterval time.Duration
	// IdleInterval is the time between calls when the reader is caught up
	// (an empty batch, or MillisBehindLatest 0); the default is 1s.
	IdleInterval time.Duration
	// MaxBackoff caps the delay after throttling and transient errors;
	// the default is 5s.
	MaxBackoff time.Duration
	// OnRetry, if set, is told of each error the reader retries.
	OnRetry func(err error, delay time.Duration)
}

// Reader reads one shard, from a start position, in order. It keeps no
// more than the batch it is handing over.
type Reader struct {
	cfg      ReaderConfig
	iterator string
	// last is the sequence number of the newest record returned: an expired
	// iterator is re-created right after it.
	last    string
	lastGet time.Time
	caught  bool
	failed  int
	done    bool
}

// NewReader returns a Reader; it calls Kinesis only on Next.
func NewReader(cfg ReaderConfig) *Reader {
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = 200 * time.Millisecond
	}
	if cfg.IdleInterval <= 0 {
		cfg.IdleInterval = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	return &Reader{cfg: cfg}
}

// ErrShardEnded is returned by Next after the batch marked End.
var ErrShardEnded = errors.New("shard: shard ended")

// Next waits for the pacing delay, then returns the next batch that holds
// records, or a batch marked End. Throttling, expired iterators and
// transient errors are retried inside Next, with backoff; none of them skips
// a record. Next returns an error only when ctx ends or on an error no retry
// can cure (the stream or shard does not exist, access denied).
func (r *Reader) Next(ctx context.Context) (Batch, error) {
	if r.done {
		return Batch{}, ErrShardEnded
	}
	for {
		if err := r.pace(ctx); err != nil {
			return Batch{}, err
		}
		b, err := r.get(ctx)
		if err == nil {
			r.failed = 0
			if b.End {
				r.done = true
			}
			if len(b.Records) > 0 || b.End {
				return b, nil
			}
			continue
		}
		if ctx.Err() != nil {
			return Batch{}, ctx.Err()
		}
		if Permanent(err) {
			return Batch{}, err
		}
		var expired *types.ExpiredIteratorException
		if errors.As(err, &expired) {
			r.iterator = "" // re-created after the last record returned
		}
		r.failed++
		delay := backoff(r.failed, r.cfg.MinInterval, r.cfg.MaxBackoff)
		if r.cfg.OnRetry != nil {
			r.cfg.OnRetry(err, delay)
		}
		if err := sleep(ctx, delay); err != nil {
			return Batch{}, err
		}
	}
}

func (r *Reader) pace(ctx context.Context) error {
	if r.lastGet.IsZero() {
		return nil
	}
	wait := r.cfg.MinInterval
	if r.caught {
		wait = r.cfg.IdleInterval
	}
	return sleep(ctx, time.Until(r.lastGet.Add(wait)))
}

func (r *Reader) get(ctx context.Context) (Batch, error) {
	if r.iterator == "" {
		pos := r.cfg.Start
		if r.last != "" {
			pos = Position{Type: AfterSequence, Sequence: r.last}
		}
		out, err := r.cfg.Client.GetShardIterator(ctx, pos.input(r.cfg.Stream, r.cfg.ShardID))
		if err != nil {
			return Batch{}, fmt.Errorf("shard %s: GetShardIterator %s: %w", r.cfg.ShardID, pos, err)
		}
		r.iterator = aws.ToString(out.ShardIterator)
		if r.iterator == "" {
			r.caught = true
			return Batch{End: true}, nil
		}
	}
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String(r.iterator)}
	if r.cfg.Limit > 0 {
		in.Limit = aws.Int32(r.cfg.Limit)
	}
	if IsARN(r.cfg.Stream) {
		in.StreamARN = aws.String(r.cfg.Stream)
	}
	r.lastGet = time.Now()
	out, err := r.cfg.Client.GetRecords(ctx, in)
	if err != nil {
		return Batch{}, fmt.Errorf("shard %s: GetRecords: %w", r.cfg.ShardID, err)
	}
	b := Batch{Records: out.Records, MillisBehindLatest: aws.ToInt64(out.MillisBehindLatest)}
	if n := len(out.Records); n > 0 {
		r.last = aws.ToString(out.Records[n-1].SequenceNumber)
	}
	r.iterator = aws.ToString(out.NextShardIterator)
	b.End = r.iterator == ""
	// Caught up: nothing came back, or the shard's tip is reached. A full
	// batch means more is waiting whatever MillisBehindLatest says (some
	// emulators always say 0).
	limit := 10000
	if r.cfg.Limit > 0 {
		limit = int(r.cfg.Limit)
	}
	r.caught = len(out.Records) == 0 || (b.MillisBehindLatest == 0 && len(out.Records) < limit)
	return b, nil
}

// Permanent reports whether err is one no retry can cure: the stream or
// shard does not exist, the request is invalid, or access is denied.
func Permanent(err error) bool {
	var (
		notFound *types.ResourceNotFoundException
		invalid  *types.InvalidArgumentException
		apiErr   smithy.APIError
	)
	switch {
	case errors.As(err, &notFound), errors.As(err, &invalid):
		return true
	case errors.As(err, &apiErr):
		switch apiErr.ErrorCode() {
		case "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException",
			"MissingAuthenticationTokenException", "ExpiredTokenException", "ValidationException":
			return true
		}
	}
	return false
}

// backoff returns the delay before retry n (1-based): exponential from base,
// capped, with full jitter over its upper half.
func backoff(n int, base, ceiling time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
