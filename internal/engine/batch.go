package engine

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// BatchHandler handles a batch of one shard's records, in order. It returns
// nil when every record is acknowledged, else one BatchFailure per record
// that was not (a record that could not be decoded is one, with a
// *kltype.DecodeError).
type BatchHandler func(ctx context.Context, recs []*kltype.Record) []BatchFailure

// BatchFailure is one record of a batch that was not acknowledged: Index
// into the batch given, and its error, read as a single record's (see
// kltype.ItemFailure).
type BatchFailure struct {
	Index int
	Err   error
}

// BatchConfig makes a worker hand its records to Handler in batches of at
// most MaxRecords records and MaxBytes bytes of data, waiting up to Linger
// after a GetRecords answer for more before handing over a batch that is
// not full (0: each answer's records go at once).
type BatchConfig struct {
	Handler    BatchHandler
	MaxRecords int
	MaxBytes   int
	Linger     time.Duration
}

// batchAcc is the batch being gathered.
type batchAcc struct {
	items     []*recordContext
	dones     []leases.Checkpoint
	bytes     int
	responses []Batch // GetRecords answers to return to the budget once handled
}

func (a *batchAcc) full(c *BatchConfig) bool {
	return len(a.items) >= c.MaxRecords || a.bytes >= c.MaxBytes
}

// consumeBatches is consume for a batch subscription.
func (w *worker) consumeBatches(f *feed, cp *checkpointer) (permanent error, lost bool) {
	bc := w.cfg.Batch
	var acc batchAcc
	var linger *time.Timer
	var lingerC <-chan time.Time
	flush := func() bool {
		if linger != nil {
			linger.Stop()
			linger, lingerC = nil, nil
		}
		if len(acc.items) == 0 {
			return true
		}
		ok := w.deliverBatch(acc.items, acc.dones, cp)
		if ok {
			for i := range acc.responses {
				f.done(&acc.responses[i])
			}
		}
		acc = batchAcc{}
		return ok
	}
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	for {
		select {
		case <-w.graceful:
			return nil, false // what is gathered is not acknowledged: the next holder reads it again
		case <-cp.ticker.C:
			if cp.since > 0 && !cp.write() {
				return nil, true
			}
		case err := <-f.errs:
			if w.hardCtx.Err() != nil {
				return nil, false
			}
			if !flush() {
				return nil, false
			}
			w.log.Error("kinesislease: cannot read shard", "err", err)
			return err, false
		case <-lingerC:
			if !flush() {
				return nil, false
			}
		case b := <-f.batches:
			acc.responses = append(acc.responses, b)
			slots := make([]recordContext, len(b.Records))
			for i := range b.Records {
				ok := w.expand(&b.Records[i], &slots[i], func(r *recordContext, corrupt error, done leases.Checkpoint) bool {
					if corrupt != nil {
						// A corrupt aggregate is dead-lettered whole, in its place.
						return flush() && w.deliver(r, corrupt, done, cp)
					}
					acc.items = append(acc.items, r)
					acc.dones = append(acc.dones, done)
					acc.bytes += len(r.rec.Data)
					return !acc.full(bc) || flush()
				})
				if !ok {
					return nil, false
				}
			}
			switch {
			case b.End:
				if !flush() {
					return nil, false
				}
				w.ended = true
				return nil, false
			case bc.Linger <= 0:
				if !flush() {
					return nil, false
				}
			case lingerC == nil && len(acc.items) > 0:
				linger = time.NewTimer(bc.Linger)
				lingerC = linger.C
			}
		}
	}
}

// deliverBatch takes a gathered batch to an outcome through the
// Processor (ProcessBatch), advancing the checkpoint over the resolved
// prefix as items resolve. It returns false when the worker stops or the
// lease is lost first.
func (w *worker) deliverBatch(items []*recordContext, dones []leases.Checkpoint, cp *checkpointer) bool {
	recs := make([]*kltype.Record, len(items))
	for i, it := range items {
		recs[i] = &it.rec
	}
	resolved := make([]bool, len(items))
	next := 0 // items[:next] are acknowledged to the checkpointer
	return w.proc.ProcessBatch(w.hardCtx, recs, w.cfg.Batch.Handler, w, func(i int, o kltype.Outcome) bool {
		w.handled(recs[i], o, time.Time{})
		resolved[i] = true
		for next < len(items) && resolved[next] {
			if !cp.ack(dones[next]) {
				return false
			}
			next++
		}
		return true
	})
}

