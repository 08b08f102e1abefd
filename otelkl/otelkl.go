// Package otelkl reports what a kinesislease Service does as OpenTelemetry
// metrics and traces. The metrics come from a hook (see kltype.Hook)
// implementing every Hook* interface; the traces from handler wrappers
// (Trace, TraceHandler, TraceBatch: a span per delivery) and a publisher
// wrapper (TracePublisher: a span per record put):
//
//	h, err := otelkl.New(meterProvider, otelkl.WithConsumerGroup("fulfilment"))
//	svc, err := kinesislease.New(cfg, kinesislease.WithHooks(h), ...)
//	kinesislease.Subscribe(svc, "fulfilment", otelkl.Trace(tracerProvider, fulfil))
//
// The kinesislease package itself does not depend on OpenTelemetry; only
// this package does. One Hooks value may serve several services (and
// streams) of a process; the attributes tell them apart.
//
// # Names
//
// The names follow the OpenTelemetry semantic conventions (SchemaURL;
// the constants of the semconv package) where one exists, kinesislease.*
// otherwise; docs/operations.md has the table of the names before them.
// The meter is named after this package's import path. Attributes of the
// consumer's metrics:
//
//	messaging.system                    aws_kinesis (SystemKinesis: the
//	                                    conventions register no Kinesis value)
//	messaging.destination.name          the stream's NAME, an ARN subscribed
//	aws.kinesis.stream_name             reduced to its name: a fleet moving
//	                                    to ARNs keeps its series
//	messaging.destination.partition.id  the shard id (left out with
//	                                    WithoutShardID)
//	messaging.consumer.group.name       WithConsumerGroup's (the WithApp name)
//	messaging.operation.name            process (records), receive (reads)
//	kinesislease.owner                  this instance's owner id (leases)
//	kinesislease.outcome                acked, dropped or dead_lettered
//	kinesislease.reason                 why a record was dead-lettered
//	error.type                          on failures only: see ErrorType
//
// Records, from HookRecordHandled (operation process):
//
//	kinesislease.records         counter    {record}  outcome (error.type dead_lettered)
//	kinesislease.record.bytes    counter    By        outcome
//	messaging.process.duration   histogram  s         outcome
//
// The process duration runs from a record's first delivery to its outcome:
// retries and their backoff included. The two record counters are
// asynchronous (observable) counters: the counts are kept in the Hooks and
// reported at each collection, which spares a record two SDK measurements.
//
// Reads, from HookBatchFetched, HookThrottled, HookShardStarted,
// HookShardEnded, HookFailed, HookUserRecordsFiltered and HookHealth:
//
//	messaging.client.consumed.messages  counter  {message}   operation receive
//	kinesislease.fetch.bytes            counter  By          operation receive
//	kinesislease.behind_latest          gauge    s
//	kinesislease.oldest_unresolved.age  gauge    s
//	kinesislease.throttles              counter  {throttle}  rpc.method, error.type
//	kinesislease.shards.started         counter  {shard}
//	kinesislease.shards.ended           counter  {shard}
//	kinesislease.failures               counter  {failure}   error.type (no shard for a stream)
//	kinesislease.kpl.filtered           counter  {record}
//
// kinesislease.behind_latest is an asynchronous gauge: at each collection,
// for every shard this process holds, the MillisBehindLatest of the last
// GetRecords answer that held records, in seconds (answers without records
// do not reach hooks, so a reader that has caught up keeps the lag of its
// last batch); no longer reported once the lease is released, lost or
// ended; without shard ids, the largest per stream.
// kinesislease.oldest_unresolved.age is, for every shard each service
// holds, ShardHealth.OldestUnresolvedAge: unlike the lag it goes on growing
// while a record that keeps failing holds its shard.
// kinesislease.failures counts shards and streams set aside after failing
// for good; kinesislease.kpl.filtered KPL user records skipped because they
// hash outside the shard they were read from.
//
// Leases, from HookLeaseAcquired, HookLeaseReleased, HookLeaseLost and
// HookShardEnded (stream, owner; no shard):
//
//	kinesislease.leases.held        up-down counter  {lease}
//	kinesislease.lease.takeovers    counter          {lease}
//	kinesislease.lease.losses       counter          {lease}
//
// Checkpoints and dead letters, from HookCheckpointWritten and
// HookDeadLettered:
//
//	kinesislease.checkpoint.writes  counter  {write}   error.type on the failed
//	kinesislease.dead_letters       counter  {record}  kinesislease.reason
//
// Calls, from HookCall (the stream is not known there), with rpc.system
// aws-api and error.type on failure:
//
//	messaging.client.operation.duration  histogram  s  Kinesis: rpc.service Kinesis, rpc.method
//	                                                   and messaging.operation.name = ListShards,
//	                                                   GetShardIterator, GetRecords (type receive)
//	kinesislease.store.call.duration     histogram  s  the lease store: rpc.service DynamoDB,
//	                                                   rpc.method GetItem or UpdateItem
//	                                                   (StoreOperation), kinesislease.store.operation
//	                                                   the store method (Heartbeat, TakeAs...)
//
// The lease store is reported as DynamoDB whatever its backend.
//
// Balance, from HookHealth (kltype.BalanceHealth), per running service
// (messaging.system, consumer group, kinesislease.owner; no stream):
//
//	kinesislease.member.load         gauge  By/s  its load, as its entry publishes it
//	kinesislease.member.share        gauge  1     its fraction of its fleet's load
//	kinesislease.member.fair_share   gauge  1     its capacity over its cost, as a fraction
//	                                              of the same over its fleet
//	kinesislease.member.utilization  gauge  1     its utilization, as its entry publishes
//	                                              it (WithUtilization; 0: none)
//	kinesislease.member.cost         gauge  1     its cost factor in the plan by load (1 to 3)
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
	semconv138 "go.opentelemetry.io/otel/semconv/v1.38.0"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"

	"github.com/kinesislease/kinesislease/kltype"
)

