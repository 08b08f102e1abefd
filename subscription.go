package kinesislease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/internal/subopts"
	"github.com/kinesislease/kinesislease/kltype"
)

// subscription is one stream's subscription as its SubscribeOptions and
// Subscribe leave it: the worker's configuration and what Run needs to
// check and register.
type subscription struct {
	stream           string
	deadLetterStream string
	deadLetterOption string         // the dead-letter option given, "both" once refused (deadLetterGiven)
	consumer         string         // WithEnhancedFanOut's consumer name, "" for polling
	client           Kinesis        // WithKinesisClient's, nil for the service's
	namespace        string         // WithLeaseNamespace's, "" for none
	fanOut           *read.Consumer // the registered consumer, set at Run
	codec            codec.Codec
	batch            *engine.BatchConfig // WithBatchSize's, for SubscribeBatch
	start            kltype.StartPosition
	at               time.Time       // when Subscribe was called: recorded in the stream's mark if this instance marks it first (streamConfig)
	ctx              context.Context // WithSubscribeContext's, nil if none
	worker           engine.WorkerConfig
	errs             []error
}

// SubscribeOption configures a subscription; pass options to Subscribe.
type SubscribeOption interface{ applySub(*subscription) }

// SharedOption is an option of both New, where it sets the default of
// every subscription of the service, and Subscribe, where it sets that
// subscription's own.
type SharedOption interface {
	Option
	SubscribeOption
}

// WithMaxRecordAge sends to the dead-letter sink, with reason
// kltype.ReasonExpired and a *kltype.ExpiredError, every record that
// arrived in the stream (its ApproximateArrivalTimestamp) more than d
// before it is delivered to the handler, at its first delivery or at a
// retry: data too old to act on is set aside instead of handled. The
// checkpoint passes it once the sink confirmed it, as for any dead letter;
// HookDeadLettered and HookRecordHandled report it (otelkl:
// kinesislease.dead_letters with reason expired). Given to New it applies
// to every subscription; given to Subscribe it applies to that one (0:
// none, whatever New says). A negative d is refused; so is a subscription
// with a maximum age and no dead-letter sink (WithDeadLetter,
// WithDeadLetterStream), where an expired record would hold its shard. The
// arrival time is Kinesis' clock, the age is measured on this instance's:
// keep d well above their skew.
func WithMaxRecordAge(d time.Duration) SharedOption { return maxAgeOption(d) }

type maxAgeOption time.Duration

func (o maxAgeOption) err() error {
	if o < 0 {
		return fmt.Errorf("%w: WithMaxRecordAge(%v): must not be negative (0 means no maximum age)", ErrInvalidOption, time.Duration(o))
	}
	return nil
}

func (o maxAgeOption) applyService(c *config) {
	if err := o.err(); err != nil {
		c.errs = append(c.errs, err)
	}
	c.maxAge = time.Duration(o)
}

func (o maxAgeOption) applySub(s *subscription) {
	if err := o.err(); err != nil {
		s.errs = append(s.errs, err)
	}
	s.worker.MaxAge = time.Duration(o)
}

type subOption func(*subscription)

func (f subOption) applySub(s *subscription) { f(s) }

// ResolveSubscribeOptions implements subopts.Resolver, the sealed way in
// for kinesisleasetest.
func (subOption) ResolveSubscribeOptions(opts []any, producer any) subopts.Settings {
	return resolveSubscribeOptions(opts, producer)
}

// Every SubscribeOption type is a way in for kinesisleasetest.
var (
	_ subopts.Resolver = subOption(nil)
	_ subopts.Resolver = maxAgeOption(0)
)

// ResolveSubscribeOptions implements subopts.Resolver (see subOption's).
func (maxAgeOption) ResolveSubscribeOptions(opts []any, producer any) subopts.Settings {
	return resolveSubscribeOptions(opts, producer)
}

// WithCodec sets how record data is decoded into T (default codec.JSON).
func WithCodec(c codec.Codec) SubscribeOption {
	return subOption(func(s *subscription) {
		if c == nil {
			s.errs = append(s.errs, fmt.Errorf("%w: WithCodec(nil)", ErrInvalidOption))
		}
		s.codec = c
	})
}

// WithStartPosition sets where a shard without a checkpoint starts (default
// kltype.Latest; also kltype.TrimHorizon, kltype.AtTimestamp,
// kltype.AtSequenceNumber, kltype.AfterSequenceNumber). A shard with a
// checkpoint resumes after it; a child of a split or merge starts at its own
// beginning once its parents are done.
//
// kltype.Latest means the records put after the subscription began: a
// shard with no checkpoint starts at the first record that arrived at or
// after that moment (an AT_TIMESTAMP of it), not at the newest record when
// its lease happens to be taken, which comes a few seconds later and would
// skip what was put meanwhile. KCL's LATEST is the latter. The moment is
// the Subscribe of the first instance to mark the stream in the lease
// table, recorded in the mark so that every instance resolves it alike
// (its own Subscribe if the mark, written by an older version, has none).
// It is read on that instance's clock, which Kinesis compares with the
// records' arrival times: keep instances' clocks synchronised (NTP), as
// AWS's are.
func WithStartPosition(p kltype.StartPosition) SubscribeOption {
	return subOption(func(s *subscription) {
		if err := p.Validate(); err != nil {
			s.errs = append(s.errs, fmt.Errorf("%w: %w", ErrInvalidOption, err))
		}
		s.start = p
	})
}

