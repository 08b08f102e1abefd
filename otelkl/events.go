package otelkl

import (
	"context"
	"errors"
	"fmt"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
)

// The hooks: each event the service reports, measured (the attribute sets
// they are measured with, cached per shard, owner and outcome).

// set returns the attribute set of kv plus WithAttributes'.
func (h *Hooks) set(kv ...attribute.KeyValue) attribute.Set {
	if len(h.cfg.attrs) > 0 {
		kv = append(append([]attribute.KeyValue(nil), h.cfg.attrs...), kv...)
	}
	return attribute.NewSet(kv...)
}

// streamAttrs returns the attributes naming the messaging system, the
// stream (its name, from a name or an ARN) and the consumer group.
func streamAttrs(cfg *config, stream string) []attribute.KeyValue {
	name := kinesisx.Name(stream)
	out := []attribute.KeyValue{AttrSystem.String(SystemKinesis), AttrStream.String(name), AttrStreamName.String(name)}
	if cfg.group != "" {
		out = append(out, AttrConsumerGroup.String(cfg.group))
	}
	return out
}

// streamShard returns the stream and shard attributes (the shard left out
// with WithoutShardID, or when there is none) followed by kv.
func (h *Hooks) streamShard(stream, shard string, kv ...attribute.KeyValue) []attribute.KeyValue {
	out := streamAttrs(&h.cfg, stream)
	if !h.cfg.noShard && shard != "" {
		out = append(out, AttrShardID.String(shard))
	}
	return append(out, kv...)
}

var (
	opProcess = AttrOperationName.String("process")
	opReceive = AttrOperationName.String("receive")
)

// outcomeAttrs are the attributes of a record's outcome: a failure to
// process (dead-lettered) carries error.type.
func (h *Hooks) outcomeAttrs(stream, shard, name string) *attrs {
	kv := []attribute.KeyValue{opProcess, AttrOutcome.String(name)}
	if name == outcomeNames[kltype.DeadLettered] {
		kv = append(kv, AttrErrorType.String(ErrorTypeDeadLettered))
	}
	return newAttrs(h.set(h.streamShard(stream, shard, kv...)...))
}

func (h *Hooks) shardAttrs(stream, shard string) *shardAttrs {
	if h.cfg.noShard {
		shard = ""
	}
	k := shardKey{stream, shard}
	if v, ok := h.shards.Load(k); ok {
		return v.(*shardAttrs)
	}
	sa := &shardAttrs{
		shard:   newAttrs(h.set(h.streamShard(stream, shard)...)),
		receive: newAttrs(h.set(h.streamShard(stream, shard, opReceive)...)),
	}
	for o, name := range outcomeNames {
		sa.outcome[o] = &outcomeState{a: h.outcomeAttrs(stream, shard, name)}
	}
	v, _ := h.shards.LoadOrStore(k, sa)
	return v.(*shardAttrs)
}

// cached returns the attrs stored under k in h.other, building them with
// kv on first use.
func (h *Hooks) cached(k any, kv func() []attribute.KeyValue) *attrs {
	if v, ok := h.other.Load(k); ok {
		return v.(*attrs)
	}
	v, _ := h.other.LoadOrStore(k, newAttrs(h.set(kv()...)))
	return v.(*attrs)
}

type ownerKey struct{ stream, owner string }

func (h *Hooks) ownerAttrs(stream, owner string) *attrs {
	return h.cached(ownerKey{stream, owner}, func() []attribute.KeyValue {
		return append(streamAttrs(&h.cfg, stream), AttrOwner.String(owner))
	})
}

// OnLeaseAcquired implements kltype.HookLeaseAcquired.
func (h *Hooks) OnLeaseAcquired(ctx context.Context, l kltype.LeaseInfo) {
	ctx = orBackground(ctx)
	a := h.ownerAttrs(l.Stream, l.Owner)
	k := leaseKey{l.Stream, l.ShardID, l.Owner}
	h.mu.Lock()
	_, dup := h.mine[k]
	h.mine[k] = struct{}{}
	h.mu.Unlock()
	if !dup {
		h.held.Add(ctx, 1, a.add...)
	}
	if l.From != "" {
		h.takeovers.Add(ctx, 1, a.add...)
	}
}

