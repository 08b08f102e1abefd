package shard

import (
	"context"
	"log/slog"
	"time"

	"github.com/kinesislease/kinesislease/internal/budget"
	"github.com/kinesislease/kinesislease/internal/kinesiswire"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/lease"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/kpl"
)

// DefaultMaxDeferred bounds a shard's deferred acknowledgements not yet
// resolved (WorkerConfig.MaxDeferred): about ten seconds of a shard written
// at its limit of 1,000 records a second.
const DefaultMaxDeferred = 10_000

// WorkerConfig is a subscription's settings for the workers of its
// shards, shared by them all (Defaults applied before the first New).
type WorkerConfig struct {
	// Handler handles the records one at a time (unless Batch is set).
	Handler pipeline.Handler
	// Policy retries failing records (default DefaultRetryPolicy).
	Policy kltype.RetryPolicy
	// Sink receives dead letters; with none a failing record holds its shard.
	Sink pipeline.Sink
	// CheckpointEvery and CheckpointInterval: a checkpoint is written after
	// every CheckpointEvery acknowledged records or CheckpointInterval,
	// whichever comes first, and always on release. Defaults 10,000 and 5s.
	CheckpointEvery    int
	CheckpointInterval time.Duration
	// Reader settings (see read.ReaderConfig).
	Encoding     kinesiswire.Encoding // how GetRecords travels (see read.ReaderConfig)
	Limit        int32
	MinInterval  time.Duration
	IdleInterval time.Duration
	// HandlerTimeout, if positive, bounds each handler call (see
	// pipeline.Processor.Timeout).
	HandlerTimeout time.Duration
	// MaxAge, if positive, dead-letters records older than it at a
	// delivery (see pipeline.Processor.MaxAge).
	MaxAge time.Duration
	// Batch, if set, hands the records to a batch handler instead of
	// Handler (see BatchConfig).
	Batch *BatchConfig
	// KeyConcurrency, if above 1, handles records of different partition
	// keys concurrently, at most that many at a time per shard; records of
	// one key stay in order, one at a time (see byKey).
	KeyConcurrency int
	// Budget, if set, bounds what the instance holds fetched and not yet
	// handled; every worker of the instance shares it.
	Budget *budget.Budget
	// FanOut, if set, reads with enhanced fan-out (SubscribeToShard)
	// instead of GetRecords; Limit, MinInterval and IdleInterval then do
	// not apply.
	FanOut *read.FanOutConfig
	// MaxDeferred bounds the shard's deferred acknowledgements not yet
	// resolved (Defer), in records: delivery waits at the bound (default
	// DefaultMaxDeferred).
	MaxDeferred int
	// DrainTimeout bounds how long a release waits for deferred
	// acknowledgements (the service's shutdown timeout; default 20s).
	DrainTimeout time.Duration
	// Retention is the stream's retention period: a WARN is logged once a
	// shard's oldest unresolved record is older than half of it (default
	// DefaultRetention).
	Retention time.Duration
	// OnRelease, if set, is called on the worker's goroutine before the
	// shard is let go (see kltype.ReleaseInfo); ctx is cancelled when the
	// release stops waiting.
	OnRelease func(ctx context.Context, info kltype.ReleaseInfo)
}

// Defaults sets the settings left zero to their defaults.
func (c *WorkerConfig) Defaults() {
	if c.CheckpointEvery <= 0 {
		c.CheckpointEvery = 10000
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = 5 * time.Second
	}
	if c.Policy == (kltype.RetryPolicy{}) {
		c.Policy = kltype.DefaultRetryPolicy
	}
	if c.MaxDeferred <= 0 {
		c.MaxDeferred = DefaultMaxDeferred
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
}

// BatchConfig makes a worker hand its records to Handler in batches of at
// most MaxRecords records and MaxBytes bytes of data, waiting up to Linger
// after a GetRecords answer for more before handing over a batch that is
// not full (0: each answer's records go at once).
type BatchConfig struct {
	Handler    pipeline.BatchHandler
	MaxRecords int
	MaxBytes   int
	Linger     time.Duration
}

// Config is everything a Worker is built from: New sets every part of the
// worker, and nothing is set on it afterwards.
type Config struct {
	// Settings are the subscription's (see WorkerConfig), Defaults applied.
	Settings *WorkerConfig
	// Log is the stream's logger; the worker adds its shard.
	Log *slog.Logger
	// Client reads the shard (unless Settings.FanOut is set).
	Client kinesisx.Reader
	// Stream and Shard name the shard; Start is where reading starts.
	Stream, Shard string
	Start         kltype.StartPosition
	// Lease is the shard's lease, held: the worker delivers while it is
	// valid, checkpoints and releases through it.
	Lease *lease.Held
	// HashRange is the shard's hash key range (HashRangeOf), against which
	// the user records of KPL aggregates are filtered (see outOfRange); nil
	// when unknown or the whole key space: nothing is filtered.
	HashRange *kpl.HashRange
	// Hooks are the instance's hooks the worker calls; nil: none.
	Hooks *Hooks
}
