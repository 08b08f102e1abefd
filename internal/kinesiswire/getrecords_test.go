package kinesiswire

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
)

// answer is an http.RoundTripper that answers every call with status and
// body.
type answer struct {
	status int
	body   []byte
}

func (a answer) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: a.status, Status: http.StatusText(a.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/x-amz-json-1.1"}}, ContentLength: int64(len(a.body)),
		Body: io.NopCloser(bytes.NewReader(a.body)), Request: req}, nil
}

// getRecords decodes body as the answer to GetRecords, with the SDK's
// decoder or, fast, FastGetRecords'.
func getRecords(status int, body []byte, fast bool) (*kinesis.GetRecordsOutput, error) {
	c := kinesis.New(kinesis.Options{
		Region: "us-east-1", BaseEndpoint: aws.String("http://kinesisx.invalid"),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
		HTTPClient:  &http.Client{Transport: answer{status, body}}, RetryMaxAttempts: 1,
	})
	var opts []func(*kinesis.Options)
	if fast {
		opts = append(opts, FastGetRecords)
	}
	return c.GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: aws.String("it")}, opts...)
}

// sameOutput says how two GetRecords outputs differ ("" if they do not):
// every field the SDK exposes; nil and empty data are the same.
func sameOutput(a, b *kinesis.GetRecordsOutput) string {
	if len(a.Records) != len(b.Records) {
		return fmt.Sprintf("%d records against %d", len(a.Records), len(b.Records))
	}
	for i := range a.Records {
		x, y := a.Records[i], b.Records[i]
		switch {
		case !bytes.Equal(x.Data, y.Data):
			return fmt.Sprintf("record %d: data %q against %q", i, x.Data, y.Data)
		case !eqPtr(x.PartitionKey, y.PartitionKey), !eqPtr(x.SequenceNumber, y.SequenceNumber):
			return fmt.Sprintf("record %d: key/sequence %q/%q against %q/%q", i, aws.ToString(x.PartitionKey), aws.ToString(x.SequenceNumber), aws.ToString(y.PartitionKey), aws.ToString(y.SequenceNumber))
		case x.EncryptionType != y.EncryptionType:
			return fmt.Sprintf("record %d: encryption %q against %q", i, x.EncryptionType, y.EncryptionType)
		case (x.ApproximateArrivalTimestamp == nil) != (y.ApproximateArrivalTimestamp == nil),
			x.ApproximateArrivalTimestamp != nil && !x.ApproximateArrivalTimestamp.Equal(*y.ApproximateArrivalTimestamp),
			x.ApproximateArrivalTimestamp != nil && x.ApproximateArrivalTimestamp.Location() != y.ApproximateArrivalTimestamp.Location():
			return fmt.Sprintf("record %d: arrival %v against %v", i, x.ApproximateArrivalTimestamp, y.ApproximateArrivalTimestamp)
		}
	}
	if !eqPtr(a.NextShardIterator, b.NextShardIterator) || !eqPtr(a.MillisBehindLatest, b.MillisBehindLatest) {
		return fmt.Sprintf("next %v behind %v against %v %v", a.NextShardIterator, a.MillisBehindLatest, b.NextShardIterator, b.MillisBehindLatest)
	}
	if !reflect.DeepEqual(a.ChildShards, b.ChildShards) {
		return fmt.Sprintf("child shards %v against %v", a.ChildShards, b.ChildShards)
	}
	return ""
}