// OnLeaseReleased implements kltype.HookLeaseReleased.
func (h *Hooks) OnLeaseReleased(ctx context.Context, l kltype.LeaseInfo) {
	h.gone(orBackground(ctx), l.Stream, l.ShardID, l.Owner)
}

// OnLeaseLost implements kltype.HookLeaseLost.
func (h *Hooks) OnLeaseLost(ctx context.Context, l kltype.LeaseInfo) {
	ctx = orBackground(ctx)
	h.losses.Add(ctx, 1, h.ownerAttrs(l.Stream, l.Owner).add...)
	h.gone(ctx, l.Stream, l.ShardID, l.Owner)
}

// gone counts a lease of owner no longer held (every owner's, for owner "":
// a shard ended, whose event names no owner) and stops reporting its lag.
func (h *Hooks) gone(ctx context.Context, stream, shard, owner string) {
	var owners []string
	h.mu.Lock()
	for k := range h.mine {
		if k.stream == stream && k.shard == shard && (owner == "" || k.owner == owner) {
			owners = append(owners, k.owner)
			delete(h.mine, k)
		}
	}
	delete(h.lag, shardKey{stream, shard})
	h.mu.Unlock()
	for _, o := range owners {
		h.held.Add(ctx, -1, h.ownerAttrs(stream, o).add...)
	}
}

// OnHealthSource implements kltype.HookHealth: the service's Health is
// read at each collection for kinesislease.oldest_unresolved.age.
func (h *Hooks) OnHealthSource(health func() kltype.Health) {
	h.mu.Lock()
	h.health = append(h.health, health)
	h.mu.Unlock()
}

// OnShardStarted implements kltype.HookShardStarted.
func (h *Hooks) OnShardStarted(s kltype.ShardInfo) {
	h.shardsStarted.Add(context.Background(), 1, h.shardAttrs(s.Stream, s.ShardID).shard.add...)
}

// OnShardEnded implements kltype.HookShardEnded. The lease of an
// ended shard is released with SHARD_END; no OnLeaseReleased follows.
func (h *Hooks) OnShardEnded(s kltype.ShardInfo) {
	ctx := context.Background()
	h.shardsEnded.Add(ctx, 1, h.shardAttrs(s.Stream, s.ShardID).shard.add...)
	h.gone(ctx, s.Stream, s.ShardID, "")
}

// OnBatchFetched implements kltype.HookBatchFetched.
func (h *Hooks) OnBatchFetched(b kltype.BatchInfo) {
	ctx := context.Background()
	a := h.shardAttrs(b.Stream, b.ShardID)
	h.consumed.Add(ctx, int64(b.Records), a.receive.add...)
	h.fetchBytes.Add(ctx, int64(b.Bytes), a.receive.add...)
	h.mu.Lock()
	h.lag[shardKey{b.Stream, b.ShardID}] = b.MillisBehindLatest
	h.mu.Unlock()
}

// OnRecordHandled implements kltype.HookRecordHandled.
func (h *Hooks) OnRecordHandled(r kltype.RecordInfo) {
	var st *outcomeState
	if r.Outcome >= 0 && int(r.Outcome) < len(shardAttrs{}.outcome) {
		st = h.shardAttrs(r.Stream, r.ShardID).outcome[r.Outcome]
	}
	if st == nil { // an outcome added after this package was written
		st = h.otherOutcome(r.Stream, r.ShardID, r.Outcome)
	}
	st.records.Add(1)
	st.bytes.Add(int64(r.Bytes))
	h.processDuration.Record(context.Background(), r.Duration.Seconds(), st.a.rec...)
}