// ScopeName is the name of the meter the instruments are created with.
const ScopeName = "github.com/kinesislease/kinesislease/otelkl"

// SchemaURL is the OpenTelemetry semantic conventions version the names
// follow (the messaging and AWS ones; rpc.system and rpc.service, dropped
// from the registry after v1.38.0 but still required by the AWS SDK
// conventions, come from v1.38.0).
const SchemaURL = semconv.SchemaURL

// Attribute keys: the semantic conventions' where one exists, the rest
// under kinesislease.
const (
	// AttrStream is messaging.destination.name: the stream's NAME (an ARN
	// subscribed is reduced to its name, so that a fleet moving from names
	// to ARNs keeps its series).
	AttrStream = semconv.MessagingDestinationNameKey
	// AttrStreamName is aws.kinesis.stream_name, the same name.
	AttrStreamName = semconv.AWSKinesisStreamNameKey
	// AttrShardID is messaging.destination.partition.id: the shard id.
	AttrShardID = semconv.MessagingDestinationPartitionIDKey
	// AttrConsumerGroup is messaging.consumer.group.name (WithConsumerGroup).
	AttrConsumerGroup = semconv.MessagingConsumerGroupNameKey
	// AttrSystem is messaging.system: always SystemKinesis.
	AttrSystem = semconv.MessagingSystemKey
	// AttrOperationName is messaging.operation.name: process, receive,
	// send, create, or the Kinesis operation of a call.
	AttrOperationName = semconv.MessagingOperationNameKey
	// AttrOperationType is messaging.operation.type.
	AttrOperationType = semconv.MessagingOperationTypeKey
	// AttrBatchCount is messaging.batch.message_count (batch spans).
	AttrBatchCount = semconv.MessagingBatchMessageCountKey
	// AttrErrorType is error.type, set on failures only (see ErrorType).
	AttrErrorType = semconv.ErrorTypeKey
	// AttrRPCSystem is rpc.system: always aws-api.
	AttrRPCSystem = semconv138.RPCSystemKey
	// AttrService is rpc.service: DynamoDB or Kinesis.
	AttrService = semconv138.RPCServiceKey
	// AttrMethod is rpc.method: the AWS operation (GetItem, UpdateItem;
	// ListShards, GetShardIterator, GetRecords, SubscribeToShard).
	AttrMethod = semconv.RPCMethodKey

	AttrOwner   = attribute.Key("kinesislease.owner")
	AttrOutcome = attribute.Key("kinesislease.outcome")
	AttrReason  = attribute.Key("kinesislease.reason")
	// AttrStoreOperation is the lease store method a call made (Heartbeat,
	// Checkpoint, TakeAs...): rpc.method says only GetItem or UpdateItem.
	AttrStoreOperation = attribute.Key("kinesislease.store.operation")
)

