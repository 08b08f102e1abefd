package kinesiswire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kschemas "github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
)

// Encoding is how GetRecords travels and is decoded.
type Encoding int

const (
	// EncodingCBOR: in CBOR, decoded by the library (CBORGetRecords).
	EncodingCBOR Encoding = iota
	// EncodingJSON: in AWS JSON 1.1, decoded by the library
	// (FastGetRecords).
	EncodingJSON
	// EncodingSDK: in AWS JSON 1.1, decoded by the SDK.
	EncodingSDK
)

// GetRecordsOptions returns the per-call options of GetRecords that make
// it travel as e says; onFallback is CBORGetRecords'.
func GetRecordsOptions(e Encoding, onFallback func(endpoint string, err error)) []func(*kinesis.Options) {
	switch e {
	case EncodingJSON:
		return []func(*kinesis.Options){FastGetRecords}
	case EncodingSDK:
		return nil
	}
	return []func(*kinesis.Options){CBORGetRecords(onFallback)}
}

// ContentTypeCBOR is the content type of Kinesis' CBOR protocol.
const ContentTypeCBOR = "application/x-amz-cbor-1.1"

// IsCBOR reports whether contentType (a Content-Type header's value) is
// ContentTypeCBOR, parameters aside.
func IsCBOR(contentType string) bool {
	ct, _, _ := strings.Cut(contentType, ";")
	return strings.TrimSpace(ct) == ContentTypeCBOR
}

// CBORRefusedError is returned by a GetRecords sent in CBOR to an endpoint
// that answered with a protocol error (it does not speak CBOR): the
// endpoint is read in JSON from then on, and the call is to be made again
// (no record was read; the iterator stays valid).
type CBORRefusedError struct {
	Endpoint string
	Err      error
}

func (e *CBORRefusedError) Error() string {
	return fmt.Sprintf("kinesiswire: endpoint %s refused CBOR (reading it in JSON from now on): %v", e.Endpoint, e.Err)
}

func (e *CBORRefusedError) Unwrap() error { return e.Err }

// cborRefused holds the endpoints that answered a CBOR request with JSON
// or a protocol error (endpointKey): their GetRecords go in JSON.
var cborRefused sync.Map

// CBORGetRecords returns a per-call option of GetRecords that sends it in
// CBOR, as AWS's Java SDK and the KCL do, and decodes the answer straight
// into the output: records' data are slices of the answer's own buffer (no
// base64, no copy), their keys and sequence numbers slices of one string.
// Only GetRecords' request and answer change: endpoints, credentials,
// signing, retries, timeouts, middleware and the SDK's error types are the
// client's. An answer the fast decoder does not take (child shards, say)
// is transcoded to JSON and decoded by the client's own protocol, so every
// field the SDK exposes is kept; an error answer reaches the SDK's error
// types the same way.
//
// An endpoint that answers in JSON, or refuses CBOR with a protocol error,
// is read in JSON (FastGetRecords) from then on; onFallback, if not nil, is
// called once for it. A refused call fails with a *CBORRefusedError, to be
// made again.
func CBORGetRecords(onFallback func(endpoint string, err error)) func(*kinesis.Options) {
	return func(o *kinesis.Options) {
		key := endpointKey(o)
		if _, refused := cborRefused.Load(key); refused {
			FastGetRecords(o)
			return
		}
		var jp smithyhttp.ClientProtocol
		switch p := o.Protocol.(type) {
		case *cborProtocol:
			return
		case *fastProtocol:
			jp = p
		case *awsjson.Protocol:
			jp = &fastProtocol{ClientProtocol: p}
		case nil:
			jp = &fastProtocol{ClientProtocol: awsjson.New11(kschemas.Kinesis_20131202)}
		default:
			return // not the SDK's AWS JSON 1.1: left alone
		}
		o.Protocol = &cborProtocol{ClientProtocol: jp, key: key, onFallback: onFallback}
	}
}

