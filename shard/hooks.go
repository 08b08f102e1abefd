package shard

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/leases"
)

// Hook is any value implementing one or more of the Hook* interfaces below;
// the coordinator calls the methods a hook implements, and only those.
// Hooks are called synchronously from the goroutine where the event happens,
// possibly concurrently for different shards: they must be safe for
// concurrent use and return quickly. New hook interfaces may be added later;
// existing ones do not change.
type Hook any

// LeaseInfo describes a lease event.
type LeaseInfo struct {
	Stream, ShardID, Owner string
	Checkpoint             leases.Checkpoint
	// From is the previous owner on a takeover, else empty.
	From string
}

// HookLeaseAcquired is called when this instance took a lease.
type HookLeaseAcquired interface {
	OnLeaseAcquired(ctx context.Context, l LeaseInfo)
}

// HookLeaseReleased is called when this instance released a lease after its
// final checkpoint (a planned move or a shutdown): it could still commit.
type HookLeaseReleased interface {
	OnLeaseReleased(ctx context.Context, l LeaseInfo)
}

// HookLeaseLost is called when this instance found another owner holding a
// lease it held: nothing more was written.
type HookLeaseLost interface {
	OnLeaseLost(ctx context.Context, l LeaseInfo)
}

// ShardInfo describes a shard reader starting or a shard ending.
type ShardInfo struct {
	Stream, ShardID string
	Start           Position // where reading starts (ShardStarted)
}

// HookShardStarted is called when a worker starts reading a shard.
type HookShardStarted interface{ OnShardStarted(s ShardInfo) }

// HookShardEnded is called when a closed shard was read to its end and its
// SHARD_END checkpoint written.
type HookShardEnded interface{ OnShardEnded(s ShardInfo) }

// BatchInfo describes one GetRecords answer that held records.
type BatchInfo struct {
	Stream, ShardID    string
	Records            int
	Bytes              int
	MillisBehindLatest int64
}

// HookBatchFetched is called for every batch read.
type HookBatchFetched interface{ OnBatchFetched(b BatchInfo) }

// RecordInfo describes a record that reached an outcome.
type RecordInfo struct {
	Stream, ShardID string
	SequenceNumber  string
	SubSequence     int64
	Bytes           int
	Attempts        int
	Outcome         Outcome
	Duration        time.Duration // from the first delivery to the outcome
}

// HookRecordHandled is called when a record was acknowledged, dropped or
// dead-lettered.
type HookRecordHandled interface{ OnRecordHandled(r RecordInfo) }

// CheckpointInfo describes a checkpoint write.
type CheckpointInfo struct {
	Stream, ShardID string
	Checkpoint      leases.Checkpoint
	Err             error // nil when it landed
}

// HookCheckpointWritten is called after every checkpoint write (also the
// final one of a release), successful or not.
type HookCheckpointWritten interface{ OnCheckpointWritten(c CheckpointInfo) }

// ThrottleInfo describes a throttled or failed-and-retried Kinesis read.
type ThrottleInfo struct {
	Stream, ShardID string
	Op              string // GetRecords or GetShardIterator
	Delay           time.Duration
	Err             error
}

// HookThrottled is called when a read was throttled
// (ProvisionedThroughputExceededException) and will be retried after Delay.
type HookThrottled interface{ OnThrottled(t ThrottleInfo) }

// HookDeadLettered is called when a sink confirmed a dead letter.
type HookDeadLettered interface{ OnDeadLettered(dl *DeadLetter) }

// CallInfo describes one call to the lease store or Kinesis.
type CallInfo struct {
	Service  string // "dynamodb" (the lease store) or "kinesis"
	Op       string // e.g. Renew, GetRecords
	Duration time.Duration
	Err      error
}

// HookCall is called after every lease store and Kinesis call.
type HookCall interface{ OnCall(c CallInfo) }

// hooks holds the registered hooks by interface, sorted once, so that an
// event nobody listens to costs one length check.
type hooks struct {
	acquired   []HookLeaseAcquired
	released   []HookLeaseReleased
	lost       []HookLeaseLost
	started    []HookShardStarted
	ended      []HookShardEnded
	batch      []HookBatchFetched
	record     []HookRecordHandled
	checkpoint []HookCheckpointWritten
	throttled  []HookThrottled
	dead       []HookDeadLettered
	call       []HookCall
}