func (h *Hooks) otherOutcome(stream, shard string, o kltype.Outcome) *outcomeState {
	if h.cfg.noShard {
		shard = ""
	}
	k := outcomeKey{shardKey{stream, shard}, o}
	if v, ok := h.outcomes.Load(k); ok {
		return v.(*outcomeState)
	}
	name := fmt.Sprintf("outcome_%d", int(o))
	if o == kltype.Outcome(0) {
		name = o.String()
	}
	st := &outcomeState{a: h.outcomeAttrs(stream, shard, name)}
	v, _ := h.outcomes.LoadOrStore(k, st)
	return v.(*outcomeState)
}

type checkpointKey struct {
	shardKey
	errType string
}

// withError appends error.type to kv when err is not nil.
func withError(err error, kv []attribute.KeyValue) []attribute.KeyValue {
	if err != nil {
		kv = append(kv, AttrErrorType.String(ErrorType(err)))
	}
	return kv
}

// OnCheckpointWritten implements kltype.HookCheckpointWritten.
func (h *Hooks) OnCheckpointWritten(c kltype.CheckpointInfo) {
	a := h.cached(checkpointKey{shardKey{c.Stream, h.shard(c.ShardID)}, errorTypeOrEmpty(c.Err)}, func() []attribute.KeyValue {
		return withError(c.Err, h.streamShard(c.Stream, c.ShardID))
	})
	h.checkpoints.Add(context.Background(), 1, a.add...)
}

// shard is shard, or "" with WithoutShardID (for cache keys).
func (h *Hooks) shard(shard string) string {
	if h.cfg.noShard {
		return ""
	}
	return shard
}

type throttleKey struct {
	shardKey
	op, errType string
}

// OnThrottled implements kltype.HookThrottled.
func (h *Hooks) OnThrottled(t kltype.ThrottleInfo) {
	a := h.cached(throttleKey{shardKey{t.Stream, h.shard(t.ShardID)}, t.Op, errorTypeOrEmpty(t.Err)}, func() []attribute.KeyValue {
		return withError(t.Err, h.streamShard(t.Stream, t.ShardID, AttrMethod.String(t.Op)))
	})
	h.throttles.Add(context.Background(), 1, a.add...)
}

type failureKey struct {
	shardKey
	errType string
}

// OnFailed implements kltype.HookFailed.
func (h *Hooks) OnFailed(f kltype.FailureInfo) {
	a := h.cached(failureKey{shardKey{f.Stream, h.shard(f.ShardID)}, errorTypeOrEmpty(f.Err)}, func() []attribute.KeyValue {
		return withError(f.Err, h.streamShard(f.Stream, f.ShardID))
	})
	h.failures.Add(context.Background(), 1, a.add...)
}

type filteredKey struct{ shardKey }

// OnUserRecordsFiltered implements kltype.HookUserRecordsFiltered.
func (h *Hooks) OnUserRecordsFiltered(f kltype.FilterInfo) {
	a := h.cached(filteredKey{shardKey{f.Stream, h.shard(f.ShardID)}}, func() []attribute.KeyValue { return h.streamShard(f.Stream, f.ShardID) })
	h.filtered.Add(context.Background(), int64(f.Filtered), a.add...)
}

type deadKey struct {
	shardKey
	reason string
}

// OnDeadLettered implements kltype.HookDeadLettered.
func (h *Hooks) OnDeadLettered(dl *kltype.DeadLetterRecord) {
	if dl == nil || dl.Record == nil {
		return
	}
	r := dl.Record
	a := h.cached(deadKey{shardKey{r.Stream, h.shard(r.ShardID)}, dl.Reason}, func() []attribute.KeyValue {
		return h.streamShard(r.Stream, r.ShardID, AttrReason.String(dl.Reason))
	})
	h.deadLetters.Add(context.Background(), 1, a.add...)
}

