// Package pipeline takes a record (or a batch) to an outcome: the
// Processor calls the handler, retries it per the policy and the handler's
// outcome, waits, and dead-letters; a handler may defer its
// acknowledgement (Defer), resolved later through a worker's Tracker. It
// holds no shard: a worker (internal/shard) and the test harness
// (kinesisleasetest) both run records through it.
package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/kltype"
)

// Processor takes a record to an outcome: it calls the handler, retries per
// the policy and the handler's outcome, and dead-letters. It is not generic:
// decoding happens inside Handler, whose decode errors are *Undecodable.
type Processor struct {
	Handler Handler
	Policy  kltype.RetryPolicy
	// Sink, if set, receives dead letters; with none, a record that would be
	// dead-lettered is retried every MaxDelay, holding its shard.
	Sink Sink
	Log  *slog.Logger
	// Sleep waits d or until ctx ends; tests replace it. Nil means real time.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnAttempt, if set, is told of every delivery's error (nil for success).
	OnAttempt func(r *kltype.Record, err error)
	// OnWait, if set, is told of every wait just before it starts (and
	// before Sleep is called): why the Processor decided to wait and for
	// how long. It runs on the goroutine calling Process.
	OnWait func(r *kltype.Record, w Wait)
	// OnDeadLetter, if set, is told of every dead letter a sink confirmed.
	OnDeadLetter func(dl *kltype.DeadLetterRecord)
	// Timeout, if positive, bounds each handler call: its context is
	// cancelled then, and a call that overran counts as a failed attempt
	// (a *HandlerTimeoutError), whatever it returned.
	Timeout time.Duration
	// MaxAge, if positive: a record whose ArrivalTime is more than MaxAge
	// ago when it is about to be delivered (at any attempt) is
	// dead-lettered with ReasonExpired (a *kltype.ExpiredError) instead.
	MaxAge time.Duration
	// Now reads the clock for MaxAge; nil means time.Now.
	Now func() time.Time
}

// Process delivers r until it is acknowledged, dropped or dead-lettered, or
// until the gate says stop. ctx is the handler's context: cancelled when the
// lease is lost or the shutdown timeout expires.
//
// A handler that defers its acknowledgement (Defer) makes Process return
// Deferred, inside a worker; outside one (ctx carries no worker's record)
// Process waits for the resolution in place.
func (p *Processor) Process(ctx context.Context, r *kltype.Record, gate Gate) kltype.Outcome {
	return p.process(ctx, r, gate, nil)
}

// Resume goes on with r after its handler's deferred acknowledgement d was
// resolved, as Process would have had the handler returned the resolution.
func (p *Processor) Resume(ctx context.Context, r *kltype.Record, gate Gate, d *Deferral) kltype.Outcome {
	return p.process(ctx, r, gate, d)
}

