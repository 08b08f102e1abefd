package kinesiswire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
)

// cborAnswer answers every call with status, body and content type, and
// keeps the last request.
type cborAnswer struct {
	status int
	ct     string
	body   []byte
	header http.Header

	mu   sync.Mutex
	last *http.Request
	sent []byte
}

func (a *cborAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(req.Body)
	a.mu.Lock()
	a.last, a.sent = req, b
	a.mu.Unlock()
	h := http.Header{"Content-Type": {a.ct}}
	for k, v := range a.header {
		h[k] = v
	}
	return &http.Response{StatusCode: a.status, Status: http.StatusText(a.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, ContentLength: int64(len(a.body)), Body: io.NopCloser(bytes.NewReader(a.body)), Request: req}, nil
}

// cborCall makes one GetRecords with CBORGetRecords against a, at endpoint.
func cborCall(a *cborAnswer, endpoint string, onFallback func(string, error)) (*kinesis.GetRecordsOutput, error) {
	c := kinesis.New(kinesis.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
		HTTPClient:  &http.Client{Transport: a}, RetryMaxAttempts: 1,
	})
	return c.GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: aws.String("it"), Limit: aws.Int32(500)}, CBORGetRecords(onFallback))
}

var endpoints freshEndpoints

// freshEndpoints hands out endpoints no test used before (fallbacks are
// kept per endpoint).
type freshEndpoints struct{ n atomic.Int64 }

func (e *freshEndpoints) fresh() string { return fmt.Sprintf("http://cbor-%d.invalid", e.n.Add(1)) }

// TestCBORGetRecordsAsSDK: every answer of the JSON corpus that the SDK
// decodes, encoded in CBOR as Kinesis sends it, decodes through
// CBORGetRecords to what the SDK gave; the request is CBOR with the JSON
// protocol's target, and names the iterator and the limit.
func TestCBORGetRecordsAsSDK(t *testing.T) {
	for i, a := range answers {
		want, err := getRecords(200, []byte(a), false)
		if err != nil || !utf8.ValidString(a) {
			continue // CBOR text must be UTF-8: no such answer can come in CBOR
		}
		body := EncodeGetRecordsOutputCBOR(want)
		ans := &cborAnswer{status: 200, ct: ContentTypeCBOR, body: body}
		got, err := cborCall(ans, endpoints.fresh(), nil)
		if err != nil {
			t.Fatalf("answer %d in CBOR: %v", i, err)
		}
		if d := sameOutput(got, want); d != "" {
			t.Fatalf("answer %d: CBOR and SDK differ: %s", i, d)
		}
		if i == 0 {
			req := ans.last
			if ct, tg := req.Header.Get("Content-Type"), req.Header.Get("X-Amz-Target"); ct != ContentTypeCBOR || tg != "Kinesis_20131202.GetRecords" {
				t.Fatalf("request headers: Content-Type %q, X-Amz-Target %q", ct, tg)
			}
			in, err := DecodeGetRecordsInputCBOR(ans.sent)
			if err != nil || aws.ToString(in.ShardIterator) != "it" || aws.ToInt32(in.Limit) != 500 {
				t.Fatalf("request body %x: %+v, %v", ans.sent, in, err)
			}
		}
	}
}

// TestCBORDataNotCopied: a record's data is a slice of the answer's buffer
// (byte strings), with no allocation per record on the decoder's side.
func TestCBORDataNotCopied(t *testing.T) {
	out := &kinesis.GetRecordsOutput{NextShardIterator: aws.String("next"), MillisBehindLatest: aws.Int64(0)}
	at := time.UnixMilli(1_700_000_000_123).UTC()
	for i := range 500 {
		out.Records = append(out.Records, types.Record{Data: []byte(fmt.Sprintf(`{"id":%d,"sku":"sku-0000000000","quantity":3}`, i)),
			PartitionKey: aws.String(fmt.Sprintf("customer-%d", i%100)), SequenceNumber: aws.String(fmt.Sprintf("4959033827149025660855969253836157109592157598913658%04d", i)),
			ApproximateArrivalTimestamp: &at, EncryptionType: types.EncryptionTypeNone})
	}
	body := EncodeGetRecordsOutputCBOR(out)
	var got kinesis.GetRecordsOutput
	allocs := func(body []byte) float64 {
		return testing.AllocsPerRun(20, func() {
			got = kinesis.GetRecordsOutput{}
			if err := decodeCBORGetRecords(body, &got); err != nil {
				t.Fatal(err)
			}
		})
	}
	few := *out
	few.Records = out.Records[:5]
	if n5, n500 := allocs(EncodeGetRecordsOutputCBOR(&few)), allocs(body); n500 > n5+2 {
		t.Errorf("%v allocations to decode 500 records, %v for 5: want none per record", n500, n5)
	}
	allocs(body)
	d := got.Records[7].Data
	if !bytes.Contains(body, d) || &d[0] != &body[bytes.Index(body, d)] {
		t.Errorf("record 7's data is not a slice of the answer")
	}
	if !got.Records[7].ApproximateArrivalTimestamp.Equal(at) {
		t.Errorf("arrival %v, want %v", got.Records[7].ApproximateArrivalTimestamp, at)
	}
}

