package engine

import (
	"context"

	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// recordContext is one record and the handler context that carries it
// (for RecordFrom). The worker allocates them with the batch, one per
// record, so that handing a record to the handler allocates nothing, and a
// handler's context keeps returning its own record after the handler
// returned.
type recordContext struct {
	context.Context
	rec kltype.Record
	del delivery // its handler's acknowledgement, if the handler defers it (Defer)

	// The worker's bookkeeping while the record waits to be acknowledged
	// to the checkpointer (ackQueue).
	order    int64             // its place in the shard (counted by the worker)
	done     leases.Checkpoint // the checkpoint that marks it done
	resp     *respHold         // the GetRecords answer it came in, for the budget
	resolved bool              // it reached an outcome
	deferred bool              // its acknowledgement is deferred and not resolved yet
}

type recordKey struct{}

// Value returns the record for RecordFrom's key, else the parent's value.
func (c *recordContext) Value(key any) any {
	switch key {
	case recordKey{}:
		return &c.rec
	case deliveryKey{}:
		return &c.del
	}
	return c.Context.Value(key)
}

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
	c := &recordContext{Context: parent}
	return c, &c.rec
}
