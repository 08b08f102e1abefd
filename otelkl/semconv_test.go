package otelkl_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv138 "go.opentelemetry.io/otel/semconv/v1.38.0"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/otelkl"
)

// conventions are the semantic conventions' names otelkl emits, from the
// semconv package's constants, with the names they stand for when this
// test was written: a semconv upgrade that renames one fails here (update
// the docs and the CHANGELOG), and so does an attribute or metric otelkl
// names by a literal of its own that is not the convention's.
var conventions = map[string]string{
	string(semconv.MessagingSystemKey):                 "messaging.system",
	string(semconv.MessagingOperationNameKey):          "messaging.operation.name",
	string(semconv.MessagingOperationTypeKey):          "messaging.operation.type",
	string(semconv.MessagingDestinationNameKey):        "messaging.destination.name",
	string(semconv.MessagingDestinationPartitionIDKey): "messaging.destination.partition.id",
	string(semconv.MessagingConsumerGroupNameKey):      "messaging.consumer.group.name",
	string(semconv.MessagingBatchMessageCountKey):      "messaging.batch.message_count",
	string(semconv.MessagingMessageIDKey):              "messaging.message.id",
	string(semconv.AWSKinesisStreamNameKey):            "aws.kinesis.stream_name",
	string(semconv.ErrorTypeKey):                       "error.type",
	string(semconv.RPCMethodKey):                       "rpc.method",
	string(semconv138.RPCSystemKey):                    "rpc.system",
	string(semconv138.RPCServiceKey):                   "rpc.service",

	messagingconv.ProcessDuration{}.Name():         "messaging.process.duration",
	messagingconv.ClientConsumedMessages{}.Name():  "messaging.client.consumed.messages",
	messagingconv.ClientOperationDuration{}.Name(): "messaging.client.operation.duration",
}

// units are the conventions' units of the metrics otelkl emits under
// their names.
var units = map[string]string{
	messagingconv.ProcessDuration{}.Name():         messagingconv.ProcessDuration{}.Unit(),
	messagingconv.ClientConsumedMessages{}.Name():  messagingconv.ClientConsumedMessages{}.Unit(),
	messagingconv.ClientOperationDuration{}.Name(): messagingconv.ClientOperationDuration{}.Unit(),
}

// checkName: name is a convention's (of the semconv package) or
// kinesislease's own.
func checkName(t *testing.T, what, name string) {
	t.Helper()
	if strings.HasPrefix(name, "kinesislease.") {
		return
	}
	if _, ok := conventions[name]; !ok {
		t.Errorf("%s %q is neither a semantic convention's name (semconv) nor under kinesislease.", what, name)
	}
}

