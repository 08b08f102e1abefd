package kinesiswire

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kschemas "github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
)

// FastGetRecords is a per-call option of GetRecords: the answer is decoded
// by decodeGetRecords, straight into the output, with one buffer per batch
// for the records' data and one string for their keys and sequence
// numbers, instead of the SDK's token reader (a string and a base64 buffer
// per field). Only a successful answer's decoding changes: the request,
// signing, retries, errors and every answer the decoder does not take (one
// with child shards, escapes in a string, a field it does not know, a null)
// go through the client's own protocol, on the same bytes. The option wraps
// the client's protocol; on a client whose protocol is not the SDK's AWS
// JSON 1.1 it does nothing.
func FastGetRecords(o *kinesis.Options) {
	switch p := o.Protocol.(type) {
	case *fastProtocol:
	case *awsjson.Protocol:
		o.Protocol = &fastProtocol{ClientProtocol: p}
	case nil:
		o.Protocol = &fastProtocol{ClientProtocol: awsjson.New11(kschemas.Kinesis_20131202)}
	}
}

// fastProtocol is the SDK's protocol with GetRecords' answers decoded by
// decodeGetRecords.
type fastProtocol struct {
	smithyhttp.ClientProtocol
}

// DeserializeResponse implements smithyhttp.ClientProtocol.
func (p *fastProtocol) DeserializeResponse(ctx context.Context, schema *smithy.OperationSchema, reg *smithy.TypeRegistry, resp *smithyhttp.Response, out smithy.Deserializable) error {
	gr, ok := out.(*kinesis.GetRecordsOutput)
	if !ok || resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return p.ClientProtocol.DeserializeResponse(ctx, schema, reg, resp, out)
	}
	payload, err := readBody(resp)
	if err != nil {
		return err
	}
	if decodeGetRecords(payload, gr) {
		return nil
	}
	*gr = kinesis.GetRecordsOutput{}
	resp.Body = io.NopCloser(bytes.NewReader(payload))
	return p.ClientProtocol.DeserializeResponse(ctx, schema, reg, resp, out)
}

// readBody reads an answer's whole body into one buffer, sized by its
// Content-Length when it gives one.
func readBody(resp *smithyhttp.Response) ([]byte, error) {
	var buf bytes.Buffer
	if n := resp.ContentLength; n > 0 && n < 16<<20 {
		buf.Grow(int(n))
	}
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, &smithy.DeserializationError{Err: err}
	}
	return buf.Bytes(), nil
}

// decodeGetRecords decodes a GetRecords answer into out, reporting false
// (out then partly set) for one it does not take: anything but the members
// Records (Data, PartitionKey, SequenceNumber, ApproximateArrivalTimestamp,
// EncryptionType; KeyId, which the SDK drops, is dropped), NextShardIterator and MillisBehindLatest, a
// string with an escape, a null, a timestamp out of range; the SDK's
// decoder then decodes it. What it takes it decodes as the SDK does: data
// in standard base64, timestamps in epoch seconds truncated to the
// millisecond, in UTC.
func decodeGetRecords(p []byte, out *kinesis.GetRecordsOutput) bool {
	var a recordsAnswer
	if !decodeRecordsJSON(p, "NextShardIterator", &a) {
		return false
	}
	out.Records, out.NextShardIterator, out.MillisBehindLatest = a.records, a.next, a.millisBehind
	return true
}

// recordsAnswer is what GetRecords and SubscribeToShard's events both
// carry: records, where to go on (NextShardIterator,
// ContinuationSequenceNumber) and MillisBehindLatest.
type recordsAnswer struct {
	records      []types.Record
	next         *string
	millisBehind *int64
}

