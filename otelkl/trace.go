package otelkl

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
)

// Tracing attributes beside the metrics'.
const (
	// AttrSequence is messaging.message.id: the record's sequence number.
	AttrSequence = semconv.MessagingMessageIDKey
	// AttrAttempt counts the deliveries of the record (1 the first time).
	AttrAttempt = attribute.Key("kinesislease.attempt")
)

// Span outcomes (kinesislease.outcome on spans).
const (
	SpanAcked      = "acked"
	SpanDropped    = "dropped"
	SpanDeadLetter = "dead_letter"
	SpanRetryAfter = "retry_after"
	SpanError      = "error"
	SpanPartial    = "partial" // a batch with some items failed (FailItems)
)

// The spans: Trace, TraceHandler and TraceBatch make a span of kind
// Consumer per delivery (each attempt), named "process <stream name>";
// TracePublisher one of kind Producer per record put, "send <stream name>"
// (Put) or "create <stream name>" (PutAsync). Their attributes follow the
// messaging conventions: messaging.system aws_kinesis,
// messaging.operation.name and .type, messaging.destination.name and
// aws.kinesis.stream_name (the stream's name, never its ARN),
// messaging.destination.partition.id (the shard), messaging.message.id
// (the sequence number), messaging.consumer.group.name (WithConsumerGroup),
// messaging.batch.message_count (batches), error.type on failures; and
// kinesislease.attempt and kinesislease.outcome.
//
// Kinesis records carry no headers or attributes, only a partition key and
// data: there is nowhere to put a trace context but the payload, which
// belongs to the application. So the producer's span and the consumer's are
// not linked: the process span is a child of the context Run was given. An
// application that wants them linked can carry a W3C traceparent in its own
// payload and add the link itself (trace.LinkFromContext) in its handler.

// tracing is what the wrappers share: the tracer, the options and the
// last stream's span name and attributes (a subscription has one stream).
type tracing struct {
	tracer trace.Tracer
	cfg    config
	op     string
	last   atomic.Pointer[streamSpan]
}

type streamSpan struct {
	stream string // as given
	name   string // "<op> <stream name>"
	attrs  []attribute.KeyValue
}

func newTracing(tp trace.TracerProvider, op string, opts []Option) *tracing {
	var cfg config
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	return &tracing{tracer: tp.Tracer(ScopeName, trace.WithSchemaURL(SchemaURL)), cfg: cfg, op: op}
}

// stream returns the span name and the attributes common to the spans of
// stream.
func (t *tracing) stream(stream string) *streamSpan {
	s := t.last.Load()
	if s != nil && s.stream == stream {
		return s
	}
	kv := append(streamAttrs(&t.cfg, stream), AttrOperationName.String(t.op))
	switch t.op {
	case "process":
		kv = append(kv, AttrOperationType.String(string(messagingconv.OperationTypeProcess)))
	case "send":
		kv = append(kv, AttrOperationType.String(string(messagingconv.OperationTypeSend)))
	case "create":
		kv = append(kv, AttrOperationType.String(string(messagingconv.OperationTypeCreate)))
	}
	s = &streamSpan{stream: stream, name: t.op + " " + kinesisx.Name(stream), attrs: append(kv, t.cfg.attrs...)}
	t.last.Store(s)
	return s
}

var (
	consumerKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	producerKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}
)