// TestSemconvNames: every metric and attribute name the hooks and the
// tracing wrappers emit is the semantic conventions' (taken from the
// semconv package) or under kinesislease.; the conventions' required
// attributes are there; the stream is named by its name even when
// subscribed by ARN.
func TestSemconvNames(t *testing.T) {
	for got, want := range conventions {
		if got != want {
			t.Errorf("semconv names %q what this package documents as %q: the conventions moved; update otelkl, docs/operations.md and the CHANGELOG", got, want)
		}
	}

	// Metrics.
	h, collect := newHooks(t, otelkl.WithConsumerGroup("billing"))
	ctx := context.Background()
	const arn = "arn:aws:kinesis:eu-west-1:123456789012:stream/orders"
	h.OnHealthSource(func() kltype.Health {
		return kltype.Health{Streams: []kltype.StreamHealth{{Stream: arn, Shards: []kltype.ShardHealth{{ShardID: "s-1", Reading: true}}}}}
	})
	h.OnLeaseAcquired(ctx, kltype.LeaseInfo{Stream: arn, ShardID: "s-1", Owner: "a", From: "b"})
	h.OnShardStarted(kltype.ShardInfo{Stream: arn, ShardID: "s-1"})
	h.OnBatchFetched(kltype.BatchInfo{Stream: arn, ShardID: "s-1", Records: 2, Bytes: 20, MillisBehindLatest: 2500})
	h.OnRecordHandled(kltype.RecordInfo{Stream: arn, ShardID: "s-1", Outcome: kltype.Acked, Bytes: 10, Duration: time.Millisecond})
	h.OnRecordHandled(kltype.RecordInfo{Stream: arn, ShardID: "s-1", Outcome: kltype.DeadLettered, Bytes: 10, Duration: time.Millisecond})
	h.OnCheckpointWritten(kltype.CheckpointInfo{Stream: arn, ShardID: "s-1", Err: errors.New("x")})
	h.OnThrottled(kltype.ThrottleInfo{Stream: arn, ShardID: "s-1", Op: "GetRecords", Err: &ktypes.ProvisionedThroughputExceededException{}})
	h.OnDeadLettered(&kltype.DeadLetterRecord{Record: &kltype.Record{Stream: arn, ShardID: "s-1"}, Reason: "decode"})
	h.OnFailed(kltype.FailureInfo{Stream: arn, Err: errors.New("gone")})
	h.OnUserRecordsFiltered(kltype.FilterInfo{Stream: arn, ShardID: "s-1", Filtered: 1})
	h.OnCall(kltype.CallInfo{Service: "kinesis", Op: "GetRecords", Duration: time.Millisecond})
	h.OnCall(kltype.CallInfo{Service: "dynamodb", Op: "Checkpoint", Duration: time.Millisecond, Err: &leases.ConflictError{}})
	ms := collect(t)
	checkSchema(t, ms, false, otelkl.AttrConsumerGroup)
	for name, m := range ms {
		checkName(t, "metric", name)
		if u, ok := units[name]; ok && m.Unit != u {
			t.Errorf("%s: unit %q, the conventions' %q", name, m.Unit, u)
		}
		for _, set := range attributeSets(m) {
			for _, kv := range set.ToSlice() {
				checkName(t, name+": attribute", string(kv.Key))
				if (kv.Key == otelkl.AttrStream || kv.Key == otelkl.AttrStreamName) && kv.Value.AsString() != "orders" {
					t.Errorf("%s: %s = %q, want the stream's name", name, kv.Key, kv.Value.AsString())
				}
			}
			if strings.HasPrefix(name, "messaging.") {
				for _, k := range []attribute.Key{otelkl.AttrSystem, otelkl.AttrOperationName} { // required
					if v, ok := set.Value(k); !ok || v.AsString() == "" {
						t.Errorf("%s: no %s in %v", name, k, set.ToSlice())
					}
				}
			}
		}
	}
	for _, name := range []string{"messaging.process.duration", "messaging.client.consumed.messages", "messaging.client.operation.duration"} {
		if _, ok := ms[name]; !ok {
			t.Errorf("%s not emitted", name)
		}
	}
	if got := ms.calls(t, opDuration, otelkl.AttrSystem.String("aws_kinesis"), otelkl.AttrRPCSystem.String("aws-api")); got != 1 {
		t.Errorf("GetRecords calls with messaging.system and rpc.system: %d", got)
	}

	// Spans: every handler shape, and the publisher.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	group := otelkl.WithConsumerGroup("billing")
	kinesisleasetest.New(t, otelkl.Trace(tp, func(context.Context, order) error { return nil }, group)).Handle(ctx, order{}).RequireAcked(t)
	kinesisleasetest.NewHandler(t, otelkl.TraceHandler[order](tp, failing{}, group),
		kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(kltype.RetryPolicy{Attempts: 1, InitialDelay: 1, MaxDelay: 1}))).Handle(ctx, order{})
	kinesisleasetest.NewBatch(t, otelkl.TraceBatch(tp, func(_ context.Context, items []kinesislease.BatchItem[order]) error {
		return kinesislease.FailItems(kltype.ItemFailure{Index: 1, Err: kinesislease.Drop(errors.New("bad"))})
	}, group)).HandleBatch(ctx, order{ID: 1}, order{ID: 2}, order{ID: 3})
	p, err := kinesislease.NewPublisherFromClient[order](&producer{}, arn, kinesislease.WithLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	tpub := otelkl.TracePublisher(tp, p)
	if err := tpub.Put(ctx, "k", order{ID: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := tpub.PutAsync(ctx, "k", order{ID: 2})
	if err != nil || <-res != nil {
		t.Fatal(err)
	}
	if err := tpub.Close(ctx); err != nil {
		t.Fatal(err)
	}

	spans := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		op := ""
		for _, kv := range s.Attributes() {
			checkName(t, "span "+s.Name()+": attribute", string(kv.Key))
			if kv.Key == otelkl.AttrOperationName {
				op = kv.Value.AsString()
			}
		}
		spans[op] = append(spans[op], s)
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
		m := map[attribute.Key]string{}
		for _, kv := range s.Attributes() {
			m[kv.Key] = kv.Value.String()
		}
		return m
	}
	if n := len(spans["process"]); n != 3 {
		t.Fatalf("%d process spans, want 3 (HandlerFunc, Handler, batch)", n)
	}
	for _, s := range spans["process"] {
		a := attrs(s)
		if s.SpanKind() != trace.SpanKindConsumer || a[otelkl.AttrSystem] != "aws_kinesis" || a[otelkl.AttrOperationType] != "process" ||
			a[otelkl.AttrConsumerGroup] != "billing" || a[otelkl.AttrStream] == "" || a[otelkl.AttrStream] != a[otelkl.AttrStreamName] || a[otelkl.AttrShardID] == "" {
			t.Errorf("process span %q: kind %v, attributes %v", s.Name(), s.SpanKind(), a)
		}
		switch a[otelkl.AttrOutcome] {
		case "acked":
			if _, ok := a[otelkl.AttrErrorType]; ok {
				t.Errorf("acked span with error.type: %v", a)
			}
		case "error":
			if a[otelkl.AttrErrorType] != "*errors.errorString" {
				t.Errorf("failed span: error.type %q, want the Go type", a[otelkl.AttrErrorType])
			}
		case "partial":
			if a[otelkl.AttrBatchCount] != "3" || a[otelkl.AttrErrorType] == "" {
				t.Errorf("batch span: %v, want messaging.batch.message_count 3 and error.type", a)
			}
		default:
			t.Errorf("process span outcome %q", a[otelkl.AttrOutcome])
		}
	}
	for op, kind := range map[string]string{"send": "send", "create": "create"} {
		if len(spans[op]) != 1 {
			t.Fatalf("%d %s spans, want 1", len(spans[op]), op)
		}
		s := spans[op][0]
		a := attrs(s)
		if s.Name() != op+" orders" || s.SpanKind() != trace.SpanKindProducer || a[otelkl.AttrOperationType] != kind ||
			a[otelkl.AttrStream] != "orders" || a[otelkl.AttrStreamName] != "orders" || a[otelkl.AttrSystem] != "aws_kinesis" {
			t.Errorf("%s span %q: kind %v, attributes %v", op, s.Name(), s.SpanKind(), a)
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range conventions {
			if !yield(k) {
				return
			}
		}
	})
	t.Logf("conventions checked: %v", names)
}

type failing struct{}

func (failing) Handle(context.Context, order) error { return errors.New("boom") }

// producer accepts every record.
type producer struct{}

func (*producer) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	out := &kinesis.PutRecordsOutput{}
	for range in.Records {
		out.Records = append(out.Records, ktypes.PutRecordsResultEntry{SequenceNumber: aws.String("1"), ShardId: aws.String("shardId-000000000000")})
	}
	return out, nil
}
