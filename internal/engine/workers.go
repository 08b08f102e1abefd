package engine

import "github.com/kinesislease/kinesislease/internal/shard"

// The Group runs one shard.Worker per held shard (startWorker); a
// subscription's worker settings are internal/shard's (the instance's
// memory budget internal/budget's), named here as the Group's configuration names them.

// worker is one held shard's reader and deliverer.
type worker = shard.Worker

// WorkerConfig configures the per-shard workers of a subscription (see
// shard.WorkerConfig).
type WorkerConfig = shard.WorkerConfig

// BatchConfig hands a subscription's records to a batch handler (see
// shard.BatchConfig).
type BatchConfig = shard.BatchConfig

// DefaultMaxDeferred is the worker settings' default (see internal/shard).
const DefaultMaxDeferred = shard.DefaultMaxDeferred
