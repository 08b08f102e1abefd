package kinesisfake

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/eventstream"

	"github.com/kinesislease/kinesislease/internal/kinesiswire"
)

// The wire: Kinesis' AWS JSON 1.1 protocol, and SubscribeToShard's event
// stream, served by ServeHTTP, and by Client without a network.

// targetPrefix prefixes the X-Amz-Target header of every Kinesis call.
const targetPrefix = "Kinesis_20131202."

// maxRequestBody bounds a request body: PutRecords' 5 MiB of data, in
// base64, with room for the JSON around it.
const maxRequestBody = 8 << 20

// operationOf makes the operation of a method of Kinesis.
func operationOf[I, O any](fn func(context.Context, *I, ...func(*kinesis.Options)) (*O, error)) operation {
	return func(ctx context.Context, body []byte) (any, error) {
		in := new(I)
		if err := fromWire(body, in); err != nil {
			return nil, err
		}
		return fn(ctx, in)
	}
}

func (k *Kinesis) operations() map[string]operation {
	k.opsOnce.Do(func() {
		k.wireOps = map[string]operation{
			"ListShards":               operationOf(k.ListShards),
			"GetShardIterator":         operationOf(k.GetShardIterator),
			"GetRecords":               operationOf(k.GetRecords),
			"PutRecords":               operationOf(k.PutRecords),
			"PutRecord":                operationOf(k.PutRecord),
			"DescribeStreamSummary":    operationOf(k.DescribeStreamSummary),
			"RegisterStreamConsumer":   operationOf(k.RegisterStreamConsumer),
			"DescribeStreamConsumer":   operationOf(k.DescribeStreamConsumer),
			"ListStreamConsumers":      operationOf(k.ListStreamConsumers),
			"DeregisterStreamConsumer": operationOf(k.DeregisterStreamConsumer),
			"CreateStream":             operationOf(k.createStream),
			"DeleteStream":             operationOf(k.deleteStream),
		}
	})
	return k.wireOps
}

// createStream serves CreateStream: CreateStream with ShardCount (default
// 1), the stream ACTIVE at once.
func (k *Kinesis) createStream(_ context.Context, in *kinesis.CreateStreamInput, _ ...func(*kinesis.Options)) (*kinesis.CreateStreamOutput, error) {
	n := 1
	if in.ShardCount != nil {
		n = int(*in.ShardCount)
	}
	if err := k.CreateStream(aws.ToString(in.StreamName), n); err != nil {
		return nil, err
	}
	return &kinesis.CreateStreamOutput{}, nil
}

// deleteStream serves DeleteStream.
func (k *Kinesis) deleteStream(_ context.Context, in *kinesis.DeleteStreamInput, _ ...func(*kinesis.Options)) (*kinesis.DeleteStreamOutput, error) {
	name := aws.ToString(in.StreamName)
	if name == "" {
		name = aws.ToString(in.StreamARN)
	}
	if err := k.DeleteStream(name); err != nil {
		return nil, err
	}
	return &kinesis.DeleteStreamOutput{}, nil
}

