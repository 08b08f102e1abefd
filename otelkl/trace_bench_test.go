package otelkl_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/otelkl"
)

// BenchmarkTrace measures what Trace adds to a handler call per record:
// none (the bare handler), a no-op tracer provider, and the SDK's provider
// sampling every span with nothing exporting (the cost of building and
// ending the span). Compare with BenchmarkRecordHook's metrics cost.
func BenchmarkTrace(b *testing.B) {
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer sdk.Shutdown(context.Background())
	handler := func(context.Context, order) error { return nil }
	for _, bc := range []struct {
		name string
		h    kinesislease.HandlerFunc[order]
	}{
		{"bare", handler},
		{"noop", otelkl.Trace(trace.TracerProvider(noop.NewTracerProvider()), handler)},
		{"sdk", otelkl.Trace(trace.TracerProvider(sdk), handler)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx, r := pipeline.NewRecordContext(context.Background())
			r.Stream, r.ShardID, r.SequenceNumber, r.Attempt = "bench", "shardId-000000000000", "49680699815135250590417184751679121418940711877092573202", 1
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.h(ctx, order{ID: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
