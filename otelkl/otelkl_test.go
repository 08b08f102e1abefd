package otelkl_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/otelkl"
)

func TestMain(m *testing.M) {
	testutil.Main(m)
}

// metrics is one collection.
type metrics map[string]metricdata.Metrics

func newHooks(t testing.TB, opts ...otelkl.Option) (*otelkl.Hooks, func(testing.TB) metrics) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	h, err := otelkl.New(mp, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h, func(t testing.TB) metrics {
		t.Helper()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		ms := metrics{}
		for _, sm := range rm.ScopeMetrics {
			if sm.Scope.Name != otelkl.ScopeName {
				t.Errorf("scope %q, want %q", sm.Scope.Name, otelkl.ScopeName)
			}
			for _, m := range sm.Metrics {
				ms[m.Name] = m
			}
		}
		return ms
	}
}

// matches reports whether set holds every attribute of want.
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if kv.Key == otelkl.AttrErrorType && kv.Value.AsString() == "" {
			if ok {
				return false // want no error.type
			}
			continue
		}
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum adds up the points of a counter, up-down counter or gauge whose
// attributes include want; n is how many points matched.
func (ms metrics) sum(t testing.TB, name string, want ...attribute.KeyValue) (total int64, n int) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0, 0
	}
	var points []metricdata.DataPoint[int64]
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		points = d.DataPoints
	case metricdata.Gauge[int64]:
		points = d.DataPoints
	default:
		t.Fatalf("%s: %T, want int64 sum or gauge", name, m.Data)
	}
	for _, p := range points {
		if matches(p.Attributes, want) {
			total += p.Value
			n++
		}
	}
	return total, n
}

// hist returns the count and sum of the histogram points whose attributes
// include want.
func (ms metrics) hist(t testing.TB, name string, want ...attribute.KeyValue) (count uint64, sum float64) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0, 0
	}
	d, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s: %T, want a float64 histogram", name, m.Data)
	}
	for _, p := range d.DataPoints {
		if matches(p.Attributes, want) {
			count += p.Count
			sum += p.Sum
		}
	}
	return count, sum
}

func (ms metrics) want(t testing.TB, name string, want int64, attrs ...attribute.KeyValue) {
	t.Helper()
	if got, _ := ms.sum(t, name, attrs...); got != want {
		t.Errorf("%s%v = %d, want %d", name, attrs, got, want)
	}
}

var (
	stream = otelkl.AttrStream.String("orders")
	s1     = otelkl.AttrShardID.String("shardId-000000000001")
	s2     = otelkl.AttrShardID.String("shardId-000000000002")
	s3     = otelkl.AttrShardID.String("shardId-000000000003")
	ownerA = otelkl.AttrOwner.String("a")
)

func outcome(s string) attribute.KeyValue { return otelkl.AttrOutcome.String(s) }

// errType is error.type s; errType("") wants none (a success).
func errType(s string) attribute.KeyValue { return otelkl.AttrErrorType.String(s) }
func service(s string) attribute.KeyValue { return otelkl.AttrService.String(s) }
func method(s string) attribute.KeyValue  { return otelkl.AttrMethod.String(s) }
func storeOp(s string) attribute.KeyValue { return otelkl.AttrStoreOperation.String(s) }

var ok = errType("")

// calls returns the number of calls a duration histogram counted.
func (ms metrics) calls(t testing.TB, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	n, _ := ms.hist(t, name, want...)
	return int64(n)
}

const (
	opDuration    = "messaging.client.operation.duration"
	storeDuration = "kinesislease.store.call.duration"
)