func (p *Processor) process(ctx context.Context, r *kltype.Record, gate Gate, resumed *Deferral) kltype.Outcome {
	log := p.logger()
	attempt, failures := 0, 0
	if resumed != nil {
		attempt, failures = resumed.attempt, resumed.failed
	}
	wait := p.waiter(ctx, r, gate)
	for ; ; resumed = nil {
		var err error
		if resumed != nil {
			err = resumed.Result() // the outcome of the attempt that deferred
		} else {
			if gate != nil && !gate.Wait() {
				return Stopped
			}
			if ctx.Err() != nil {
				return Stopped
			}
			// A record too old at this delivery is dead-lettered instead
			// (attempt is the attempts made so far).
			if expired := p.expired(r); expired != nil {
				return p.deadLetter(ctx, r, attempt, kltype.ReasonExpired, expired, log, wait)
			}
			attempt++
			r.Attempt = attempt
			var d *Deferral
			if d, err = p.callDeferrable(ctx, r, log); d != nil {
				d.attempt, d.failed = attempt, failures
				return Deferred
			}
		}
		if p.OnAttempt != nil {
			p.OnAttempt(r, err)
		}
		if err == nil {
			return kltype.Acked
		}
		var (
			after  *kltype.RetryAfterError
			drop   *kltype.DropError
			dead   *kltype.DeadLetterError
			decode *Undecodable
			panicE *kltype.PanicError
		)
		switch {
		case errors.As(err, &drop):
			log.InfoContext(ctx, "kinesislease: record dropped by the handler", "seq", r.SequenceNumber, "sub", r.SubSequence, "err", err)
			return kltype.Dropped
		case errors.As(err, &decode):
			return p.deadLetter(ctx, r, attempt-1, kltype.ReasonDecode, err, log, wait)
		case errors.As(err, &dead):
			return p.deadLetter(ctx, r, attempt, kltype.ReasonDeadLetter, err, log, wait)
		case errors.As(err, &after):
			log.InfoContext(ctx, "kinesislease: handler asked to retry the record later", "seq", r.SequenceNumber, "delay", after.Delay, "err", after.Err)
			if !wait.wait(Wait{Reason: WaitRetryAfter, Delay: after.Delay, Err: err}) {
				return Stopped
			}
			continue
		}
		failures++
		if failures >= p.Policy.Attempts {
			reason := kltype.ReasonRetriesExhausted
			if errors.As(err, &panicE) {
				reason = kltype.ReasonPanic
			}
			if p.Sink != nil {
				return p.deadLetter(ctx, r, attempt, reason, err, log, wait)
			}
			// No sink: hold the shard. Nothing is silently lost.
			log.ErrorContext(ctx, "kinesislease: record keeps failing and no dead-letter sink is configured: holding the shard",
				"seq", r.SequenceNumber, "sub", r.SubSequence, "attempt", attempt, "err", err)
			if !wait.wait(Wait{Reason: WaitRetriesExhausted, Delay: backoff.Delay(1, p.Policy.MaxDelay, p.Policy.MaxDelay), Err: err}) {
				return Stopped
			}
			continue
		}
		delay := backoff.Delay(failures, p.Policy.InitialDelay, p.Policy.MaxDelay)
		log.WarnContext(ctx, "kinesislease: handler failed; retrying the record",
			"seq", r.SequenceNumber, "sub", r.SubSequence, "attempt", attempt, "delay", delay, "err", err)
		if !wait.wait(Wait{Reason: WaitBackoff, Delay: delay, Err: err}) {
			return Stopped
		}
	}
}

// DeadLetterNow sends r to the sink without calling the handler (a corrupt
// KPL aggregate), retrying the sink until it confirms or the gate closes.
func (p *Processor) DeadLetterNow(ctx context.Context, r *kltype.Record, reason string, cause error, gate Gate) kltype.Outcome {
	if gate != nil && !gate.Wait() {
		return Stopped
	}
	return p.deadLetter(ctx, r, 0, reason, cause, p.logger(), p.waiter(ctx, r, gate))
}

// deadLetter hands r to the sink until it confirms. With no sink (a decode
// failure or a DeadLetterError without one) the record holds the shard.
func (p *Processor) deadLetter(ctx context.Context, r *kltype.Record, attempts int, reason string, cause error, log *slog.Logger, wait waiter) kltype.Outcome {
	dl := &kltype.DeadLetterRecord{Record: r, Attempts: attempts, Reason: reason, Err: cause}
	for try := 1; ; try++ {
		w := Wait{Reason: WaitNoSink, Err: cause, DeadLetterReason: reason}
		if p.Sink == nil {
			log.ErrorContext(ctx, "kinesislease: record must be dead-lettered but no dead-letter sink is configured: holding the shard",
				"seq", r.SequenceNumber, "sub", r.SubSequence, "reason", reason, "err", cause)
		} else {
			err := p.Sink(ctx, dl)
			if err == nil {
				log.WarnContext(ctx, "kinesislease: record dead-lettered", "seq", r.SequenceNumber, "sub", r.SubSequence, "reason", reason, "err", cause)
				if p.OnDeadLetter != nil {
					p.OnDeadLetter(dl)
				}
				return kltype.DeadLettered
			}
			log.ErrorContext(ctx, "kinesislease: dead-letter sink failed; retrying", "seq", r.SequenceNumber, "reason", reason, "err", err)
			w.Reason, w.Err = WaitSinkFailed, err
		}
		w.Delay = backoff.Delay(try, p.Policy.InitialDelay, p.Policy.MaxDelay)
		if !wait.wait(w) {
			return Stopped
		}
	}
}

