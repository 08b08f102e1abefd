package codec_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/codec"
)

func FuzzJSONUnmarshal(f *testing.F) {
	for _, s := range []string{
		"", "null", "{}", "[]", `"x"`, "0", "{", `{"id":`, `{"id":1}`,
		`{"created_at":"not a time"}`, `{"created_at":"2024-01-02T03:04:05.999999999+14:00"}`,
		`{"blob":"!!notbase64"}`, `{"lines":[{"qty":1e400}]}`, `{"attrs":{"a":[[[[{}]]]]}}`,
		`{"counts":{"a":-1.5}}`, `{"bill":null,"refs":[null]}`, "{}{}", "\xff\xfe",
	} {
		f.Add([]byte(s))
	}
	fuzzUnmarshal(f, codec.JSON)
}

func FuzzMsgpackUnmarshal(f *testing.F) {
	for _, s := range [][]byte{
		{}, {0xc0}, {0x80}, {0x90}, {0xc1}, {0x81}, {0x81, 0xa2, 'i', 'd'},
		{0x81, 0xa2, 'i', 'd', 0x2a},   // wrong type
		{0xdd, 0xff, 0xff, 0xff, 0xff}, // huge array
		{0xdf, 0xff, 0xff, 0xff, 0xff}, // huge map
		{0x81, 0xa5, 'a', 't', 't', 'r', 's', 0x81, 0xa1, 'x', 0x81, 0x91, 0x01, 0x01}, // array as map key
		{0x81, 0xa5, 'a', 't', 't', 'r', 's', 0x81, 0xa1, 'x', 0xd6, 0xff, 0, 0, 0, 0}, // time in any
		{0x81, 0xa5, 'a', 't', 't', 'r', 's', 0x81, 0xa1, 'x', 0xd4, 0x05, 0x00},       // unknown ext
		{0x81, 0xaa, 'c', 'r', 'e', 'a', 't', 'e', 'd', '_', 'a', 't', 0xd4, 0xff, 0x00},
		{0x81, 0xa6, 'c', 'o', 'u', 'n', 't', 's', 0xd4, 0x01, 0x00, 0x80}, // ext before map
		{0x92, 0xc0, 0xc0}, // struct as array
	} {
		f.Add(s)
	}
	fuzzUnmarshal(f, codec.Msgpack)
}

// fuzzUnmarshal decodes arbitrary bytes into an Order: the codec must never
// panic, must return either a value or a *DecodeError, and whatever it
// decodes it must be able to encode and decode again.
func fuzzUnmarshal(f *testing.F, c codec.Codec) {
	discount := 2.5
	for _, o := range []Order{
		sampleOrder(),
		{},
		{ID: "x", CreatedAt: time.Unix(0, 1), Bill: &Address{}, Discount: &discount},
		{Attrs: map[string]any{"n": nil, "m": map[string]any{"k": []any{1.5, "s", true}}}},
	} {
		data, err := c.Marshal(o)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var o Order
		if err := c.Unmarshal(data, &o); err != nil {
			var de *codec.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *DecodeError: %v", err, err)
			}
			if de.Codec != c.Name() || de.Type != "codec_test.Order" {
				t.Fatalf("DecodeError = %+v", de)
			}
			return
		}
		out, err := c.Marshal(&o)
		if err != nil {
			t.Fatalf("decoded %#v but cannot encode it: %v", o, err)
		}
		var again Order
		if err := c.Unmarshal(out, &again); err != nil {
			t.Fatalf("cannot decode own encoding %q of %#v: %v", out, o, err)
		}
	})
}