// SystemKinesis is the value of messaging.system. The messaging
// conventions register no value for Kinesis (as of v1.43.0 their list is
// activemq, aws.sns, aws_sqs, eventgrid, eventhubs, servicebus,
// gcp_pubsub, jms, kafka, rabbitmq, rocketmq, pulsar; the list is open):
// this one is shaped as aws_sqs is.
const SystemKinesis = "aws_kinesis"

// RPCSystemAWS is the value of rpc.system for AWS calls (AWS SDK
// conventions).
const RPCSystemAWS = "aws-api"

// Values of rpc.service.
const (
	ServiceDynamoDB = "DynamoDB"
	ServiceKinesis  = "Kinesis"
)

// Values of error.type beside AWS error codes and Go error types (see
// ErrorType).
const (
	ErrorTypeConflict     = "conflict"
	ErrorTypeCanceled     = "canceled"
	ErrorTypeTimeout      = "timeout"
	ErrorTypeDeadLettered = "dead_lettered"
)

// Metric names: the conventions' (from the semconv package, so that they
// follow it) and kinesislease's own.
var (
	MetricProcessDuration   = messagingconv.ProcessDuration{}.Name()
	MetricConsumedMessages  = messagingconv.ClientConsumedMessages{}.Name()
	MetricOperationDuration = messagingconv.ClientOperationDuration{}.Name()
)

// Kinesis-specific metric names (no convention).
const (
	MetricRecords           = "kinesislease.records"
	MetricRecordBytes       = "kinesislease.record.bytes"
	MetricFetchBytes        = "kinesislease.fetch.bytes"
	MetricBehindLatest      = "kinesislease.behind_latest"
	MetricOldestUnresolved  = "kinesislease.oldest_unresolved.age"
	MetricThrottles         = "kinesislease.throttles"
	MetricFailures          = "kinesislease.failures"
	MetricKPLFiltered       = "kinesislease.kpl.filtered"
	MetricShardsStarted     = "kinesislease.shards.started"
	MetricShardsEnded       = "kinesislease.shards.ended"
	MetricLeasesHeld        = "kinesislease.leases.held"
	MetricLeaseTakeovers    = "kinesislease.lease.takeovers"
	MetricLeaseLosses       = "kinesislease.lease.losses"
	MetricCheckpointWrites  = "kinesislease.checkpoint.writes"
	MetricDeadLetters       = "kinesislease.dead_letters"
	MetricStoreCallDuration = "kinesislease.store.call.duration"
	MetricMemberLoad        = "kinesislease.member.load"
	MetricMemberShare       = "kinesislease.member.share"
	MetricMemberFairShare   = "kinesislease.member.fair_share"
	MetricMemberUtilization = "kinesislease.member.utilization"
	MetricMemberCost        = "kinesislease.member.cost"
)

// Outcome attribute values, by kltype.Outcome.
var outcomeNames = map[kltype.Outcome]string{
	kltype.Acked:        "acked",
	kltype.Dropped:      "dropped",
	kltype.DeadLettered: "dead_lettered",
}

// Option configures Hooks (New) and the tracing wrappers (Trace,
// TraceHandler, TraceBatch, TracePublisher: WithAttributes and
// WithConsumerGroup apply to their spans; WithoutShardID does not).
type Option interface{ apply(*config) }

