package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/kltype"
)

// batchContext is a batch handler's context: it carries the batch's
// deferrable acknowledgement (Defer).
type batchContext struct {
	context.Context
	del delivery
}

// Value returns the batch's delivery for its key, else the parent's value.
func (c *batchContext) Value(key any) any {
	if key == (deliveryKey{}) {
		return &c.del
	}
	return c.Context.Value(key)
}

// BatchRun is one batch on its way to outcomes: the records still
// unresolved (pending) and their failed attempts, kept across a deferral.
type BatchRun struct {
	ctx     *batchContext
	recs    []*kltype.Record
	handler BatchHandler
	done    func(i int, o kltype.Outcome) bool
	pending []int // indices into recs, in order
	failed  []int // failed attempts per record
	batch   []*kltype.Record
}

// NewBatchRun returns recs, one shard's records in order, on their way to
// outcomes through handler, its context derived from ctx: done(i, o) is
// told of each record as it resolves, and returns false to stop. The
// handler's deferred acknowledgements (Defer) are handed to t once resolved
// (a nil t: awaited in place).
func NewBatchRun(ctx context.Context, recs []*kltype.Record, handler BatchHandler, t *Tracker, done func(i int, o kltype.Outcome) bool) *BatchRun {
	br := &BatchRun{ctx: &batchContext{Context: ctx}, recs: recs, handler: handler, done: done,
		pending: make([]int, len(recs)), failed: make([]int, len(recs)), batch: make([]*kltype.Record, 0, len(recs))}
	br.ctx.del.t = t
	for i := range br.pending {
		br.pending[i] = i
	}
	return br
}

// Pending returns the indices (into the records given) of the records not
// resolved yet, in order. The slice is the run's: read it before the run
// goes on.
func (br *BatchRun) Pending() []int { return br.pending }

// Deferral returns the acknowledgement the batch's handler deferred (once
// RunBatch or ResumeBatch returned Deferred), for the worker to track.
func (br *BatchRun) Deferral() *Deferral { return br.ctx.del.d }

// ProcessBatch takes recs, one shard's records in order, to outcomes: the
// handler gets the records still unresolved, as a batch, until each is
// acknowledged, dropped or dead-lettered; failed ones are retried per the
// policy (a RetryAfter after its delay, counting no attempt) as a batch of
// their own, then dead-lettered (with no sink they hold the shard, as a
// single record does). done(i, o) is told of each record as it resolves;
// it returns false to stop. ProcessBatch returns false when the gate says
// stop (or done did) before every record resolved. A handler that defers
// the batch's acknowledgement (Defer) is waited for in place.
func (p *Processor) ProcessBatch(ctx context.Context, recs []*kltype.Record, handler BatchHandler, gate Gate, done func(i int, o kltype.Outcome) bool) bool {
	return p.runBatch(NewBatchRun(ctx, recs, handler, nil, done), gate, nil) != Stopped
}

// RunBatch is ProcessBatch on br: it returns Acked once every record
// resolved, Stopped, or (with a Tracker) Deferred when the handler deferred
// the batch's acknowledgement.
func (p *Processor) RunBatch(br *BatchRun, gate Gate) kltype.Outcome {
	return p.runBatch(br, gate, nil)
}

// ResumeBatch goes on with br after its handler's deferred acknowledgement
// d was resolved, as RunBatch would have had the handler returned the
// resolution.
func (p *Processor) ResumeBatch(br *BatchRun, gate Gate, d *Deferral) kltype.Outcome {
	return p.runBatch(br, gate, d)
}