// ServeHTTP serves the Kinesis API on AWS JSON 1.1, and GetRecords in CBOR
// too (application/x-amz-cbor-1.1), as the service does,
// to any SDK client whose endpoint is the server, in this process or
// another (see Client for one that needs no server): the calls Kinesis
// implements, CreateStream and DeleteStream, and SubscribeToShard with its
// event stream (see DescribeStreamSummary and FanOutRules).
// Requests are not authenticated. Errors are the service's: a JSON body
// with __type and message, status 400 (500 for InternalFailure).
func (k *Kinesis) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), targetPrefix)
	if r.Method != http.MethodPost || !ok {
		writeError(w, &smithy.GenericAPIError{Code: "UnknownOperationException", Message: "want a POST with X-Amz-Target " + targetPrefix + "<operation>"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
	if err != nil {
		writeError(w, serializationErr("reading the request: %v", err))
		return
	}
	if name == "SubscribeToShard" {
		k.serveSubscribe(w, r, body)
		return
	}
	if kinesiswire.IsCBOR(r.Header.Get("Content-Type")) {
		k.serveCBOR(w, r, name, body)
		return
	}
	fn := k.operations()[name]
	if fn == nil {
		writeError(w, &smithy.GenericAPIError{Code: "UnknownOperationException", Message: "kinesisfake: no operation " + name})
		return
	}
	out, err := fn(r.Context(), body)
	if err != nil {
		writeError(w, err)
		return
	}
	payload, err := json.Marshal(toWire(reflect.ValueOf(out)))
	if err != nil {
		writeError(w, &smithy.GenericAPIError{Code: "InternalFailure", Message: err.Error(), Fault: smithy.FaultServer})
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_, _ = w.Write(payload)
}

// serveCBOR answers a call in CBOR (application/x-amz-cbor-1.1), as the
// service answers AWS's Java SDK: GetRecords, the one operation the
// library sends so; any other is a SerializationException.
func (k *Kinesis) serveCBOR(w http.ResponseWriter, r *http.Request, name string, body []byte) {
	fail := func(err error) {
		code, msg, status := "InternalFailure", err.Error(), http.StatusInternalServerError
		var api smithy.APIError
		if errors.As(err, &api) {
			code, msg = api.ErrorCode(), api.ErrorMessage()
			if api.ErrorFault() != smithy.FaultServer && code != "InternalFailure" {
				status = http.StatusBadRequest
			}
		}
		w.Header().Set("Content-Type", kinesiswire.ContentTypeCBOR)
		w.WriteHeader(status)
		_, _ = w.Write(kinesiswire.EncodeErrorCBOR(code, msg))
	}
	if name != OpGetRecords {
		fail(serializationErr("kinesisfake: %s in CBOR: only GetRecords is served in CBOR", name))
		return
	}
	in, err := kinesiswire.DecodeGetRecordsInputCBOR(body)
	if err != nil {
		fail(serializationErr("GetRecords in CBOR: %v", err))
		return
	}
	out, err := k.GetRecords(r.Context(), in)
	if err != nil {
		fail(err)
		return
	}
	w.Header().Set("Content-Type", kinesiswire.ContentTypeCBOR)
	_, _ = w.Write(kinesiswire.EncodeGetRecordsOutputCBOR(out))
}

// serveSubscribe answers SubscribeToShard: the initial-response, then each
// event, then the exception that ended the subscription, if one did.
func (k *Kinesis) serveSubscribe(w http.ResponseWriter, r *http.Request, body []byte) {
	in := new(kinesis.SubscribeToShardInput)
	if err := fromWire(body, in); err != nil {
		writeError(w, err)
		return
	}
	sub, err := k.subscribe(r.Context(), in)
	if err != nil {
		writeError(w, err)
		return
	}
	defer sub.Close()
	rc := http.NewResponseController(w)
	enc := eventstream.NewEncoder()
	send := func(msgType, typeHeader, typ string, payload []byte) error {
		var msg eventstream.Message
		msg.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue(msgType))
		msg.Headers.Set(typeHeader, eventstream.StringValue(typ))
		msg.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue("application/json"))
		msg.Payload = payload
		if err := enc.Encode(w, msg); err != nil {
			return err
		}
		return rc.Flush()
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	if send(eventstream.EventMessageType, eventstream.EventTypeHeader, "initial-response", []byte("{}")) != nil {
		return
	}
	for ev := range sub.Events() {
		payload, err := json.Marshal(toWire(reflect.ValueOf(ev)))
		if err != nil {
			panic(err) // SDK shapes always marshal
		}
		if send(eventstream.EventMessageType, eventstream.EventTypeHeader, "SubscribeToShardEvent", payload) != nil {
			return
		}
	}
	err = sub.Err()
	var api smithy.APIError
	switch {
	case errors.Is(err, ErrConnectionReset):
		panic(http.ErrAbortHandler) // the client reads a broken body, not the stream's end
	case errors.As(err, &api):
		payload, _ := json.Marshal(map[string]string{"message": api.ErrorMessage()})
		_ = send(eventstream.ExceptionMessageType, eventstream.ExceptionTypeHeader, api.ErrorCode(), payload)
	}
}

func serializationErr(format string, args ...any) error {
	return &smithy.GenericAPIError{Code: "SerializationException", Message: fmt.Sprintf(format, args...)}
}

// writeError answers err as Kinesis does: an API error by its code, any
// other as InternalFailure.
func writeError(w http.ResponseWriter, err error) {
	code, msg, status := "InternalFailure", err.Error(), http.StatusInternalServerError
	var api smithy.APIError
	if errors.As(err, &api) {
		code, msg = api.ErrorCode(), api.ErrorMessage()
		if api.ErrorFault() != smithy.FaultServer && code != "InternalFailure" {
			status = http.StatusBadRequest
		}
	}
	body, _ := json.Marshal(map[string]string{"__type": code, "message": msg})
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	bytesType = reflect.TypeFor[[]byte]()
)

// toWire returns v (an SDK shape) as AWS JSON 1.1 writes it: members by
// name, nil ones left out, timestamps in epoch seconds, blobs in base64.
func toWire(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return toWire(v.Elem())
	}
	switch t := v.Type(); {
	case t == timeType:
		ms := v.Interface().(time.Time).UnixMilli()
		return json.Number(strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64))
	case t == bytesType:
		return base64.StdEncoding.EncodeToString(v.Bytes())
	}
	switch v.Kind() {
	case reflect.Struct:
		m := map[string]any{}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Name == "ResultMetadata" {
				continue
			}
			fv := v.Field(i)
			switch fv.Kind() {
			case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map:
				if fv.IsNil() {
					continue
				}
			case reflect.String:
				if fv.String() == "" {
					continue // an unset enum
				}
			}
			m[f.Name] = toWire(fv)
		}
		return m
	case reflect.Slice:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = toWire(v.Index(i))
		}
		return out
	case reflect.Map:
		out := map[string]any{}
		for it := v.MapRange(); it.Next(); {
			out[it.Key().String()] = toWire(it.Value())
		}
		return out
	case reflect.String:
		return v.String()
	}
	return v.Interface()
}