// decodeRecordsJSON decodes records, nextKey and MillisBehindLatest from
// the JSON object p (GetRecords' answer, or a SubscribeToShardEvent's
// payload) into out, as decodeGetRecords says; false for what it does not
// take.
func decodeRecordsJSON(p []byte, nextKey string, out *recordsAnswer) bool {
	d := scanner{p: p}
	var (
		recs  []types.Record
		spans []span // PartitionKey, SequenceNumber, EncryptionType of each record, in text
		data  []byte // every record's data, decoded
		dataN []int  // where each record's data ends in data
		times []time.Time
		text  []byte // the strings, concatenated
		next  span   // nextKey's value (ok: one came)
	)
	addText := func(s []byte) span {
		start := len(text)
		text = append(text, s...)
		return span{start, len(text), true}
	}
	if !d.byte('{') {
		return false
	}
	first := true
	for {
		if d.byte('}') {
			break
		}
		if !first && !d.byte(',') {
			return false
		}
		first = false
		key, ok := d.str()
		if !ok || !d.byte(':') {
			return false
		}
		switch string(key) {
		case "Records":
			if !d.byte('[') {
				return false
			}
			if n := bytes.Count(p[d.i:], []byte(`"SequenceNumber"`)); n > 0 {
				recs = make([]types.Record, 0, n)
				spans = make([]span, 0, 3*n)
				dataN = make([]int, 0, n)
				text = slices.Grow(text, 80*n) // the next key may have come first
				// The data are shorter than their base64 in p: a small
				// answer (an event of a record or two) gets a buffer its
				// size, a large one starts at 4 KiB and doubles.
				data = make([]byte, 0, min(base64.StdEncoding.DecodedLen(len(p)-d.i), 4096))
				times = make([]time.Time, 0, n)
			}
			for i := 0; ; i++ {
				if d.byte(']') {
					break
				}
				if i > 0 && !d.byte(',') {
					return false
				}
				if !d.byte('{') {
					return false
				}
				var fields [3]span // PartitionKey, SequenceNumber, EncryptionType
				var at time.Time
				recStart := len(data) // where this record's data begin
				for j := 0; ; j++ {
					if d.byte('}') {
						break
					}
					if j > 0 && !d.byte(',') {
						return false
					}
					k, ok := d.str()
					if !ok || !d.byte(':') {
						return false
					}
					switch string(k) {
					case "Data":
						v, ok := d.str()
						if !ok {
							return false
						}
						n := base64.StdEncoding.DecodedLen(len(v))
						data = growBytes(data[:recStart], n) // a Data met twice: the last, as the SDK keeps
						m, err := base64.StdEncoding.Decode(data[len(data):len(data)+n], v)
						if err != nil {
							return false
						}
						data = data[:len(data)+m]
					case "ApproximateArrivalTimestamp":
						v, ok := d.number()
						if !ok {
							return false
						}
						f, err := strconv.ParseFloat(string(v), 64)
						ms := f * 1e3
						if err != nil || math.IsNaN(ms) || math.Abs(ms) > 1<<53 {
							return false
						}
						// As smithytime.ParseEpochSeconds: the milliseconds,
						// truncated (big.Float at float64's precision).
						at = time.Unix(0, int64(ms)*1e6).UTC()
					case "PartitionKey":
						fields[0], ok = d.text(addText)
					case "SequenceNumber":
						fields[1], ok = d.text(addText)
					case "EncryptionType":
						fields[2], ok = d.text(addText)
					case "KeyId": // not in the SDK's Record: read and dropped
						_, ok = d.str()
					default:
						return false
					}
					if !ok {
						return false
					}
				}
				dataN = append(dataN, len(data))
				times = append(times, at)
				spans = append(spans, fields[:]...)
				recs = append(recs, types.Record{})
			}
		case nextKey:
			if next, ok = d.text(addText); !ok {
				return false
			}
		case "ChildShards":
			if !d.null() {
				return false // a closed shard's end: the SDK's decoder
			}
		case "MillisBehindLatest":
			v, ok := d.number()
			if !ok {
				return false
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return false
			}
			out.millisBehind = &n
		default:
			return false
		}
	}
	if !d.end() {
		return false
	}
	// One buffer for every record's data: the records slice it.
	prev := 0
	for i := range recs {
		recs[i].Data, prev = data[prev:dataN[i]:dataN[i]], dataN[i]
	}
	out.records, out.next = finishRecords(recs, spans, times, text, next)
	return true
}

