package pipeline

import (
	"context"

	"github.com/kinesislease/kinesislease/kltype"
)

// Undecodable marks a record whose data its codec could not decode into the
// subscription's type (Err, a *codec.DecodeError): it is dead-lettered at
// once with ReasonDecode, without reaching the handler. Only the typed
// adapter builds it, so a handler returning a codec's error of its own is
// retried like any failure.
type Undecodable struct{ Err error }

func (e *Undecodable) Error() string { return "decode: " + e.Err.Error() }

// Unwrap returns the codec's error.
func (e *Undecodable) Unwrap() error { return e.Err }

// Handler processes one record. nil acknowledges it; an error retries it in
// place after a backoff. It is called for one record of a shard at a time,
// in order.
type Handler func(ctx context.Context, r *kltype.Record) error

// Sink receives dead letters. A nil return confirms the record is kept; an
// error is retried (with backoff) until it succeeds or the worker stops: the
// checkpoint passes a dead-lettered record only once a sink confirmed it.
type Sink func(ctx context.Context, dl *kltype.DeadLetterRecord) error

// Gate lets a Processor wait for permission to deliver: the worker's lease
// must be valid and the worker not stopping. A nil Gate always allows.
type Gate interface {
	// Wait blocks until a delivery may start and reports whether it may;
	// false means stop.
	Wait() bool
	// Done is closed when the worker stops (gracefully or not).
	Done() <-chan struct{}
}

// BatchHandler handles a batch of one shard's records, in order. It returns
// nil when every record is acknowledged, else one BatchFailure per record
// that was not (a record that could not be decoded is one, with a
// *Undecodable).
type BatchHandler func(ctx context.Context, recs []*kltype.Record) []BatchFailure

// BatchFailure is one record of a batch that was not acknowledged: Index
// into the batch given, and its error, read as a single record's (see
// kltype.ItemFailure).
type BatchFailure struct {
	Index int
	Err   error
}
