// Package budget bounds what one instance holds fetched and not yet
// handled, across every shard it reads (Budget), each shard's reader
// holding a Share.
package budget

import (
	"context"
	"sync"

	"github.com/kinesislease/kinesislease/internal/read"
)

// Budget bounds what one instance holds fetched and not yet handled, in
// bytes and in records, across every shard it reads. Each reader holds a
// share, with a fair part of the budget (the budget divided by the
// readers) that is always its own: a reader may call GetRecords while its
// holdings plus what every other reader holds or is owed (the larger of
// its holdings and its fair part) stay below the budget, with GetRecords'
// Limit sized to that room. So a slow shard borrows only what idle or
// caught-up shards leave unused, and never starves a fast one below its
// fair part. Holdings are charged when a
// response arrives and returned when the worker has handled the batch, so a
// caught-up shard holds nothing. One response can carry more than the room
// it was sized for (Limit caps records, not bytes), so the bound is the
// budget plus at most one response per reader.
type Budget struct {
	maxBytes, maxRecords int64

	mu             sync.Mutex
	bytes, records int64
	shares         map[*Share]struct{}
	avg            float64       // bytes per record, over every response so far (0: none yet)
	largest        int64         // the largest response charged, in bytes
	changed        chan struct{} // closed and replaced whenever holdings drop or readers leave
}

// Budget defaults: see kinesislease.WithMemoryBudget.
const (
	DefaultBudgetBytes   = 32 << 20
	DefaultBudgetRecords = 100_000
	// recordOverhead is what a fetched record costs beside its data: the
	// SDK's Record struct, its sequence number and partition key strings.
	recordOverhead = 160
	// firstLimit is the Limit of calls made before any response told the
	// budget how large records are.
	firstLimit = 16
	maxLimit   = read.MaxLimit // GetRecords' own cap
)

// NewBudget returns a budget of maxBytes and maxRecords (each at least 1).
func NewBudget(maxBytes, maxRecords int64) *Budget {
	return &Budget{maxBytes: max(maxBytes, 1), maxRecords: max(maxRecords, 1), changed: make(chan struct{}), shares: map[*Share]struct{}{}}
}

// Held returns the bytes and records held now.
func (b *Budget) Held() (bytes, records int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes, b.records
}

// Largest returns the largest response charged so far, in bytes: the
// budget's bound is its bytes plus one such response per shard.
func (b *Budget) Largest() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.largest
}

// join registers a reader and returns its share.
func (b *Budget) Join() *Share {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &Share{b: b}
	b.shares[s] = struct{}{}
	return s
}

// share is one reader's part of a Budget. Its methods are called from the
// reader's goroutine (reserve, charge) and the worker's (release, leave).
type Share struct {
	b              *Budget
	bytes, records int64 // guarded by b.mu
}

func (b *Budget) wake() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// reserve waits until the share may fetch, and returns the Limit for the
// call: at most limit (GetRecords' configured Limit; 0 for its default of
// 10,000), at least 1.
func (s *Share) Reserve(ctx context.Context, limit int32) (int32, error) {
	b := s.b
	if limit <= 0 || limit > maxLimit {
		limit = maxLimit
	}
	for {
		b.mu.Lock()
		roomBytes, roomRecords := b.room(s)
		// A shard holding records waits until half its fair part is free,
		// so that its calls stay large (tiny refills would leave it without
		// work while its next call waits for the polling interval).
		n := int64(len(b.shares))
		enough := s.records == 0 || (roomBytes >= b.maxBytes/n/2 && roomRecords >= b.maxRecords/n/2)
		if roomBytes > 0 && roomRecords > 0 && enough {
			n := min(int64(limit), roomRecords)
			if b.avg == 0 {
				// No record seen yet: a few, to learn their size before
				// sizing a call to the room.
				n = min(n, firstLimit)
			} else {
				n = min(n, max(int64(float64(roomBytes)/b.avg), 1))
			}
			b.mu.Unlock()
			return int32(n), nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// room is what s may fetch now: the budget less s's holdings and, for
// every other share, the larger of its holdings and its fair part. The
// caller holds b.mu.
func (b *Budget) room(s *Share) (bytes, records int64) {
	n := int64(len(b.shares))
	fairBytes, fairRecords := b.maxBytes/n, b.maxRecords/n
	bytes, records = b.maxBytes-s.bytes, b.maxRecords-s.records
	for o := range b.shares {
		if o != s {
			bytes -= max(o.bytes, fairBytes)
			records -= max(o.records, fairRecords)
		}
	}
	return bytes, records
}

// locked runs fn on the share's budget under its lock, unless records is
// 0 (an empty response holds nothing).
func (s *Share) locked(records int64, fn func(b *Budget)) {
	if records == 0 {
		return
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	fn(s.b)
}

// charge adds a response of bytes and records to the share.
func (s *Share) Charge(bytes, records int64) {
	s.locked(records, func(b *Budget) {
		s.add(bytes, records)
		b.largest = max(b.largest, bytes)
		size := float64(bytes) / float64(records)
		if b.avg == 0 {
			b.avg = size
		} else {
			b.avg += (size - b.avg) / 8
		}
	})
}

// add changes the share's holdings, and the budget's, by bytes and
// records. The caller holds b.mu.
func (s *Share) add(bytes, records int64) {
	s.bytes += bytes
	s.records += records
	s.b.bytes += bytes
	s.b.records += records
}

// release returns a handled batch of bytes and records.
func (s *Share) Release(bytes, records int64) {
	s.locked(records, func(b *Budget) {
		s.add(-min(bytes, s.bytes), -min(records, s.records))
		b.wake()
	})
}

// leave returns everything the share holds and unregisters its reader.
func (s *Share) Leave() {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	s.add(-s.bytes, -s.records)
	delete(b.shares, s)
	b.wake()
}

// batchCost is what a batch costs the budget.
func BatchCost(b *read.Batch) (bytes, records int64) {
	for i := range b.Records {
		r := &b.Records[i]
		bytes += int64(len(r.Data)) + recordOverhead
		if r.PartitionKey != nil {
			bytes += int64(len(*r.PartitionKey))
		}
	}
	return bytes, int64(len(b.Records))
}