// storeOps maps the lease store's methods to the DynamoDB operation each
// makes (leases/dynamo): reads are one strongly consistent GetItem, writes
// one conditional UpdateItem. A few make a second call now and then (Create
// and Rewind read the shard's rewind record first; MarkStream and MarkTaken
// read the mark when their write meets another's); they are named after
// their write. The duration measured is the whole method's.
var storeOps = map[string]string{
	"Get": "GetItem", "Members": "GetItem", "Header": "GetItem", "LastRewind": "GetItem", "StreamMark": "GetItem",

	"Create": "UpdateItem", "CreateAs": "UpdateItem", "Checkpoint": "UpdateItem", "Release": "UpdateItem",
	"Rewind": "UpdateItem", "ApplyRewind": "UpdateItem", "TakeAs": "UpdateItem", "Heartbeat": "UpdateItem",
	"Join": "UpdateItem", "ReplaceMember": "UpdateItem", "MarkStream": "UpdateItem", "MarkTaken": "UpdateItem",
	"BumpRow": "UpdateItem", "ReportVanished": "UpdateItem",
}

// StoreOperation returns the DynamoDB operation a lease store method makes
// (rpc.method of its calls): GetItem or UpdateItem, "_OTHER" for a method
// this package does not know.
func StoreOperation(method string) string {
	if op, ok := storeOps[method]; ok {
		return op
	}
	return "_OTHER"
}

var (
	rpcAWS          = AttrRPCSystem.String(RPCSystemAWS)
	serviceKinesis  = AttrService.String(ServiceKinesis)
	serviceDynamoDB = AttrService.String(ServiceDynamoDB)
	opReceiveType   = AttrOperationType.String(string(messagingconv.OperationTypeReceive))
)

// callAttrs returns the attributes of a call (see OnCall).
func (h *Hooks) callAttrs(k callKey) *attrs {
	var kv []attribute.KeyValue
	if k.service == "kinesis" {
		kv = []attribute.KeyValue{rpcAWS, serviceKinesis, AttrMethod.String(k.op),
			AttrSystem.String(SystemKinesis), AttrOperationName.String(k.op)}
		if k.op == "GetRecords" || k.op == "SubscribeToShard" {
			kv = append(kv, opReceiveType)
		}
		if h.cfg.group != "" {
			kv = append(kv, AttrConsumerGroup.String(h.cfg.group))
		}
	} else {
		svc := serviceDynamoDB
		if k.service != "dynamodb" {
			svc = AttrService.String(k.service)
		}
		kv = []attribute.KeyValue{rpcAWS, svc, AttrMethod.String(StoreOperation(k.op)), AttrStoreOperation.String(k.op)}
	}
	if k.errType != "" {
		kv = append(kv, AttrErrorType.String(k.errType))
	}
	return newAttrs(h.set(kv...))
}

// OnCall implements kltype.HookCall: Kinesis calls are measured by
// messaging.client.operation.duration, lease store calls by
// kinesislease.store.call.duration.
func (h *Hooks) OnCall(c kltype.CallInfo) {
	k := callKey{c.Service, c.Op, errorTypeOrEmpty(c.Err)}
	var a *attrs
	if v, ok := h.callSets.Load(k); ok {
		a = v.(*attrs)
	} else {
		v, _ := h.callSets.LoadOrStore(k, h.callAttrs(k))
		a = v.(*attrs)
	}
	hist := h.storeDuration
	if c.Service == "kinesis" {
		hist = h.opDuration
	}
	hist.Record(context.Background(), c.Duration.Seconds(), a.rec...)
}

func errorTypeOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return ErrorType(err)
}

// ErrorType returns the error.type of a failure: conflict for a lease store
// write whose condition did not hold (leases.ErrConflict: another instance
// moved the row, a normal event), canceled or timeout when a context ended,
// the AWS error code when there is one (ProvisionedThroughputExceededException,
// ThrottlingException, AccessDeniedException...), else the Go type of the
// error (semconv.ErrorType: fmt wrapping looked through, or the error's
// ErrorType method).
func ErrorType(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, leases.ErrConflict):
		return ErrorTypeConflict
	case errors.Is(err, context.Canceled):
		return ErrorTypeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return ErrorTypeTimeout
	}
	if code := kinesisx.ErrorCode(err); code != "" {
		return code
	}
	return semconv.ErrorType(err).Value.AsString()
}
