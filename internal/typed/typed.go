// Package typed turns a typed handler into the non-generic handler the
// engine runs, and carries the record being handled in the context.
// The root package and kinesisleasetest both use it, so the harness runs the
// very code a subscription runs.
package typed

import (
	"context"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/kltype"
)

// WithRecord returns ctx carrying r, for RecordFrom.
func WithRecord(ctx context.Context, r *kltype.Record) context.Context {
	return engine.WithRecord(ctx, r)
}

// RecordFrom returns the record ctx carries.
func RecordFrom(ctx context.Context) (*kltype.Record, bool) { return engine.RecordFrom(ctx) }

// Handler decodes each record's data into a T with c and calls h with the
// record in its context (the worker's contexts carry their record already;
// others get it added). A decode failure is a *kltype.DecodeError.
func Handler[T any](c codec.Codec, h func(context.Context, T) error) engine.Handler {
	return func(ctx context.Context, r *kltype.Record) error {
		var v T
		if err := c.Unmarshal(r.Data, &v); err != nil {
			return &kltype.DecodeError{Err: err}
		}
		if got, ok := engine.RecordFrom(ctx); !ok || got != r {
			ctx = engine.WithRecord(ctx, r)
		}
		return h(ctx, v)
	}
}