// endpointKey names the endpoint a client calls: its base endpoint, or its
// region for the service's own.
func endpointKey(o *kinesis.Options) string {
	if o.BaseEndpoint != nil {
		return *o.BaseEndpoint
	}
	return "kinesis." + o.Region
}

// refuse records that the endpoint of p answered a CBOR request with JSON
// or refused it, and tells onFallback the first time.
func (p *cborProtocol) refuse(err error) {
	if _, loaded := cborRefused.LoadOrStore(p.key, true); !loaded && p.onFallback != nil {
		p.onFallback(p.key, err)
	}
}

// cborProtocol is the client's AWS JSON 1.1 protocol (with FastGetRecords'
// decoding), with GetRecords sent and answered in CBOR.
type cborProtocol struct {
	smithyhttp.ClientProtocol // the JSON protocol: every other operation, and fallbacks
	key                       string
	onFallback                func(endpoint string, err error)
}

// SerializeRequest implements smithyhttp.ClientProtocol.
func (p *cborProtocol) SerializeRequest(ctx context.Context, schema *smithy.OperationSchema, in smithy.Serializable, req *smithyhttp.Request) error {
	gr, ok := in.(*kinesis.GetRecordsInput)
	if !ok {
		return p.ClientProtocol.SerializeRequest(ctx, schema, in, req)
	}
	req.Method = http.MethodPost
	if len(req.URL.Path) == 0 {
		req.URL.Path = "/"
	}
	req.Header.Set("X-Amz-Target", "Kinesis_20131202.GetRecords")
	req.Header.Set("Content-Type", ContentTypeCBOR)
	sreq, err := req.SetStream(bytes.NewReader(encodeGetRecordsInput(gr)))
	if err != nil {
		return fmt.Errorf("set stream: %w", err)
	}
	*req = *sreq
	return nil
}

// encodeGetRecordsInput encodes in as a CBOR map.
func encodeGetRecordsInput(in *kinesis.GetRecordsInput) []byte {
	n := 0
	for _, set := range []bool{in.ShardIterator != nil, in.Limit != nil, in.StreamARN != nil} {
		if set {
			n++
		}
	}
	w := cborWriter{b: make([]byte, 0, 64+len(aws.ToString(in.ShardIterator))+len(aws.ToString(in.StreamARN)))}
	w.head(cborMap, uint64(n))
	if in.Limit != nil {
		w.text("Limit")
		w.int(int64(*in.Limit))
	}
	if in.ShardIterator != nil {
		w.text("ShardIterator")
		w.text(*in.ShardIterator)
	}
	if in.StreamARN != nil {
		w.text("StreamARN")
		w.text(*in.StreamARN)
	}
	return w.b
}

