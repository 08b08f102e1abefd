package engine

import "github.com/kinesislease/kinesislease/internal/shard"

// The Group runs one shard.Worker per held shard (startWorker); a
// subscription's worker settings and the instance's memory budget are
// internal/shard's, named here as the Group's configuration names them.

// worker is one held shard's reader and deliverer.
type worker = shard.Worker

// WorkerConfig configures the per-shard workers of a subscription (see
// shard.WorkerConfig).
type WorkerConfig = shard.WorkerConfig

// BatchConfig hands a subscription's records to a batch handler (see
// shard.BatchConfig).
type BatchConfig = shard.BatchConfig

// Budget bounds what one instance holds fetched and not yet handled,
// across every shard it reads (see shard.Budget).
type Budget = shard.Budget

// NewBudget returns a budget of maxBytes and maxRecords (each at least 1).
func NewBudget(maxBytes, maxRecords int64) *Budget { return shard.NewBudget(maxBytes, maxRecords) }

// Defaults of the worker settings and the budget (see internal/shard).
const (
	DefaultMaxDeferred   = shard.DefaultMaxDeferred
	DefaultBudgetBytes   = shard.DefaultBudgetBytes
	DefaultBudgetRecords = shard.DefaultBudgetRecords
)
