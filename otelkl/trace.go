package otelkl

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kltype"
)

// Tracing attributes beside the metrics' (AttrStream, AttrShardID).
const (
	AttrSequence = attribute.Key("messaging.message.id")
	AttrAttempt  = attribute.Key("kinesislease.attempt")
)

// Trace wraps a handler so that every delivery of a record (each attempt)
// is a span of tp's tracer named "process <stream>", of kind Consumer, a
// child of whatever span the handler's context carries (the context Run
// was given), and the parent of the spans the handler starts from its
// context. Its attributes: messaging.system aws_kinesis,
// messaging.operation.type process, the stream (kinesis.stream and
// messaging.destination.name), kinesis.shard_id, the sequence number
// (messaging.message.id), kinesislease.attempt, and kinesislease.outcome:
// acked, dropped, dead_letter (the handler asked for it), retry_after, or
// error (retried per the policy, then dead-lettered). A handler error
// other than Drop sets the span's status to Error and is recorded on it.
//
//	kinesislease.Subscribe(svc, "fulfilment", otelkl.Trace(tp, fulfil))
func Trace[T any](tp trace.TracerProvider, h kinesislease.HandlerFunc[T]) kinesislease.HandlerFunc[T] {
	tracer := tp.Tracer(ScopeName)
	kind := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	var names atomic.Pointer[[2]string] // the last stream and its span name: one subscription, one stream
	return func(ctx context.Context, v T) error {
		rec, ok := kinesislease.RecordFrom(ctx)
		if !ok {
			return h(ctx, v)
		}
		name := names.Load()
		if name == nil || name[0] != rec.Stream {
			name = &[2]string{rec.Stream, "process " + rec.Stream}
			names.Store(name)
		}
		ctx, span := tracer.Start(ctx, name[1], kind...)
		recording := span.IsRecording()
		if recording { // a sampled-out or no-op span costs no attributes
			span.SetAttributes(
				attribute.String("messaging.system", "aws_kinesis"),
				attribute.String("messaging.operation.type", "process"),
				attribute.String("messaging.destination.name", rec.Stream),
				AttrStream.String(rec.Stream),
				AttrShardID.String(rec.ShardID),
				AttrSequence.String(rec.SequenceNumber),
				AttrAttempt.Int(rec.Attempt),
			)
		}
		err := h(ctx, v)
		if recording {
			outcome := "acked"
			var (
				drop  *kltype.DropError
				dead  *kltype.DeadLetterError
				after *kltype.RetryAfterError
			)
			switch {
			case err == nil:
			case errors.As(err, &drop):
				outcome = "dropped"
			case errors.As(err, &dead):
				outcome = "dead_letter"
			case errors.As(err, &after):
				outcome = "retry_after"
			default:
				outcome = "error"
			}
			span.SetAttributes(AttrOutcome.String(outcome))
			if err != nil && outcome != "dropped" {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
		}
		span.End()
		return err
	}
}
