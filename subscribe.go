package kinesislease

import (
	"context"
	"fmt"
	"time"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/internal/typed"
	"github.com/kinesislease/kinesislease/shard"
)

// Record is a Kinesis record's metadata and raw bytes; a handler reaches it
// with RecordFrom.
type Record = shard.Record

// RecordFrom returns the record being handled: its stream, shard, sequence
// number, partition key, approximate arrival time, raw data and attempt
// number. ok is false outside a handler.
func RecordFrom(ctx context.Context) (r *Record, ok bool) { return typed.RecordFrom(ctx) }

// Handler handles one decoded record. nil acknowledges it; a plain error
// retries it in place per the subscription's RetryPolicy, then dead-letters
// it (with no dead-letter sink it holds its shard: nothing is silently lost);
// RetryAfter, Drop and DeadLetter return special outcomes. A panic is
// recovered and handled as an error, its stack logged. ctx is cancelled when
// the lease is lost and when the shutdown timeout expires.
type Handler[T any] func(ctx context.Context, v T) error

// SubscribeOption configures a subscription.
type SubscribeOption interface{ applySub(*subscription) }

type subOption func(*subscription)

func (f subOption) applySub(s *subscription) { f(s) }

// WithCodec sets how record data is decoded into T (default codec.JSON).
func WithCodec(c codec.Codec) SubscribeOption {
	return subOption(func(s *subscription) {
		if c == nil {
			s.errs = append(s.errs, fmt.Errorf("%w: WithCodec(nil)", ErrInvalidOption))
		}
		s.codec = c
	})
}

// StartPosition is where a shard without a checkpoint starts.
type StartPosition = shard.Position

// Start positions for WithStartPosition.
var (
	// Latest starts after the newest record: only records put from now on.
	Latest = StartPosition{Type: shard.Latest}
	// TrimHorizon starts at the oldest record the stream still keeps.
	TrimHorizon = StartPosition{Type: shard.TrimHorizon}
)

// AtTimestamp starts at the first record that arrived at or after t.
func AtTimestamp(t time.Time) StartPosition { return StartPosition{Type: shard.AtTimestamp, Time: t} }

// AtSequenceNumber starts at the record with sequence number seq.
func AtSequenceNumber(seq string) StartPosition {
	return StartPosition{Type: shard.AtSequence, Sequence: seq}
}

// AfterSequenceNumber starts right after the record with sequence number seq.
func AfterSequenceNumber(seq string) StartPosition {
	return StartPosition{Type: shard.AfterSequence, Sequence: seq}
}

// WithStartPosition sets where a shard without a checkpoint starts (default
// Latest). A shard with a checkpoint resumes after it; a child of a split or
// merge starts at its own beginning once its parents are done.
func WithStartPosition(p StartPosition) SubscribeOption {
	return subOption(func(s *subscription) {
		switch {
		case p.Type == shard.AtTimestamp && p.Time.IsZero():
			s.errs = append(s.errs, fmt.Errorf("%w: AtTimestamp with a zero time", ErrInvalidOption))
		case (p.Type == shard.AtSequence || p.Type == shard.AfterSequence) && p.Sequence == "":
			s.errs = append(s.errs, fmt.Errorf("%w: %v with an empty sequence number", ErrInvalidOption, p))
		case p.Type < shard.Latest || p.Type > shard.AfterSequence:
			s.errs = append(s.errs, fmt.Errorf("%w: unknown start position %v", ErrInvalidOption, p))
		}
		s.start = p
	})
}

// WithCheckpoint sets the checkpoint cadence: after every records
// acknowledged records or every interval, whichever comes first (defaults
// 1000 and 5s), and always when a lease is released. A restart redelivers
// at most the records acknowledged since the last checkpoint.
func WithCheckpoint(records int, interval time.Duration) SubscribeOption {
	return subOption(func(s *subscription) {
		if records <= 0 || interval <= 0 {
			s.errs = append(s.errs, fmt.Errorf("%w: WithCheckpoint(%d, %v): both must be positive", ErrInvalidOption, records, interval))
		}
		s.worker.CheckpointEvery, s.worker.CheckpointInterval = records, interval
	})
}

// WithPolling sets GetRecords' pacing: at least minInterval between calls on
// a shard (default 200ms, Kinesis' 5 calls per second), and idle between calls
// when the reader is caught up (default 1s). limit caps the records per
// call (0: Kinesis' default, 10,000).
func WithPolling(minInterval, idle time.Duration, limit int32) SubscribeOption {
	return subOption(func(s *subscription) {
		if minInterval <= 0 || idle < minInterval || limit < 0 || limit > 10000 {
			s.errs = append(s.errs, fmt.Errorf("%w: WithPolling(%v, %v, %d): want 0 < minInterval <= idle and 0 <= limit <= 10000", ErrInvalidOption, minInterval, idle, limit))
		}
		s.worker.MinInterval, s.worker.IdleInterval, s.worker.Limit = minInterval, idle, limit
	})
}

type subscription struct {
	stream           string
	deadLetterStream string
	codec            codec.Codec
	start            StartPosition
	worker           shard.WorkerConfig
	errs             []error
}

// Subscribe makes svc consume stream (a name or an ARN) with handler, each
// record's data decoded into a T by the subscription's codec. It must be
// called before Run. A second subscription to the same stream is refused
// with ErrDuplicateSubscription; invalid options with ErrInvalidOption.
func Subscribe[T any](svc *Service, stream string, handler Handler[T], opts ...SubscribeOption) error {
	if svc == nil {
		return fmt.Errorf("%w: Subscribe on a nil service", ErrInvalidOption)
	}
	if handler == nil {
		return fmt.Errorf("%w: Subscribe(%q) with a nil handler", ErrInvalidOption, stream)
	}
	if err := validStream(stream); err != nil {
		return err
	}
	sub := &subscription{stream: stream, codec: codec.JSON, start: Latest}
	for _, o := range opts {
		if o == nil {
			sub.errs = append(sub.errs, fmt.Errorf("%w: nil option", ErrInvalidOption))
			continue
		}
		o.applySub(sub)
	}
	if len(sub.errs) > 0 {
		return fmt.Errorf("subscribe %q: %w", stream, sub.errs[0])
	}
	sub.worker.Handler = typed.Handler(sub.codec, handler)

	svc.mu.Lock()
	defer svc.mu.Unlock()
	if svc.run {
		return ErrRunning
	}
	for _, s := range svc.subs {
		if s.stream == stream {
			return fmt.Errorf("%w: %q", ErrDuplicateSubscription, stream)
		}
	}
	svc.subs = append(svc.subs, sub)
	return nil
}