// TestHooksUnit feeds hook calls directly and checks every instrument.
func TestHooksUnit(t *testing.T) {
	h, collect := newHooks(t)
	ctx := context.Background()
	lease := func(shard, from string) kltype.LeaseInfo {
		return kltype.LeaseInfo{Stream: "orders", ShardID: shard, Owner: "a", From: from}
	}
	sh := func(kv attribute.KeyValue) string { return kv.Value.AsString() }

	h.OnLeaseAcquired(ctx, lease(sh(s1), ""))
	h.OnLeaseAcquired(ctx, lease(sh(s2), "old-owner"))
	h.OnLeaseAcquired(ctx, lease(sh(s3), ""))
	for _, s := range []attribute.KeyValue{s1, s2, s3} {
		h.OnShardStarted(kltype.ShardInfo{Stream: "orders", ShardID: sh(s), Start: kltype.TrimHorizon})
	}
	h.OnBatchFetched(kltype.BatchInfo{Stream: "orders", ShardID: sh(s1), Records: 3, Bytes: 30, MillisBehindLatest: 1500})
	h.OnBatchFetched(kltype.BatchInfo{Stream: "orders", ShardID: sh(s2), Records: 1, Bytes: 7, MillisBehindLatest: 0})
	h.OnBatchFetched(kltype.BatchInfo{Stream: "orders", ShardID: sh(s1), Records: 2, Bytes: 20, MillisBehindLatest: 200})
	rec := func(shard string, o kltype.Outcome, bytes int, d time.Duration) {
		h.OnRecordHandled(kltype.RecordInfo{Stream: "orders", ShardID: shard, SequenceNumber: "1", Bytes: bytes, Attempts: 1, Outcome: o, Duration: d})
	}
	for range 3 {
		rec(sh(s1), kltype.Acked, 10, 2*time.Millisecond)
	}
	rec(sh(s1), kltype.Dropped, 5, time.Millisecond)
	rec(sh(s2), kltype.DeadLettered, 8, 1500*time.Millisecond)
	h.OnCheckpointWritten(kltype.CheckpointInfo{Stream: "orders", ShardID: sh(s1), Checkpoint: leases.Checkpoint{Sequence: "1"}})
	h.OnCheckpointWritten(kltype.CheckpointInfo{Stream: "orders", ShardID: sh(s1), Checkpoint: leases.Checkpoint{Sequence: "2"}})
	h.OnCheckpointWritten(kltype.CheckpointInfo{Stream: "orders", ShardID: sh(s1), Checkpoint: leases.Checkpoint{Sequence: "3"}, Err: errors.New("boom")})
	h.OnThrottled(kltype.ThrottleInfo{Stream: "orders", ShardID: sh(s1), Op: "GetRecords", Delay: time.Second})
	h.OnThrottled(kltype.ThrottleInfo{Stream: "orders", ShardID: sh(s1), Op: "GetRecords", Delay: time.Second})
	h.OnThrottled(kltype.ThrottleInfo{Stream: "orders", ShardID: sh(s2), Op: "GetShardIterator", Delay: time.Second})
	h.OnDeadLettered(&kltype.DeadLetterRecord{Record: &kltype.Record{Stream: "orders", ShardID: sh(s2)}, Reason: "dead-letter"})
	h.OnDeadLettered(nil) // ignored
	h.OnFailed(kltype.FailureInfo{Stream: "orders", ShardID: sh(s1), Err: errors.New("denied"), Failures: 1, RetryIn: time.Minute})
	h.OnFailed(kltype.FailureInfo{Stream: "orders", ShardID: sh(s1), Err: errors.New("denied"), Failures: 2, RetryIn: 2 * time.Minute})
	h.OnFailed(kltype.FailureInfo{Stream: "orders", Err: errors.New("gone")})
	h.OnUserRecordsFiltered(kltype.FilterInfo{Stream: "orders", ShardID: sh(s1), SequenceNumber: "1", Filtered: 2, UserRecords: 5})
	h.OnUserRecordsFiltered(kltype.FilterInfo{Stream: "orders", ShardID: sh(s1), SequenceNumber: "2", Filtered: 1, UserRecords: 3})
	call := func(svc, op string, d time.Duration, err error) {
		h.OnCall(kltype.CallInfo{Service: svc, Op: op, Duration: d, Err: err})
	}
	throttled := fmt.Errorf("shard x: GetRecords: %w", &ktypes.ProvisionedThroughputExceededException{Message: aws.String("slow down")})
	call("kinesis", "GetRecords", 10*time.Millisecond, nil)
	call("kinesis", "GetRecords", 30*time.Millisecond, nil)
	call("kinesis", "GetRecords", 5*time.Millisecond, throttled)
	call("dynamodb", "Heartbeat", 2*time.Millisecond, nil)
	call("dynamodb", "TakeAs", 3*time.Millisecond, &leases.ConflictError{Op: "TakeAs"})
	call("dynamodb", "Heartbeat", time.Millisecond, fmt.Errorf("heartbeat: %w", context.Canceled))
	call("dynamodb", "Get", time.Millisecond, errors.New("connection refused"))

	ms := collect(t)
	ms.want(t, "kinesislease.leases.held", 3, stream, ownerA)
	ms.want(t, "kinesislease.lease.takeovers", 1, stream, ownerA)
	ms.want(t, "kinesislease.lease.losses", 0, stream, ownerA)
	ms.want(t, "kinesislease.shards.started", 3, stream)
	ms.want(t, "kinesislease.failures", 2, stream, s1)
	ms.want(t, "kinesislease.failures", 3, stream)
	ms.want(t, "kinesislease.kpl.filtered", 3, stream, s1)
	ms.want(t, "kinesislease.shards.started", 1, stream, s2)
	ms.want(t, "messaging.client.consumed.messages", 5, stream, s1)
	ms.want(t, "kinesislease.fetch.bytes", 50, stream, s1)
	ms.want(t, "messaging.client.consumed.messages", 1, stream, s2)
	ms.wantGauge(t, "kinesislease.behind_latest", 0.2, stream, s1)
	ms.wantGauge(t, "kinesislease.behind_latest", 0, stream, s2)
	if _, n := ms.gaugeSum(t, "kinesislease.behind_latest", stream, s3); n != 0 {
		t.Errorf("lag of %v reported before any batch", s3)
	}
	ms.want(t, "kinesislease.records", 3, stream, s1, outcome("acked"))
	ms.want(t, "kinesislease.records", 1, stream, s1, outcome("dropped"))
	ms.want(t, "kinesislease.records", 1, stream, s2, outcome("dead_lettered"))
	ms.want(t, "kinesislease.records", 5, stream)
	ms.want(t, "kinesislease.record.bytes", 30, stream, outcome("acked"))
	ms.want(t, "kinesislease.record.bytes", 5, stream, outcome("dropped"))
	ms.want(t, "kinesislease.record.bytes", 8, stream, outcome("dead_lettered"))
	if n, sum := ms.hist(t, "messaging.process.duration", stream, s1, outcome("acked")); n != 3 || !near(sum, 0.006) {
		t.Errorf("process.duration acked on s1: %d records, %gs in all; want 3, 0.006s", n, sum)
	}
	if n, sum := ms.hist(t, "messaging.process.duration", outcome("dead_lettered")); n != 1 || !near(sum, 1.5) {
		t.Errorf("process.duration dead_lettered: %d records, %gs; want 1, 1.5s", n, sum)
	}
	ms.want(t, "kinesislease.checkpoint.writes", 2, stream, s1, ok)
	ms.want(t, "kinesislease.checkpoint.writes", 1, stream, s1, errType("*errors.errorString"))
	ms.want(t, "kinesislease.throttles", 2, stream, s1, method("GetRecords"))
	ms.want(t, "kinesislease.throttles", 1, stream, s2, method("GetShardIterator"))
	ms.want(t, "kinesislease.dead_letters", 1, stream, s2, otelkl.AttrReason.String("dead-letter"))
	ms.want(t, "kinesislease.dead_letters", 1)
	for _, c := range []struct {
		name string
		n    int64
		want []attribute.KeyValue
	}{
		{opDuration, 2, []attribute.KeyValue{service("Kinesis"), method("GetRecords"), otelkl.AttrOperationName.String("GetRecords"), ok}},
		{opDuration, 1, []attribute.KeyValue{service("Kinesis"), method("GetRecords"), errType("ProvisionedThroughputExceededException")}},
		{storeDuration, 1, []attribute.KeyValue{service("DynamoDB"), method("UpdateItem"), storeOp("Heartbeat"), ok}},
		{storeDuration, 1, []attribute.KeyValue{service("DynamoDB"), method("UpdateItem"), storeOp("Heartbeat"), errType("canceled")}},
		{storeDuration, 1, []attribute.KeyValue{service("DynamoDB"), method("UpdateItem"), storeOp("TakeAs"), errType("conflict")}},
		{storeDuration, 1, []attribute.KeyValue{service("DynamoDB"), method("GetItem"), storeOp("Get"), errType("*errors.errorString")}},
		{storeDuration, 4, []attribute.KeyValue{otelkl.AttrRPCSystem.String("aws-api")}},
	} {
		if got := ms.calls(t, c.name, c.want...); got != c.n {
			t.Errorf("%s%v: %d calls, want %d", c.name, c.want, got, c.n)
		}
	}
	if n, sum := ms.hist(t, opDuration, service("Kinesis"), method("GetRecords"), ok); n != 2 || !near(sum, 0.04) {
		t.Errorf("operation.duration GetRecords ok: %d calls, %gs; want 2, 0.04s", n, sum)
	}

	first := ms

	// Lost, released, ended: each lease held counts down once, and its
	// shard's lag is no longer reported.
	h.OnLeaseLost(ctx, lease(sh(s2), ""))
	h.OnLeaseReleased(ctx, lease(sh(s1), ""))
	h.OnLeaseReleased(ctx, lease(sh(s1), "")) // twice: no effect
	ms = collect(t)
	ms.want(t, "kinesislease.leases.held", 1, stream, ownerA)
	ms.want(t, "kinesislease.lease.losses", 1, stream, ownerA)
	if _, n := ms.gaugeSum(t, "kinesislease.behind_latest"); n != 0 {
		t.Errorf("lag still reported for shards no longer held: %d points", n)
	}
	h.OnShardEnded(kltype.ShardInfo{Stream: "orders", ShardID: sh(s3)})
	ms = collect(t)
	ms.want(t, "kinesislease.leases.held", 0, stream, ownerA)
	ms.want(t, "kinesislease.shards.ended", 1, stream, s3)

	first["kinesislease.shards.ended"] = ms["kinesislease.shards.ended"] // the gauge has no point left in ms
	first["kinesislease.lease.losses"] = ms["kinesislease.lease.losses"]
	for name := range instruments {
		if _, ok := first[name]; !ok && name != "kinesislease.oldest_unresolved.age" && !strings.HasPrefix(name, "kinesislease.member.") { // no health source here
			t.Errorf("%s not collected", name)
		}
	}
	checkSchema(t, first, false)
}

