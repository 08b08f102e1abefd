// Package codec converts between the bytes of Kinesis records and Go values.
//
// A [Codec] has a name, a Marshal and an Unmarshal, and is not generic: the
// typed handlers of the library decode each record into a *T and pass that
// pointer to the codec as an any, so nothing below the typed edge knows T.
// This is the shape of connect-go's Codec.
//
// Two codecs are provided:
//
//   - [JSON], encoding/json, named "json".
//   - [Msgpack], MessagePack via github.com/vmihailenco/msgpack/v5, named
//     "msgpack". It reads the `json` tag of fields that have no `msgpack`
//     tag, so one struct definition works with both codecs.
//
// Records come from producers the consumer does not control. Both codecs
// therefore treat their input as hostile: Unmarshal never panics, bounds the
// nesting depth it accepts, rejects trailing bytes, and reports every failure
// as a *[DecodeError] naming the codec and the Go type, which the library uses
// to dead-letter the record. Marshal failures are *[EncodeError] values. Both
// wrap the underlying error, so errors.Is and errors.As see through them.
//
// Custom codecs (protobuf, Avro, a versioned envelope) implement [Codec]. They
// must be safe for concurrent use and must not panic in Unmarshal on any
// input; returning a *DecodeError from Unmarshal lets callers tell a bad
// record from other failures with errors.As.
package codec
