package kinesislease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/typed"
	"github.com/kinesislease/kinesislease/kltype"
)

// RecordFrom returns the record being handled: its stream, shard, sequence
// number, partition key, approximate arrival time, raw data and attempt
// number. ok is false outside a handler.
func RecordFrom(ctx context.Context) (r *kltype.Record, ok bool) { return pipeline.RecordFrom(ctx) }

// Handler handles decoded records: a type with its dependencies, subscribed
// with SubscribeHandler. Handle is called for one record of a shard at a
// time, in order. nil acknowledges the record; a plain error retries it in
// place per the subscription's kltype.RetryPolicy, then dead-letters it
// (with no dead-letter sink it holds its shard: nothing is silently lost);
// RetryAfter, Drop and DeadLetter return special outcomes. A panic is
// recovered and handled as an error, its stack logged. ctx is cancelled
// when the lease is lost and when the shutdown timeout expires; it carries
// the record (RecordFrom). A handler may instead take the record's
// acknowledgement with it and resolve it later (Defer).
type Handler[T any] interface {
	Handle(ctx context.Context, v T) error
}

// HandlerFunc is a function used as a Handler, as http.HandlerFunc is:
// Subscribe takes one, so a plain function subscribes in one line. Both
// forms run the same pipeline.
type HandlerFunc[T any] func(ctx context.Context, v T) error

// Handle calls f(ctx, v).
func (f HandlerFunc[T]) Handle(ctx context.Context, v T) error { return f(ctx, v) }

// Subscribe makes svc consume stream (a name or an ARN) with the function
// handler, each record's data decoded into a T by the subscription's
// codec. Called before Run, it adds the subscription Run starts with.
// Called while Run runs, it makes the start-up checks Run makes (the stream
// exists and may be read, its consumer registered), within a minute, and
// returns once the stream is in the plan: its shards are taken from the next
// round on, spread over the instances that subscribe it (call it on every
// instance). A second subscription to the same stream is refused with
// ErrDuplicateSubscription (unless one of them has a lease namespace of its
// own, WithLeaseNamespace: a stream of the same name in another account or
// region); invalid options with ErrInvalidOption.
// SubscribeHandler takes a Handler value instead.
func Subscribe[T any](svc *Service, stream string, handler HandlerFunc[T], opts ...SubscribeOption) error {
	if handler == nil {
		return subscribeRecords[T](svc, stream, nil, opts)
	}
	return subscribeRecords[T](svc, stream, handler, opts)
}

// SubscribeHandler is Subscribe with a Handler: a type whose Handle method
// handles the records, with its dependencies in its fields.
func SubscribeHandler[T any](svc *Service, stream string, handler Handler[T], opts ...SubscribeOption) error {
	return subscribeRecords(svc, stream, handler, opts)
}

// subscribeRecords is Subscribe and SubscribeHandler: handler takes the
// records one at a time (WithBatchSize is refused).
func subscribeRecords[T any](svc *Service, stream string, handler Handler[T], opts []SubscribeOption) error {
	if handler == nil {
		return subscribeWith(svc, stream, nil, opts)
	}
	return subscribeWith(svc, stream, func(sub *subscription) {
		if sub.batch != nil {
			sub.errs = append(sub.errs, fmt.Errorf("%w: WithBatchSize is for SubscribeBatch", ErrInvalidOption))
		}
		sub.worker.Handler = typed.Handler(sub.codec, handler.Handle)
	}, opts)
}

// SubscribeBatch is Subscribe with a batch handler: the records of each
// shard reach it in batches (WithBatchSize), in order. The checkpoint
// advances over the acknowledged prefix of each batch.
func SubscribeBatch[T any](svc *Service, stream string, handler BatchHandlerFunc[T], opts ...SubscribeOption) error {
	if handler == nil {
		return subscribeWith(svc, stream, nil, opts)
	}
	return subscribeWith(svc, stream, func(sub *subscription) {
		if sub.batch == nil {
			sub.batch = &engine.BatchConfig{MaxRecords: DefaultBatchRecords, MaxBytes: DefaultBatchBytes}
		}
		if sub.worker.KeyConcurrency > 1 {
			sub.errs = append(sub.errs, fmt.Errorf("%w: WithKeyConcurrency is not for SubscribeBatch", ErrInvalidOption))
		}
		sub.batch.Handler = typed.BatchHandler[T](sub.codec, func(v T, r *kltype.Record) BatchItem[T] { return BatchItem[T]{Value: v, Record: r} },
			func(ctx context.Context, items []BatchItem[T]) error { return handler(ctx, items) })
		sub.worker.Batch = sub.batch
	}, opts)
}

