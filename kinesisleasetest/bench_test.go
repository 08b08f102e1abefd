package kinesisleasetest_test

import (
	"context"
	"testing"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
)

func BenchmarkHarnessJSON(b *testing.B)    { benchmarkHarness(b, codec.JSON) }
func BenchmarkHarnessMsgpack(b *testing.B) { benchmarkHarness(b, codec.Msgpack) }

// benchmarkHarness measures records per second through the harness (encode,
// decode, the real pipeline) with a handler that does nothing.
func benchmarkHarness(b *testing.B, c codec.Codec) {
	h := kinesisleasetest.New(b, func(context.Context, Order) error { return nil }, kinesisleasetest.WithCodec(c))
	ctx := context.Background()
	v := Order{ID: "order-000042", Total: 129.95}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if res := h.Handle(ctx, v); res.Outcome != kinesisleasetest.Acked {
			b.Fatalf("outcome %v", res)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}
