package kinesiswire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/eventstream"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
)

// message encodes one event-stream message: its :message-type, the type
// header (:event-type or :exception-type) and :content-type (each left
// out when empty), and payload.
func message(msgType, typ, contentType string, payload []byte) []byte {
	var m eventstream.Message
	if msgType != "" {
		m.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue(msgType))
	}
	if typ != "" {
		name := eventstream.EventTypeHeader
		if msgType == eventstream.ExceptionMessageType {
			name = eventstream.ExceptionTypeHeader
		}
		m.Headers.Set(name, eventstream.StringValue(typ))
	}
	if contentType != "" {
		m.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue(contentType))
	}
	m.Payload = payload
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, m); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func event(payload string) []byte {
	return message("event", "SubscribeToShardEvent", "application/json", []byte(payload))
}

var initialResponse = message("event", "initial-response", "application/json", []byte("{}"))

// streamOf is a SubscribeToShard answer: the initial response, then msgs.
func streamOf(msgs ...[]byte) []byte {
	return bytes.Join(append([][]byte{initialResponse}, msgs...), nil)
}

// eventStreamAnswer answers every call with body as an event stream.
type eventStreamAnswer []byte

func (a eventStreamAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/vnd.amazon.eventstream"}}, ContentLength: -1,
		Body: io.NopCloser(bytes.NewReader(a)), Request: req}, nil
}

func fanOutClient(rt http.RoundTripper) *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region: "us-east-1", BaseEndpoint: aws.String("http://kinesisx.invalid"),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
		HTTPClient:  &http.Client{Transport: rt}, RetryMaxAttempts: 1,
	})
}

var subscribeInput = &kinesis.SubscribeToShardInput{ConsumerARN: aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/s/consumer/c:1"),
	ShardId: aws.String("shardId-000000000000"), StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeLatest}}

// readOwn reads body's events with Subscription, decoded as enc says; a
// clean end is no error.
func readOwn(body []byte, enc Encoding) ([]*types.SubscribeToShardEvent, error) {
	sub, err := SubscribeToShard(context.Background(), fanOutClient(eventStreamAnswer(body)), subscribeInput, enc)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	var evs []*types.SubscribeToShardEvent
	for {
		ev, err := sub.Next()
		if errors.Is(err, io.EOF) {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		if ev != nil {
			evs = append(evs, ev)
		}
	}
}

// readSDK reads body's events with the SDK's own event stream reader.
func readSDK(body []byte) ([]*types.SubscribeToShardEvent, error) {
	out, err := fanOutClient(eventStreamAnswer(body)).SubscribeToShard(context.Background(), subscribeInput, kinesisx.OwnEventStreamCodec)
	if err != nil {
		return nil, err
	}
	st := out.GetStream()
	defer st.Close()
	var evs []*types.SubscribeToShardEvent
	for ev := range st.Events() {
		if e, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent); ok {
			evs = append(evs, &e.Value)
		}
	}
	return evs, st.Err()
}

// sameEvents says how two readings of one stream differ ("" if they do
// not): the events, every field the SDK exposes, and the error (both or
// neither; the same code for an API error). A stream cut in a message is
// an error to the Subscription and a clean end to the SDK's reader.
func sameEvents(own, sdk []*types.SubscribeToShardEvent, ownErr, sdkErr error) string {
	if sdkErr == nil && errors.Is(ownErr, io.ErrUnexpectedEOF) {
		ownErr = nil
	}
	if (ownErr == nil) != (sdkErr == nil) {
		return fmt.Sprintf("error %v against the SDK's %v", ownErr, sdkErr)
	}
	var oa, sa smithy.APIError
	if errors.As(sdkErr, &sa) && (!errors.As(ownErr, &oa) || oa.ErrorCode() != sa.ErrorCode()) {
		return fmt.Sprintf("error %v against the SDK's %v", ownErr, sdkErr)
	}
	if len(own) != len(sdk) {
		return fmt.Sprintf("%d events against %d", len(own), len(sdk))
	}
	for i := range own {
		a, b := own[i], sdk[i]
		if d := sameOutput(
			&kinesis.GetRecordsOutput{Records: a.Records, NextShardIterator: a.ContinuationSequenceNumber, MillisBehindLatest: a.MillisBehindLatest, ChildShards: a.ChildShards},
			&kinesis.GetRecordsOutput{Records: b.Records, NextShardIterator: b.ContinuationSequenceNumber, MillisBehindLatest: b.MillisBehindLatest, ChildShards: b.ChildShards},
		); d != "" {
			return fmt.Sprintf("event %d: %s", i, d)
		}
	}
	return ""
}

// checkSameEvents reads body with a Subscription, with its own decoder and
// with EncodingSDK, and with the SDK's reader, and fails if they differ.
func checkSameEvents(t *testing.T, body []byte) {
	t.Helper()
	sdk, sdkErr := readSDK(body)
	for _, enc := range []Encoding{EncodingCBOR, EncodingSDK} {
		own, ownErr := readOwn(body, enc)
		if d := sameEvents(own, sdk, ownErr, sdkErr); d != "" {
			t.Fatalf("stream %q: Subscription (encoding %d) and the SDK differ: %s", body, enc, d)
		}
	}
}

