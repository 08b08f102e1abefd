package pipeline

import (
	"context"

	"github.com/kinesislease/kinesislease/kltype"
)

// RecordContext is one record and the handler context that carries it
// (for RecordFrom), with its handler's deferrable acknowledgement (Defer).
// A worker allocates them with the batch, one per record, inside its own
// bookkeeping, so that handing a record to the handler allocates nothing,
// and a handler's context keeps returning its own record after the handler
// returned.
type RecordContext struct {
	context.Context
	// Record is the record the context carries.
	Record kltype.Record
	del    delivery // its handler's acknowledgement, if the handler defers it (Defer)
}

type recordKey struct{}

// Value returns the record for RecordFrom's key, the delivery for Defer's,
// else the parent's value.
func (c *RecordContext) Value(key any) any {
	switch key {
	case recordKey{}:
		return &c.Record
	case deliveryKey{}:
		return &c.del
	}
	return c.Context.Value(key)
}

// Init makes c, a zero RecordContext, derive from parent, its handler's
// deferred acknowledgements (Defer) being handed to t once resolved (a nil
// t: each is awaited in place, in Process). Call it before the record is
// delivered.
func (c *RecordContext) Init(parent context.Context, t *Tracker) {
	c.Context = parent
	c.del.t = t
}

// Deferral returns the acknowledgement the record's handler deferred (once
// Process or Resume returned Deferred), for the worker to track; nil before
// a handler deferred.
func (c *RecordContext) Deferral() *Deferral { return c.del.d }

// RecordFrom returns the record ctx carries.
func RecordFrom(ctx context.Context) (*kltype.Record, bool) {
	r, ok := ctx.Value(recordKey{}).(*kltype.Record)
	return r, ok
}

// WithRecord returns ctx carrying r, for RecordFrom (the harness's path;
// the worker's records carry themselves).
func WithRecord(ctx context.Context, r *kltype.Record) context.Context {
	return context.WithValue(ctx, recordKey{}, r)
}

// NewRecordContext returns a context derived from parent that carries a
// new record, and that record, for the caller to fill: one allocation for
// both (the harness's path; the worker allocates them with the batch).
func NewRecordContext(parent context.Context) (context.Context, *kltype.Record) {
	c := &RecordContext{Context: parent}
	return c, &c.Record
}
