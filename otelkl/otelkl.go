// Package otelkl reports what a kinesislease Service does as OpenTelemetry
// metrics and traces. The metrics come from a hook (see kltype.Hook)
// implementing every Hook* interface; the traces from a handler wrapper,
// Trace, a span per delivery:
//
//	h, err := otelkl.New(meterProvider)
//	svc, err := kinesislease.New(cfg, kinesislease.WithHooks(h), ...)
//	kinesislease.Subscribe(svc, "fulfilment", otelkl.Trace(tracerProvider, fulfil))
//
// The kinesislease package itself does not depend on OpenTelemetry; only
// this package does. One Hooks value may serve several services (and
// streams) of a process; the attributes tell them apart.
//
// # Instruments
//
// Every instrument's name starts with "kinesislease."; the meter is named
// after this package's import path. Attributes:
//
//	kinesis.stream        the stream's name or ARN, as subscribed
//	kinesis.shard_id      the shard id (left out with WithoutShardID)
//	kinesislease.owner    this instance's owner id
//	kinesislease.outcome  acked, dropped or dead_lettered
//	kinesislease.result   ok or error (checkpoints); ok, error, conflict,
//	                      throttled or canceled (calls)
//	kinesislease.reason   why a record was dead-lettered: retries-exhausted,
//	                      dead-letter, decode, panic, corrupt-aggregate,
//	                      expired
//	rpc.service           dynamodb (the lease store, whatever its backend) or
//	                      kinesis
//	rpc.method            the store or Kinesis operation: Get, Create,
//	                      TakeAs, Checkpoint, Release, Rewind, ApplyRewind,
//	                      Heartbeat, Members, ReplaceMember; ListShards,
//	                      GetShardIterator, GetRecords
//
// Records, from HookRecordHandled:
//
//	kinesislease.records            counter    {record}  stream, shard_id, outcome
//	kinesislease.record.bytes       counter    By        stream, shard_id, outcome
//	kinesislease.handler.duration   histogram  s         stream, shard_id, outcome
//
// The handler duration runs from a record's first delivery to its outcome:
// retries and their backoff included. The two record counters are
// asynchronous (observable) counters: the counts are kept in the Hooks and
// reported at each collection, which spares a record two SDK measurements.
// Exporters see them as any monotonic sum.
//
// Reads, from HookBatchFetched, HookThrottled, HookShardStarted and
// HookShardEnded:
//
//	kinesislease.fetch.records          counter  {record}    stream, shard_id
//	kinesislease.fetch.bytes            counter  By          stream, shard_id
//	kinesislease.millis_behind_latest   gauge    ms          stream, shard_id
//	kinesislease.throttles              counter  {throttle}  stream, shard_id, rpc.method
//	kinesislease.shards.started         counter  {shard}     stream, shard_id
//	kinesislease.shards.ended           counter  {shard}     stream, shard_id
//	kinesislease.failures               counter  {failure}   stream, shard_id (empty for the stream)
//	kinesislease.kpl.filtered           counter  {record}    stream, shard_id
//
// kinesislease.failures counts shards and streams set aside after failing
// for good (HookFailed: access denied, a checkpoint not in its shard, a
// stream deleted); each is tried again later, the rest of the service goes
// on. Any increase wants a look at the ERROR log. kinesislease.kpl.filtered
// counts KPL user records skipped because they hash outside the shard they
// were read from (HookUserRecordsFiltered): after a reshard the KPL puts
// them again, to the shard that owns them.
//
// kinesislease.millis_behind_latest is an asynchronous gauge: at each
// collection, for every shard this process holds, the MillisBehindLatest of
// the last GetRecords answer that held records (Kinesis' answers without
// records do not reach hooks, so a reader that has caught up keeps the lag
// of its last batch). A shard is no longer reported once its lease is
// released, lost or ended. Without shard ids it reports, per stream, the
// largest lag of the shards held.
//
// The age of each shard's oldest unresolved record, from the service's
// Health (HookHealth: kinesislease.New hands it over):
//
//	kinesislease.oldest_unresolved.age  gauge  s  stream, shard_id
//
// is an asynchronous gauge: at each collection, for every shard each
// service of the process holds, ShardHealth.OldestUnresolvedAge: the time
// since the arrival of its oldest record not resolved yet, 0 when none is.
// Unlike millis_behind_latest it goes on growing while a record that keeps
// failing holds its shard; past the stream's retention the records behind
// it expire unread. Without shard ids it reports, per stream, the largest.
//
// Leases, from HookLeaseAcquired, HookLeaseReleased, HookLeaseLost and
// HookShardEnded:
//
//	kinesislease.leases.held        up-down counter  {lease}  stream, owner
//	kinesislease.lease.takeovers    counter          {lease}  stream, owner
//	kinesislease.lease.losses       counter          {lease}  stream, owner
//
// leases.held goes up by one when a lease is acquired and down by one when
// it is released, lost or its shard ended. A takeover is an acquisition from
// another owner whose lease expired (LeaseInfo.From set), a loss a lease
// this instance found held by another (the other side of a takeover).
//
// Checkpoints and dead letters, from HookCheckpointWritten and
// HookDeadLettered:
//
//	kinesislease.checkpoint.writes  counter  {write}   stream, shard_id, result (ok, error)
//	kinesislease.dead_letters       counter  {record}  stream, shard_id, reason
//
// Calls to the lease store and to Kinesis, from HookCall (the stream is not
// known there):
//
//	kinesislease.calls              counter    {call}  rpc.service, rpc.method, result
//	kinesislease.call.duration      histogram  s       rpc.service, rpc.method, result
//
// A call's result is conflict for a lease store write whose condition did not
// hold (leases.ErrConflict: another instance moved the row, a normal event),
// throttled for a throttling error (ProvisionedThroughputExceededException,
// ThrottlingException, LimitExceededException, RequestLimitExceeded),
// canceled when its context ended, error otherwise.
//
// # Cost
//
// A record costs a cache lookup, two atomic additions and one histogram
// measurement, whose attribute set is built once per shard and outcome;
// nothing is allocated per record.
package otelkl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// ScopeName is the name of the meter the instruments are created with.
const ScopeName = "github.com/kinesislease/kinesislease/otelkl"

