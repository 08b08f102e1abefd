package codec_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m)
}

var codecs = []codec.Codec{codec.JSON, codec.Msgpack}

type Address struct {
	Street string `json:"street"`
	City   string `json:"city"`
}

type Line struct {
	SKU   string  `json:"sku"`
	Qty   int     `json:"qty"`
	Price float64 `json:"price"`
}

// Order is a representative record: it carries json tags only, and must work
// unchanged with both codecs.
type Order struct {
	ID        string            `json:"id"`
	Customer  int64             `json:"customer"`
	Version   uint32            `json:"version"`
	Delta     int8              `json:"delta"`
	Total     float64           `json:"total"`
	Rate      float32           `json:"rate"`
	Paid      bool              `json:"paid"`
	CreatedAt time.Time         `json:"created_at"`
	Ship      Address           `json:"ship"`
	Bill      *Address          `json:"bill,omitempty"`
	Lines     []Line            `json:"lines"`
	Refs      []*Line           `json:"refs,omitempty"`
	Tags      map[string]string `json:"tags"`
	Counts    map[string]int    `json:"counts,omitempty"`
	Attrs     map[string]any    `json:"attrs,omitempty"`
	Blob      []byte            `json:"blob"`
	Note      string            `json:"note,omitempty"`
	Discount  *float64          `json:"discount,omitempty"`
	Secret    string            `json:"-"`
	internal  string
}

func sampleOrder() Order {
	discount := 0.15
	return Order{
		ID:        "ord-42",
		Customer:  -9_000_000_000,
		Version:   70000,
		Delta:     -3,
		Total:     123.45,
		Rate:      0.5,
		Paid:      true,
		CreatedAt: time.Date(2024, 3, 9, 14, 30, 5, 123456789, time.UTC),
		Ship:      Address{Street: "1 Main St", City: "Zürich"},
		Bill:      &Address{Street: "PO Box 7", City: "Basel"},
		Lines: []Line{
			{SKU: "A-1", Qty: 2, Price: 10},
			{SKU: "B-2", Qty: 1, Price: 103.45},
		},
		Refs:     []*Line{{SKU: "R", Qty: 1}},
		Tags:     map[string]string{"channel": "web", "region": "eu"},
		Counts:   map[string]int{"retries": 3},
		Attrs:    map[string]any{"gift": true, "wrap": "red", "weight": 1.5, "list": []any{"x", false}},
		Blob:     []byte{0, 1, 2, 0xff},
		Discount: &discount,
	}
}

// normalize makes decoded orders comparable with reflect.DeepEqual: Msgpack
// decodes times in time.Local.
func normalize(o *Order) {
	o.CreatedAt = o.CreatedAt.UTC()
}

func TestName(t *testing.T) {
	if got := codec.JSON.Name(); got != "json" {
		t.Errorf("JSON.Name() = %q, want json", got)
	}
	if got := codec.Msgpack.Name(); got != "msgpack" {
		t.Errorf("Msgpack.Name() = %q, want msgpack", got)
	}
}

func TestRoundTrip(t *testing.T) {
	full := sampleOrder()
	minimal := Order{ID: "min"} // nil maps, slices and pointers, zero time
	for _, c := range codecs {
		for name, in := range map[string]Order{"full": full, "minimal": minimal} {
			t.Run(c.Name()+"/"+name, func(t *testing.T) {
				in.Secret = "not encoded"
				in.internal = "not encoded"
				data, err := c.Marshal(&in)
				if err != nil {
					t.Fatalf("Marshal: %v", err)
				}
				if bytes.Contains(data, []byte("not encoded")) {
					t.Errorf("encoding contains a `json:\"-\"` or unexported field: %q", data)
				}
				var out Order
				if err := c.Unmarshal(data, &out); err != nil {
					t.Fatalf("Unmarshal: %v", err)
				}
				if !out.CreatedAt.Equal(in.CreatedAt) {
					t.Errorf("CreatedAt = %v, want %v", out.CreatedAt, in.CreatedAt)
				}
				want := in
				want.Secret, want.internal = "", ""
				normalize(&out)
				normalize(&want)
				if !reflect.DeepEqual(out, want) {
					t.Errorf("round trip mismatch\n got: %#v\nwant: %#v", out, want)
				}
			})
		}
	}
}

// keys decodes a struct encoding generically and returns its top-level keys.
func keys(t *testing.T, c codec.Codec, data []byte) []string {
	t.Helper()
	var m map[string]any
	if err := c.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: Unmarshal into map: %v", c.Name(), err)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return sortStrings(ks)
}

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

