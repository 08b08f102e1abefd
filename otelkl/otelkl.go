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
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kinesislease/kinesislease/kltype"
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
