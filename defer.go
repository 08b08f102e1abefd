package kinesislease

import (
	"context"
	"fmt"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/kltype"
)

// Deferred is a record's acknowledgement taken out of its handler by Defer,
// to be resolved later, from any goroutine, with Done (or Ack). A batch
// handler's Deferred resolves the whole batch. It is a small value: copy it
// freely; whichever copy resolves it first does.
type Deferred struct{ h pipeline.AckHandle }

// Defer takes the acknowledgement of the record being handled (ctx is the
// handler's context) out of the handler: its return no longer resolves the
// record; the Deferred does, once, from any goroutine. Meanwhile the shard
// goes on: the next records are delivered (in order, one handler call at a
// time per shard, or per key with WithKeyConcurrency), the checkpoint stops
// before the first record not resolved, and the record keeps its charge on
// the memory budget. At most WithMaxDeferred records per shard wait so;
// past that, delivery waits for some to resolve.
//
// In a batch handler (SubscribeBatch) it defers the whole batch: Done(nil)
// acknowledges every item, Done(FailItems(...)) fails the items named, any
// other error fails them all, exactly as the handler's return would.
//
// The error is not nil only when ctx carries no handler call: Defer was
// called outside a handler (with another context, or with a handler's
// context after the handler returned, as from a goroutine it started). It
// is then kltype.ErrNotDeferred: nothing was taken, the handler's return
// (if any) resolved the record, and the Deferred returned resolves nothing
// (its Done returns kltype.ErrNotDeferred too). A handler may return the
// error as it is: the record then fails its attempt instead of being
// acknowledged before the sink has it. A handler that defers and then
// panics, or overruns WithHandlerTimeout, fails its attempt all the same;
// its Deferred then returns kltype.ErrAlreadyResolved.
//
// Before a shard is let go, the subscription's WithOnRelease callback is
// told, so that a sink may flush; see WithOnRelease for what waits and what
// is ignored.
func Defer(ctx context.Context) (Deferred, error) {
	d := Deferred{h: pipeline.Defer(ctx)}
	if d == (Deferred{}) { // pipeline.Defer's answer outside a handler call
		return d, kltype.ErrNotDeferred
	}
	return d, nil
}

// Done resolves the deferred acknowledgement as the handler's return err
// would have: nil acknowledges the record; a plain error retries it per the
// retry policy (delivered again to the handler before any record of its
// shard, or of its key, not delivered yet); Drop, DeadLetter and RetryAfter
// as a handler's; in a batch, FailItems names the items that failed. It
// returns nil once the resolution is taken, kltype.ErrAlreadyResolved on a second
// call, kltype.ErrNotDeferred for the Deferred Defer returned with that
// error (or the zero Deferred), and
// kltype.ErrLeaseGone once the shard was let go (then it does nothing and the
// record is delivered again by the shard's next reader).
func (d Deferred) Done(err error) error { return d.h.Resolve(err) }

// Ack acknowledges the record: Done(nil).
func (d Deferred) Ack() error { return d.h.Resolve(nil) }

// DefaultMaxDeferred bounds each shard's deferred acknowledgements not yet
// resolved (WithMaxDeferred): about ten seconds of a shard written at its
// limit of 1,000 records a second.
const DefaultMaxDeferred = engine.DefaultMaxDeferred

// WithMaxDeferred bounds the records of a shard whose acknowledgement is
// deferred (Defer) and not yet resolved (default DefaultMaxDeferred,
// 10,000; a deferred batch counts its records): at the bound, delivery
// waits until some resolve. It applies inside the memory budget
// (WithMemoryBudget): a deferred record keeps its charge until it resolves,
// so a shard's reads also wait when the budget is spent. A sink that
// flushes only when it has gathered some number of records needs a bound
// above it, or a flush on a timer too.
func WithMaxDeferred(n int) SubscribeOption {
	return subOption(func(s *subscription) {
		if n < 1 {
			s.errs = append(s.errs, fmt.Errorf("%w: WithMaxDeferred(%d): must be at least 1", ErrInvalidOption, n))
		}
		s.worker.MaxDeferred = n
	})
}

// WithOnRelease calls fn before this instance lets a shard of the
// subscription go: a planned handoff, a shutdown, a lease beyond the cap, a
// shard set aside after a permanent error, a rewind, a lost lease, and a
// shard read to its end (before its SHARD_END is written). A sink that
// holds deferred acknowledgements (Defer) flushes what it holds of that
// shard then, and resolves them.
//
// After fn returns, a planned release waits for the outstanding deferred
// acknowledgements, up to the shutdown timeout (WithShutdownTimeout; ctx
// ends when the wait does), then releases the lease at the last resolved
// prefix: the checkpoint never passes an unresolved record, and a record
// whose acknowledgement comes later (kltype.ErrLeaseGone) is delivered again by
// the next holder. A failure resolved during that wait cannot be delivered
// again here and holds the checkpoint before it (Drop and DeadLetter still
// resolve). A shard read to its end waits for every outstanding
// acknowledgement before it writes SHARD_END, without a bound unless the
// lease is let go meanwhile.
//
// A lost lease (another instance took the shard over, or this instance's
// fence passed) cannot wait: fn is told with info.Lost set and ctx already
// cancelled, every acknowledgement from then on is ignored (kltype.ErrLeaseGone)
// and checkpoints nothing, and the new holder delivers those records again.
//
// fn runs on the shard's worker goroutine, possibly concurrently for
// different shards; it may flush synchronously, and should return once the
// flush is under way or ctx ends. It is called for every let-go, whether or
// not the shard has acknowledgements outstanding (info.Outstanding).
func WithOnRelease(fn func(ctx context.Context, info kltype.ReleaseInfo)) SubscribeOption {
	return subOption(func(s *subscription) {
		if fn == nil {
			s.errs = append(s.errs, fmt.Errorf("%w: WithOnRelease(nil)", ErrInvalidOption))
		}
		s.worker.OnRelease = fn
	})
}