// eventPayloads are SubscribeToShardEvent payloads: what Kinesis sends
// (records, none, a closed shard's end with its children) and what the
// fast decoder leaves to the SDK's.
var eventPayloads = []string{
	`{"Records":[],"ContinuationSequenceNumber":"49590338271490256608559692538361571095921575989136588898","MillisBehindLatest":0}`,
	`{"Records":[{"Data":"` + b64(`{"id":1}`) + `","PartitionKey":"k1","SequenceNumber":"49590338271490256608559692538361571095921575989136588898","ApproximateArrivalTimestamp":1.700000000123E9,"EncryptionType":"NONE"},` +
		`{"Data":"` + b64("second") + `","PartitionKey":"k2","SequenceNumber":"49590338271490256608559692538361571095921575989136588899","ApproximateArrivalTimestamp":1700000000.5}],"ContinuationSequenceNumber":"49590338271490256608559692538361571095921575989136588899","MillisBehindLatest":1500}`,
	`{"Records":[{"Data":"` + b64("end") + `","PartitionKey":"k","SequenceNumber":"3"}],"MillisBehindLatest":0,"ChildShards":[{"ShardId":"shardId-000000000002","ParentShards":["shardId-000000000000"],"HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"9"}}]}`,
	`{"Records":[{"Data":"` + b64("x") + `","PartitionKey":"k","SequenceNumber":"2","EncryptionType":"KMS","KeyId":"arn:aws:kms:us-east-1:000000000000:key/x","ApproximateArrivalTimestamp":1700000000}],"ContinuationSequenceNumber":"2","MillisBehindLatest":0}`,
	`{"Records":[{"Data":"` + b64("q") + `","PartitionKey":"a\"b","SequenceNumber":"4"}],"ContinuationSequenceNumber":"x\u0041"}`,
	`{"Records":[{"Data":"not base64!","PartitionKey":"k","SequenceNumber":"6"}],"ContinuationSequenceNumber":"6"}`,
	`{"Records":[{"Data":"` + b64("t") + `","SequenceNumber":"7"}],"Unknown":{"a":[1,2]},"ContinuationSequenceNumber":"7"}`,
	`{"Records":[`,
	``,
}

// TestSubscriptionAsSDK: on Kinesis' messages and odd ones, a Subscription
// gives the events and the error the SDK's own event stream reader gives,
// and takes the ordinary events itself.
func TestSubscriptionAsSDK(t *testing.T) {
	exception := func(typ, msg string) []byte {
		return message("exception", typ, "application/json", fmt.Appendf(nil, `{"message":%q}`, msg))
	}
	streams := map[string][]byte{
		"empty":              streamOf(),
		"unknown event type": streamOf(event(eventPayloads[0]), message("event", "SomethingNew", "application/json", []byte(`{"a":1}`)), event(eventPayloads[1])),
		"resource in use":    streamOf(event(eventPayloads[1]), exception("ResourceInUseException", "in use")),
		"internal failure":   streamOf(exception("InternalFailureException", "injected")),
		"unknown exception":  streamOf(event(eventPayloads[0]), exception("SomeNewException", "new")),
		"error message": streamOf(func() []byte {
			var m eventstream.Message
			m.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue("error"))
			m.Headers.Set(eventstream.ErrorCodeHeader, eventstream.StringValue("InternalError"))
			m.Headers.Set(eventstream.ErrorMessageHeader, eventstream.StringValue("boom"))
			var b bytes.Buffer
			_ = eventstream.NewEncoder().Encode(&b, m)
			return b.Bytes()
		}()),
		"no message type":     streamOf(message("", "SubscribeToShardEvent", "application/json", []byte(eventPayloads[0]))),
		"no initial response": bytes.Join([][]byte{event(eventPayloads[0]), event(eventPayloads[1])}, nil),
		"cut in a message":    streamOf(event(eventPayloads[1]), event(eventPayloads[0])[:30]),
		"checksum":            streamOf(func() []byte { m := event(eventPayloads[1]); m[len(m)-6] ^= 1; return m }()),
		"prelude checksum":    streamOf(func() []byte { m := event(eventPayloads[1]); m[2]++; return m }()),
		"other content type":  streamOf(message("event", "SubscribeToShardEvent", "application/cbor", []byte(eventPayloads[1]))),
	}
	for i, p := range eventPayloads {
		streams[fmt.Sprintf("payload %d", i)] = streamOf(event(p), event(eventPayloads[0]))
	}
	for name, body := range streams {
		t.Run(name, func(t *testing.T) { checkSameEvents(t, body) })
	}
	// The typed exceptions reach errors.As as the SDK's do.
	_, err := readOwn(streams["resource in use"], EncodingCBOR)
	var inUse *types.ResourceInUseException
	if !errors.As(err, &inUse) || !kinesisx.IsResourceInUse(err) {
		t.Errorf("ResourceInUseException mid-stream: %v (%T)", err, err)
	}
	// The ordinary events are the fast decoder's.
	for _, p := range eventPayloads[:2] {
		if !decodeRecordsJSON([]byte(p), "ContinuationSequenceNumber", &recordsAnswer{}) {
			t.Errorf("the fast decoder does not take %s", p)
		}
	}
}

