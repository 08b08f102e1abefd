package kinesiswire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kschemas "github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
)

// Subscription is an open SubscribeToShard call whose event stream is read
// and decoded on the caller's goroutine, by Next: no goroutine of the SDK's
// stands between the connection and the caller (the SDK's own reader hands
// each event over twice). The SDK still resolves the endpoint, signs, sends
// and retries the call and turns its error answers into its error types.
//
// A SubscribeToShardEvent in JSON is decoded as GetRecords' answers are
// (FastGetRecords): one buffer for every record's data, one string for
// their keys and sequence numbers; with EncodingSDK, by the SDK's event
// decoder. Every other message (the end of a shard, with its ChildShards;
// an exception; an event of a type the fast decoder does not take) is
// decoded by the SDK's own event decoder, on the same bytes, so the events
// and exceptions are the SDK's. Where the two differ: a stream cut inside
// a message is an error here (the SDK's reader ends cleanly), and a
// missing or malformed initial response is Next's error (the SDK's call
// fails).
//
// A client that does not run the SDK's middleware for the call (a fake
// that answers with kinesis.NewSubscribeToShardEventStream, say) is read
// through the event stream it returns.
//
// A Subscription is read by one goroutine at a time; Close may be called
// from any goroutine, and makes a Next that is waiting return.
type Subscription struct {
	body    io.ReadCloser
	sdkOnly bool   // EncodingSDK: every message is the SDK's decoder's
	buf     []byte // the message being read, reused
	sdk     smithyhttp.ClientProtocol
	started bool                                 // the initial response was read
	stream  *kinesis.SubscribeToShardEventStream // a client's own event stream (no body)
}

// SubscribeToShard calls c.SubscribeToShard with in and opts and returns
// its event stream to be read with Next, its events decoded as enc says
// (EncodingCBOR and EncodingJSON alike: the events come in JSON). ctx
// bounds the call and the subscription both: when it ends, the
// subscription ends.
func SubscribeToShard(ctx context.Context, c kinesisx.FanOut, in *kinesis.SubscribeToShardInput, enc Encoding, opts ...func(*kinesis.Options)) (*Subscription, error) {
	raw := &rawEventStream{}
	opts = append(opts[:len(opts):len(opts)], raw.option)
	out, err := c.SubscribeToShard(ctx, in, opts...)
	if err != nil {
		if raw.body != nil {
			_ = raw.body.Close()
		}
		return nil, err
	}
	if raw.body == nil {
		if st := out.GetStream(); st != nil {
			return &Subscription{stream: st}, nil
		}
		return nil, errors.New("kinesiswire: SubscribeToShard answered without an event stream")
	}
	return &Subscription{body: raw.body, sdkOnly: enc == EncodingSDK, sdk: awsjson.New11(kschemas.Kinesis_20131202)}, nil
}

// rawEventStream is a deserialize middleware that takes the place of the
// SDK's event stream deserializer for one call: it keeps the answer's body
// for the Subscription instead of starting the SDK's reader goroutines.
type rawEventStream struct{ body io.ReadCloser }

// rawEventStreamID is the ID of the SDK's event stream deserializer.
const rawEventStreamID = "OperationEventStreamDeserializer"

func (r *rawEventStream) option(o *kinesis.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		if _, err := st.Deserialize.Remove(rawEventStreamID); err != nil {
			return fmt.Errorf("kinesiswire: the SDK's SubscribeToShard stack: %w", err)
		}
		return st.Deserialize.Insert(r, "OperationDeserializer", middleware.Before)
	})
}

// ID implements middleware.DeserializeMiddleware.
func (r *rawEventStream) ID() string { return rawEventStreamID }

// HandleDeserialize implements middleware.DeserializeMiddleware.
func (r *rawEventStream) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleDeserialize(ctx, in)
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if err != nil {
		if ok && resp.Body != nil {
			_ = resp.Body.Close()
		}
		return out, md, err
	}
	if !ok {
		return out, md, fmt.Errorf("kinesiswire: unknown transport type %T", out.RawResponse)
	}
	if r.body != nil {
		_ = r.body.Close() // an earlier attempt's, which the call did not keep
	}
	r.body = resp.Body
	if out.Result == nil {
		out.Result = &kinesis.SubscribeToShardOutput{}
	}
	return out, md, nil
}

// preludeLen is an event-stream message's prelude: total length, headers
// length, prelude CRC. The lengths are not capped (the SDK's decoder does
// not cap them either: a Kinesis record may be 10 MiB, its base64 more);
// the prelude's CRC is checked before anything is allocated.
const preludeLen = 12

