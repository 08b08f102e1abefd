package kinesisfake

import (
	"fmt"
	"time"
)

// GetRecordsPerSecond is Kinesis' limit of GetRecords calls per shard and
// second, shared by every reader of the shard, which WithGetRecordsRateLimit
// enforces.
const GetRecordsPerSecond = 5

// WithListShardsPage makes ListShards list at most n shards per answer
// (MaxResults may ask for fewer), instead of Kinesis' 1,000, so that a
// caller on a stream of a few shards must follow NextToken. It panics
// unless n is between 1 and 1,000.
func WithListShardsPage(n int) Option {
	if n < 1 || n > listPageMax {
		panic(fmt.Sprintf("kinesisfake: WithListShardsPage(%d): want 1 to %d", n, listPageMax))
	}
	return option(func(k *Kinesis) { k.listPage = n })
}

// WithGetRecordsRateLimit enforces Kinesis' limit of GetRecordsPerSecond
// GetRecords calls per shard within any second, counted over every reader
// of the shard: a call over the limit fails with
// ProvisionedThroughputExceededException and does not count. Calls with a
// bad or expired iterator fail as they would without the limit. Time is
// read with time.Now, so under testing/synctest the bubble's clock counts.
func WithGetRecordsRateLimit() Option {
	return option(func(k *Kinesis) { k.readLimit = true })
}

// read counts a GetRecords call on sh at now, unless GetRecordsPerSecond
// calls were counted within the second before: then it reports false. k.mu
// is held.
func (sh *shard) read(now time.Time) bool {
	recent := sh.reads[:0]
	for _, t := range sh.reads {
		if now.Sub(t) < time.Second {
			recent = append(recent, t)
		}
	}
	sh.reads = recent
	if len(sh.reads) >= GetRecordsPerSecond {
		return false
	}
	sh.reads = append(sh.reads, now)
	return true
}
