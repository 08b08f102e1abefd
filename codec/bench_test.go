package codec_test

import (
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/codec"
)

// smallOrder is the kind of record a stream typically carries.
type smallOrder struct {
	ID        string    `json:"id"`
	Customer  int64     `json:"customer"`
	Total     float64   `json:"total"`
	Currency  string    `json:"currency"`
	Items     []string  `json:"items"`
	CreatedAt time.Time `json:"created_at"`
}

func benchCodec(b *testing.B, c codec.Codec) {
	in := smallOrder{
		ID:        "ord-0000042",
		Customer:  1234567,
		Total:     99.95,
		Currency:  "EUR",
		Items:     []string{"sku-1", "sku-2", "sku-3"},
		CreatedAt: time.Date(2024, 3, 9, 14, 30, 5, 0, time.UTC),
	}
	data, err := c.Marshal(&in)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Marshal(&in); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(data)), "bytes/record")
	})
	b.Run("Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var out smallOrder
			if err := c.Unmarshal(data, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("RoundTrip", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d, err := c.Marshal(&in)
			if err != nil {
				b.Fatal(err)
			}
			var out smallOrder
			if err := c.Unmarshal(d, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkJSON(b *testing.B)    { benchCodec(b, codec.JSON) }
func BenchmarkMsgpack(b *testing.B) { benchCodec(b, codec.Msgpack) }