// Next reads the subscription's next event (events of a type this SDK
// does not know are skipped), or returns an error:
// the exception the stream ended with (the SDK's error type), io.EOF when
// it ended cleanly, or the reading's error (the connection broke, Close was
// called, ctx ended). The event owns its records' data: nothing of it is
// reused by the next call.
func (s *Subscription) Next() (*types.SubscribeToShardEvent, error) {
	if s.stream != nil {
		return s.nextOfStream()
	}
	for {
		msg, err := s.read()
		if err != nil {
			return nil, err
		}
		h, payload, err := parseMessage(msg)
		if err != nil {
			return nil, &smithy.DeserializationError{Err: fmt.Errorf("SubscribeToShard event stream: %w", err)}
		}
		if !s.started {
			// The initial response comes first, as the SDK requires it
			// (SubscribeToShard's output has no member of its own).
			s.started = true
			if err := s.sdk.DeserializeInitialResponse(kschemas.SubscribeToShardOutput, bytes.NewReader(msg), &kinesis.SubscribeToShardOutput{}); err != nil {
				return nil, &smithy.DeserializationError{Err: fmt.Errorf("SubscribeToShard event stream: %w", err)}
			}
			continue
		}
		event := string(h.messageType) == "event"
		if event && !s.sdkOnly && string(h.eventType) == "SubscribeToShardEvent" && isJSON(h.contentType) {
			var a recordsAnswer
			if decodeRecordsJSON(payload, "ContinuationSequenceNumber", &a) {
				return &types.SubscribeToShardEvent{Records: a.records, ContinuationSequenceNumber: a.next, MillisBehindLatest: a.millisBehind}, nil
			}
		}
		ev, err := s.sdkMessage(msg)
		if err != nil || ev != nil {
			return ev, err
		}
	}
}

// sdkMessage decodes msg with the SDK's event decoder: an event, nil for
// one of a type the SDK does not know, or the exception's error.
func (s *Subscription) sdkMessage(msg []byte) (*types.SubscribeToShardEvent, error) {
	v, err := s.sdk.DeserializeEventMessage(kschemas.SubscribeToShardEventStream, kinesis.TypeRegistry, bytes.NewReader(msg))
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // a whole message was there
		}
		return nil, err
	}
	ev, _ := v.(*types.SubscribeToShardEvent)
	return ev, nil
}

// read reads the next message, prelude and all, checking both CRCs.
func (s *Subscription) read() ([]byte, error) {
	var pre [preludeLen]byte
	if _, err := io.ReadFull(s.body, pre[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("SubscribeToShard event stream cut in a message: %w", err)
		}
		return nil, err
	}
	total, hlen := binary.BigEndian.Uint32(pre[0:4]), binary.BigEndian.Uint32(pre[4:8])
	switch {
	case crc32.ChecksumIEEE(pre[:8]) != binary.BigEndian.Uint32(pre[8:12]):
		return nil, &smithy.DeserializationError{Err: errors.New("SubscribeToShard event stream: prelude checksum mismatch")}
	case uint64(hlen)+preludeLen+4 > uint64(total):
		return nil, &smithy.DeserializationError{Err: fmt.Errorf("SubscribeToShard event stream: message of %d bytes with %d bytes of headers", total, hlen)}
	}
	if cap(s.buf) < int(total) {
		s.buf = make([]byte, total, max(int(total), 4096))
	}
	msg := s.buf[:total]
	copy(msg, pre[:])
	if _, err := io.ReadFull(s.body, msg[preludeLen:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("SubscribeToShard event stream cut in a message: %w", err)
	}
	if crc32.ChecksumIEEE(msg[:total-4]) != binary.BigEndian.Uint32(msg[total-4:]) {
		return nil, &smithy.DeserializationError{Err: errors.New("SubscribeToShard event stream: message checksum mismatch")}
	}
	return msg, nil
}

// nextOfStream is Next on a client's own event stream.
func (s *Subscription) nextOfStream() (*types.SubscribeToShardEvent, error) {
	for ev := range s.stream.Events() {
		if e, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent); ok {
			return &e.Value, nil
		}
	}
	if err := s.stream.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}

// Close ends the subscription: a Next waiting for a message returns. It
// throws away what the connection holds unread.
func (s *Subscription) Close() error {
	if s.stream != nil {
		return s.stream.Close()
	}
	return s.body.Close()
}

// messageHeaders are the headers of a message that Next looks at.
type messageHeaders struct {
	messageType, eventType, contentType []byte // slices of the message
}

// parseMessage returns msg's headers that Next looks at and its payload.
// Header values of other types are skipped by their sizes.
func parseMessage(msg []byte) (h messageHeaders, payload []byte, err error) {
	hlen := binary.BigEndian.Uint32(msg[4:8])
	hs := msg[preludeLen : preludeLen+hlen]
	payload = msg[preludeLen+hlen : len(msg)-4]
	for len(hs) > 0 {
		n := int(hs[0])
		if len(hs) < 1+n+1 {
			return h, nil, errors.New("header cut short")
		}
		name, typ := hs[1:1+n], hs[1+n]
		hs = hs[2+n:]
		var size int
		switch typ {
		case 0, 1: // true, false
		case 2:
			size = 1
		case 3:
			size = 2
		case 4:
			size = 4
		case 5, 8: // long, timestamp
			size = 8
		case 9: // UUID
			size = 16
		case 6, 7: // bytes, string: a 2-byte length
			if len(hs) < 2 {
				return h, nil, errors.New("header cut short")
			}
			size = 2 + int(binary.BigEndian.Uint16(hs))
		default:
			return h, nil, fmt.Errorf("header %q of unknown type %d", name, typ)
		}
		if len(hs) < size {
			return h, nil, fmt.Errorf("header %q cut short", name)
		}
		if typ == 7 {
			v := hs[2:size]
			switch string(name) {
			case ":message-type":
				h.messageType = v
			case ":event-type":
				h.eventType = v
			case ":content-type":
				h.contentType = v
			}
		}
		hs = hs[size:]
	}
	return h, payload, nil
}

// isJSON reports whether an event's content type is JSON's (or absent, as
// in an event with no payload).
func isJSON(ct []byte) bool {
	switch string(ct) {
	case "", "application/json", "application/x-amz-json-1.1":
		return true
	}
	return false
}