func eqPtr[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// answers is the seed corpus: what Kinesis and the emulators send, and
// what the fast decoder leaves to the SDK's.
var answers = []string{
	`{"Records":[],"NextShardIterator":"AAAA","MillisBehindLatest":0}`,
	`{"Records":[{"Data":"` + b64(`{"id":1}`) + `","PartitionKey":"k1","SequenceNumber":"49590338271490256608559692538361571095921575989136588898","ApproximateArrivalTimestamp":1.700000000123E9,"EncryptionType":"NONE"},` +
		`{"Data":"` + b64("second") + `","PartitionKey":"k2","SequenceNumber":"49590338271490256608559692538361571095921575989136588899","ApproximateArrivalTimestamp":1700000000.5}],"NextShardIterator":"AAAB","MillisBehindLatest":1500}`,
	" {\n \"MillisBehindLatest\" : 3 , \"Records\" : [ { \"SequenceNumber\" : \"1\" , \"Data\" : \"\" , \"PartitionKey\" : \"ü\" } ] } ",
	`{"Records":[{"Data":"` + b64("x") + `","PartitionKey":"k","SequenceNumber":"2","EncryptionType":"KMS","KeyId":"arn:aws:kms:us-east-1:000000000000:key/x","ApproximateArrivalTimestamp":1700000000}],"MillisBehindLatest":0}`,
	`{"Records":[{"Data":"` + b64("end") + `","PartitionKey":"k","SequenceNumber":"3"}],"MillisBehindLatest":0,"ChildShards":[{"ShardId":"shardId-000000000002","ParentShards":["shardId-000000000000"],"HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"9"}}]}`,
	`{"Records":[{"Data":"` + b64("q") + `","PartitionKey":"a\"b","SequenceNumber":"4"}],"NextShardIterator":"x\u0041"}`,
	`{"Records":[{"Data":null,"PartitionKey":"k","SequenceNumber":"5"}],"NextShardIterator":null}`,
	`{"Records":[{"Data":"not base64!","PartitionKey":"k","SequenceNumber":"6"}]}`,
	`{"Records":[{"Data":"` + b64("t") + `","SequenceNumber":"7","ApproximateArrivalTimestamp":-1.5}],"Unknown":{"a":[1,2]}}`,
	`{"Records":[{"ApproximateArrivalTimestamp":1e400}]}`,
	`{"ChildShards":null,"MillisBehindLatest":0,"NextShardIterator":"AAAA/b+c=","Records":[]}`,
	`{"Records":[{"Data":"` + b64("u") + `","PartitionKey":"tab\there \u00e9 \ud83d\ude00 \/","SequenceNumber":"8"}],"NextShardIterator":"a\/b"}`,
	"{\"Records\":[{\"Data\":\"\",\"PartitionKey\":\"bad \xff utf-8\",\"SequenceNumber\":\"9\"}]}",
	`{"Records":[`,
	`[]`,
	``,
	`{}`,
}

// TestFastGetRecordsAsSDK: on every answer of the corpus, FastGetRecords
// gives what the SDK's own decoder gives, or an error where it errs; and
// it takes the ordinary answers itself.
func TestFastGetRecordsAsSDK(t *testing.T) {
	for i, a := range answers {
		checkSame(t, []byte(a))
		if (i < 4 || i == 10 || i == 11) && !decodeGetRecords([]byte(a), &kinesis.GetRecordsOutput{}) {
			t.Errorf("answer %d: the fast decoder does not take it: %s", i, a)
		}
	}
	// Errors go to the SDK's decoder, with its types.
	_, err := getRecords(400, []byte(`{"__type":"ExpiredIteratorException","message":"Iterator expired"}`), true)
	var expired *types.ExpiredIteratorException
	if !errors.As(err, &expired) {
		t.Errorf("an error answer through FastGetRecords: %v, want ExpiredIteratorException", err)
	}
}

func checkSame(t *testing.T, body []byte) {
	t.Helper()
	want, werr := getRecords(200, body, false)
	got, gerr := getRecords(200, body, true)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("answer %q: SDK error %v, fast error %v", body, werr, gerr)
	}
	if werr == nil {
		if d := sameOutput(got, want); d != "" {
			t.Fatalf("answer %q: fast and SDK differ: %s", body, d)
		}
	}
}

