package kinesisleasetest_test

import (
	"context"
	"testing"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
)

func BenchmarkHarnessJSON(b *testing.B)    { benchmarkHarness(b, codec.JSON) }
func BenchmarkHarnessMsgpack(b *testing.B) { benchmarkHarness(b, codec.Msgpack) }

// benchmarkHarness measures records per second through the harness (encode,
// decode, the real pipeline) with a handler that does nothing.
func benchmarkHarness(b *testing.B, c codec.Codec) {
	h := kinesisleasetest.New(b, func(context.Context, Order) error { return nil }, kinesisleasetest.WithSubscribeOptions(kinesislease.WithCodec(c)))
	ctx := context.Background()
	v := Order{ID: "order-000042", Total: 129.95}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if res := h.Handle(ctx, v); res.Outcome != kltype.Acked {
			b.Fatalf("outcome %v", res)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkRawCodecJSON(b *testing.B)    { benchmarkRawCodec(b, codec.JSON) }
func BenchmarkRawCodecMsgpack(b *testing.B) { benchmarkRawCodec(b, codec.Msgpack) }

// benchmarkRawCodec is the floor the harness is compared with: what Handle
// must do whatever the pipeline costs, encoding the value and decoding it,
// in a loop and nothing else.
func benchmarkRawCodec(b *testing.B, c codec.Codec) {
	in := Order{ID: "order-000042", Total: 129.95}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		data, err := c.Marshal(in)
		if err != nil {
			b.Fatal(err)
		}
		var v Order
		if err := c.Unmarshal(data, &v); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}