// WithCheckpoint sets the checkpoint cadence: after every records
// acknowledged records or every interval, whichever comes first (defaults
// 10,000 and 5s: at most one write per 5s per shard, since a shard takes
// at most 1,000 records a second), and always when a lease is released. A
// restart redelivers at most the records acknowledged since the last
// checkpoint.
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

// WithEnhancedFanOut reads the stream with enhanced fan-out: each shard's
// records are pushed over a SubscribeToShard subscription as they arrive
// (about 70ms after the put, against 200ms to 1s polled), with 2 MiB/s per
// shard for this consumer alone instead of a share of the 2 MiB/s and 5
// GetRecords calls a second every polling application of the stream
// divides. consumerName is the stream consumer: registered at Run if it
// does not exist (RegisterStreamConsumer, then DescribeStreamConsumer until
// ACTIVE), used as it is if it does. Every instance of an application uses
// the same name; another application reading the same stream uses its own.
//
// Leases, checkpoints, ordering, outcomes, dead letters, rewinds, KPL
// de-aggregation and the memory budget work as with polling. A shard is
// subscribed only while its lease is valid, and a lost or fenced lease
// closes its subscription at once. Kinesis refuses a new subscription to a
// shard within 5 seconds of the previous one (ResourceInUseException, retried
// every second), so a failover can take up to 5 seconds longer than with
// polling. Registered consumers cost money per consumer-shard hour and per
// GB read; they are not deregistered when the service stops (see
// docs/fanout.md). WithPolling does not apply. Subscribe fails with
// ErrInvalidOption if the Kinesis client (WithKinesisClient) has no
// SubscribeToShard; Run fails with kltype.ErrConsumerLimit when the stream has no
// room for another consumer.
func WithEnhancedFanOut(consumerName string) SubscribeOption {
	return subOption(func(s *subscription) {
		if !validConsumerName(consumerName) {
			s.errs = append(s.errs, fmt.Errorf("%w: WithEnhancedFanOut(%q): a consumer name has 1 to 128 letters, digits, '_', '.' and '-'", ErrInvalidOption, consumerName))
		}
		s.consumer = consumerName
	})
}

// validConsumerName reports whether name is a valid stream consumer name.
func validConsumerName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
		default:
			return false
		}
	}
	return true
}

// WithKeyConcurrency handles the records of a shard concurrently by
// partition key: records of one key in order, one at a time; records of
// different keys at most n at a time per shard (default 1: the whole shard
// in order). The checkpoint advances only over records that are, with
// every record before them, done, so a restart never skips one; a record
// retrying or waiting on RetryAfter holds only its key (and the
// checkpoint). On a planned handoff or shutdown, records in flight finish
// and their retries are cut short; a lost lease cancels them. For
// SubscribeBatch it is refused.
func WithKeyConcurrency(n int) SubscribeOption {
	return subOption(func(s *subscription) {
		if n < 1 {
			s.errs = append(s.errs, fmt.Errorf("%w: WithKeyConcurrency(%d): must be at least 1", ErrInvalidOption, n))
		}
		s.worker.KeyConcurrency = n
	})
}

// WithHandlerTimeout bounds each handler call: after d its context is
// cancelled, and the attempt counts as failed (a
// *kltype.HandlerTimeoutError, matching context.DeadlineExceeded), retried
// per the retry policy and then dead-lettered, whatever the handler
// returned once it did return. A handler must honour its context for the
// timeout to free its shard. Default: no timeout (and no cost per record).
func WithHandlerTimeout(d time.Duration) SubscribeOption {
	return subOption(func(s *subscription) {
		if d <= 0 {
			s.errs = append(s.errs, fmt.Errorf("%w: WithHandlerTimeout(%v): must be positive", ErrInvalidOption, d))
		}
		s.worker.HandlerTimeout = d
	})
}

// WithSubscribeContext bounds a Subscribe made while Run runs: its start-up
// checks (the stream listed, its enhanced fan-out consumer registered) and
// the wait until the stream is in the plan. Subscribe returns ctx's error
// if ctx ends first (the subscription is then not added). Without it, such
// a Subscribe is bounded by Run's context and a minute. Before Run it has
// no effect: Subscribe makes no call then.
func WithSubscribeContext(ctx context.Context) SubscribeOption {
	return subOption(func(s *subscription) {
		if ctx == nil {
			s.errs = append(s.errs, fmt.Errorf("%w: WithSubscribeContext(nil)", ErrInvalidOption))
			return
		}
		s.ctx = ctx
	})
}