// DeserializeResponse implements smithyhttp.ClientProtocol.
func (p *cborProtocol) DeserializeResponse(ctx context.Context, schema *smithy.OperationSchema, reg *smithy.TypeRegistry, resp *smithyhttp.Response, out smithy.Deserializable) error {
	gr, ok := out.(*kinesis.GetRecordsOutput)
	if !ok {
		return p.ClientProtocol.DeserializeResponse(ctx, schema, reg, resp, out)
	}
	payload, err := readBody(resp)
	if err != nil {
		return err
	}
	ct := resp.Header.Get("Content-Type")
	isCBOR := IsCBOR(ct) || (ct == "" && len(payload) > 0 && payload[0]>>5 == byte(cborMap))
	if !isCBOR {
		// An answer in JSON (or anything else) to a CBOR request: this
		// endpoint does not speak CBOR. A success is an answer all the
		// same; an error is a refusal of the request, made again in JSON.
		resp.Body = io.NopCloser(bytes.NewReader(payload))
		err := p.ClientProtocol.DeserializeResponse(ctx, schema, reg, resp, out)
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			p.refuse(fmt.Errorf("it answered GetRecords with content type %q", ct))
			return err
		case refusal(resp.StatusCode, kinesisx.ErrorCode(err)):
			p.refuse(err)
			return &CBORRefusedError{Endpoint: p.key, Err: err}
		}
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		err := p.cborError(ctx, schema, reg, resp, payload)
		if refusal(resp.StatusCode, kinesisx.ErrorCode(err)) {
			p.refuse(err)
			return &CBORRefusedError{Endpoint: p.key, Err: err}
		}
		return err
	}
	err = decodeCBORGetRecords(payload, gr)
	if err == nil {
		return nil
	}
	*gr = kinesis.GetRecordsOutput{}
	if errors.Is(err, errNotFast) {
		// Well-formed, but not for the fast decoder: the SDK's own,
		// through JSON.
		js, jerr := cborToJSON(payload)
		if jerr == nil {
			resp.Body = io.NopCloser(bytes.NewReader(js))
			resp.Header.Set("Content-Type", "application/x-amz-json-1.1")
			return p.ClientProtocol.DeserializeResponse(ctx, schema, reg, resp, out)
		}
		err = jerr
	}
	// Malformed: an endpoint whose CBOR cannot be trusted (kinesalite cuts
	// answers past 16 KiB: node-cbor's encodeOne stops at its
	// highWaterMark). It is read in JSON from now on; this call is made
	// again.
	derr := &smithy.DeserializationError{Err: fmt.Errorf("GetRecords answer in CBOR (%d bytes): %w", len(payload), err), Snapshot: payload[:min(len(payload), 1024)]}
	p.refuse(derr)
	return &CBORRefusedError{Endpoint: p.key, Err: derr}
}

// refusal reports whether an error answer to a CBOR request says that the
// endpoint does not take CBOR: an unknown operation or a request it could
// not read (its codes), an unsupported media type, or a 404.
func refusal(status int, code string) bool {
	switch code {
	case "SerializationException", "UnknownOperationException", "UnsupportedMediaTypeException", "InvalidContentTypeException":
		return true
	}
	return status == http.StatusUnsupportedMediaType || status == http.StatusNotFound
}

// cborError turns an error answer in CBOR into the SDK's error, as the
// client's JSON protocol would make it of the same answer in JSON.
func (p *cborProtocol) cborError(ctx context.Context, schema *smithy.OperationSchema, reg *smithy.TypeRegistry, resp *smithyhttp.Response, payload []byte) error {
	code, msg := errorInfo(payload)
	if h := resp.Header.Get("X-Amzn-ErrorType"); h != "" {
		code = h // the JSON protocol prefers it too
	}
	if h := resp.Header.Get("X-Amzn-Error-Message"); h != "" {
		msg = h
	}
	fields := map[string]string{}
	if code != "" {
		fields["__type"] = code
	}
	if msg != "" {
		fields["message"] = msg
	}
	js, _ := json.Marshal(fields)
	resp.Body = io.NopCloser(bytes.NewReader(js))
	resp.Header.Set("Content-Type", "application/x-amz-json-1.1")
	return p.ClientProtocol.DeserializeResponse(ctx, schema, reg, resp, &kinesis.GetRecordsOutput{})
}

// errorInfo reads an error answer's code (__type, or code) and message
// (message, Message or errorMessage), as the Java SDK's CBOR protocol does.
func errorInfo(p []byte) (code, msg string) {
	r := cborReader{p: p}
	n, err := r.container(cborMap)
	if err != nil {
		return "", ""
	}
	for i := 0; r.more(n, i); i++ {
		k, err := r.text()
		if err != nil {
			return code, msg
		}
		switch string(k) {
		case "__type", "code", "message", "Message", "errorMessage":
			if r.isNull() {
				continue
			}
			v, err := r.text()
			if err != nil {
				return code, msg
			}
			switch {
			case string(k) == "__type" || (string(k) == "code" && code == ""):
				code = string(v)
			case msg == "":
				msg = string(v)
			}
		default:
			if r.skip(0) != nil {
				return code, msg
			}
		}
	}
	return code, msg
}
