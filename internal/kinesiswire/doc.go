// Package kinesiswire is how Kinesis' records travel between the client and
// the service: the codecs of GetRecords and the reader of SubscribeToShard's
// event stream. It holds the per-call options that send GetRecords in CBOR
// (CBORGetRecords) or decode its JSON answers straight into the output
// (FastGetRecords), Encoding to choose between them and the SDK's own
// decoder, the Subscription that reads an event stream on its caller's
// goroutine, and the CBOR encoders and decoders the Kinesis fake and the
// bench answer with (EncodeGetRecordsOutputCBOR, EncodeErrorCBOR,
// DecodeGetRecordsInputCBOR, AppendCBORHead). Every decoder is held to the
// SDK's by differential tests and fuzzers.
//
// Stream names, ARNs, request shapes and the classification of AWS errors
// are kinesisx's; this package imports it, never the reverse.
package kinesiswire
