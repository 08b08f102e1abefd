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
}