// ProcessBatch takes recs, one shard's records in order, to outcomes: the
// handler gets the records still unresolved, as a batch, until each is
// acknowledged, dropped or dead-lettered; failed ones are retried per the
// policy (a RetryAfter after its delay, counting no attempt) as a batch of
// their own, then dead-lettered (with no sink they hold the shard, as a
// single record does). done(i, o) is told of each record as it resolves;
// it returns false to stop. ProcessBatch returns false when the gate says
// stop (or done did) before every record resolved.
func (p *Processor) ProcessBatch(ctx context.Context, recs []*kltype.Record, handler BatchHandler, gate Gate, done func(i int, o kltype.Outcome) bool) bool {
	log := p.logger()
	policy := p.Policy
	pending := make([]int, len(recs))
	for i := range pending {
		pending[i] = i
	}
	failed := make([]int, len(recs)) // failed attempts per record
	batch := make([]*kltype.Record, 0, len(recs))
	for {
		if gate != nil && !gate.Wait() {
			return false
		}
		if ctx.Err() != nil {
			return false
		}
		if p.MaxAge > 0 {
			// Records too old are dead-lettered instead of handed over.
			live := make([]int, 0, len(pending))
			for _, i := range pending {
				expired := p.expired(recs[i])
				if expired == nil {
					live = append(live, i)
					continue
				}
				o := p.deadLetter(ctx, recs[i], failed[i], kltype.ReasonExpired, expired, log, p.waiter(ctx, recs[i], gate))
				if o == Stopped || !done(i, o) {
					return false
				}
			}
			if pending = live; len(pending) == 0 {
				return true
			}
		}
		batch = batch[:0]
		for _, i := range pending {
			recs[i].Attempt = failed[i] + 1
			batch = append(batch, recs[i])
		}
		byIndex := map[int]error{}
		for _, f := range p.callBatch(ctx, handler, batch, log) {
			if f.Index >= 0 && f.Index < len(batch) {
				byIndex[f.Index] = f.Err
			}
		}
		var again []int
		var wt Wait
		for bi, i := range pending {
			err, ok := byIndex[bi]
			r := recs[i]
			if p.OnAttempt != nil {
				p.OnAttempt(r, err)
			}
			if !ok || err == nil {
				if !done(i, kltype.Acked) {
					return false
				}
				continue
			}
			var (
				drop   *kltype.DropError
				dead   *kltype.DeadLetterError
				decode *kltype.DecodeError
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
					return false
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
						return false
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
				return false
			}
		}
		if len(again) == 0 {
			return true
		}
		pending = again
		if !p.waiter(ctx, recs[pending[0]], gate).wait(wt) {
			return false
		}
	}
}

// longer returns the wait of a and b that waits longer.
func longer(a, b Wait) Wait {
	if b.Delay > a.Delay || a.Reason == 0 {
		return b
	}
	return a
}

// callBatch calls the batch handler (bounded by Timeout, if set); a
// panic fails every record of the batch with a *kltype.PanicError.
func (p *Processor) callBatch(ctx context.Context, handler BatchHandler, recs []*kltype.Record, log *slog.Logger) (failures []BatchFailure) {
	defer func() {
		if v := recover(); v != nil {
			pe := &kltype.PanicError{Value: v, Stack: debug.Stack()}
			log.Error("kinesislease: batch handler panicked", "records", len(recs), "panic", v, "stack", string(pe.Stack))
			failures = make([]BatchFailure, len(recs))
			for i := range failures {
				failures[i] = BatchFailure{Index: i, Err: pe}
			}
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
		}
		return failures
	}
	return handler(ctx, recs)
}