// TestCBORTimestamps: integers are epoch milliseconds (tagged or not), as
// the Java SDK reads them; floats and small integers epoch seconds, as
// kinesalite sends them.
func TestCBORTimestamps(t *testing.T) {
	for _, c := range []struct {
		name string
		item []byte
		want time.Time
	}{
		{"tag 1, ms", append([]byte{0xc1, 0x1b}, be64(1_700_000_000_123)...), time.UnixMilli(1_700_000_000_123)},
		{"ms", append([]byte{0x1b}, be64(1_700_000_000_123)...), time.UnixMilli(1_700_000_000_123)},
		{"float64 seconds", append([]byte{0xfb}, be64f(1_700_000_000.5)...), time.UnixMilli(1_700_000_000_500)},
		{"integer seconds", []byte{0x1a, 0x65, 0x53, 0xf1, 0x00}, time.Unix(1_700_000_000, 0)},
	} {
		r := cborReader{p: c.item}
		got, err := r.timestamp()
		if err != nil || !got.Equal(c.want) || got.Location() != time.UTC {
			t.Errorf("%s: %v, %v; want %v UTC", c.name, got, err, c.want)
		}
	}
}

// TestCBORErrorsAsSDK: error answers in CBOR reach the SDK's error types,
// with the code from the body or the x-amzn-ErrorType header.
func TestCBORErrorsAsSDK(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   []byte
		header http.Header
		check  func(error) bool
	}{
		{"expired", 400, EncodeErrorCBOR("ExpiredIteratorException", "Iterator expired"), nil, func(err error) bool {
			var e *types.ExpiredIteratorException
			return errors.As(err, &e) && strings.Contains(e.ErrorMessage(), "Iterator expired")
		}},
		{"throttled", 400, EncodeErrorCBOR("ProvisionedThroughputExceededException", "Rate exceeded"), nil, func(err error) bool {
			var e *types.ProvisionedThroughputExceededException
			return errors.As(err, &e)
		}},
		{"not found", 400, EncodeErrorCBOR("ResourceNotFoundException", "Stream x not found"), nil, func(err error) bool { return kinesisx.IsNotFound(err) && kinesisx.Permanent(err) }},
		{"access denied, header", 400, EncodeErrorCBOR("", "User is not authorized"), http.Header{"X-Amzn-Errortype": {"AccessDeniedException:http://internal"}}, func(err error) bool { return kinesisx.IsAccessDenied(err) }},
	}
	for _, c := range cases {
		_, err := cborCall(&cborAnswer{status: c.status, ct: ContentTypeCBOR, body: c.body, header: c.header}, endpoints.fresh(), nil)
		if !c.check(err) {
			t.Errorf("%s: %v (%T)", c.name, err, err)
		}
	}
}

// TestCBORFallback: an endpoint that answers a CBOR request in JSON, or
// refuses it, is read in JSON from then on, with one call of onFallback;
// a refused call is a *CBORRefusedError, retryable, that loses nothing.
func TestCBORFallback(t *testing.T) {
	jsonOK := []byte(`{"Records":[{"Data":"` + b64("x") + `","PartitionKey":"k","SequenceNumber":"1"}],"NextShardIterator":"n","MillisBehindLatest":0}`)
	t.Run("answered in JSON", func(t *testing.T) {
		ep := endpoints.fresh()
		var told []string
		a := &cborAnswer{status: 200, ct: "application/x-amz-json-1.1", body: jsonOK}
		out, err := cborCall(a, ep, func(e string, err error) { told = append(told, e) })
		if err != nil || len(out.Records) != 1 {
			t.Fatalf("a JSON answer to a CBOR request: %v, %+v", err, out)
		}
		if _, err := cborCall(a, ep, func(e string, err error) { told = append(told, e) }); err != nil {
			t.Fatal(err)
		}
		if ct := a.last.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
			t.Errorf("the call after the fallback sent %q, want JSON", ct)
		}
		if len(told) != 1 || told[0] != ep {
			t.Errorf("onFallback told %v, want once for %s", told, ep)
		}
	})
	for _, refusal := range []struct {
		name   string
		status int
		ct     string
		body   []byte
	}{
		{"unknown operation in CBOR", 400, ContentTypeCBOR, EncodeErrorCBOR("UnknownOperationException", "")},
		{"serialization error in JSON", 400, "application/x-amz-json-1.1", []byte(`{"__type":"SerializationException"}`)},
		{"unsupported media type", 415, "text/plain", []byte("no")},
		{"a CBOR answer cut short (kinesalite past 16 KiB)", 200, ContentTypeCBOR, EncodeGetRecordsOutputCBOR(&kinesis.GetRecordsOutput{Records: []types.Record{{Data: []byte("x"), PartitionKey: aws.String("k"), SequenceNumber: aws.String("1")}}})[:20]},
	} {
		t.Run(refusal.name, func(t *testing.T) {
			ep := endpoints.fresh()
			_, err := cborCall(&cborAnswer{status: refusal.status, ct: refusal.ct, body: refusal.body}, ep, nil)
			var refused *CBORRefusedError
			if !errors.As(err, &refused) || kinesisx.Permanent(err) {
				t.Fatalf("a refusal: %v (%T), want a retryable *CBORRefusedError", err, err)
			}
			a := &cborAnswer{status: 200, ct: "application/x-amz-json-1.1", body: jsonOK}
			out, err := cborCall(a, ep, nil)
			if err != nil || len(out.Records) != 1 || a.last.Header.Get("Content-Type") != "application/x-amz-json-1.1" {
				t.Fatalf("the call again: %v, %+v, sent %q", err, out, a.last.Header.Get("Content-Type"))
			}
		})
	}
}