// subscribeWith checks stream and opts, lets install set the
// subscription's handler (nil: no handler given), and adds it to svc.
func subscribeWith(svc *Service, stream string, install func(*subscription), opts []SubscribeOption) error {
	if svc == nil {
		return fmt.Errorf("%w: Subscribe on a nil service", ErrInvalidOption)
	}
	if install == nil {
		return fmt.Errorf("%w: Subscribe(%q) with a nil handler", ErrInvalidOption, stream)
	}
	if err := validStream(stream); err != nil {
		return err
	}
	sub := &subscription{stream: stream, codec: codec.JSON, start: kltype.Latest, at: time.Now()}
	sub.worker.MaxAge = svc.cfg.maxAge
	for _, o := range opts {
		if o == nil {
			sub.errs = append(sub.errs, fmt.Errorf("%w: nil option", ErrInvalidOption))
			continue
		}
		o.applySub(sub)
	}
	install(sub)
	if sub.worker.MaxAge > 0 && sub.worker.Sink == nil && sub.deadLetterStream == "" {
		sub.errs = append(sub.errs, fmt.Errorf("%w: WithMaxRecordAge(%v) needs a dead-letter sink (WithDeadLetter or WithDeadLetterStream): without one an expired record would hold its shard",
			ErrInvalidOption, sub.worker.MaxAge))
	}
	if sub.consumer != "" {
		if _, err := fanOutClient(svc.clientOf(sub), stream); err != nil {
			sub.errs = append(sub.errs, err)
		}
	}
	if len(sub.errs) > 0 {
		return fmt.Errorf("subscribe %q: %w", stream, errors.Join(sub.errs...))
	}

	svc.mu.Lock()
	for _, s := range svc.subs {
		if s.leaseKey() == sub.leaseKey() {
			svc.mu.Unlock()
			// One stream, whichever way it is named: its rows are keyed by
			// its name (and namespace).
			return duplicateError(stream, s)
		}
	}
	if !svc.run {
		svc.subs = append(svc.subs, sub)
		svc.mu.Unlock()
		return nil
	}
	svc.subs = append(svc.subs, sub) // reserved: a concurrent Subscribe of the stream is refused
	ready := svc.groupSet
	svc.mu.Unlock()
	if err := svc.addRunning(ready, sub); err != nil {
		svc.mu.Lock()
		svc.subs = slices.DeleteFunc(svc.subs, func(s *subscription) bool { return s == sub })
		svc.mu.Unlock()
		return fmt.Errorf("subscribe %q: %w", stream, err)
	}
	return nil
}

// subscribeTimeout bounds the start-up checks of a subscription added while
// the service runs (the stream listed, its consumer registered), unless
// WithSubscribeContext gives a context.
const subscribeTimeout = time.Minute

// addRunning adds sub to the running service: the start-up checks Run makes
// of every subscription, then its stream joins the plan at the next round.
// They are bounded by sub's context (WithSubscribeContext), else by Run's
// context and subscribeTimeout.
func (svc *Service) addRunning(ready <-chan struct{}, sub *subscription) error {
	ctx, cancel := sub.ctx, context.CancelFunc(func() {})
	if ctx == nil {
		svc.mu.Lock()
		base := cmp.Or[context.Context](svc.runCtx, context.Background())
		svc.mu.Unlock()
		ctx, cancel = context.WithTimeout(base, subscribeTimeout)
	}
	defer cancel()
	select {
	case <-ready:
	case <-ctx.Done():
		return fmt.Errorf("%w: the service did not finish starting: %w", ErrRunning, ctx.Err())
	}
	svc.mu.Lock()
	g := svc.group
	svc.mu.Unlock()
	if g == nil {
		return fmt.Errorf("%w: Run returned before the subscription could be added", ErrRunning)
	}
	if err := svc.preflightSubs(ctx, []*subscription{sub}); err != nil {
		return err
	}
	return g.AddStream(ctx, svc.streamConfig(sub))
}

// Unsubscribe stops consuming stream. Before Run it drops the
// subscription. While Run runs, every shard of the stream this instance
// holds drains (the record in flight finishes, within the shutdown
// timeout), writes its final checkpoint and is released, and Unsubscribe
// returns once they are, or when ctx ends (the removal goes on). Every
// instance of the service should unsubscribe: the shards the plan gives an
// instance that still subscribes are read on by it. A stream that is not
// subscribed is refused with ErrNotSubscribed. A registered enhanced fan-out
// consumer stays registered. stream names the subscription as Subscribe
// did (its name or ARN), or by its lease key ("acct-b/orders") for one
// given WithLeaseNamespace.
func (s *Service) Unsubscribe(ctx context.Context, stream string) error {
	s.mu.Lock()
	i := slices.IndexFunc(s.subs, func(sub *subscription) bool { return sub.leaseKey() == kinesisx.Name(stream) })
	if i < 0 {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrNotSubscribed, stream)
	}
	sub := s.subs[i]
	if !s.run {
		s.subs = slices.Delete(s.subs, i, i+1)
		s.mu.Unlock()
		return nil
	}
	ready := s.groupSet
	s.mu.Unlock()
	select {
	case <-ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	g := s.group
	s.mu.Unlock()
	if g != nil {
		if err := g.RemoveStream(ctx, sub.leaseKey()); err != nil {
			return fmt.Errorf("unsubscribe %q: %w", stream, err)
		}
	}
	s.mu.Lock()
	s.subs = slices.DeleteFunc(s.subs, func(x *subscription) bool { return x == sub })
	s.mu.Unlock()
	return nil
}
