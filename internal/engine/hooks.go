package engine

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// hooks holds the registered hooks by interface, sorted once, so that an
// event nobody listens to costs one length check.
type hooks struct {
	acquired   []kltype.HookLeaseAcquired
	released   []kltype.HookLeaseReleased
	lost       []kltype.HookLeaseLost
	started    []kltype.HookShardStarted
	ended      []kltype.HookShardEnded
	batch      []kltype.HookBatchFetched
	record     []kltype.HookRecordHandled
	checkpoint []kltype.HookCheckpointWritten
	throttled  []kltype.HookThrottled
	dead       []kltype.HookDeadLettered
	call       []kltype.HookCall
	failed     []kltype.HookFailed
}

func newHooks(hs []kltype.Hook) *hooks {
	h := &hooks{}
	for _, x := range hs {
		add(&h.acquired, x)
		add(&h.released, x)
		add(&h.lost, x)
		add(&h.started, x)
		add(&h.ended, x)
		add(&h.batch, x)
		add(&h.record, x)
		add(&h.checkpoint, x)
		add(&h.throttled, x)
		add(&h.dead, x)
		add(&h.call, x)
		add(&h.failed, x)
	}
	return h
}

// add appends x to list if x implements the list's hook interface.
func add[T any](list *[]T, x kltype.Hook) {
	if v, ok := x.(T); ok {
		*list = append(*list, v)
	}
}

// calls wraps the lease store and the Kinesis client to time every call for
// HookCall hooks; without such hooks it returns them as they are.
func (h *hooks) wrapStore(s leases.Store) leases.Store {
	if len(h.call) == 0 {
		return s
	}
	if m, ok := s.(leases.Membership); ok {
		return &hookedMemberStore{hookedStore: hookedStore{Store: s, h: h}, mem: m}
	}
	return &hookedStore{Store: s, h: h}
}

func (h *hooks) wrapKinesis(k kinesisx.Reader) kinesisx.Reader {
	if len(h.call) == 0 {
		return k
	}
	return &hookedKinesis{Reader: k, h: h}
}

func (h *hooks) onFailed(f kltype.FailureInfo) {
	for _, x := range h.failed {
		x.OnFailed(f)
	}
}

func (h *hooks) deadLettered(dl *kltype.DeadLetterRecord) {
	for _, x := range h.dead {
		x.OnDeadLettered(dl)
	}
}

func (h *hooks) onCall(service, op string, start time.Time, err error) {
	ci := kltype.CallInfo{Service: service, Op: op, Duration: time.Since(start), Err: err}
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

func (s *hookedStore) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "Checkpoint", func() (leases.Lease, error) { return s.Store.Checkpoint(ctx, l, cp) })
}

func (s *hookedStore) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "Release", func() (leases.Lease, error) { return s.Store.Release(ctx, l, cp) })
}

func (s *hookedStore) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "Rewind", func() (leases.Lease, error) { return s.Store.Rewind(ctx, l, cp) })
}

func (s *hookedStore) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "ApplyRewind", func() (leases.Lease, error) { return s.Store.ApplyRewind(ctx, l) })
}

// hookedKinesis times every Kinesis call for HookCall hooks.
type hookedKinesis struct {
	kinesisx.Reader
	h *hooks
}

func (k *hookedKinesis) ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return timed(k.h, "kinesis", "ListShards", func() (*kinesis.ListShardsOutput, error) { return k.Reader.ListShards(ctx, in, optFns...) })
}

func (k *hookedKinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return timed(k.h, "kinesis", "GetShardIterator", func() (*kinesis.GetShardIteratorOutput, error) {
		return k.Reader.GetShardIterator(ctx, in, optFns...)
	})
}

func (k *hookedKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	return timed(k.h, "kinesis", "GetRecords", func() (*kinesis.GetRecordsOutput, error) { return k.Reader.GetRecords(ctx, in, optFns...) })
}

// hookedMemberStore times the membership calls too.
type hookedMemberStore struct {
	hookedStore
	mem leases.Membership
}

func (s *hookedMemberStore) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	return timed(s.h, "dynamodb", "Heartbeat", func() ([]leases.Member, error) { return s.mem.Heartbeat(ctx, row, m) })
}

func (s *hookedMemberStore) Members(ctx context.Context, row int) ([]leases.Member, error) {
	return timed(s.h, "dynamodb", "Members", func() ([]leases.Member, error) { return s.mem.Members(ctx, row) })
}

func (s *hookedMemberStore) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	return timed(s.h, "dynamodb", "ReplaceMember", func() ([]leases.Member, error) { return s.mem.ReplaceMember(ctx, row, seen, next) })
}

func (s *hookedMemberStore) TakeAs(ctx context.Context, l leases.Lease, owner, inc string) (leases.Lease, error) {
	return timed(s.h, "dynamodb", "TakeAs", func() (leases.Lease, error) { return s.mem.TakeAs(ctx, l, owner, inc) })
}
