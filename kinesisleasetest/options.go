package kinesisleasetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/internal/subopts"
	"github.com/kinesislease/kinesislease/kltype"
)

// Defaults of a Harness.
const (
	// DefaultStream is the stream name records carry (WithStream).
	DefaultStream = "test-stream"
	// DefaultShard is the shard ID records carry (WithShard).
	DefaultShard = "shardId-000000000000"
	// DefaultPartitionKey is the partition key records carry
	// (WithPartitionKey).
	DefaultPartitionKey = "test-partition-key"
	// DefaultHoldAttempts is how many extra rounds a record that holds its
	// shard is given before the harness reports it held (Result.Held) (WithHoldAttempts).
	DefaultHoldAttempts = 2
	// MaxWaits bounds the waits of one record: a record still unresolved
	// after that many (a handler returning RetryAfter forever, say) is
	// reported held, as it would hold its shard in production.
	MaxWaits = 1000
)

// Option configures a Harness; pass options to New, which checks them.
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

type config struct {
	codec        codec.Codec
	policy       kltype.RetryPolicy
	sink         func(context.Context, *kltype.DeadLetterRecord) error
	noSink       bool
	stream       string
	shard        string
	holdAttempts int
	log          *slog.Logger
	timeout      time.Duration // WithHandlerTimeout's
	maxAge       time.Duration // WithMaxRecordAge's
	subOpts      []kinesislease.SubscribeOption
	producer     kinesislease.Producer
	errs         []error
}

func defaultConfig() config {
	return config{
		codec:        codec.JSON,
		policy:       kltype.DefaultRetryPolicy,
		stream:       DefaultStream,
		shard:        DefaultShard,
		holdAttempts: DefaultHoldAttempts,
		log:          slog.New(slog.DiscardHandler),
	}
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// WithSubscribeOptions applies the options of the subscription the
// handler runs under, the very values given to kinesislease.Subscribe:
// WithCodec (how Handle encodes records and the pipeline decodes them;
// default codec.JSON), WithRetryPolicy (its waits cost no time here),
// WithDeadLetter, WithDeadLetterStream and WithMaxRecordAge (against the
// record's arrival time: see WithArrivalTime). Options about reading a stream
// (WithStartPosition, WithCheckpoint, WithPolling) are checked and
// otherwise ignored. A dead letter a sink confirmed is recorded in
// Result.DeadLetter and Harness.DeadLetters; a sink error is retried, the
// record holding its shard meanwhile, and a sink that keeps failing makes
// the record held. A dead-letter stream is written with WithKinesisClient's
// client; without one, its dead letters are only recorded. With no
// dead-letter option, every dead letter is recorded and confirmed (see
// WithoutDeadLetter for a subscription without any).
func WithSubscribeOptions(opts ...kinesislease.SubscribeOption) Option {
	return option(func(cfg *config) {
		cfg.subOpts = append(cfg.subOpts, opts...)
		// The last of this and WithoutDeadLetter wins.
		if st := resolveOptions(opts, nil); st.Sink != nil || st.DeadLetterStream != "" {
			cfg.noSink = false
		}
	})
}

// WithKinesisClient is the client a dead-letter stream of WithSubscribeOptions
// is written with (a *kinesis.Client on an emulator, or an in-memory
// Kinesis), so that a test can read the envelopes back.
func WithKinesisClient(p kinesislease.Producer) Option {
	return option(func(cfg *config) {
		if p == nil {
			cfg.fail("WithKinesisClient(nil)")
		}
		cfg.producer = p
	})
}

// resolve applies the subscription's options (WithSubscribeOptions) once
// every harness option is known.
func (c *config) resolve() {
	st := resolveOptions(c.subOpts, c.producer)
	if st.Err != nil {
		c.errs = append(c.errs, st.Err)
	}
	c.codec, c.policy, c.timeout, c.maxAge = st.Codec, st.Policy, st.HandlerTimeout, st.MaxAge
	if !c.noSink {
		c.sink = st.Sink
	}
}

// WithoutDeadLetter simulates a subscription with no dead-letter sink (no
// WithDeadLetter nor WithDeadLetterStream). There a record that would be
// dead-lettered is never dropped: it holds its shard, redelivered every
// RetryPolicy.MaxDelay (or, for a decode failure or a DeadLetter outcome,
// waiting for a sink that never comes). The harness lets such a record go
// WithHoldAttempts more rounds, then stops it and reports it held (Result.Held).
func WithoutDeadLetter() Option {
	return option(func(cfg *config) { cfg.noSink = true })
}

// WithHoldAttempts sets how many extra rounds a record holding its shard is
// given before the harness reports it held (Result.Held) (default DefaultHoldAttempts). A
// round is a redelivery to the handler (a record that failed every attempt
// of the retry policy with no sink: the handler sees policy Attempts + n
// deliveries in all) or a retry of the dead-letter hand-off (no sink, or a
// sink returning errors). With 0 the record is reported held as soon as it
// starts holding.
func WithHoldAttempts(n int) Option {
	return option(func(cfg *config) {
		if n < 0 {
			cfg.fail("WithHoldAttempts(%d): want n >= 0", n)
		}
		cfg.holdAttempts = n
	})
}

// WithStream sets the stream name records carry (default DefaultStream).
func WithStream(name string) Option {
	return option(func(cfg *config) {
		if name == "" {
			cfg.fail("WithStream(\"\")")
		}
		cfg.stream = name
	})
}

// WithShard sets the shard ID records carry (default DefaultShard).
func WithShard(id string) Option {
	return option(func(cfg *config) {
		if id == "" {
			cfg.fail("WithShard(\"\")")
		}
		cfg.shard = id
	})
}

// WithLogger makes the pipeline log to l, as a subscription's shard workers
// do (retries at WARN, records holding their shard at ERROR, panics with
// their stack). The default discards the log.
func WithLogger(l *slog.Logger) Option {
	return option(func(cfg *config) {
		if l == nil {
			cfg.fail("WithLogger(nil)")
		}
		cfg.log = l
	})
}

// RecordOption sets the metadata of one record handled by Handle or
// HandleRaw.
type RecordOption interface{ applyRecord(*kltype.Record) }

type recordOption func(*kltype.Record)

func (f recordOption) applyRecord(r *kltype.Record) { f(r) }

// WithPartitionKey sets the record's partition key (default
// DefaultPartitionKey).
func WithPartitionKey(key string) RecordOption {
	return recordOption(func(r *kltype.Record) { r.PartitionKey = key })
}

// WithSequenceNumber sets the record's sequence number. By default each
// record of a Harness gets the next of an increasing series of 56-digit
// sequence numbers, as Kinesis assigns them.
func WithSequenceNumber(seq string) RecordOption {
	return recordOption(func(r *kltype.Record) { r.SequenceNumber = seq })
}

// WithArrivalTime sets the record's approximate arrival time (default: the
// time Handle is called, in UTC, to the millisecond as Kinesis has it).
func WithArrivalTime(t time.Time) RecordOption {
	return recordOption(func(r *kltype.Record) { r.ArrivalTime = t })
}

var errNilOption = errors.New("nil option")

// resolveOptions applies subscription options as kinesislease.Subscribe
// does, through the sealed method every SubscribeOption value has (any
// option is the way in).
func resolveOptions(opts []kinesislease.SubscribeOption, p kinesislease.Producer) subopts.Settings {
	all := make([]any, len(opts))
	for i, o := range opts {
		all[i] = o
	}
	var producer any
	if p != nil {
		producer = p
	}
	return kinesislease.WithCodec(codec.JSON).(subopts.Resolver).ResolveSubscribeOptions(all, producer)
}
