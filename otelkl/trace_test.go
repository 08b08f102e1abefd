package otelkl_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/otelkl"
)

// TestTrace: each delivery is a consumer span, a child of the span the
// handler's context carries and the parent of the handler's own spans,
// with the record's stream, shard, sequence number, attempt and outcome; a
// failed attempt is marked Error and the retry gets a span of its own.
func TestTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	boom := errors.New("boom")
	h := kinesisleasetest.New(t, otelkl.Trace(tp, func(ctx context.Context, _ order) error {
		_, child := tp.Tracer("handler").Start(ctx, "write")
		child.End()
		if r, _ := kinesislease.RecordFrom(ctx); r.Attempt == 1 {
			return boom
		}
		return nil
	}), kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(kltype.RetryPolicy{Attempts: 3, InitialDelay: 1, MaxDelay: 1})))
	ctx, parent := tp.Tracer("test").Start(context.Background(), "poll")
	res := h.Handle(ctx, order{ID: 1}, kinesisleasetest.WithSequenceNumber("42"))
	parent.End()
	res.RequireAcked(t)

	var process []sdktrace.ReadOnlySpan
	children := map[trace.SpanID]int{}
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "process " + kinesisleasetest.DefaultStream:
			process = append(process, s)
		case "write":
			children[s.Parent().SpanID()]++
		}
	}
	if len(process) != 2 {
		t.Fatalf("%d process spans, want one per attempt (2)", len(process))
	}
	for i, s := range process {
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		wantOutcome, wantStatus := "error", codes.Error
		if i == 1 {
			wantOutcome, wantStatus = "acked", codes.Unset
		}
		if s.SpanKind() != trace.SpanKindConsumer || s.Parent().SpanID() != parent.SpanContext().SpanID() ||
			attrs[otelkl.AttrStream].AsString() != kinesisleasetest.DefaultStream || attrs[otelkl.AttrShardID].AsString() != kinesisleasetest.DefaultShard ||
			attrs[otelkl.AttrSequence].AsString() != "42" || attrs[otelkl.AttrAttempt].AsInt64() != int64(i+1) ||
			attrs[otelkl.AttrOutcome].AsString() != wantOutcome || s.Status().Code != wantStatus {
			t.Errorf("span %d: kind %v, parent %v, attributes %v, status %v; want consumer, child of %v, attempt %d, outcome %s, status %v",
				i, s.SpanKind(), s.Parent().SpanID(), attrs, s.Status(), parent.SpanContext().SpanID(), i+1, wantOutcome, wantStatus)
		}
		if children[s.SpanContext().SpanID()] != 1 {
			t.Errorf("span %d: %d handler spans under it, want 1", i, children[s.SpanContext().SpanID()])
		}
	}
}
