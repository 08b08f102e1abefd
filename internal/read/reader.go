package read

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/kinesiswire"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
)

var _ kinesisx.Reader = (*kinesis.Client)(nil)

// MaxLimit is GetRecords' own cap on the records of one call (and its
// Limit when none is given).
const MaxLimit = 10_000

// Batch is what one GetRecords call (or one SubscribeToShard event)
// returned.
type Batch struct {
	Records            []types.Record
	MillisBehindLatest int64
	// End is set on the last batch of a closed shard: every record of the
	// shard has been read.
	End bool

	// Cost is what the batch was charged to the caller's memory budget,
	// in bytes; the reader leaves it 0 for the caller to set.
	Cost int64
}

// ReaderConfig configures a Reader.
type ReaderConfig struct {
	Client  kinesisx.Reader
	Stream  string // name or ARN
	ShardID string
	Start   kltype.StartPosition
	// Limit is GetRecords' Limit; 0 means Kinesis' default (10,000).
	Limit int32
	// Encoding is how GetRecords travels (kinesiswire.EncodingCBOR by
	// default); OnFallback is told once when an endpoint refuses CBOR.
	Encoding   kinesiswire.Encoding
	OnFallback func(endpoint string, err error)
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
	// Reserve, if set, is called before every GetRecords with Limit: it
	// waits until the call may be made and returns the Limit to use (the
	// memory budget's share of this shard).
	Reserve func(ctx context.Context, limit int32) (int32, error)
	// OnSend, if set, is called with the instant of each GetRecords call
	// as the reader paces it: the instant MinInterval and IdleInterval are
	// measured from.
	OnSend func(time.Time)
}

// Reader reads one shard, from a start position, in order. It keeps no
// more than the batch it is handing over.
type Reader struct {
	cfg      ReaderConfig
	callOpts []func(*kinesis.Options) // GetRecords' per-call options
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
	opts := append([]func(*kinesis.Options){kinesisx.WithoutThrottleRetries}, kinesiswire.GetRecordsOptions(cfg.Encoding, cfg.OnFallback)...)
	return &Reader{cfg: cfg, callOpts: opts}
}

// Close implements Source; a Reader holds nothing open between calls.
func (r *Reader) Close() {}

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
		if kinesisx.Permanent(err) {
			return Batch{}, err
		}
		if kinesisx.IsExpiredIterator(err) {
			r.iterator = "" // re-created after the last record returned
		}
		r.failed++
		delay := backoff.Delay(r.failed, r.cfg.MinInterval, r.cfg.MaxBackoff)
		if r.cfg.OnRetry != nil {
			r.cfg.OnRetry(err, delay)
		}
		if err := backoff.Sleep(ctx, delay); err != nil {
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
	return backoff.Sleep(ctx, time.Until(r.lastGet.Add(wait)))
}

func (r *Reader) get(ctx context.Context) (Batch, error) {
	if r.iterator == "" {
		pos := r.cfg.Start
		if r.last != "" {
			pos = kltype.AfterSequenceNumber(r.last)
		}
		out, err := r.cfg.Client.GetShardIterator(ctx, kinesisx.IteratorInput(r.cfg.Stream, r.cfg.ShardID, pos), kinesisx.WithoutThrottleRetries)
		if err != nil {
			var invalid *types.InvalidArgumentException
			if pos.Sequence != "" && errors.As(err, &invalid) {
				return Batch{}, &kltype.CheckpointError{Stream: r.cfg.Stream, ShardID: r.cfg.ShardID, Position: pos, Err: err}
			}
			return Batch{}, fmt.Errorf("shard %s: GetShardIterator %s: %w", r.cfg.ShardID, pos, err)
		}
		r.iterator = aws.ToString(out.ShardIterator)
		if r.iterator == "" {
			r.caught = true
			return Batch{End: true}, nil
		}
	}
	limit := r.cfg.Limit
	if r.cfg.Reserve != nil {
		var err error
		if limit, err = r.cfg.Reserve(ctx, limit); err != nil {
			return Batch{}, err
		}
	}
	r.lastGet = time.Now()
	if r.cfg.OnSend != nil {
		r.cfg.OnSend(r.lastGet)
	}
	out, err := r.cfg.Client.GetRecords(ctx, kinesisx.GetRecordsInput(r.cfg.Stream, r.iterator, limit), r.callOpts...)
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
	if limit <= 0 {
		limit = MaxLimit
	}
	r.caught = len(out.Records) == 0 || (b.MillisBehindLatest == 0 && len(out.Records) < int(limit))
	return b, nil
}
