package codec

import (
	"errors"
	"fmt"
	"reflect"
)

// Codec marshals Go values to record bytes and unmarshals record bytes back
// into Go values.
//
// Implementations must be safe for concurrent use by multiple goroutines:
// the library calls one Codec from every shard worker at once.
//
// Unmarshal must never panic, whatever bytes it is given. Records come from
// producers this process does not control, and the library dead-letters a
// record whose bytes fail to decode, so a malformed record has to surface as
// an error, not bring down the consumer. Errors returned by Unmarshal should
// be (or wrap) a *DecodeError, and errors returned by Marshal a *EncodeError.
//
// Codec is deliberately not generic: the typed edge of the library decodes
// into a *T and hands the codec that pointer as an any.
type Codec interface {
	// Name identifies the encoding, such as "json" or "msgpack". It is used in
	// errors, logs and metrics.
	Name() string
	// Marshal returns the encoding of v. The returned slice is owned by the
	// caller.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into the value that v points to. v must be a
	// non-nil pointer. Unmarshal must not retain data after it returns.
	Unmarshal(data []byte, v any) error
}

// ErrInvalidTarget is wrapped in the *DecodeError returned when Unmarshal is
// given a nil or non-pointer target. It signals a programming error rather
// than a malformed record.
var ErrInvalidTarget = errors.New("target must be a non-nil pointer")

// DecodeError is returned by Unmarshal of the codecs in this package when the
// bytes cannot be decoded into the target, when the target is invalid, or
// when decoding panicked. Match it with errors.As.
type DecodeError struct {
	// Codec is the Name of the codec that failed.
	Codec string
	// Type is the Go type being decoded into, such as "main.Order" for a
	// target of type *main.Order.
	Type string
	// Err is the underlying error.
	Err error
}

func (e *DecodeError) Error() string {
	return "codec " + e.Codec + ": decode into " + e.Type + ": " + errString(e.Err)
}

// Unwrap returns the underlying error.
func (e *DecodeError) Unwrap() error { return e.Err }

// EncodeError is returned by Marshal of the codecs in this package when a
// value cannot be encoded, or when encoding panicked. Match it with errors.As.
type EncodeError struct {
	// Codec is the Name of the codec that failed.
	Codec string
	// Type is the Go type of the value being encoded, such as "main.Order".
	Type string
	// Err is the underlying error.
	Err error
}

func (e *EncodeError) Error() string {
	return "codec " + e.Codec + ": encode " + e.Type + ": " + errString(e.Err)
}

// Unwrap returns the underlying error.
func (e *EncodeError) Unwrap() error { return e.Err }

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// decodeError builds a *DecodeError for target v. Type names are computed only
// on this error path.
func decodeError(codec string, v any, err error) *DecodeError {
	return &DecodeError{Codec: codec, Type: targetTypeName(v), Err: err}
}

func encodeError(codec string, v any, err error) *EncodeError {
	return &EncodeError{Codec: codec, Type: typeName(reflect.TypeOf(v)), Err: err}
}

// targetTypeName names the type a pointer target points to, or the target's
// own type when it is not a pointer.
func targetTypeName(v any) string {
	t := reflect.TypeOf(v)
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return typeName(t)
}

func typeName(t reflect.Type) string {
	if t == nil {
		return "<nil>"
	}
	return t.String()
}

// checkTarget reports whether v can be decoded into.
func checkTarget(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		if !rv.IsValid() {
			return fmt.Errorf("%w, got nil", ErrInvalidTarget)
		}
		return fmt.Errorf("%w, got %s", ErrInvalidTarget, rv.Type())
	}
	return nil
}

// panicError turns a recovered panic value into an error.
func panicError(r any) error {
	if err, ok := r.(error); ok {
		return fmt.Errorf("panic: %w", err)
	}
	return fmt.Errorf("panic: %v", r)
}
