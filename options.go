package kinesislease

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/subopts"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// Option configures a Service; pass options to New, which checks them all
// and reports every invalid one.
type Option interface{ applyService(*config) }

type serviceOption func(*config)

func (f serviceOption) applyService(c *config) { f(c) }

type config struct {
	app, version    string
	owner           string
	store           leases.MembershipStore
	storeDefaulted  bool // no WithLeaseStore: the memory store
	logger          *slog.Logger
	client          Kinesis
	encoding        GetRecordsEncoding // WithGetRecordsEncoding
	heartbeat       time.Duration
	timeout         time.Duration
	maxLeases       int
	shardSync       time.Duration
	shutdownTimeout time.Duration
	hooks           []kltype.Hook
	budgetBytes     int64
	budgetRecords   int64
	maxAge          time.Duration // WithMaxRecordAge's, the subscriptions' default
	errs            []error
}

// DefaultShutdownTimeout bounds the drain at shutdown (WithShutdownTimeout).
const DefaultShutdownTimeout = 30 * time.Second

// Default lease settings (WithHeartbeat): a heartbeat every 1.25s is one
// write per instance, 2,880 an hour, whatever the number of shards; a dead
// instance's shards move after about DefaultTimeout plus a heartbeat, and
// an instance stops delivering once its last successful heartbeat was sent
// 5/6 of DefaultTimeout ago (its fence: about 4.17s).
const (
	DefaultHeartbeat = engine.DefaultHeartbeat
	DefaultTimeout   = engine.DefaultTimeout
)

// WithApp names the application and its version: they prefix the default
// owner id and appear in logs.
func WithApp(name, version string) Option {
	return serviceOption(func(c *config) { c.app, c.version = name, version })
}

// WithOwner sets this instance's owner id, written in the lease rows it
// holds. It must be unique among the instances sharing a lease table. The
// default is app-hostname-pid-random, unique per process.
func WithOwner(id string) Option {
	return serviceOption(func(c *config) {
		if err := leases.ValidateOwner(id); err != nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithOwner(%q): %w", ErrInvalidOption, id, err))
		}
		c.owner = id
	})
}

// WithLeaseStore sets where leases and checkpoints live. The default is an
// in-memory store: one instance only, and checkpoints die with the process.
// Use leases/dynamo for a service of several instances. The store is a
// leases.MembershipStore: the lease protocol takes leases and heartbeats
// through leases.Membership as well as leases.Store (both stores of this
// module are one; a wrapper around one embeds a leases.MembershipStore).
func WithLeaseStore(s leases.MembershipStore) Option {
	return serviceOption(func(c *config) {
		if s == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithLeaseStore(nil)", ErrInvalidOption))
		}
		c.store = s
	})
}

// WithLogger sets the logger; the default is slog.Default(). At INFO an
// operator sees starts, lease moves and shutdown, never a line per record.
func WithLogger(l *slog.Logger) Option {
	return serviceOption(func(c *config) { c.logger = l })
}

// WithKinesisClient makes the service call client instead of a Kinesis
// client built from the aws.Config given to New.
func WithKinesisClient(client Kinesis) Option {
	return serviceOption(func(c *config) { c.client = client })
}

// GetRecordsEncoding is how GetRecords travels and is decoded (see
// WithGetRecordsEncoding).
type GetRecordsEncoding int

const (
	// EncodingCBOR (the default) sends GetRecords in CBOR
	// (application/x-amz-cbor-1.1), as AWS's Java SDK and the KCL do, and
	// decodes the answer itself: record data are slices of the answer (no
	// base64, no copy), keys and sequence numbers slices of one string.
	EncodingCBOR GetRecordsEncoding = iota
	// EncodingJSON sends GetRecords in AWS JSON 1.1, as the Go SDK does,
	// and decodes the answer itself (one buffer for a batch's data, one
	// string for its keys and sequence numbers).
	EncodingJSON
	// EncodingSDK leaves GetRecords to the Go SDK: AWS JSON 1.1, its own
	// decoder. With enhanced fan-out, SubscribeToShard's events are
	// decoded by the SDK's event decoder too.
	EncodingSDK
)

// WithGetRecordsEncoding sets how GetRecords travels and is decoded
// (default EncodingCBOR). Whatever the encoding, the SDK still resolves
// the endpoint, signs, retries and times out every call, and errors are
// the SDK's types (errors.As works as with the SDK alone). An answer the
// library's decoder does not take (child shards at a shard's end, members
// it does not know) is decoded by the SDK's decoder, and the decoders give
// the same records (differential tests and fuzzing check it). An endpoint
// that does not speak CBOR (some proxies and emulators: it answers in JSON
// or refuses the request) is read in JSON from its first answer on, with
// one INFO line; a refused call is made again, and loses nothing.
// EncodingSDK is for an endpoint or proxy that only the SDK's own path
// reads.
func WithGetRecordsEncoding(e GetRecordsEncoding) Option {
	return serviceOption(func(c *config) {
		if e < EncodingCBOR || e > EncodingSDK {
			c.errs = append(c.errs, fmt.Errorf("%w: WithGetRecordsEncoding(%d): want EncodingCBOR, EncodingJSON or EncodingSDK", ErrInvalidOption, e))
		}
		c.encoding = e
	})
}