// TestSubscriptionAllocations: the Subscription allocates nothing per
// record: the records' data share one buffer, their keys and sequence
// numbers one string. An event of 500 records costs a few allocations
// more than one of 5 (those buffers double as they grow), not 495.
func TestSubscriptionAllocations(t *testing.T) {
	count := func(records int) float64 {
		var recs []string
		for i := range records {
			recs = append(recs, fmt.Sprintf(`{"Data":"%s","PartitionKey":"k%d","SequenceNumber":"4959033827149025660855969253836157109592157598913658%04d","ApproximateArrivalTimestamp":1700000000.123}`,
				b64(strings.Repeat("x", 100)), i, i))
		}
		ev := event(`{"Records":[` + strings.Join(recs, ",") + `],"ContinuationSequenceNumber":"1","MillisBehindLatest":0}`)
		const events = 20
		body := streamOf(bytes.Repeat(ev, events))
		sub, err := SubscribeToShard(context.Background(), fanOutClient(eventStreamAnswer(body)), subscribeInput, EncodingCBOR)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if _, err := sub.Next(); err != nil { // the buffers' first growth
			t.Fatal(err)
		}
		return testing.AllocsPerRun(events-2, func() {
			if ev, err := sub.Next(); err != nil || len(ev.Records) != records {
				t.Fatalf("%v, %v", ev, err)
			}
		})
	}
	few, many := count(5), count(500)
	t.Logf("allocations per event: %.0f with 5 records, %.0f with 500", few, many)
	if many > few+50 {
		t.Errorf("an event of 500 records costs %.0f allocations, one of 5 %.0f: allocations grow with the records", many, few)
	}
}

// FuzzSubscribeToShardEvent: a Subscription and the SDK's reader agree on
// any event (payload, event and content types, an extra header): equal
// events, or both an error; neither panics.
func FuzzSubscribeToShardEvent(f *testing.F) {
	for _, p := range eventPayloads {
		f.Add([]byte(p), "event", "SubscribeToShardEvent", "application/json", "")
	}
	f.Add([]byte(`{"message":"x"}`), "exception", "ResourceInUseException", "application/json", "")
	f.Add([]byte(eventPayloads[1]), "event", "SubscribeToShardEvent", "", ":date")
	f.Fuzz(func(t *testing.T, payload []byte, msgType, typ, contentType, extra string) {
		if strings.Count(string(payload), "{") > 1000 || len(msgType) > 255 || len(typ) > 255 || len(contentType) > 255 || len(extra) > 255 {
			return // the SDK's decoder recurses; header names are at most 255 bytes
		}
		var m eventstream.Message
		m.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue(msgType))
		name := eventstream.EventTypeHeader
		if msgType == eventstream.ExceptionMessageType {
			name = eventstream.ExceptionTypeHeader
		}
		m.Headers.Set(name, eventstream.StringValue(typ))
		m.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue(contentType))
		if extra != "" {
			m.Headers.Set(extra, eventstream.Int64Value(int64(len(payload))))
		}
		m.Payload = payload
		var b bytes.Buffer
		if err := eventstream.NewEncoder().Encode(&b, m); err != nil {
			return
		}
		checkSameEvents(t, streamOf(b.Bytes(), event(eventPayloads[1])))
	})
}

// optionsDropped is a client wrapper that calls SubscribeToShard without
// the caller's per-call options, as a decorator might.
type optionsDropped struct{ *kinesis.Client }

func (c optionsDropped) SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, _ ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error) {
	return c.Client.SubscribeToShard(ctx, in, kinesisx.OwnEventStreamCodec)
}

// TestSubscriptionOfClientStream: a client that does not pass the
// Subscription's options on (so the SDK reads the event stream itself) is
// read through the SDK's event stream, with the same events and error.
func TestSubscriptionOfClientStream(t *testing.T) {
	body := streamOf(event(eventPayloads[1]), event(eventPayloads[0]), message("exception", "ResourceInUseException", "application/json", []byte(`{"message":"in use"}`)))
	sub, err := SubscribeToShard(context.Background(), optionsDropped{fanOutClient(eventStreamAnswer(body))}, subscribeInput, EncodingCBOR)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var own []*types.SubscribeToShardEvent
	for {
		ev, err := sub.Next()
		if err != nil {
			sdk, sdkErr := readSDK(body)
			if d := sameEvents(own, sdk, err, sdkErr); d != "" {
				t.Fatal(d)
			}
			if !kinesisx.IsResourceInUse(err) {
				t.Fatalf("the stream's exception: %v", err)
			}
			return
		}
		own = append(own, ev)
	}
}
