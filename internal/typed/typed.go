// Package typed turns a typed handler into the non-generic handler the
// pipeline runs, and carries the record being handled in the context.
// The root package and kinesisleasetest both use it, so the harness runs the
// very code a subscription runs.
package typed

import (
	"context"
	"errors"
	"fmt"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/kltype"
)

// Handler decodes each record's data into a T with c and calls h with the
// record in its context (the worker's contexts carry their record already;
// others get it added). A decode failure is a *codec.DecodeError (a codec of
// another package's error is wrapped in one), marked for the pipeline.
func Handler[T any](c codec.Codec, h func(context.Context, T) error) pipeline.Handler {
	return func(ctx context.Context, r *kltype.Record) error {
		var v T
		if err := c.Unmarshal(r.Data, &v); err != nil {
			return undecodable(c, &v, err)
		}
		if got, ok := pipeline.RecordFrom(ctx); !ok || got != r {
			ctx = pipeline.WithRecord(ctx, r)
		}
		return h(ctx, v)
	}
}

// BatchHandler decodes each record of a batch into a T with c and calls h
// with the decoded ones, as items (value and record) in order. A record
// that cannot be decoded fails with a *codec.DecodeError without reaching
// h; h's *kltype.BatchError names its failed items by their index in the
// items it was given; any other error fails every item it was given.
func BatchHandler[T any, I any](c codec.Codec, item func(v T, r *kltype.Record) I, h func(context.Context, []I) error) pipeline.BatchHandler {
	return func(ctx context.Context, recs []*kltype.Record) []pipeline.BatchFailure {
		var failures []pipeline.BatchFailure
		items := make([]I, 0, len(recs))
		index := make([]int, 0, len(recs)) // items[k] is recs[index[k]]
		for i, r := range recs {
			var v T
			if err := c.Unmarshal(r.Data, &v); err != nil {
				failures = append(failures, pipeline.BatchFailure{Index: i, Err: undecodable(c, &v, err)})
				continue
			}
			items = append(items, item(v, r))
			index = append(index, i)
		}
		if len(items) == 0 {
			return failures
		}
		// failuresFor reads the handler's outcome of items: its return, or
		// the resolution of the acknowledgement it deferred (Defer).
		failuresFor := func(err error) []pipeline.BatchFailure {
			fs := append([]pipeline.BatchFailure(nil), failures...)
			var be *kltype.BatchError
			switch {
			case err == nil:
			case errors.As(err, &be):
				for _, f := range be.Failures {
					if f.Index >= 0 && f.Index < len(index) {
						fs = append(fs, pipeline.BatchFailure{Index: index[f.Index], Err: f.Err})
					}
				}
			default:
				for _, i := range index {
					fs = append(fs, pipeline.BatchFailure{Index: i, Err: err})
				}
			}
			return fs
		}
		pipeline.SetBatchResolver(ctx, failuresFor)
		return failuresFor(h(ctx, items))
	}
}

// undecodable is the error of a record c could not decode into target: the
// codec's *codec.DecodeError (one is built around an error of a codec that
// returned none), marked so that the pipeline dead-letters it at once.
func undecodable(c codec.Codec, target any, err error) error {
	var de *codec.DecodeError
	if !errors.As(err, &de) {
		err = &codec.DecodeError{Codec: c.Name(), Type: fmt.Sprintf("%T", target)[1:], Err: err}
	}
	return &pipeline.Undecodable{Err: err}
}