// Attribute keys.
const (
	AttrStream  = attribute.Key("kinesis.stream")
	AttrShardID = attribute.Key("kinesis.shard_id")
	AttrOwner   = attribute.Key("kinesislease.owner")
	AttrOutcome = attribute.Key("kinesislease.outcome")
	AttrResult  = attribute.Key("kinesislease.result")
	AttrReason  = attribute.Key("kinesislease.reason")
	AttrService = attribute.Key("rpc.service")
	AttrMethod  = attribute.Key("rpc.method")
)

// Values of AttrResult.
const (
	ResultOK        = "ok"
	ResultError     = "error"
	ResultConflict  = "conflict"
	ResultThrottled = "throttled"
	ResultCanceled  = "canceled"
)

// Outcome attribute values, by kltype.Outcome.
var outcomeNames = map[kltype.Outcome]string{
	kltype.Acked:        "acked",
	kltype.Dropped:      "dropped",
	kltype.DeadLettered: "dead_lettered",
}

// Option configures Hooks.
type Option interface{ apply(*config) }

type config struct {
	attrs   []attribute.KeyValue
	noShard bool
	errs    []error
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithAttributes adds attributes to every measurement (a service or
// deployment name, say). They must not use the keys of this package.
func WithAttributes(kv ...attribute.KeyValue) Option {
	return optionFunc(func(c *config) {
		for _, a := range kv {
			if !a.Valid() {
				c.errs = append(c.errs, fmt.Errorf("otelkl: WithAttributes: invalid attribute %q", a.Key))
			}
			switch a.Key {
			case AttrStream, AttrShardID, AttrOwner, AttrOutcome, AttrResult, AttrReason, AttrService, AttrMethod:
				c.errs = append(c.errs, fmt.Errorf("otelkl: WithAttributes: key %q is set by otelkl", a.Key))
			}
		}
		c.attrs = append(c.attrs, kv...)
	})
}

// WithoutShardID leaves kinesis.shard_id out of every attribute set, for
// streams of many shards where a time series per shard costs too much.
func WithoutShardID() Option {
	return optionFunc(func(c *config) { c.noShard = true })
}

// Hooks records a Service's events as metrics. It implements every
// kinesislease Hook* interface; it is safe for concurrent use. Create it
// with New.
type Hooks struct {
	cfg config

	records, recordBytes       metric.Int64ObservableCounter
	handlerDuration            metric.Float64Histogram
	fetchRecords, fetchBytes   metric.Int64Counter
	throttles                  metric.Int64Counter
	failures                   metric.Int64Counter
	filtered                   metric.Int64Counter
	shardsStarted, shardsEnded metric.Int64Counter
	held                       metric.Int64UpDownCounter
	takeovers, losses          metric.Int64Counter
	checkpoints                metric.Int64Counter
	deadLetters                metric.Int64Counter
	calls                      metric.Int64Counter
	callDuration               metric.Float64Histogram
	lagGauge                   metric.Int64ObservableGauge
	ageGauge                   metric.Float64ObservableGauge
	reg                        metric.Registration

	shards   sync.Map // shardKey -> *shardAttrs
	callSets sync.Map // callKey -> *attrs
	other    sync.Map // any comparable key -> *attrs (rare events)
	outcomes sync.Map // outcomeKey -> *outcomeState, for outcomes unknown to this package

	mu   sync.Mutex
	lag  map[shardKey]int64    // by shard held: the last batch's MillisBehindLatest
	mine map[leaseKey]struct{} // leases held, for leases.held
	// health are the Health methods of the services the hooks serve
	// (HookHealth), for the age gauge.
	health []func() kltype.Health
}

var (
	_ kltype.HookLeaseAcquired       = (*Hooks)(nil)
	_ kltype.HookLeaseReleased       = (*Hooks)(nil)
	_ kltype.HookLeaseLost           = (*Hooks)(nil)
	_ kltype.HookShardStarted        = (*Hooks)(nil)
	_ kltype.HookShardEnded          = (*Hooks)(nil)
	_ kltype.HookBatchFetched        = (*Hooks)(nil)
	_ kltype.HookRecordHandled       = (*Hooks)(nil)
	_ kltype.HookCheckpointWritten   = (*Hooks)(nil)
	_ kltype.HookThrottled           = (*Hooks)(nil)
	_ kltype.HookDeadLettered        = (*Hooks)(nil)
	_ kltype.HookCall                = (*Hooks)(nil)
	_ kltype.HookFailed              = (*Hooks)(nil)
	_ kltype.HookUserRecordsFiltered = (*Hooks)(nil)
	_ kltype.HookHealth              = (*Hooks)(nil)
)

type shardKey struct{ stream, shard string }

type leaseKey struct{ stream, shard, owner string }

type callKey struct{ service, op, result string }

// attrs is one attribute set, as the options the instruments take.
type attrs struct {
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption
}

func newAttrs(set attribute.Set) *attrs {
	o := metric.WithAttributeSet(set)
	return &attrs{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}, obs: []metric.ObserveOption{o}}
}

// shardAttrs are the attribute sets of one shard's per-record and per-batch
// measurements, and its record counts.
type shardAttrs struct {
	shard   *attrs                                 // stream, shard_id
	outcome [kltype.DeadLettered + 1]*outcomeState // by outcome
}

// outcomeState counts the records of one shard and outcome. The counts are
// kept here and observed at collection time (the record counters are
// asynchronous), so that a record costs two atomic additions and one
// histogram measurement.
type outcomeState struct {
	a              *attrs // stream, shard_id, outcome
	records, bytes atomic.Int64
}

type outcomeKey struct {
	shardKey
	o kltype.Outcome
}

// Durations in seconds: handlers from well under a millisecond to minutes of
// retries; calls from a millisecond to the SDK's retries.
var (
	handlerBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
	callBuckets    = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

// New creates the instruments with a meter of mp (the global MeterProvider
// if mp is nil) and returns the hooks to register with
// kinesislease.WithHooks.
func New(mp metric.MeterProvider, opts ...Option) (*Hooks, error) {
	var cfg config
	for _, o := range opts {
		if o == nil {
			cfg.errs = append(cfg.errs, errors.New("otelkl: nil option"))
			continue
		}
		o.apply(&cfg)
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	h := &Hooks{cfg: cfg, lag: map[shardKey]int64{}, mine: map[leaseKey]struct{}{}}

	var (
		errs []error
		err  error
	)
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string, buckets []float64) metric.Float64Histogram {
		hi, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return hi
	}
	h.records, err = m.Int64ObservableCounter("kinesislease.records", metric.WithUnit("{record}"),
		metric.WithDescription("Records that reached an outcome (acked, dropped, dead_lettered)."))
	errs = append(errs, err)
	h.recordBytes, err = m.Int64ObservableCounter("kinesislease.record.bytes", metric.WithUnit("By"),
		metric.WithDescription("Data bytes of the records that reached an outcome."))
	errs = append(errs, err)
	h.handlerDuration = histogram("kinesislease.handler.duration", "Time from a record's first delivery to its outcome, retries included.", handlerBuckets)
	h.fetchRecords = counter("kinesislease.fetch.records", "{record}", "Records read by GetRecords.")
	h.fetchBytes = counter("kinesislease.fetch.bytes", "By", "Data bytes of the records read by GetRecords.")
	h.throttles = counter("kinesislease.throttles", "{throttle}", "Kinesis reads throttled and retried.")
	h.failures = counter("kinesislease.failures", "{failure}", "Shards and streams set aside after failing for good, tried again later.")
	h.filtered = counter("kinesislease.kpl.filtered", "{record}", "KPL user records skipped because they hash outside the shard they were read from.")
	h.shardsStarted = counter("kinesislease.shards.started", "{shard}", "Shard readers started.")
	h.shardsEnded = counter("kinesislease.shards.ended", "{shard}", "Closed shards read to their end.")
	h.takeovers = counter("kinesislease.lease.takeovers", "{lease}", "Leases taken over from another owner whose lease expired.")
	h.losses = counter("kinesislease.lease.losses", "{lease}", "Leases found held by another owner.")
	h.checkpoints = counter("kinesislease.checkpoint.writes", "{write}", "Checkpoint writes, by result.")
	h.deadLetters = counter("kinesislease.dead_letters", "{record}", "Records a dead-letter sink confirmed, by reason.")
	h.calls = counter("kinesislease.calls", "{call}", "Calls to the lease store and to Kinesis.")
	h.callDuration = histogram("kinesislease.call.duration", "Duration of calls to the lease store and to Kinesis.", callBuckets)
	held, err := m.Int64UpDownCounter("kinesislease.leases.held", metric.WithUnit("{lease}"), metric.WithDescription("Leases this instance holds."))
	errs = append(errs, err)
	h.held = held
	lag, err := m.Int64ObservableGauge("kinesislease.millis_behind_latest", metric.WithUnit("ms"),
		metric.WithDescription("MillisBehindLatest of the last GetRecords answer holding records, per shard held."))
	errs = append(errs, err)
	h.lagGauge = lag
	h.ageGauge, err = m.Float64ObservableGauge("kinesislease.oldest_unresolved.age", metric.WithUnit("s"),
		metric.WithDescription("Time since the arrival of the oldest record not resolved yet, per shard held (0: none)."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelkl: creating instruments: %w", err)
	}
	reg, err := m.RegisterCallback(h.observe, lag, h.ageGauge, h.records, h.recordBytes)
	if err != nil {
		return nil, fmt.Errorf("otelkl: registering the callback: %w", err)
	}
	h.reg = reg
	return h, nil
}

// Close unregisters the callback of the asynchronous instruments (records,
// record bytes, lag, age): they are no longer reported.
func (h *Hooks) Close() error { return h.reg.Unregister() }

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

// observe reports the record counts of every shard seen and the lag of every
// shard held.
func (h *Hooks) observe(_ context.Context, o metric.Observer) error {
	count := func(st *outcomeState) {
		if st == nil {
			return
		}
		if n := st.records.Load(); n > 0 {
			o.ObserveInt64(h.records, n, st.a.obs...)
			o.ObserveInt64(h.recordBytes, st.bytes.Load(), st.a.obs...)
		}
	}
	h.shards.Range(func(_, v any) bool {
		for _, st := range v.(*shardAttrs).outcome {
			count(st)
		}
		return true
	})
	h.outcomes.Range(func(_, v any) bool {
		count(v.(*outcomeState))
		return true
	})

	type obs struct {
		a   *attrs
		lag int64
	}
	h.mu.Lock()
	out := make([]obs, 0, len(h.lag))
	if h.cfg.noShard {
		perStream := map[string]int64{}
		for k, v := range h.lag {
			if cur, ok := perStream[k.stream]; !ok || v > cur {
				perStream[k.stream] = v
			}
		}
		for stream, v := range perStream {
			out = append(out, obs{h.shardAttrs(stream, "").shard, v})
		}
	} else {
		for k, v := range h.lag {
			out = append(out, obs{h.shardAttrs(k.stream, k.shard).shard, v})
		}
	}
	sources := h.health
	h.mu.Unlock()
	for _, x := range out {
		o.ObserveInt64(h.lagGauge, x.lag, x.a.obs...)
	}
	h.observeAges(o, sources)
	return nil
}

// observeAges reports the age of the oldest unresolved record of every
// shard the services of sources hold (the largest per stream without
// shard ids).
func (h *Hooks) observeAges(o metric.Observer, sources []func() kltype.Health) {
	ages := map[shardKey]time.Duration{}
	for _, health := range sources {
		for _, st := range health().Streams {
			for _, sh := range st.Shards {
				if !sh.Reading && sh.OldestUnresolvedAge == 0 {
					continue // set aside, or not read yet
				}
				k := shardKey{st.Stream, sh.ShardID}
				if h.cfg.noShard {
					k.shard = ""
				}
				if cur, ok := ages[k]; !ok || sh.OldestUnresolvedAge > cur {
					ages[k] = sh.OldestUnresolvedAge
				}
			}
		}
	}
	for k, age := range ages {
		o.ObserveFloat64(h.ageGauge, age.Seconds(), h.shardAttrs(k.stream, k.shard).shard.obs...)
	}
}

func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
