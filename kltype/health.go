package kltype

import "time"

// Health is a snapshot of a service's state, for readiness and liveness
// probes (kinesislease.Service.Health).
type Health struct {
	// Ready: Run passed its start-up checks (store, streams, dead-letter
	// streams), joined the fleet (its first heartbeat landed) and has seen
	// every membership row, so it holds or watches its leases. A probe of
	// readiness should wait for it.
	Ready bool
	// Live: the instance may deliver records: its last successful heartbeat
	// is within the fence. It turns false the moment the fence passes (the
	// store unreachable for longer than the timeout less the margin) and
	// true again once a heartbeat lands and leases are taken afresh. A
	// liveness probe that restarts the process on false trades a wait for a
	// restart: both take the leases afresh.
	Live bool
	// Err, while Live is false, is why: the last error of the lease store
	// (a table missing or unreachable, access denied); nil otherwise. The
	// instance keeps trying and resumes on its own once the store works.
	Err error
	// Owner is the instance's owner id.
	Owner string
	// Streams is one entry per subscription, in subscription order.
	Streams []StreamHealth
	// Balance is this instance's part of the fleet's load: its load and
	// capacity, its fair share and its actual share. It does not count in
	// OK: a share away from the fair one is the plan's business (within
	// its tolerance and hold times), not a fault.
	Balance BalanceHealth
}

// BalanceMode names how the plan shares the shards
// (kinesislease.WithBalance).
type BalanceMode string

// The balance modes.
const (
	// BalanceByThroughput: kinesislease.ByThroughput, the default.
	BalanceByThroughput BalanceMode = "throughput"
	// BalanceByCount: kinesislease.ByCount.
	BalanceByCount BalanceMode = "count"
)

// BalanceHealth is an instance's part of the fleet's load (Health.Balance),
// from the membership entries of the live instances it plans its streams
// with (those that read the same streams, itself included), as it last
// read them: the figures every instance plans from. Loads are those the
// entries publish: each instance's bytes per second, a decayed average
// over about a minute, to two significant digits, as of its last
// heartbeat. Before Run, and after it returned, only Mode, Tolerance,
// Capacity and MaxLeases are set.
type BalanceHealth struct {
	// Mode is how the plan shares the shards; Tolerance is
	// ByThroughput's (a fraction: 0.2 lets an instance carry 20% more
	// than its fair share before shards move off it), 0 by count.
	Mode      BalanceMode
	Tolerance float64
	// Capacity is this instance's weight (kinesislease.WithCapacity, 1 by
	// default); MaxLeases its own cap (kinesislease.WithMaxLeases), 0 for
	// none.
	Capacity  float64
	MaxLeases int
	// Load is this instance's load, in bytes per second, as its entry
	// publishes it; FleetLoad the sum over Members.
	Load      int64
	FleetLoad int64
	// Members is how many live instances share the shards, this one
	// included.
	Members int
	// Utilization is this instance's utilization of its capacity as its
	// entry publishes it (kinesislease.WithUtilization; a fraction, 1 when
	// fully used, to two significant digits), 0 when it publishes none.
	// Cost is its cost factor in the plan: its cost per byte (utilization ×
	// capacity over load) over that of the Members that publish a
	// utilization and a load, at least 1 and at most 3, in steps of 0.05;
	// 1 when it publishes no utilization or no load (or no other member
	// publishes both), by count, and while Legacy.
	Utilization float64
	Cost        float64
	// FairShare is the fraction of FleetLoad the plan aims to give this
	// instance: its capacity divided by its Cost, over the sum of the
	// Members' (an instance publishing no capacity counts as 1), so that
	// an instance of Cost 2 is given half the share its capacity alone
	// would. The plan lowers it where caps bind (docs/balance.md).
	// 1/Members when Legacy.
	FairShare float64
	// Share is the fraction of FleetLoad this instance carries: Load over
	// FleetLoad; 0 while FleetLoad is 0. By throughput the plan moves
	// shards off an instance whose Share stays above FairShare × (1 +
	// Tolerance) (after its hold time).
	Share float64
	// Legacy: a live instance publishes no capacity (a version before
	// balancing by load), so every instance plans by count, each of
	// weight 1, until it is upgraded or gone.
	Legacy bool
}