// WithRetention gives the stream's retention period instead of reading it
// at Run (DescribeStreamSummary's RetentionPeriodHours, which needs
// kinesis:DescribeStreamSummary; without it, 24 hours, Kinesis' default, is
// assumed and said once at INFO). A shard whose oldest unresolved record is
// older than half of d logs a WARN once (see kltype.ShardHealth's
// OldestUnresolvedAge): past d, the records behind it expire unread. d
// must be positive; it is not checked against the stream's.
func WithRetention(d time.Duration) SubscribeOption {
	return subOption(func(s *subscription) {
		if d <= 0 {
			s.errs = append(s.errs, fmt.Errorf("%w: WithRetention(%v): must be positive", ErrInvalidOption, d))
		}
		s.worker.Retention = d
	})
}

// WithRetryPolicy sets how failing records are retried (default
// kltype.DefaultRetryPolicy).
func WithRetryPolicy(p kltype.RetryPolicy) SubscribeOption {
	return subOption(func(s *subscription) {
		if err := p.Validate(); err != nil {
			s.errs = append(s.errs, fmt.Errorf("%w: WithRetryPolicy: %w", ErrInvalidOption, err))
		}
		s.worker.Policy = p
	})
}

// WithDeadLetter sends records that cannot be processed to sink. A nil
// return confirms the record is kept; the checkpoint passes the record only
// then. An error is retried with backoff, holding the shard meanwhile. A
// subscription has one dead-letter sink: given with WithDeadLetterStream,
// it is refused (ErrInvalidOption).
func WithDeadLetter(sink func(ctx context.Context, dl *kltype.DeadLetterRecord) error) SubscribeOption {
	return subOption(func(s *subscription) {
		if sink == nil {
			s.errs = append(s.errs, fmt.Errorf("%w: WithDeadLetter(nil)", ErrInvalidOption))
		}
		s.deadLetterGiven("WithDeadLetter")
		s.worker.Sink = sink
	})
}

// WithDeadLetterStream writes records that cannot be processed to another
// Kinesis stream (name or ARN), as a JSON DeadLetterEnvelope under the
// record's own partition key. The checkpoint passes the record only once
// Kinesis accepted the envelope. The credentials need kinesis:PutRecords on
// that stream. A subscription has one dead-letter sink: given with
// WithDeadLetter, it is refused (ErrInvalidOption).
func WithDeadLetterStream(stream string) SubscribeOption {
	return subOption(func(s *subscription) {
		if err := validStream(stream); err != nil {
			s.errs = append(s.errs, fmt.Errorf("WithDeadLetterStream: %w", err))
		}
		s.deadLetterGiven("WithDeadLetterStream")
		s.deadLetterStream = stream
	})
}

// deadLetterGiven records that option, one of the two dead-letter options,
// was given, and refuses a subscription given both (once, however often
// they alternate): each fills the one sink, and the last would silently
// win.
func (s *subscription) deadLetterGiven(option string) {
	switch s.deadLetterOption {
	case "", option:
		s.deadLetterOption = option
	case "both": // refused already
	default:
		s.errs = append(s.errs, fmt.Errorf("%w: WithDeadLetter and WithDeadLetterStream both given: a subscription has one dead-letter sink, give one of them", ErrInvalidOption))
		s.deadLetterOption = "both"
	}
}

// resolveSubscribeOptions applies opts to a subscription with the defaults
// and returns what a handler's pipeline uses, for kinesisleasetest.
func resolveSubscribeOptions(opts []any, producer any) subopts.Settings {
	sub := &subscription{codec: codec.JSON, start: kltype.Latest}
	for _, o := range opts {
		so, ok := o.(SubscribeOption)
		if !ok || so == nil {
			sub.errs = append(sub.errs, fmt.Errorf("%w: nil option", ErrInvalidOption))
			continue
		}
		so.applySub(sub)
	}
	if sub.worker.Policy == (kltype.RetryPolicy{}) {
		sub.worker.Policy = kltype.DefaultRetryPolicy
	}
	s := subopts.Settings{Codec: sub.codec, Policy: sub.worker.Policy, Sink: sub.worker.Sink, HandlerTimeout: sub.worker.HandlerTimeout, MaxAge: sub.worker.MaxAge,
		DeadLetterStream: sub.deadLetterStream, Err: errors.Join(sub.errs...)}
	if p, ok := producer.(Producer); ok && p != nil && sub.deadLetterStream != "" {
		s.Sink = streamSink(p, sub.deadLetterStream)
	}
	return s
}