// fromWire decodes an AWS JSON 1.1 request body into in, a pointer to an
// SDK input shape; unknown members are ignored, as the service does.
func fromWire(body []byte, in any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return serializationErr("the request is not JSON: %v", err)
	}
	return setWire(reflect.ValueOf(in).Elem(), doc, reflect.TypeOf(in).Elem().Name())
}

// setWire sets v from the decoded JSON doc; path names v in errors.
func setWire(v reflect.Value, doc any, path string) error {
	if doc == nil {
		return nil
	}
	if v.Kind() == reflect.Pointer {
		p := reflect.New(v.Type().Elem())
		if err := setWire(p.Elem(), doc, path); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	bad := func() error { return serializationErr("%s: unexpected %T", path, doc) }
	switch t := v.Type(); {
	case t == timeType:
		n, ok := doc.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return bad()
		}
		sec, frac := math.Modf(f)
		v.Set(reflect.ValueOf(time.Unix(int64(sec), int64(math.Round(frac*1e3))*int64(time.Millisecond)).UTC()))
		return nil
	case t == bytesType:
		s, ok := doc.(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if !ok || err != nil {
			return serializationErr("%s: not base64", path)
		}
		v.SetBytes(b)
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		m, ok := doc.(map[string]any)
		if !ok {
			return bad()
		}
		for name, val := range m {
			f, ok := v.Type().FieldByName(name)
			if !ok || !f.IsExported() {
				continue
			}
			if err := setWire(v.FieldByIndex(f.Index), val, path+"."+name); err != nil {
				return err
			}
		}
	case reflect.Slice:
		a, ok := doc.([]any)
		if !ok {
			return bad()
		}
		s := reflect.MakeSlice(v.Type(), len(a), len(a))
		for i, e := range a {
			if err := setWire(s.Index(i), e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
	case reflect.Map:
		m, ok := doc.(map[string]any)
		if !ok || v.Type().Key().Kind() != reflect.String {
			return bad()
		}
		out := reflect.MakeMapWithSize(v.Type(), len(m))
		for key, val := range m {
			e := reflect.New(v.Type().Elem()).Elem()
			if err := setWire(e, val, path+"."+key); err != nil {
				return err
			}
			out.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), e)
		}
		v.Set(out)
	case reflect.String:
		s, ok := doc.(string)
		if !ok {
			return bad()
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := doc.(bool)
		if !ok {
			return bad()
		}
		v.SetBool(b)
	case reflect.Int32, reflect.Int64, reflect.Int:
		n, ok := doc.(json.Number)
		i, err := n.Int64()
		if !ok || err != nil || v.OverflowInt(i) {
			return bad()
		}
		v.SetInt(i)
	case reflect.Float32, reflect.Float64:
		n, ok := doc.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil {
			return bad()
		}
		v.SetFloat(f)
	default:
		return serializationErr("%s: kinesisfake cannot decode a %s", path, v.Type())
	}
	return nil
}