// OK reports whether the whole service is green: Ready and Live, and every
// stream OK (see StreamHealth.OK): no stream or shard set aside, no shard
// Blocked. Live alone says whether the process works; OK says whether
// anything wants an operator's look. A shard held by a record that keeps
// failing is not OK but stays Live: restarting the process does not cure
// a handler that fails on a record, it delivers the record again.
func (h Health) OK() bool {
	if !h.Ready || !h.Live || h.Err != nil {
		return false
	}
	for i := range h.Streams {
		if !h.Streams[i].OK() {
			return false
		}
	}
	return true
}

// StreamHealth is the state of one subscription.
type StreamHealth struct {
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// Err is why the stream is set aside (its shards could not be listed
	// for a reason no retry cures), until RetryAt; nil otherwise.
	Err     error
	RetryAt time.Time
	// Shards lists the shards this instance holds, and those it set aside
	// after a failure, sorted by id.
	Shards []ShardHealth
}

// OK reports whether the stream is green: not set aside (Err nil) and every
// shard OK (see ShardHealth.OK).
func (s StreamHealth) OK() bool {
	if s.Err != nil {
		return false
	}
	for i := range s.Shards {
		if !s.Shards[i].OK() {
			return false
		}
	}
	return true
}

// ShardHealth is the state of one shard this instance holds or set aside.
type ShardHealth struct {
	// ShardID is the shard.
	ShardID string
	// Reading: its lease is held and valid and its worker runs.
	Reading bool
	// MillisBehindLatest is the lag of the last GetRecords answer that held
	// records (-1 before the first).
	MillisBehindLatest int64
	// Err is the last error: the failure that set the shard aside (until
	// RetryAt), or, while reading, the last read error retried (nil once a
	// read succeeds again).
	Err     error
	RetryAt time.Time
	// OldestUnresolvedAge is the age of the shard's oldest record taken up
	// for delivery and not resolved yet (not acknowledged, dropped or
	// dead-lettered; a deferred acknowledgement not come back counts as
	// unresolved): the time since its ApproximateArrivalTimestamp, on this
	// instance's clock. 0 while nothing is unresolved. Unlike
	// MillisBehindLatest it goes on growing while a record holds the shard:
	// once it passes the stream's retention, the records behind the one
	// held start to expire unread (a WARN is logged once it passes half).
	OldestUnresolvedAge time.Duration
	// Blocked, if set, is the shard's oldest unresolved record that has
	// been failing for longer than the retry policy's first delay: it holds
	// the shard (and its checkpoint) while it is retried; with no
	// dead-letter sink a record that keeps failing holds it until the
	// handler succeeds, drops it or dead-letters it. nil once it resolves.
	Blocked *BlockedRecord
}

// OK reports whether the shard is green: not Blocked, and not set aside (a
// read error retried while Reading is not counted: the reader recovers by
// itself, and Err says what it retries).
func (s ShardHealth) OK() bool {
	return s.Blocked == nil && (s.Reading || s.Err == nil)
}

// BlockedRecord is a record holding its shard (ShardHealth.Blocked): the
// shard's oldest unresolved record, failing.
type BlockedRecord struct {
	// SequenceNumber and SubSequence name the record (SubSequence: the
	// user record's index in a KPL aggregate, 0 otherwise).
	SequenceNumber string
	SubSequence    int64
	// ArrivalTime is the record's ApproximateArrivalTimestamp.
	ArrivalTime time.Time
	// Since is when its first failure in a row was seen (the first wait
	// before a retry, or before a dead letter with no sink or a failing
	// sink is tried again).
	Since time.Time
	// Attempts counts its deliveries to the handler so far.
	Attempts int
	// LastErr is its last failure: the handler's error, the cause of a dead
	// letter no sink takes, or the failing sink's error.
	LastErr error
}
