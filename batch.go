package kinesislease

import (
	"context"
	"fmt"
	"time"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/kltype"
)

// BatchItem is one record of a batch: its decoded value and the record
// (stream, shard, sequence number, partition key, data, attempt).
type BatchItem[T any] struct {
	Value  T
	Record *kltype.Record
}

// BatchHandlerFunc handles a batch of one shard's records, in order (KPL
// user records flattened). nil acknowledges every item; FailItems names
// the items that failed (the others are acknowledged), each with an error
// read as a single record's (Drop, DeadLetter, RetryAfter, or a plain
// error: a failed attempt); any other error fails every item. Failed items
// are retried as a batch of their own per the retry policy, then
// dead-lettered; a record that cannot be decoded is dead-lettered without
// reaching the handler. ctx is cancelled when the lease is lost (and when
// a handler timeout passes).
type BatchHandlerFunc[T any] func(ctx context.Context, items []BatchItem[T]) error

// FailItems returns the error a batch handler returns to acknowledge every
// item but these: each failure names an item by its index in the batch
// the handler was given.
func FailItems(failures ...kltype.ItemFailure) error {
	return &kltype.BatchError{Failures: failures}
}

// Default batch limits (WithBatchSize).
const (
	DefaultBatchRecords = 100
	DefaultBatchBytes   = 1 << 20
)

// WithBatchSize sets the batches of SubscribeBatch: at most records
// records and bytes bytes of record data, and how long to wait after a
// GetRecords answer for more before handing over a batch that is not full
// (linger; 0 hands each answer's records over at once). Defaults 100
// records, 1 MiB, no linger. A batch never spans shards or a lease.
func WithBatchSize(records, bytes int, linger time.Duration) SubscribeOption {
	return subOption(func(s *subscription) {
		if records <= 0 || bytes <= 0 || linger < 0 {
			s.errs = append(s.errs, fmt.Errorf("%w: WithBatchSize(%d, %d, %v): want records and bytes positive, linger not negative",
				ErrInvalidOption, records, bytes, linger))
		}
		s.batch = &engine.BatchConfig{MaxRecords: records, MaxBytes: bytes, Linger: linger}
	})
}