// WithHeartbeat sets the lease protocol's heartbeat interval and timeout
// (defaults DefaultHeartbeat and DefaultTimeout, 1.25s and 5s). Every
// instance heartbeats in a membership row of the lease table, and its leases
// stay held while its heartbeat advances: a member whose heartbeat another
// instance sees unchanged for timeout is dead and its shards are taken; an
// instance delivers only while its last successful heartbeat was sent less
// than 5/6 of timeout ago (its fence; after a failed heartbeat the next
// comes half an interval later). interval must leave room for two failed
// heartbeats: at most a quarter of timeout. Each heartbeat is one DynamoDB
// write (one WCU while the membership row stays under 1 KB), whatever the
// number of shards. Give every instance sharing a lease table the same
// settings.
func WithHeartbeat(interval, timeout time.Duration) Option {
	return serviceOption(func(c *config) {
		if interval <= 0 || timeout <= 0 || interval > timeout/4 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithHeartbeat(%v, %v): want 0 < interval <= timeout/4", ErrInvalidOption, interval, timeout))
		}
		c.heartbeat, c.timeout = interval, timeout
	})
}

// WithMaxLeases caps the leases this instance holds (default no cap). Shards beyond the fleet's capacity stay unread until an
// instance joins: a cap is for keeping one instance's load bounded. Give
// every instance the same cap: each computes the plan with its own, and
// plans that differ move leases back and forth.
func WithMaxLeases(n int) Option {
	return serviceOption(func(c *config) {
		if n <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithMaxLeases(%d): must be positive", ErrInvalidOption, n))
		}
		c.maxLeases = n
	})
}

// Default memory budget (WithMemoryBudget).
const (
	DefaultMemoryBudgetBytes   = engine.DefaultBudgetBytes
	DefaultMemoryBudgetRecords = engine.DefaultBudgetRecords
)

// WithMemoryBudget bounds what this instance holds fetched from Kinesis and
// not yet handled, over every shard of every subscription: bytes (record
// data, partition keys and about 160 bytes of bookkeeping per record) and
// records. Default 32 MiB and 100,000 records.
//
// Each held shard has a fair part (the budget divided by the held shards)
// that is always its own, and may borrow what other shards leave unused:
// a shard that keeps up (its handler is fast, or it is caught up with the
// stream) holds little or nothing, so a fast shard beside slow ones reads
// at full speed, and a slow shard holds its fair part plus what is free.
// GetRecords' Limit is sized to the room left (never above WithPolling's
// limit). One GetRecords response can carry up to 10 MiB whatever its
// Limit, so the bound is the budget plus at most one response per shard.
//
// Why 32 MiB: Go's collector lets the heap grow to about twice what is
// live (GOGC=100) and the SDK decodes each response from a buffer of about
// twice its size, so 32 MiB held keeps an instance with 64 slow shards
// near 100 MB of heap; one fast shard needs two responses of 10,000
// records in flight (one handled, one prefetched), 2 MiB with 100-byte
// records, so the default never limits one shard's throughput.
func WithMemoryBudget(bytes int64, records int64) Option {
	return serviceOption(func(c *config) {
		if bytes < 1<<20 || records < 100 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithMemoryBudget(%d, %d): want at least 1 MiB and 100 records", ErrInvalidOption, bytes, records))
		}
		c.budgetBytes, c.budgetRecords = bytes, records
	})
}

// WithShardSyncInterval sets how often ListShards runs to see splits and
// merges (default 60s; it also runs whenever a held shard ends). Each
// stream's lister, one instance of the fleet, lists it that often; the
// other instances list it when the lister's digest of its shards changes
// (docs/lease-protocol.md, "Shard lists and open parents").
func WithShardSyncInterval(d time.Duration) Option {
	return serviceOption(func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithShardSyncInterval(%v): must be positive", ErrInvalidOption, d))
		}
		c.shardSync = d
	})
}

// WithShutdownTimeout bounds the drain when Run's context is cancelled
// (default 30s): handlers still running then have their context cancelled,
// and the leases are released with the last acknowledged checkpoint.
func WithShutdownTimeout(d time.Duration) Option {
	return serviceOption(func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithShutdownTimeout(%v): must be positive", ErrInvalidOption, d))
		}
		c.shutdownTimeout = d
	})
}

// WithHooks registers hooks: values implementing one or more of the
// kltype.Hook* interfaces (see kltype.Hook; otelkl is one). A value
// implementing none of them is refused.
func WithHooks(hooks ...kltype.Hook) Option {
	return serviceOption(func(c *config) {
		for i, h := range hooks {
			if !kltype.IsHook(h) {
				c.errs = append(c.errs, fmt.Errorf("%w: WithHooks: hook %d (%T) implements no Hook interface", ErrInvalidOption, i, h))
			}
		}
		c.hooks = append(c.hooks, hooks...)
	})
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