// expired returns why r is too old to be delivered (MaxAge), or nil.
func (p *Processor) expired(r *kltype.Record) error {
	if p.MaxAge <= 0 || r.ArrivalTime.IsZero() {
		return nil
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	if age := now().Sub(r.ArrivalTime); age > p.MaxAge {
		return &kltype.ExpiredError{Arrival: r.ArrivalTime, Age: age, MaxAge: p.MaxAge}
	}
	return nil
}

// logger is p.Log, or a logger discarding everything.
func (p *Processor) logger() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

func (p *Processor) call(ctx context.Context, r *kltype.Record, log *slog.Logger) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &kltype.PanicError{Value: v, Stack: debug.Stack()}
			err = pe
			log.ErrorContext(ctx, "kinesislease: handler panicked", "seq", r.SequenceNumber, "panic", v, "stack", string(pe.Stack))
		}
	}()
	if p.Timeout <= 0 {
		return p.Handler(ctx, r)
	}
	tctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	err = p.Handler(tctx, r)
	if errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return &kltype.HandlerTimeoutError{Timeout: p.Timeout, Err: err}
	}
	return err
}

// waiter sleeps for a Processor working on one record. It is a value, not
// a closure, so that a record that needs no wait costs no allocation.
type waiter struct {
	p    *Processor
	ctx  context.Context
	r    *kltype.Record
	done <-chan struct{} // the gate's; nil without one
}

func (p *Processor) waiter(ctx context.Context, r *kltype.Record, gate Gate) waiter {
	wt := waiter{p: p, ctx: ctx, r: r}
	if gate != nil {
		wt.done = gate.Done()
	}
	return wt
}

// wait reports w to OnWait, then sleeps w.Delay, or less if ctx ends or the
// gate closes, and reports whether it slept the whole time.
func (wt waiter) wait(w Wait) bool {
	if wt.p.OnWait != nil {
		wt.p.OnWait(wt.r, w)
	}
	sleep := wt.p.Sleep
	if sleep == nil {
		sleep = backoff.Sleep
	}
	if wt.done == nil {
		return sleep(wt.ctx, w.Delay) == nil
	}
	wctx, cancel := context.WithCancel(wt.ctx)
	defer cancel()
	done := wt.done
	go func() {
		select {
		case <-done:
			cancel()
		case <-wctx.Done():
		}
	}()
	return sleep(wctx, w.Delay) == nil
}

// Stopped is the Outcome of a record that reached none: the worker stopped
// first, and the record is not acknowledged.
const Stopped kltype.Outcome = 0

// callDeferrable calls the handler (call) for a delivery whose context may
// let it defer its acknowledgement. It returns the call's result, or, if the
// handler deferred inside a worker, the Deferral (its result comes later).
// Outside a worker a deferral is waited for here. A call that panicked or
// overran its timeout fails whatever the handler deferred.
func (p *Processor) callDeferrable(ctx context.Context, r *kltype.Record, log *slog.Logger) (*Deferral, error) {
	del, _ := ctx.Value(deliveryKey{}).(*delivery)
	if del == nil {
		return nil, p.call(ctx, r, log)
	}
	del.begin(0)
	err := p.call(ctx, r, log)
	return del.settle(ctx, err)
}

// settle ends a call of del that returned err: see callDeferrable.
func (del *delivery) settle(ctx context.Context, err error) (*Deferral, error) {
	d, done := del.end(voids(err))
	switch {
	case d == nil:
		return nil, err
	case done:
		return nil, d.Result()
	case del.t == nil:
		if !d.await(ctx) {
			return nil, context.Cause(ctx)
		}
		return nil, d.Result()
	}
	return d, nil
}

// voids reports whether a call's error fails it whatever its handler
// deferred: the handler panicked or overran its timeout.
func voids(err error) bool {
	switch err.(type) {
	case *kltype.PanicError, *kltype.HandlerTimeoutError:
		return true
	}
	return false
}