// TestMsgpackJSONTagFallback checks that Msgpack names fields exactly as JSON
// does, omitempty included, for a struct with json tags only.
func TestMsgpackJSONTagFallback(t *testing.T) {
	for name, in := range map[string]Order{"full": sampleOrder(), "minimal": {ID: "min"}} {
		t.Run(name, func(t *testing.T) {
			j, err := codec.JSON.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			m, err := codec.Msgpack.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			jk, mk := keys(t, codec.JSON, j), keys(t, codec.Msgpack, m)
			if !reflect.DeepEqual(jk, mk) {
				t.Errorf("msgpack keys %v, json keys %v", mk, jk)
			}
			if name == "minimal" && slicesContain(mk, "note") {
				t.Errorf("omitempty field note encoded: %v", mk)
			}
		})
	}
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestMsgpackTagWins(t *testing.T) {
	type both struct {
		A string `msgpack:"a_mp" json:"a_json"`
		B string `json:"b_json"`
		C string `msgpack:"-" json:"c_json"`
		D string
	}
	data, err := codec.Msgpack.Marshal(both{A: "a", B: "b", C: "c", D: "d"})
	if err != nil {
		t.Fatal(err)
	}
	got := keys(t, codec.Msgpack, data)
	want := []string{"D", "a_mp", "b_json"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("keys = %v, want %v", got, want)
	}
	var out both
	if err := codec.Msgpack.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if out != (both{A: "a", B: "b", D: "d"}) {
		t.Errorf("decoded %+v", out)
	}
}

// TestMsgpackInterop decodes bytes as a non-Go producer (or plain
// msgpack.Marshal) would write them.
func TestMsgpackInterop(t *testing.T) {
	in := map[string]any{
		"id":         "ord-1",
		"customer":   int8(7),    // narrowest integer form
		"version":    uint64(12), // wide integer form
		"total":      float32(2.5),
		"created_at": time.Unix(1700000000, 0),
		"ship":       map[string]any{"city": "Bern"},
		"unknown":    []any{1, "x"},
	}
	data, err := msgpack.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Order
	if err := codec.Msgpack.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if out.ID != "ord-1" || out.Customer != 7 || out.Version != 12 || out.Total != 2.5 ||
		out.Ship.City != "Bern" || !out.CreatedAt.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("decoded %+v", out)
	}
}

func TestMsgpackCompactInts(t *testing.T) {
	data, err := codec.Msgpack.Marshal(int64(1))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, []byte{0x01}) {
		t.Errorf("int64(1) encoded as % x, want 01", data)
	}
}

func TestMsgpackInterfaceNumbers(t *testing.T) {
	data, err := codec.Msgpack.Marshal(map[string]any{"i": int8(-1), "u": uint16(300), "f": float32(0.5)})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := codec.Msgpack.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"i": int64(-1), "u": uint64(300), "f": float64(0.5)}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got %#v, want %#v", m, want)
	}
}

func TestMsgpackZeroTime(t *testing.T) {
	data, err := codec.Msgpack.Marshal(Order{})
	if err != nil {
		t.Fatal(err)
	}
	var out Order
	if err := codec.Msgpack.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !out.CreatedAt.IsZero() {
		t.Errorf("zero time decoded as %v", out.CreatedAt)
	}
}

func TestUnmarshalMalformed(t *testing.T) {
	validJSON, _ := codec.JSON.Marshal(sampleOrder())
	validMsgpack, _ := codec.Msgpack.Marshal(sampleOrder())
	inputs := map[string]map[string][]byte{
		"json": {
			"empty":      nil,
			"garbage":    []byte("\x00\xff not json"),
			"truncated":  validJSON[:len(validJSON)/2],
			"trailing":   append(append([]byte{}, validJSON...), "{}"...),
			"wrong type": []byte(`{"id": 42}`),
			"not object": []byte(`"order"`),
			"too deep":   []byte(`{"attrs":{"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}}`),
			"msgpack":    validMsgpack,
		},
		"msgpack": {
			"empty":        nil,
			"reserved":     {0xc1},
			"truncated":    validMsgpack[:len(validMsgpack)/2],
			"trailing":     append(append([]byte{}, validMsgpack...), 0xc0),
			"wrong type":   {0x81, 0xa2, 'i', 'd', 0x2a},
			"not map":      {0xa5, 'o', 'r', 'd', 'e', 'r'},
			"huge array":   {0x81, 0xa5, 'l', 'i', 'n', 'e', 's', 0xdd, 0xff, 0xff, 0xff, 0xff},
			"huge string":  {0x81, 0xa2, 'i', 'd', 0xdb, 0x7f, 0xff, 0xff, 0xff, 'x'},
			"bad time":     {0x81, 0xaa, 'c', 'r', 'e', 'a', 't', 'e', 'd', '_', 'a', 't', 0xd4, 0xff, 0x00},
			"unknown ext":  {0x81, 0xa5, 'a', 't', 't', 'r', 's', 0x81, 0xa1, 'x', 0xd4, 0x05, 0x00},
			"unhashable":   {0x81, 0xa5, 'a', 't', 't', 'r', 's', 0x81, 0xa1, 'x', 0x81, 0x91, 0x01, 0x01},
			"too deep":     deepMsgpack(10001),
			"too deep big": deepMsgpack(4 << 20),
			"json":         validJSON,
		},
	}
	for _, c := range codecs {
		for name, data := range inputs[c.Name()] {
			t.Run(c.Name()+"/"+name, func(t *testing.T) {
				var out Order
				err := c.Unmarshal(data, &out)
				if err == nil {
					t.Fatalf("Unmarshal succeeded: %+v", out)
				}
				t.Log(err)
				var de *codec.DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("error %T is not a *DecodeError: %v", err, err)
				}
				if de.Codec != c.Name() || de.Type != "codec_test.Order" || de.Err == nil {
					t.Errorf("DecodeError = %+v", de)
				}
				prefix := "codec " + c.Name() + ": decode into codec_test.Order: "
				if !strings.HasPrefix(err.Error(), prefix) {
					t.Errorf("error %q lacks prefix %q", err, prefix)
				}
				if errors.Is(err, codec.ErrInvalidTarget) {
					t.Errorf("malformed input reported as invalid target: %v", err)
				}
			})
		}
	}
}