// checkCBOR: the fast decoder and the SDK's (through the JSON transcoding)
// agree on body: equal outputs when the fast decoder takes it, and a
// malformed body is malformed for both.
func checkCBOR(t *testing.T, body []byte) {
	t.Helper()
	var fast kinesis.GetRecordsOutput
	ferr := decodeCBORGetRecords(body, &fast)
	js, terr := cborToJSON(body)
	switch {
	case ferr == nil && terr != nil:
		t.Fatalf("body %x: the fast decoder took it, the transcoding failed: %v", body, terr)
	case ferr != nil && !errors.Is(ferr, errNotFast) && terr == nil:
		if _, err := getRecords(200, js, false); err == nil {
			t.Fatalf("body %x: malformed for the fast decoder (%v), the SDK decoded its JSON %s", body, ferr, js)
		}
	}
	if ferr != nil {
		return // errNotFast: the client answers with the SDK's decoding of js, or its error
	}
	ref, rerr := getRecords(200, js, false)
	if rerr != nil {
		t.Fatalf("body %x: the fast decoder took it, the SDK failed on its JSON %s: %v", body, js, rerr)
	}
	if d := sameOutput(&fast, ref); d != "" {
		t.Fatalf("body %x (JSON %s): fast and SDK differ: %s", body, js, d)
	}
}

// FuzzCBORGetRecords: on any bytes, the CBOR decoder and the SDK's agree
// (checkCBOR), and nothing panics. The seeds are the JSON corpus encoded
// as Kinesis sends it.
func FuzzCBORGetRecords(f *testing.F) {
	for _, a := range answers {
		if out, err := getRecords(200, []byte(a), false); err == nil {
			f.Add(EncodeGetRecordsOutputCBOR(out))
		}
	}
	f.Add([]byte{0xbf, 0x67, 'R', 'e', 'c', 'o', 'r', 'd', 's', 0x9f, 0xff, 0xff}) // indefinite map and array
	f.Add(EncodeErrorCBOR("ExpiredIteratorException", "x"))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkCBOR(t, body)
	})
}

// TestCBORGetRecordsOnEmulators: both emulators answer GetRecords in CBOR
// (kinesalite with data as base64 text and timestamps as float seconds,
// kinesis-local with integer milliseconds), and the records read through
// CBORGetRecords are those read through the SDK's JSON.
func TestCBORGetRecordsOnEmulators(t *testing.T) {
	t.Parallel()
	for _, e := range []testutil.Emulator{testutil.Kinesalite, testutil.KinesisLocal} {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			var fellBack bool
			kc := testutil.KinesisClient(t, e)
			stream := testutil.StreamName(t)
			testutil.CreateStream(t, kc, stream, 1)
			ctx := t.Context()
			keys := []string{"plain", "ü-ñ-日本", `quote"and\back`, strings.Repeat("k", 256)}
			for i, k := range keys {
				if _, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String(k),
					Data: append([]byte{0, 255, byte(i)}, `{"x":"\u00e9"}`...)}); err != nil {
					t.Fatal(err)
				}
			}
			read := func(opt func(*kinesis.Options)) *kinesis.GetRecordsOutput {
				it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String("shardId-000000000000"),
					ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
				if err != nil {
					t.Fatal(err)
				}
				out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator}, opt)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			want := read(func(*kinesis.Options) {})
			got := read(CBORGetRecords(func(string, error) { fellBack = true }))
			if fellBack {
				t.Fatalf("%s fell back to JSON", e)
			}
			got.NextShardIterator, got.MillisBehindLatest = want.NextShardIterator, want.MillisBehindLatest // each read has its own iterator
			if d := sameOutput(got, want); d != "" || len(got.Records) != len(keys) {
				t.Fatalf("CBOR and JSON differ (%d records): %s", len(got.Records), d)
			}
		})
	}
}

func be64(v uint64) []byte {
	return []byte{byte(v >> 56), byte(v >> 48), byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

func be64f(v float64) []byte { return be64(mathFloat64bits(v)) }

func mathFloat64bits(v float64) uint64 { return math.Float64bits(v) }