// end sets the outcome, error.type and status of a span, and ends it.
func end(span trace.Span, recording bool, err error) {
	if recording {
		o := outcome(err)
		span.SetAttributes(AttrOutcome.String(o))
		if err != nil && o != SpanDropped {
			span.SetAttributes(AttrErrorType.String(ErrorType(err)))
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// is reports whether err's chain holds a P.
func is[P interface {
	*T
	error
}, T any](err error) bool {
	var target P
	return errors.As(err, &target)
}

// outcome classifies a handler's error.
func outcome(err error) string {
	switch {
	case err == nil:
		return SpanAcked
	case is[*kltype.DropError](err):
		return SpanDropped
	case is[*kltype.DeadLetterError](err):
		return SpanDeadLetter
	case is[*kltype.RetryAfterError](err):
		return SpanRetryAfter
	case is[*kltype.BatchError](err):
		return SpanPartial
	}
	return SpanError
}

// start starts the span of the record ctx carries; ok is false outside a
// handler (no span).
func (t *tracing) start(ctx context.Context) (_ context.Context, span trace.Span, recording, ok bool) {
	rec, ok := kinesislease.RecordFrom(ctx)
	if !ok {
		return ctx, nil, false, false
	}
	s := t.stream(rec.Stream)
	ctx, span = t.tracer.Start(ctx, s.name, consumerKind...)
	recording = span.IsRecording()
	if recording { // a sampled-out or no-op span costs no attributes
		span.SetAttributes(s.attrs...)
		span.SetAttributes(
			AttrShardID.String(rec.ShardID),
			AttrSequence.String(rec.SequenceNumber),
			AttrAttempt.Int(rec.Attempt),
		)
	}
	return ctx, span, recording, true
}

// Trace wraps a handler function so that every delivery of a record (each
// attempt) is a span of tp's tracer named "process <stream name>", of kind
// Consumer, a child of whatever span the handler's context carries (the
// context Run was given), and the parent of the spans the handler starts
// from its context. kinesislease.outcome says what the handler returned:
// acked, dropped, dead_letter (the handler asked for it), retry_after, or
// error (retried per the policy, then dead-lettered). A handler error other
// than Drop sets error.type and the span's status to Error, and is recorded
// on it. opts: WithConsumerGroup and WithAttributes.
//
//	kinesislease.Subscribe(svc, "fulfilment", otelkl.Trace(tp, fulfil, otelkl.WithConsumerGroup("fulfilment")))
func Trace[T any](tp trace.TracerProvider, h kinesislease.HandlerFunc[T], opts ...Option) kinesislease.HandlerFunc[T] {
	t := newTracing(tp, "process", opts)
	return func(ctx context.Context, v T) error {
		ctx, span, recording, ok := t.start(ctx)
		if !ok {
			return h(ctx, v)
		}
		err := h(ctx, v)
		end(span, recording, err)
		return err
	}
}

// TraceHandler is Trace for a Handler (SubscribeHandler).
func TraceHandler[T any](tp trace.TracerProvider, h kinesislease.Handler[T], opts ...Option) kinesislease.Handler[T] {
	return tracedHandler[T]{t: newTracing(tp, "process", opts), h: h}
}

type tracedHandler[T any] struct {
	t *tracing
	h kinesislease.Handler[T]
}

func (th tracedHandler[T]) Handle(ctx context.Context, v T) error {
	ctx, span, recording, ok := th.t.start(ctx)
	if !ok {
		return th.h.Handle(ctx, v)
	}
	err := th.h.Handle(ctx, v)
	end(span, recording, err)
	return err
}

// TraceBatch is Trace for a batch handler (SubscribeBatch): a span per
// delivery of a batch, with messaging.batch.message_count, the shard, and
// the first item's attempt; messaging.message.id is left out (a batch has
// many). kinesislease.outcome is acked, partial (FailItems: some items
// failed, and error.type is set), or as Trace's for an error failing every
// item.
func TraceBatch[T any](tp trace.TracerProvider, h kinesislease.BatchHandlerFunc[T], opts ...Option) kinesislease.BatchHandlerFunc[T] {
	t := newTracing(tp, "process", opts)
	return func(ctx context.Context, items []kinesislease.BatchItem[T]) error {
		if len(items) == 0 || items[0].Record == nil {
			return h(ctx, items)
		}
		rec := items[0].Record
		s := t.stream(rec.Stream)
		ctx, span := t.tracer.Start(ctx, s.name, consumerKind...)
		recording := span.IsRecording()
		if recording {
			span.SetAttributes(s.attrs...)
			span.SetAttributes(
				AttrShardID.String(rec.ShardID),
				AttrBatchCount.Int(len(items)),
				AttrAttempt.Int(rec.Attempt),
			)
		}
		err := h(ctx, items)
		end(span, recording, err)
		return err
	}
}

// Publisher is a kinesislease.Publisher whose puts are traced (see
// TracePublisher).
type Publisher[T any] struct {
	p            *kinesislease.Publisher[T]
	send, create *tracing
}

// TracePublisher wraps p so that every record put is a span of tp's
// tracer, of kind Producer: Put's, named "send <stream name>"
// (messaging.operation.type send), lasts until Kinesis accepted the record
// or the publisher gave up; PutAsync's, "create <stream name>" (type
// create), lasts while the record is encoded and queued. Both carry the
// stream's name (messaging.destination.name, aws.kinesis.stream_name) and
// error.type on failure; neither can carry a trace context to the
// consumer (Kinesis records have no headers: see the package
// documentation). opts: WithAttributes.
func TracePublisher[T any](tp trace.TracerProvider, p *kinesislease.Publisher[T], opts ...Option) *Publisher[T] {
	return &Publisher[T]{p: p, send: newTracing(tp, "send", opts), create: newTracing(tp, "create", opts)}
}

// Unwrap returns the publisher wrapped.
func (tp *Publisher[T]) Unwrap() *kinesislease.Publisher[T] { return tp.p }

func (t *tracing) produce(ctx context.Context, stream string, call func(context.Context) error) error {
	s := t.stream(stream)
	ctx, span := t.tracer.Start(ctx, s.name, producerKind...)
	recording := span.IsRecording()
	if recording {
		span.SetAttributes(s.attrs...)
	}
	err := call(ctx)
	if recording && err != nil {
		span.SetAttributes(AttrErrorType.String(ErrorType(err)))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return err
}

// Put is kinesislease.Publisher.Put within a "send" span.
func (tp *Publisher[T]) Put(ctx context.Context, partitionKey string, v T) error {
	return tp.send.produce(ctx, tp.p.Stream(), func(ctx context.Context) error { return tp.p.Put(ctx, partitionKey, v) })
}

// PutAsync is kinesislease.Publisher.PutAsync within a "create" span.
func (tp *Publisher[T]) PutAsync(ctx context.Context, partitionKey string, v T) (<-chan error, error) {
	var res <-chan error
	err := tp.create.produce(ctx, tp.p.Stream(), func(context.Context) error {
		var err error
		res, err = tp.p.PutAsync(partitionKey, v)
		return err
	})
	return res, err
}

// Close closes the publisher wrapped.
func (tp *Publisher[T]) Close(ctx context.Context) error { return tp.p.Close(ctx) }