func newHooks(hs []Hook) *hooks {
	h := &hooks{}
	for _, x := range hs {
		if v, ok := x.(HookLeaseAcquired); ok {
			h.acquired = append(h.acquired, v)
		}
		if v, ok := x.(HookLeaseReleased); ok {
			h.released = append(h.released, v)
		}
		if v, ok := x.(HookLeaseLost); ok {
			h.lost = append(h.lost, v)
		}
		if v, ok := x.(HookShardStarted); ok {
			h.started = append(h.started, v)
		}
		if v, ok := x.(HookShardEnded); ok {
			h.ended = append(h.ended, v)
		}
		if v, ok := x.(HookBatchFetched); ok {
			h.batch = append(h.batch, v)
		}
		if v, ok := x.(HookRecordHandled); ok {
			h.record = append(h.record, v)
		}
		if v, ok := x.(HookCheckpointWritten); ok {
			h.checkpoint = append(h.checkpoint, v)
		}
		if v, ok := x.(HookThrottled); ok {
			h.throttled = append(h.throttled, v)
		}
		if v, ok := x.(HookDeadLettered); ok {
			h.dead = append(h.dead, v)
		}
		if v, ok := x.(HookCall); ok {
			h.call = append(h.call, v)
		}
	}
	return h
}

// calls wraps the lease store and the Kinesis client to time every call for
// HookCall hooks; without such hooks it returns them as they are.
func (h *hooks) wrapStore(s leases.Store) leases.Store {
	if len(h.call) == 0 {
		return s
	}
	return &hookedStore{Store: s, h: h}
}

func (h *hooks) wrapKinesis(k Kinesis) Kinesis {
	if len(h.call) == 0 {
		return k
	}
	return &hookedKinesis{Kinesis: k, h: h}
}

func (h *hooks) deadLettered(dl *DeadLetter) {
	for _, x := range h.dead {
		x.OnDeadLettered(dl)
	}
}

func (h *hooks) onCall(service, op string, start time.Time, err error) {
	ci := CallInfo{Service: service, Op: op, Duration: time.Since(start), Err: err}
	for _, x := range h.call {
		x.OnCall(ci)
	}
}

// hookedStore times every lease store call for HookCall hooks.
type hookedStore struct {
	leases.Store
	h *hooks
}

func timed[T any](h *hooks, service, op string, call func() (T, error)) (T, error) {
	start := time.Now()
	v, err := call()
	h.onCall(service, op, start, err)
	return v, err
}

func (s *hookedStore) Get(ctx context.Context, key leases.Key) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "Get", func() (leases.Lease, error) { return s.Store.Get(ctx, key) })
}

func (s *hookedStore) Create(ctx context.Context, key leases.Key) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "Create", func() (leases.Lease, error) { return s.Store.Create(ctx, key) })
}

func (s *hookedStore) Take(ctx context.Context, l leases.Lease, owner string, ttl time.Duration) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "Take", func() (leases.Lease, error) { return s.Store.Take(ctx, l, owner, ttl) })
}

func (s *hookedStore) Renew(ctx context.Context, l leases.Lease, ttl time.Duration) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "Renew", func() (leases.Lease, error) { return s.Store.Renew(ctx, l, ttl) })
}

func (s *hookedStore) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "Checkpoint", func() (leases.Lease, error) { return s.Store.Checkpoint(ctx, l, cp) })
}

func (s *hookedStore) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "Release", func() (leases.Lease, error) { return s.Store.Release(ctx, l, cp) })
}

func (s *hookedStore) RequestHandoff(ctx context.Context, l leases.Lease, to string) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "RequestHandoff", func() (leases.Lease, error) { return s.Store.RequestHandoff(ctx, l, to) })
}

func (s *hookedStore) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "Rewind", func() (leases.Lease, error) { return s.Store.Rewind(ctx, l, cp) })
}

func (s *hookedStore) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "ApplyRewind", func() (leases.Lease, error) { return s.Store.ApplyRewind(ctx, l) })
}

// hookedKinesis times every Kinesis call for HookCall hooks.
type hookedKinesis struct {
	Kinesis
	h *hooks
}

func (k *hookedKinesis) ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return timed(k.h, "kinesis", "ListShards", func() (*kinesis.ListShardsOutput, error) { return k.Kinesis.ListShards(ctx, in, optFns...) })
}

func (k *hookedKinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return timed(k.h, "kinesis", "GetShardIterator", func() (*kinesis.GetShardIteratorOutput, error) {
		return k.Kinesis.GetShardIterator(ctx, in, optFns...)
	})
}

func (k *hookedKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	return timed(k.h, "kinesis", "GetRecords", func() (*kinesis.GetRecordsOutput, error) { return k.Kinesis.GetRecords(ctx, in, optFns...) })
}
