package codec_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/kinesislease/kinesislease/codec"
)

func ExampleMsgpack() {
	// One struct, tagged for JSON only, serves both codecs: Msgpack falls
	// back to the json tag of fields without a msgpack tag.
	type Order struct {
		ID        string    `json:"id"`
		Total     float64   `json:"total"`
		Items     []string  `json:"items"`
		Note      string    `json:"note,omitempty"`
		CreatedAt time.Time `json:"created_at"`
	}
	in := Order{
		ID:        "ord-42",
		Total:     99.5,
		Items:     []string{"book", "pen"},
		CreatedAt: time.Date(2024, 3, 9, 14, 30, 0, 0, time.UTC),
	}

	data, err := codec.Msgpack.Marshal(&in)
	if err != nil {
		panic(err)
	}
	var out Order
	if err := codec.Msgpack.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	// MessagePack timestamps carry no zone: times decode in time.Local.
	fmt.Println(out.ID, out.Total, out.Items, out.CreatedAt.UTC())

	var fields map[string]any
	_ = codec.Msgpack.Unmarshal(data, &fields)
	fmt.Println(len(fields), "fields, note omitted:", fields["note"] == nil)
	// Output:
	// ord-42 99.5 [book pen] 2024-03-09 14:30:00 +0000 UTC
	// 4 fields, note omitted: true
}

func ExampleDecodeError() {
	type Order struct {
		ID string `json:"id"`
	}
	var o Order
	err := codec.JSON.Unmarshal([]byte(`{"id": 42}`), &o)

	// A *DecodeError marks a record whose bytes cannot be decoded.
	var de *codec.DecodeError
	if errors.As(err, &de) {
		fmt.Println("codec:", de.Codec)
		fmt.Println("type:", de.Type)
	}
	fmt.Println(err)
	// Output:
	// codec: json
	// type: codec_test.Order
	// codec json: decode into codec_test.Order: json: cannot unmarshal number into Go struct field Order.id of type string
}