// runBatch is RunBatch, or ResumeBatch from resumed.
func (p *Processor) runBatch(br *BatchRun, gate Gate, resumed *Deferral) kltype.Outcome {
	log := p.logger()
	policy := p.Policy
	recs, ctx := br.recs, br.ctx
	for ; ; resumed = nil {
		var fs []BatchFailure
		if resumed != nil {
			fs = resumed.resultFailures()
		} else {
			if gate != nil && !gate.Wait() {
				return Stopped
			}
			if ctx.Err() != nil {
				return Stopped
			}
			if p.MaxAge > 0 {
				// Records too old are dead-lettered instead of handed over.
				live := make([]int, 0, len(br.pending))
				for _, i := range br.pending {
					expired := p.expired(recs[i])
					if expired == nil {
						live = append(live, i)
						continue
					}
					o := p.deadLetter(ctx, recs[i], br.failed[i], kltype.ReasonExpired, expired, log, p.waiter(ctx, recs[i], gate))
					if o == Stopped || !br.done(i, o) {
						return Stopped
					}
				}
				if br.pending = live; len(br.pending) == 0 {
					return kltype.Acked
				}
			}
			br.batch = br.batch[:0]
			for _, i := range br.pending {
				recs[i].Attempt = br.failed[i] + 1
				br.batch = append(br.batch, recs[i])
			}
			ctx.del.begin(len(br.batch))
			got, void := p.callBatch(ctx, br.handler, br.batch, log)
			var d *Deferral
			if fs, d = ctx.del.settleBatch(ctx, got, void); d != nil {
				return Deferred
			}
		}
		byIndex := map[int]error{}
		for _, f := range fs {
			if f.Index >= 0 && f.Index < len(br.pending) {
				byIndex[f.Index] = f.Err
			}
		}
		failed, done := br.failed, br.done
		var again []int
		var wt Wait
		for bi, i := range br.pending {
			err, ok := byIndex[bi]
			r := recs[i]
			if p.OnAttempt != nil {
				p.OnAttempt(r, err)
			}
			if !ok || err == nil {
				if !done(i, kltype.Acked) {
					return Stopped
				}
				continue
			}
			var (
				drop   *kltype.DropError
				dead   *kltype.DeadLetterError
				decode *Undecodable
				after  *kltype.RetryAfterError
				panicE *kltype.PanicError
			)
			outcome := kltype.Outcome(0)
			switch {
			case errors.As(err, &drop):
				log.Info("kinesislease: record dropped by the handler", "seq", r.SequenceNumber, "sub", r.SubSequence, "err", err)
				outcome = kltype.Dropped
			case errors.As(err, &decode), errors.As(err, &dead):
				reason := kltype.ReasonDeadLetter
				if decode != nil {
					reason = kltype.ReasonDecode
				}
				if outcome = p.deadLetter(ctx, r, failed[i], reason, err, log, p.waiter(ctx, r, gate)); outcome == Stopped {
					return Stopped
				}
			case errors.As(err, &after):
				again = append(again, i)
				wt = longer(wt, Wait{Reason: WaitRetryAfter, Delay: after.Delay, Err: err})
				continue
			default:
				failed[i]++
				switch {
				case failed[i] < policy.Attempts:
					log.Warn("kinesislease: batch item failed; retrying it", "seq", r.SequenceNumber, "sub", r.SubSequence, "attempt", failed[i], "err", err)
					again = append(again, i)
					wt = longer(wt, Wait{Reason: WaitBackoff, Delay: backoff.Delay(failed[i], policy.InitialDelay, policy.MaxDelay), Err: err})
					continue
				case p.Sink != nil:
					reason := kltype.ReasonRetriesExhausted
					if errors.As(err, &panicE) {
						reason = kltype.ReasonPanic
					}
					if outcome = p.deadLetter(ctx, r, failed[i], reason, err, log, p.waiter(ctx, r, gate)); outcome == Stopped {
						return Stopped
					}
				default:
					log.Error("kinesislease: batch item keeps failing and no dead-letter sink is configured: holding the shard",
						"seq", r.SequenceNumber, "sub", r.SubSequence, "attempt", failed[i], "err", err)
					again = append(again, i)
					wt = longer(wt, Wait{Reason: WaitRetriesExhausted, Delay: policy.MaxDelay, Err: err})
					continue
				}
			}
			if !done(i, outcome) {
				return Stopped
			}
		}
		if len(again) == 0 {
			br.pending = br.pending[:0]
			return kltype.Acked
		}
		br.pending = again
		if !p.waiter(ctx, recs[br.pending[0]], gate).wait(wt) {
			return Stopped
		}
	}
}

// settleBatch ends a batch call of del that returned fs (void: it
// panicked or overran its timeout): the batch's failures, or, if the
// handler deferred inside a worker, the Deferral. Outside a worker a
// deferral is waited for here.
func (del *delivery) settleBatch(ctx context.Context, fs []BatchFailure, void bool) ([]BatchFailure, *Deferral) {
	d, done := del.end(void)
	switch {
	case d == nil:
		return fs, nil
	case done:
		return d.resultFailures(), nil
	case del.t == nil:
		if !d.await(ctx) {
			return failBatch(del.batchSize)(context.Cause(ctx)), nil
		}
		return d.resultFailures(), nil
	}
	return nil, d
}

// longer returns the wait of a and b that waits longer.
func longer(a, b Wait) Wait {
	if b.Delay > a.Delay || a.Reason == 0 {
		return b
	}
	return a
}

// callBatch calls the batch handler (bounded by Timeout, if set); a
// panic fails every record of the batch with a *kltype.PanicError, and so
// does an overrun of the timeout with a *kltype.HandlerTimeoutError (void).
func (p *Processor) callBatch(ctx context.Context, handler BatchHandler, recs []*kltype.Record, log *slog.Logger) (failures []BatchFailure, void bool) {
	defer func() {
		if v := recover(); v != nil {
			pe := &kltype.PanicError{Value: v, Stack: debug.Stack()}
			log.ErrorContext(ctx, "kinesislease: batch handler panicked", "records", len(recs), "panic", v, "stack", string(pe.Stack))
			failures = make([]BatchFailure, len(recs))
			for i := range failures {
				failures[i] = BatchFailure{Index: i, Err: pe}
			}
			void = true
		}
	}()
	if p.Timeout > 0 {
		tctx, cancel := context.WithTimeout(ctx, p.Timeout)
		defer cancel()
		failures = handler(tctx, recs)
		if errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			failures = make([]BatchFailure, len(recs))
			for i := range failures {
				failures[i] = BatchFailure{Index: i, Err: &kltype.HandlerTimeoutError{Timeout: p.Timeout}}
			}
			return failures, true
		}
		return failures, false
	}
	return handler(ctx, recs), false
}