// gaugeSum adds up the points of a float64 gauge whose attributes include
// want; n is how many points matched.
func (ms metrics) gaugeSum(t testing.TB, name string, want ...attribute.KeyValue) (total float64, n int) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return 0, 0
	}
	d, ok := m.Data.(metricdata.Gauge[float64])
	if !ok {
		t.Fatalf("%s: %T, want a float64 gauge", name, m.Data)
	}
	for _, p := range d.DataPoints {
		if matches(p.Attributes, want) {
			total += p.Value
			n++
		}
	}
	return total, n
}

func (ms metrics) wantGauge(t testing.TB, name string, want float64, attrs ...attribute.KeyValue) {
	t.Helper()
	if got, n := ms.gaugeSum(t, name, attrs...); n == 0 || !near(got, want) {
		t.Errorf("%s%v = %g (%d points), want %g", name, attrs, got, n, want)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// instruments lists every instrument with its unit and attribute keys:
// those of every point, and those some points have.
var (
	base      = []attribute.Key{otelkl.AttrSystem, otelkl.AttrStream, otelkl.AttrStreamName, otelkl.AttrShardID}
	ownerKeys = []attribute.Key{otelkl.AttrSystem, otelkl.AttrStream, otelkl.AttrStreamName, otelkl.AttrOwner}
	// memberKeys: an instance's balance gauges, over every stream it reads.
	memberKeys = []attribute.Key{otelkl.AttrSystem, otelkl.AttrOwner}
	with       = func(keys []attribute.Key, more ...attribute.Key) []attribute.Key {
		return append(slices.Clone(keys), more...)
	}
	errKey     = []attribute.Key{otelkl.AttrErrorType}
	rpcKeys    = []attribute.Key{otelkl.AttrRPCSystem, otelkl.AttrService, otelkl.AttrMethod}
	opName     = otelkl.AttrOperationName
	instrument = func(unit string, keys []attribute.Key, optional ...attribute.Key) struct {
		unit           string
		keys, optional []attribute.Key
	} {
		return struct {
			unit           string
			keys, optional []attribute.Key
		}{unit, keys, optional}
	}
)

var instruments = map[string]struct {
	unit           string
	keys, optional []attribute.Key
}{
	"kinesislease.records":                instrument("{record}", with(base, opName, otelkl.AttrOutcome), errKey...),
	"kinesislease.record.bytes":           instrument("By", with(base, opName, otelkl.AttrOutcome), errKey...),
	"messaging.process.duration":          instrument("s", with(base, opName, otelkl.AttrOutcome), errKey...),
	"messaging.client.consumed.messages":  instrument("{message}", with(base, opName)),
	"kinesislease.fetch.bytes":            instrument("By", with(base, opName)),
	"kinesislease.behind_latest":          instrument("s", base),
	"kinesislease.oldest_unresolved.age":  instrument("s", base),
	"kinesislease.throttles":              instrument("{throttle}", with(base, otelkl.AttrMethod), errKey...),
	"kinesislease.failures":               instrument("{failure}", with(base[:3], otelkl.AttrErrorType), otelkl.AttrShardID),
	"kinesislease.kpl.filtered":           instrument("{record}", base),
	"kinesislease.shards.started":         instrument("{shard}", base),
	"kinesislease.shards.ended":           instrument("{shard}", base),
	"kinesislease.leases.held":            instrument("{lease}", ownerKeys),
	"kinesislease.lease.takeovers":        instrument("{lease}", ownerKeys),
	"kinesislease.lease.losses":           instrument("{lease}", ownerKeys),
	"kinesislease.checkpoint.writes":      instrument("{write}", base, errKey...),
	"kinesislease.dead_letters":           instrument("{record}", with(base, otelkl.AttrReason)),
	"messaging.client.operation.duration": instrument("s", with(rpcKeys, otelkl.AttrSystem, opName), otelkl.AttrOperationType, otelkl.AttrErrorType),
	"kinesislease.store.call.duration":    instrument("s", with(rpcKeys, otelkl.AttrStoreOperation), otelkl.AttrErrorType, otelkl.AttrConsumerGroup), // not a messaging operation
	"kinesislease.member.load":            instrument("By/s", memberKeys),
	"kinesislease.member.share":           instrument("1", memberKeys),
	"kinesislease.member.fair_share":      instrument("1", memberKeys),
	"kinesislease.member.utilization":     instrument("1", memberKeys),
	"kinesislease.member.cost":            instrument("1", memberKeys),
}

// checkSchema: every instrument collected has its unit, a description, and
// its documented attribute keys on every point (the optional ones on some).
func checkSchema(t *testing.T, ms metrics, noShard bool, extra ...attribute.Key) {
	t.Helper()
	for name, want := range instruments {
		m, ok := ms[name]
		if !ok {
			continue
		}
		if m.Unit != want.unit || m.Description == "" {
			t.Errorf("%s: unit %q, description %q; want unit %q and a description", name, m.Unit, m.Description, want.unit)
		}
		keys := slices.Clone(want.keys)
		for _, k := range extra {
			if !slices.Contains(want.optional, k) {
				keys = append(keys, k)
			}
		}
		if noShard {
			keys = slices.DeleteFunc(keys, func(k attribute.Key) bool { return k == otelkl.AttrShardID })
		}
		for _, set := range attributeSets(m) {
			var got []attribute.Key
			for _, kv := range set.ToSlice() {
				if !slices.Contains(want.optional, kv.Key) || slices.Contains(keys, kv.Key) {
					got = append(got, kv.Key)
				}
			}
			if !sameKeys(got, keys) {
				t.Errorf("%s: point with attributes %v, want keys %v (and maybe %v)", name, set.ToSlice(), keys, want.optional)
			}
		}
	}
	for name := range ms {
		if _, ok := instruments[name]; !ok {
			t.Errorf("undocumented instrument %s", name)
		}
	}
}

func sameKeys(a, b []attribute.Key) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func attributeSets(m metricdata.Metrics) []attribute.Set {
	var sets []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	}
	return sets
}

// TestOptions: WithAttributes adds to every point; WithoutShardID drops the
// shard everywhere and reports the largest lag per stream.
func TestOptions(t *testing.T) {
	h, collect := newHooks(t, otelkl.WithAttributes(attribute.String("service.component", "billing")), otelkl.WithoutShardID())
	ctx := context.Background()
	for i, lag := range []int64{300, 900, 100} {
		id := fmt.Sprintf("shardId-%012d", i)
		h.OnLeaseAcquired(ctx, kltype.LeaseInfo{Stream: "orders", ShardID: id, Owner: "a"})
		h.OnShardStarted(kltype.ShardInfo{Stream: "orders", ShardID: id})
		h.OnBatchFetched(kltype.BatchInfo{Stream: "orders", ShardID: id, Records: 1, Bytes: 1, MillisBehindLatest: lag})
		h.OnRecordHandled(kltype.RecordInfo{Stream: "orders", ShardID: id, Outcome: kltype.Acked, Bytes: 1})
		h.OnCheckpointWritten(kltype.CheckpointInfo{Stream: "orders", ShardID: id})
		h.OnThrottled(kltype.ThrottleInfo{Stream: "orders", ShardID: id, Op: "GetRecords"})
		h.OnDeadLettered(&kltype.DeadLetterRecord{Record: &kltype.Record{Stream: "orders", ShardID: id}, Reason: "decode"})
		h.OnCall(kltype.CallInfo{Service: "kinesis", Op: "GetRecords"})
	}
	h.OnLeaseAcquired(ctx, kltype.LeaseInfo{Stream: "orders", ShardID: "shardId-000000000009", Owner: "a", From: "b"})
	h.OnLeaseLost(ctx, kltype.LeaseInfo{Stream: "orders", ShardID: "shardId-000000000009", Owner: "a"})
	h.OnShardEnded(kltype.ShardInfo{Stream: "orders", ShardID: "shardId-000000000002"})
	// An outcome this package does not know of yet is counted under its number.
	h.OnRecordHandled(kltype.RecordInfo{Stream: "orders", ShardID: "shardId-000000000000", Outcome: kltype.Outcome(9), Bytes: 4})
	h.OnRecordHandled(kltype.RecordInfo{Stream: "orders", ShardID: "shardId-000000000001", Outcome: kltype.Outcome(9), Bytes: 4})
	ms := collect(t)
	ms.want(t, "kinesislease.records", 3, stream, outcome("acked"))
	if got, n := ms.sum(t, "kinesislease.records", stream, outcome("outcome_9")); got != 2 || n != 1 {
		t.Errorf("records of outcome 9: %d in %d points, want 2 in 1", got, n)
	}
	if got, n := ms.gaugeSum(t, "kinesislease.behind_latest", stream); got != 0.9 || n != 1 {
		t.Errorf("lag without shard ids: %g in %d points, want the largest, 0.9, in 1", got, n)
	}
	ms.want(t, "kinesislease.leases.held", 2, stream, ownerA)

	// The schema without the shard id, with the extra attribute.
	checkSchema(t, ms, true, "service.component")

	for _, opt := range []otelkl.Option{otelkl.WithAttributes(otelkl.AttrStream.String("x")), otelkl.WithConsumerGroup(""), otelkl.WithAttributes(attribute.KeyValue{}), nil} {
		if _, err := otelkl.New(sdkmetric.NewMeterProvider(), opt); err == nil {
			t.Errorf("New with option %v: no error", opt)
		}
	}
}

// TestWithHooks: the service accepts the hooks (they implement the Hook
// interfaces), and New falls back to the global MeterProvider.
func TestWithHooks(t *testing.T) {
	h, err := otelkl.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kinesislease.New(aws.Config{Region: "us-east-1"}, kinesislease.WithHooks(h)); err != nil {
		t.Fatalf("WithHooks(otelkl hooks): %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}

// gauge returns the points of a float64 gauge, by shard_id (the stream's
// name without shard ids).
func (ms metrics) gauge(t testing.TB, name string) map[string]float64 {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		return nil
	}
	d, ok := m.Data.(metricdata.Gauge[float64])
	if !ok {
		t.Fatalf("%s: %T, want a float64 gauge", name, m.Data)
	}
	out := map[string]float64{}
	for _, p := range d.DataPoints {
		key, ok := p.Attributes.Value(otelkl.AttrShardID)
		if !ok {
			key, _ = p.Attributes.Value(otelkl.AttrStream)
		}
		out[key.AsString()] = p.Value
	}
	return out
}

// TestOldestUnresolvedAge: the age gauge reports, at each collection, the
// OldestUnresolvedAge of every shard held in the Health handed over
// (HookHealth), in seconds; a shard set aside is left out; without shard
// ids, the largest per stream.
func TestOldestUnresolvedAge(t *testing.T) {
	health := kltype.Health{Streams: []kltype.StreamHealth{{Stream: "orders", Shards: []kltype.ShardHealth{
		{ShardID: "shard-0", Reading: true, OldestUnresolvedAge: 90 * time.Second, Blocked: &kltype.BlockedRecord{}},
		{ShardID: "shard-1", Reading: true},
		{ShardID: "shard-2", Err: errors.New("denied")}, // set aside
	}}}}
	h, collect := newHooks(t)
	if got := collect(t).gauge(t, "kinesislease.oldest_unresolved.age"); len(got) != 0 {
		t.Fatalf("before a health source: %v", got)
	}
	h.OnHealthSource(func() kltype.Health { return health })
	got := collect(t).gauge(t, "kinesislease.oldest_unresolved.age")
	if want := map[string]float64{"shard-0": 90, "shard-1": 0}; !maps.Equal(got, want) {
		t.Errorf("ages %v, want %v", got, want)
	}
	health.Streams[0].Shards[0].OldestUnresolvedAge = 100 * time.Second
	if got := collect(t).gauge(t, "kinesislease.oldest_unresolved.age"); got["shard-0"] != 100 {
		t.Errorf("ages %v at the second collection, want shard-0 at 100", got)
	}

	h2, collect2 := newHooks(t, otelkl.WithoutShardID())
	h2.OnHealthSource(func() kltype.Health { return health })
	if got, want := collect2(t).gauge(t, "kinesislease.oldest_unresolved.age"), map[string]float64{"orders": 100}; !maps.Equal(got, want) {
		t.Errorf("ages without shard ids %v, want %v", got, want)
	}
}