// finishRecords gives the decoded records their partition keys, sequence
// numbers and encryption types (spans, three a record, in text), and
// their arrival times (times; zero: none), and returns them (never nil) with
// next's string. One string holds every key, sequence number and the
// iterator or continuation: the records slice it.
func finishRecords(recs []types.Record, spans []span, times []time.Time, text []byte, next span) ([]types.Record, *string) {
	all := string(text)
	strs := make([]string, 0, 2*len(recs)+1)
	ptr := func(s span) *string {
		if !s.ok {
			return nil
		}
		strs = append(strs, all[s.start:s.end])
		return &strs[len(strs)-1]
	}
	for i := range recs {
		r := &recs[i]
		f := spans[3*i : 3*i+3]
		r.PartitionKey, r.SequenceNumber = ptr(f[0]), ptr(f[1])
		if f[2].ok {
			r.EncryptionType = types.EncryptionType(all[f[2].start:f[2].end])
		}
		if !times[i].IsZero() {
			r.ApproximateArrivalTimestamp = &times[i]
		}
	}
	if recs == nil {
		recs = []types.Record{}
	}
	return recs, ptr(next)
}

// span is a string's place in decodeGetRecords' text.
type span struct {
	start, end int
	ok         bool
}

// growBytes returns b with room for n more bytes.
func growBytes(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), max(2*cap(b), len(b)+n, 4096))
	copy(nb, b)
	return nb
}

// scanner reads the JSON of one GetRecords answer.
type scanner struct {
	p []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.p) {
		switch s.p[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c (after white space), reporting whether it was there.
func (s *scanner) byte(c byte) bool {
	s.space()
	if s.i < len(s.p) && s.p[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str consumes a string that needs no unquoting (no escape) and returns its
// bytes. Like the SDK's, it keeps bytes that are not UTF-8 as they are in
// a string without escapes.
func (s *scanner) str() ([]byte, bool) {
	v, plain, ok := s.quoted()
	if !ok || !plain {
		return nil, false
	}
	return v[1 : len(v)-1], true
}

// quoted consumes a string and returns it with its quotes, and whether its
// bytes are its value (no escape).
func (s *scanner) quoted() (tok []byte, plain, ok bool) {
	if !s.byte('"') {
		return nil, false, false
	}
	start, esc := s.i-1, false
	for s.i < len(s.p) {
		switch c := s.p[s.i]; {
		case c == '"':
			s.i++
			tok = s.p[start:s.i]
			return tok, !esc, true
		case c == '\\':
			esc = true
			s.i++ // the escaped byte: a quote does not end the string
		case c < 0x20:
			return nil, false, false
		}
		s.i++
	}
	return nil, false, false
}

// text consumes a string and adds its value to the text with add,
// unquoted as the SDK unquotes (encoding/json's rules) when it needs it.
func (s *scanner) text(add func([]byte) span) (span, bool) {
	tok, plain, ok := s.quoted()
	switch {
	case !ok:
		return span{}, false
	case plain:
		return add(tok[1 : len(tok)-1]), true
	}
	var v string
	if json.Unmarshal(tok, &v) != nil {
		return span{}, false
	}
	return add([]byte(v)), true
}

// number consumes a JSON number and returns its text.
func (s *scanner) number() ([]byte, bool) {
	s.space()
	start := s.i
	for s.i < len(s.p) {
		c := s.p[s.i]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			s.i++
			continue
		}
		break
	}
	return s.p[start:s.i], s.i > start
}

// null consumes a null, reporting whether there was one.
func (s *scanner) null() bool {
	s.space()
	if bytes.HasPrefix(s.p[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// end reports whether only white space is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.p)
}