// deepMsgpack returns {"attrs": {"x": [[[...nil...]]]}} with depth levels in
// total.
func deepMsgpack(depth int) []byte {
	b := []byte{0x81, 0xa5, 'a', 't', 't', 'r', 's', 0x81, 0xa1, 'x'}
	b = append(b, bytes.Repeat([]byte{0x91}, depth-2)...)
	return append(b, 0xc0)
}

func TestMaxDepth(t *testing.T) {
	okJSON := []byte(`{"attrs":{"x":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}}`)
	for c, data := range map[codec.Codec][]byte{codec.JSON: okJSON, codec.Msgpack: deepMsgpack(10000)} {
		var out Order
		if err := c.Unmarshal(data, &out); err != nil {
			t.Errorf("%s: depth 10000 rejected: %v", c.Name(), err)
		}
		// Skipping an unknown deep value is bounded too.
		var skip struct{ ID string }
		if err := c.Unmarshal(data, &skip); err != nil {
			t.Errorf("%s: skipping depth 10000 rejected: %v", c.Name(), err)
		}
	}
	var skip struct{ ID string }
	if err := codec.Msgpack.Unmarshal(deepMsgpack(1<<20), &skip); err == nil {
		t.Error("msgpack: skipping depth 1<<20 accepted")
	}
}

func TestUnmarshalInvalidTarget(t *testing.T) {
	data := map[string][]byte{"json": []byte(`{"id":"x"}`), "msgpack": {0x81, 0xa2, 'i', 'd', 0xa1, 'x'}}
	for _, c := range codecs {
		for _, tc := range []struct {
			name     string
			target   any
			wantType string
		}{
			{"nil", nil, "<nil>"},
			{"nil pointer", (*Order)(nil), "codec_test.Order"},
			{"non-pointer", Order{}, "codec_test.Order"},
			{"map", map[string]any{}, "map[string]interface {}"},
		} {
			t.Run(c.Name()+"/"+tc.name, func(t *testing.T) {
				err := c.Unmarshal(data[c.Name()], tc.target)
				if !errors.Is(err, codec.ErrInvalidTarget) {
					t.Fatalf("err = %v, want ErrInvalidTarget", err)
				}
				var de *codec.DecodeError
				if !errors.As(err, &de) || de.Type != tc.wantType || de.Codec != c.Name() {
					t.Errorf("DecodeError = %+v, want Type %q", de, tc.wantType)
				}
			})
		}
	}
}

type panicky struct{}

func (*panicky) UnmarshalJSON([]byte) error           { panic("boom") }
func (*panicky) DecodeMsgpack(*msgpack.Decoder) error { panic(errors.New("boom")) }
func (panicky) MarshalJSON() ([]byte, error)          { panic("boom") }
func (panicky) EncodeMsgpack(*msgpack.Encoder) error  { panic("boom") }

