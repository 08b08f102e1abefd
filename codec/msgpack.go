package codec

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Msgpack is a Codec for MessagePack, named "msgpack", built on
// github.com/vmihailenco/msgpack/v5 with these settings:
//
//   - Struct fields are named by the `msgpack` tag and, for fields without
//     one, by the `json` tag (name and omitempty), so one struct serves both
//     JSON and Msgpack. Unlike encoding/json, names match case-sensitively.
//   - Integers are written in their most compact form, as other MessagePack
//     implementations do, and any integer form decodes into any Go integer
//     field. Beware that the library converts as a Go conversion does: a
//     value out of range for the field's type wraps (300 into an int8 gives
//     44) where JSON reports an error. A float64 on the wire does not decode
//     into a float32 field.
//   - Values decoded into an interface (any, map[string]any, []any) use
//     int64, uint64 and float64 for numbers, whatever their wire width.
//   - time.Time uses the MessagePack timestamp extension, which carries no
//     time zone: decoded times are in time.Local (the zero time in UTC), so
//     compare them with time.Time.Equal.
//   - data must hold exactly one MessagePack value; trailing bytes are an
//     error, as with JSON. Unknown map keys are ignored.
//   - Arrays and maps may nest at most 10000 deep, the bound encoding/json
//     uses; deeper input is an error rather than a stack overflow.
//
// Unmarshal recovers panics raised inside the MessagePack library on
// malformed input (for example an array as the key of a map[any]any) and
// returns them as a *DecodeError.
var Msgpack Codec = msgpackCodec{}

type msgpackCodec struct{}

const msgpackName = "msgpack"

// maxPooledBuffer bounds the buffers kept in the encoder pool, so that one
// large record does not pin its buffer for the life of the process. Kinesis
// records are at most 1 MiB; most are far smaller.
const maxPooledBuffer = 64 << 10

// A pooled encoder writes into its own buffer, a pooled decoder reads from
// its own reader.
type msgpackEncoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}
type msgpackDecoder struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

// Pooled encoders and decoders, configured once. UsePreallocateValues stays
// off: it starts a goroutine per decoded type that never exits.
var (
	msgpackEncoders = newPool(func(e *msgpackEncoder) {
		e.enc = msgpack.NewEncoder(&e.buf)
		e.enc.SetCustomStructTag("json")
		e.enc.UseCompactInts(true)
	})
	msgpackDecoders = newPool(func(d *msgpackDecoder) {
		// bytes.Reader is an io.ByteScanner, so the decoder reads it directly
		// without a bufio.Reader and d.r.Len reports what is left unread.
		d.dec = msgpack.NewDecoder(&d.r)
		d.dec.SetCustomStructTag("json")
		d.dec.UseLooseInterfaceDecoding(true)
	})
)

// pool is a sync.Pool of *T, each new one set up once by setup.
type pool[T any] struct{ p sync.Pool }

func newPool[T any](setup func(*T)) *pool[T] {
	return &pool[T]{p: sync.Pool{New: func() any {
		x := new(T)
		setup(x)
		return x
	}}}
}

func (p *pool[T]) get() *T  { return p.p.Get().(*T) }
func (p *pool[T]) put(x *T) { p.p.Put(x) }

func (msgpackCodec) Name() string { return msgpackName }

func (msgpackCodec) Marshal(v any) (data []byte, err error) {
	e := msgpackEncoders.get()
	defer func() {
		if r := recover(); r != nil {
			// The encoder may be in any state: drop it rather than pool it.
			data, err = nil, encodeError(msgpackName, v, panicError(r))
		}
	}()
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		putEncoder(e)
		return nil, encodeError(msgpackName, v, err)
	}
	data = bytes.Clone(e.buf.Bytes())
	putEncoder(e)
	return data, nil
}

func putEncoder(e *msgpackEncoder) {
	if e.buf.Cap() > maxPooledBuffer {
		return
	}
	e.buf.Reset()
	msgpackEncoders.put(e)
}

func (msgpackCodec) Unmarshal(data []byte, v any) (err error) {
	if err := checkTarget(v); err != nil {
		return decodeError(msgpackName, v, err)
	}
	if err := scanMsgpack(data); err != nil {
		return decodeError(msgpackName, v, err)
	}
	d := msgpackDecoders.get()
	defer func() {
		if r := recover(); r != nil {
			// The decoder may be in any state: drop it rather than pool it.
			err = decodeError(msgpackName, v, panicError(r))
		}
	}()
	d.r.Reset(data)
	d.dec.ResetReader(&d.r)
	err = d.dec.Decode(v)
	if err == nil && d.r.Len() > 0 {
		err = fmt.Errorf("%w (%d bytes)", errTrailingData, d.r.Len())
	}
	d.r.Reset(nil) // do not retain data
	msgpackDecoders.put(d)
	if err != nil {
		return decodeError(msgpackName, v, err)
	}
	return nil
}