// FuzzFastGetRecords: the fast decoder and the SDK's agree on any bytes:
// equal outputs, or both an error; neither panics.
func FuzzFastGetRecords(f *testing.F) {
	for _, a := range answers {
		f.Add([]byte(a))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if strings.Count(string(body), "{") > 1000 {
			return // the SDK's decoder recurses; not this test's subject
		}
		checkSame(t, body)
	})
}

// BenchmarkDecodeGetRecords: a GetRecords answer of 500 records of 100
// bytes, decoded by the SDK and by FastGetRecords, through the client.
func BenchmarkDecodeGetRecords(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"Records":[`)
	for i := range 500 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"Data":"%s","PartitionKey":"customer-%d","SequenceNumber":"4959033827149025660855969253836157109592157598913658%04d","ApproximateArrivalTimestamp":1.700000000123E9,"EncryptionType":"NONE"}`,
			b64(fmt.Sprintf(`{"id":%d,"customer":"customer-%d","sku":"sku-0000000000","quantity":3,"price":1999}`, i, i%100)), i%100, i)
	}
	sb.WriteString(`],"NextShardIterator":"AAAAAAAAAAH","MillisBehindLatest":0}`)
	body := []byte(sb.String())
	for _, fast := range []bool{false, true} {
		name := "sdk"
		if fast {
			name = "fast"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := getRecords(200, body, fast); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The same answer in CBOR, as Kinesis sends it to CBORGetRecords.
	out, err := getRecords(200, body, false)
	if err != nil {
		b.Fatal(err)
	}
	cbody := EncodeGetRecordsOutputCBOR(out)
	b.Run("cbor", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(cbody)))
		a := &cborAnswer{status: 200, ct: ContentTypeCBOR, body: cbody}
		ep := endpoints.fresh()
		for b.Loop() {
			if _, err := cborCall(a, ep, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// recorder keeps the body of every GetRecords answer that passes it.
type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".GetRecords") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, body)
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// TestFastGetRecordsOnEmulators: the emulators' GetRecords answers (keys
// and data of every kind, an empty answer, a closed shard's last) are
// decoded by the fast decoder itself where it should, and give what the
// SDK gives on the same bytes.
func TestFastGetRecordsOnEmulators(t *testing.T) {
	t.Parallel()
	for _, e := range []testutil.Emulator{testutil.Kinesalite, testutil.KinesisLocal} {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			kc := testutil.KinesisClient(t, e, func(o *kinesis.Options) { o.HTTPClient = &http.Client{Transport: rec} })
			stream := testutil.StreamName(t)
			testutil.CreateStream(t, kc, stream, 1)
			ctx := t.Context()
			keys := []string{"plain", "ü-ñ-日本", `quote"and\back`, "tab\there", strings.Repeat("k", 256)}
			for i, k := range keys {
				if _, err := kc.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String(k),
					Data: append([]byte{0, 255, byte(i)}, `{"x":"\u00e9"}`...)}); err != nil {
					t.Fatal(err)
				}
			}
			it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String("shardId-000000000000"),
				ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			if err != nil {
				t.Fatal(err)
			}
			out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator}, FastGetRecords)
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Records) != len(keys) {
				t.Fatalf("%d records, want %d", len(out.Records), len(keys))
			}
			for i, r := range out.Records {
				if aws.ToString(r.PartitionKey) != keys[i] || r.Data[2] != byte(i) || r.ApproximateArrivalTimestamp == nil {
					t.Errorf("record %d: key %q data %q arrival %v", i, aws.ToString(r.PartitionKey), r.Data, r.ApproximateArrivalTimestamp)
				}
			}
			if _, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator}, FastGetRecords); err != nil {
				t.Fatal(err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for i, body := range rec.bodies {
				checkSame(t, body)
				took := decodeGetRecords(body, &kinesis.GetRecordsOutput{})
				t.Logf("answer %d: %d bytes, fast decoder took it: %v", i, len(body), took)
				if i == 1 && !took {
					t.Errorf("the empty answer was not taken by the fast decoder: %s", body)
				}
			}
		})
	}
}