type config struct {
	attrs   []attribute.KeyValue
	noShard bool
	group   string
	errs    []error
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// reserved are the keys this package sets.
var reserved = map[attribute.Key]bool{
	AttrStream: true, AttrStreamName: true, AttrShardID: true, AttrConsumerGroup: true, AttrSystem: true,
	AttrOperationName: true, AttrOperationType: true, AttrBatchCount: true, AttrErrorType: true,
	AttrRPCSystem: true, AttrService: true, AttrMethod: true,
	AttrOwner: true, AttrOutcome: true, AttrReason: true, AttrStoreOperation: true,
}

// WithAttributes adds attributes to every measurement and span (a service
// or deployment name, say). They must not use the keys of this package.
func WithAttributes(kv ...attribute.KeyValue) Option {
	return optionFunc(func(c *config) {
		for _, a := range kv {
			if !a.Valid() {
				c.errs = append(c.errs, fmt.Errorf("otelkl: WithAttributes: invalid attribute %q", a.Key))
			}
			if reserved[a.Key] {
				c.errs = append(c.errs, fmt.Errorf("otelkl: WithAttributes: key %q is set by otelkl", a.Key))
			}
		}
		c.attrs = append(c.attrs, kv...)
	})
}

// WithoutShardID leaves messaging.destination.partition.id out of every
// metric's attribute set, for streams of many shards where a time series
// per shard costs too much. Spans keep it.
func WithoutShardID() Option {
	return optionFunc(func(c *config) { c.noShard = true })
}

// WithConsumerGroup sets messaging.consumer.group.name on the consumer's
// metrics and spans: the name of the application whose instances share the
// lease table and split the shards among them (Kinesis has no consumer
// group of its own; the KCL calls it the application name). Pass the name
// given to kinesislease.WithApp. Without it the attribute is left out.
func WithConsumerGroup(name string) Option {
	return optionFunc(func(c *config) {
		if name == "" {
			c.errs = append(c.errs, errors.New("otelkl: WithConsumerGroup: empty name"))
		}
		c.group = name
	})
}

func newConfig(opts []Option) config {
	var cfg config
	for _, o := range opts {
		if o == nil {
			cfg.errs = append(cfg.errs, errors.New("otelkl: nil option"))
			continue
		}
		o.apply(&cfg)
	}
	return cfg
}

// Hooks records a Service's events as metrics. It implements every
// kinesislease Hook* interface; it is safe for concurrent use. Create it
// with New.
type Hooks struct {
	cfg config

	records, recordBytes       metric.Int64ObservableCounter
	processDuration            metric.Float64Histogram
	consumed, fetchBytes       metric.Int64Counter
	throttles                  metric.Int64Counter
	failures                   metric.Int64Counter
	filtered                   metric.Int64Counter
	shardsStarted, shardsEnded metric.Int64Counter
	held                       metric.Int64UpDownCounter
	takeovers, losses          metric.Int64Counter
	checkpoints                metric.Int64Counter
	deadLetters                metric.Int64Counter
	opDuration                 metric.Float64Histogram // Kinesis calls
	storeDuration              metric.Float64Histogram // lease store calls
	lagGauge                   metric.Float64ObservableGauge
	ageGauge                   metric.Float64ObservableGauge
	loadGauge                  metric.Int64ObservableGauge   // balance.go
	shareGauge, fairGauge      metric.Float64ObservableGauge // balance.go
	utilGauge, costGauge       metric.Float64ObservableGauge // balance.go
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

type callKey struct{ service, op, errType string }

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

// shardAttrs are the attribute sets of one shard's measurements, and its
// record counts.
type shardAttrs struct {
	shard   *attrs                                 // system, stream, shard (lifecycle, gauges)
	receive *attrs                                 // the same, operation receive (consumed messages)
	outcome [kltype.DeadLettered + 1]*outcomeState // by outcome, operation process
}

// outcomeState counts the records of one shard and outcome. The counts are
// kept here and observed at collection time (the record counters are
// asynchronous), so that a record costs two atomic additions and one
// histogram measurement.
type outcomeState struct {
	a              *attrs // stream, shard, operation process, outcome
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
	cfg := newConfig(opts)
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName, metric.WithSchemaURL(SchemaURL))
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
	h.records, err = m.Int64ObservableCounter(MetricRecords, metric.WithUnit("{record}"),
		metric.WithDescription("Records that reached an outcome (acked, dropped, dead_lettered)."))
	errs = append(errs, err)
	h.recordBytes, err = m.Int64ObservableCounter(MetricRecordBytes, metric.WithUnit("By"),
		metric.WithDescription("Data bytes of the records that reached an outcome."))
	errs = append(errs, err)
	h.processDuration = histogram(MetricProcessDuration, "Time from a record's first delivery to its outcome, retries included.", handlerBuckets)
	h.consumed = counter(MetricConsumedMessages, messagingconv.ClientConsumedMessages{}.Unit(), "Records read from Kinesis (GetRecords or SubscribeToShard; an aggregate counts once).")
	h.fetchBytes = counter(MetricFetchBytes, "By", "Data bytes of the records read from Kinesis.")
	h.throttles = counter(MetricThrottles, "{throttle}", "Kinesis reads throttled and retried.")
	h.failures = counter(MetricFailures, "{failure}", "Shards and streams set aside after failing for good, tried again later.")
	h.filtered = counter(MetricKPLFiltered, "{record}", "KPL user records skipped because they hash outside the shard they were read from.")
	h.shardsStarted = counter(MetricShardsStarted, "{shard}", "Shard readers started.")
	h.shardsEnded = counter(MetricShardsEnded, "{shard}", "Closed shards read to their end.")
	h.takeovers = counter(MetricLeaseTakeovers, "{lease}", "Leases taken over from another owner whose lease expired.")
	h.losses = counter(MetricLeaseLosses, "{lease}", "Leases found held by another owner.")
	h.checkpoints = counter(MetricCheckpointWrites, "{write}", "Checkpoint writes (error.type set on the failed).")
	h.deadLetters = counter(MetricDeadLetters, "{record}", "Records a dead-letter sink confirmed, by reason.")
	h.opDuration = histogram(MetricOperationDuration, "Duration of the calls to Kinesis (ListShards, GetShardIterator, GetRecords).", callBuckets)
	h.storeDuration = histogram(MetricStoreCallDuration, "Duration of the calls to the lease store.", callBuckets)
	held, err := m.Int64UpDownCounter(MetricLeasesHeld, metric.WithUnit("{lease}"), metric.WithDescription("Leases this instance holds."))
	errs = append(errs, err)
	h.held = held
	h.lagGauge, err = m.Float64ObservableGauge(MetricBehindLatest, metric.WithUnit("s"),
		metric.WithDescription("How far the reader is behind the tip of the shard (MillisBehindLatest of the last GetRecords answer holding records, in seconds), per shard held."))
	errs = append(errs, err)
	h.ageGauge, err = m.Float64ObservableGauge(MetricOldestUnresolved, metric.WithUnit("s"),
		metric.WithDescription("Time since the arrival of the oldest record not resolved yet, per shard held (0: none)."))
	errs = append(errs, err, h.newBalanceGauges(m))
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelkl: creating instruments: %w", err)
	}
	reg, err := m.RegisterCallback(h.observe, h.lagGauge, h.ageGauge, h.records, h.recordBytes, h.loadGauge, h.shareGauge, h.fairGauge, h.utilGauge, h.costGauge)
	if err != nil {
		return nil, fmt.Errorf("otelkl: registering the callback: %w", err)
	}
	h.reg = reg
	return h, nil
}

// Close unregisters the callback of the asynchronous instruments (records,
// record bytes, lag, age, balance): they are no longer reported.
func (h *Hooks) Close() error { return h.reg.Unregister() }
