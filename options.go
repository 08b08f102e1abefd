package kinesislease

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/kinesislease/kinesislease/internal/budget"
	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/plan"
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
	kinesisOpts     []func(*kinesis.Options) // WithKinesisOptions'
	encoding        GetRecordsEncoding       // WithGetRecordsEncoding
	heartbeat       time.Duration
	timeout         time.Duration
	maxLeases       int
	capacity        int64          // WithCapacity's, in thousandths (0: 1000)
	balance         plan.Balance   // WithBalance's (New sets the default)
	utilization     func() float64 // WithUtilization's (nil: none)
	shardSync       time.Duration
	shutdownTimeout time.Duration
	hooks           []kltype.Hook
	budgetBytes     int64
	budgetRecords   int64
	maxAge          time.Duration // WithMaxRecordAge's, the subscriptions' default
	errs            []error
}

// DefaultShutdownTimeout bounds the drain at shutdown (WithShutdownTimeout):
// 20s, so that the final checkpoints and releases land within the 30s
// Kubernetes and ECS give a container between SIGTERM and SIGKILL.
const DefaultShutdownTimeout = 20 * time.Second

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

// WithKinesisOptions adjusts the Kinesis client New builds from its
// aws.Config (an endpoint, a retryer, middleware, another region), as
// dynamo.WithDynamoDBOptions does for the lease store's. It has no effect
// with WithKinesisClient. A nil function is refused.
func WithKinesisOptions(fns ...func(*kinesis.Options)) Option {
	return serviceOption(func(c *config) {
		for _, fn := range fns {
			if fn == nil {
				c.errs = append(c.errs, fmt.Errorf("%w: WithKinesisOptions(nil)", ErrInvalidOption))
				return
			}
		}
		c.kinesisOpts = append(c.kinesisOpts, fns...)
	})
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

// WithMaxLeases caps the leases this instance holds (default no cap). The
// cap is published in the instance's membership entry and the plan
// honours each instance's own: instances may have different caps, or
// none, and the shards the capped ones cannot take are shared among the
// others. Shards beyond the fleet's caps stay unread until an instance
// joins: a cap is for keeping one instance's load bounded.
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
	DefaultMemoryBudgetBytes   = budget.DefaultBudgetBytes
	DefaultMemoryBudgetRecords = budget.DefaultBudgetRecords
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
// (default 20s): handlers still running then have their context cancelled,
// and the leases are released with the last acknowledged checkpoint. Keep
// it a few seconds below the time the platform allows between SIGTERM and
// SIGKILL (Kubernetes' terminationGracePeriodSeconds, ECS's stopTimeout:
// both 30s by default), or the final checkpoints may not land.
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
