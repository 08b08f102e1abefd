package otelkl

import (
	"context"
	"errors"
	"fmt"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"go.opentelemetry.io/otel/attribute"
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

// streamShard returns the stream and shard attributes (the shard left out
// with WithoutShardID).
func (h *Hooks) streamShard(stream, shard string, kv ...attribute.KeyValue) []attribute.KeyValue {
	out := []attribute.KeyValue{AttrStream.String(stream)}
	if !h.cfg.noShard {
		out = append(out, AttrShardID.String(shard))
	}
	return append(out, kv...)
}

func (h *Hooks) shardAttrs(stream, shard string) *shardAttrs {
	if h.cfg.noShard {
		shard = ""
	}
	k := shardKey{stream, shard}
	if v, ok := h.shards.Load(k); ok {
		return v.(*shardAttrs)
	}
	sa := &shardAttrs{shard: newAttrs(h.set(h.streamShard(stream, shard)...))}
	for o, name := range outcomeNames {
		sa.outcome[o] = &outcomeState{a: newAttrs(h.set(h.streamShard(stream, shard, AttrOutcome.String(name))...))}
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
		return []attribute.KeyValue{AttrStream.String(stream), AttrOwner.String(owner)}
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
	a := h.shardAttrs(b.Stream, b.ShardID).shard
	h.fetchRecords.Add(ctx, int64(b.Records), a.add...)
	h.fetchBytes.Add(ctx, int64(b.Bytes), a.add...)
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
	h.handlerDuration.Record(context.Background(), r.Duration.Seconds(), st.a.rec...)
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
	st := &outcomeState{a: newAttrs(h.set(h.streamShard(stream, shard, AttrOutcome.String(name))...))}
	v, _ := h.outcomes.LoadOrStore(k, st)
	return v.(*outcomeState)
}

type checkpointKey struct {
	shardKey
	ok bool
}

// OnCheckpointWritten implements kltype.HookCheckpointWritten.
func (h *Hooks) OnCheckpointWritten(c kltype.CheckpointInfo) {
	a := h.cached(checkpointKey{shardKey{c.Stream, c.ShardID}, c.Err == nil}, func() []attribute.KeyValue {
		result := ResultOK
		if c.Err != nil {
			result = ResultError
		}
		return h.streamShard(c.Stream, c.ShardID, AttrResult.String(result))
	})
	h.checkpoints.Add(context.Background(), 1, a.add...)
}

type throttleKey struct {
	shardKey
	op string
}

// OnThrottled implements kltype.HookThrottled.
func (h *Hooks) OnThrottled(t kltype.ThrottleInfo) {
	a := h.cached(throttleKey{shardKey{t.Stream, t.ShardID}, t.Op}, func() []attribute.KeyValue {
		return h.streamShard(t.Stream, t.ShardID, AttrMethod.String(t.Op))
	})
	h.throttles.Add(context.Background(), 1, a.add...)
}

type failureKey struct{ shardKey }

// OnFailed implements kltype.HookFailed.
func (h *Hooks) OnFailed(f kltype.FailureInfo) {
	a := h.cached(failureKey{shardKey{f.Stream, f.ShardID}}, func() []attribute.KeyValue { return h.streamShard(f.Stream, f.ShardID) })
	h.failures.Add(context.Background(), 1, a.add...)
}

type filteredKey struct{ shardKey }

// OnUserRecordsFiltered implements kltype.HookUserRecordsFiltered.
func (h *Hooks) OnUserRecordsFiltered(f kltype.FilterInfo) {
	a := h.cached(filteredKey{shardKey{f.Stream, f.ShardID}}, func() []attribute.KeyValue { return h.streamShard(f.Stream, f.ShardID) })
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
	a := h.cached(deadKey{shardKey{r.Stream, r.ShardID}, dl.Reason}, func() []attribute.KeyValue {
		return h.streamShard(r.Stream, r.ShardID, AttrReason.String(dl.Reason))
	})
	h.deadLetters.Add(context.Background(), 1, a.add...)
}

// OnCall implements kltype.HookCall.
func (h *Hooks) OnCall(c kltype.CallInfo) {
	k := callKey{c.Service, c.Op, callResult(c.Err)}
	var a *attrs
	if v, ok := h.callSets.Load(k); ok {
		a = v.(*attrs)
	} else {
		v, _ := h.callSets.LoadOrStore(k, newAttrs(h.set(AttrService.String(k.service), AttrMethod.String(k.op), AttrResult.String(k.result))))
		a = v.(*attrs)
	}
	ctx := context.Background()
	h.calls.Add(ctx, 1, a.add...)
	h.callDuration.Record(ctx, c.Duration.Seconds(), a.rec...)
}

// callResult classifies a call's error.
func callResult(err error) string {
	if err == nil {
		return ResultOK
	}
	if errors.Is(err, leases.ErrConflict) {
		return ResultConflict
	}
	if kinesisx.IsThrottled(err) {
		return ResultThrottled
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ResultCanceled
	}
	return ResultError
}