func TestPanicsAreErrors(t *testing.T) {
	data := map[string][]byte{"json": []byte(`{}`), "msgpack": {0x80}}
	for _, c := range codecs {
		var p panicky
		err := c.Unmarshal(data[c.Name()], &p)
		var de *codec.DecodeError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), "panic: boom") {
			t.Errorf("%s: Unmarshal err = %v, want DecodeError with panic", c.Name(), err)
		}
		_, err = c.Marshal(p)
		var ee *codec.EncodeError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), "boom") {
			t.Errorf("%s: Marshal err = %v, want EncodeError with panic", c.Name(), err)
		}
	}
	// The codecs still work after a panic.
	roundTrip(t, codec.Msgpack, sampleOrder())
}

// TestMsgpackLibraryPanic feeds input on which the MessagePack library itself
// panics: an array used as the key of a map[any]any.
func TestMsgpackLibraryPanic(t *testing.T) {
	var m map[any]any
	err := codec.Msgpack.Unmarshal([]byte{0x81, 0x91, 0x01, 0x01}, &m)
	var de *codec.DecodeError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "panic: runtime error: hash of unhashable type") {
		t.Fatalf("err = %v, want DecodeError from recovered panic", err)
	}
	if de.Type != "map[interface {}]interface {}" {
		t.Errorf("Type = %q", de.Type)
	}
	roundTrip(t, codec.Msgpack, sampleOrder())
}

func TestMarshalError(t *testing.T) {
	type withChan struct{ C chan int }
	for _, c := range codecs {
		for name, v := range map[string]any{"chan": withChan{C: make(chan int)}, "func": func() {}} {
			_, err := c.Marshal(v)
			var ee *codec.EncodeError
			if !errors.As(err, &ee) {
				t.Errorf("%s/%s: err = %v, want *EncodeError", c.Name(), name, err)
				continue
			}
			if ee.Codec != c.Name() || ee.Type != reflect.TypeOf(v).String() || ee.Unwrap() == nil {
				t.Errorf("%s/%s: EncodeError = %+v", c.Name(), name, ee)
			}
			if want := "codec " + c.Name() + ": encode " + ee.Type + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s/%s: error %q lacks prefix %q", c.Name(), name, err, want)
			}
		}
	}
	// NaN has no JSON form.
	if _, err := codec.JSON.Marshal(math.NaN()); err == nil {
		t.Error("JSON.Marshal(NaN) succeeded")
	}
}

func TestMarshalNil(t *testing.T) {
	for _, c := range codecs {
		data, err := c.Marshal(nil)
		if err != nil {
			t.Fatalf("%s: Marshal(nil): %v", c.Name(), err)
		}
		var p *Order
		if err := c.Unmarshal(data, &p); err != nil || p != nil {
			t.Errorf("%s: Unmarshal(null) = %v, %v", c.Name(), p, err)
		}
	}
}

func roundTrip(t *testing.T, c codec.Codec, in Order) {
	t.Helper()
	if err := checkRoundTrip(c, in); err != nil {
		t.Fatal(err)
	}
}

// checkRoundTrip marshals in with c and unmarshals it back, and says how
// that failed or the result differs (nil if it does not).
func checkRoundTrip(c codec.Codec, in Order) error {
	data, err := c.Marshal(in)
	if err != nil {
		return fmt.Errorf("%s: Marshal: %v", c.Name(), err)
	}
	var out Order
	if err := c.Unmarshal(data, &out); err != nil {
		return fmt.Errorf("%s: Unmarshal: %v", c.Name(), err)
	}
	normalize(&in)
	normalize(&out)
	if !reflect.DeepEqual(in, out) {
		return fmt.Errorf("%s: round trip mismatch\n got: %#v\nwant: %#v", c.Name(), out, in)
	}
	return nil
}

// TestConcurrent exercises the pooled encoders and decoders from many
// goroutines; run it with -race.
func TestConcurrent(t *testing.T) {
	for _, c := range codecs {
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 50 { // 8 goroutines at once; 200 each took 10s under -race
					in := sampleOrder()
					in.ID = fmt.Sprintf("g%d-%d", g, i)
					in.Note = strings.Repeat("n", i*200) // vary buffer sizes, 0 to 10 KB as before
					if err := checkRoundTrip(c, in); err != nil {
						t.Error(err) // not Fatal: this is not the test's goroutine
						return
					}
					var out Order
					_ = c.Unmarshal([]byte{0x81, 0x91}, &out) // interleave failures
				}
			})
		}
		wg.Wait()
	}
}

// TestMarshalOwnership checks that a returned slice is not reused by a later
// Marshal through the encoder pool.
func TestMarshalOwnership(t *testing.T) {
	for _, c := range codecs {
		a, _ := c.Marshal(Order{ID: "first"})
		keep := bytes.Clone(a)
		_, _ = c.Marshal(Order{ID: "other"})
		if !bytes.Equal(a, keep) {
			t.Errorf("%s: Marshal result was overwritten", c.Name())
		}
	}
}
