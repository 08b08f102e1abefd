package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// RetryPolicy says how a record whose handler returns a plain error is
// retried: up to Attempts deliveries in all, waiting InitialDelay after the
// first failure and doubling up to MaxDelay (with jitter). After the last
// attempt the record goes to the dead-letter sink; with no sink it keeps
// being retried every MaxDelay, holding its shard, so nothing is lost.
type RetryPolicy struct {
	Attempts     int
	InitialDelay time.Duration
	MaxDelay     time.Duration
}

// DefaultRetryPolicy: 5 deliveries, 100ms doubling to 30s.
var DefaultRetryPolicy = RetryPolicy{Attempts: 5, InitialDelay: 100 * time.Millisecond, MaxDelay: 30 * time.Second}

// Validate reports whether p can work.
func (p RetryPolicy) Validate() error {
	if p.Attempts < 1 || p.InitialDelay <= 0 || p.MaxDelay < p.InitialDelay {
		return fmt.Errorf("retry policy %+v: want Attempts >= 1 and 0 < InitialDelay <= MaxDelay", p)
	}
	return nil
}

// RetryAfterError asks for the record to be delivered again after Delay. It
// does not count against the retry policy's attempts.
type RetryAfterError struct {
	Delay time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("retry after %v: %v", e.Delay, e.Err)
}

// Unwrap returns the handler's error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// DropError acknowledges the record without processing it; it is logged.
type DropError struct{ Err error }

func (e *DropError) Error() string { return fmt.Sprintf("drop: %v", e.Err) }

// Unwrap returns the handler's error.
func (e *DropError) Unwrap() error { return e.Err }

// DeadLetterError sends the record to the dead-letter sink at once.
type DeadLetterError struct{ Err error }

func (e *DeadLetterError) Error() string { return fmt.Sprintf("dead-letter: %v", e.Err) }

// Unwrap returns the handler's error.
func (e *DeadLetterError) Unwrap() error { return e.Err }

// DecodeError is what a record whose data the codec cannot decode yields;
// such a record is dead-lettered at once with Reason ReasonDecode.
type DecodeError struct{ Err error }

func (e *DecodeError) Error() string { return fmt.Sprintf("decode: %v", e.Err) }

// Unwrap returns the codec's error.
func (e *DecodeError) Unwrap() error { return e.Err }

// Reasons a record is dead-lettered.
const (
	ReasonRetriesExhausted = "retries-exhausted" // the handler failed Attempts times
	ReasonDeadLetter       = "dead-letter"       // the handler asked for it (DeadLetterError)
	ReasonDecode           = "decode"            // the codec could not decode the data
	ReasonPanic            = "panic"             // the handler panicked on the last attempt
	ReasonCorrupt          = "corrupt-aggregate" // a KPL aggregate that cannot be split
)

// DeadLetter is a record that could not be processed, as a sink receives it.
type DeadLetter struct {
	Record   *Record
	Attempts int    // deliveries to the handler (0 for decode and corrupt records)
	Reason   string // one of the Reason constants
	Err      error  // the last error
}

// Sink receives dead letters. A nil return confirms the record is kept; an
// error is retried (with backoff) until it succeeds or the worker stops: the
// checkpoint passes a dead-lettered record only once a sink confirmed it.
type Sink func(ctx context.Context, dl *DeadLetter) error

// Outcome is what became of a record.
type Outcome int

// Outcomes.
const (
	Stopped      Outcome = iota // the worker stopped first; the record is not acknowledged
	Acked                       // the handler acknowledged it
	Dropped                     // the handler dropped it
	DeadLettered                // a sink confirmed it
)

func (o Outcome) String() string {
	return [...]string{"stopped", "acknowledged", "dropped", "dead-lettered"}[o]
}

// Gate lets a Processor wait for permission to deliver: the worker's lease
// must be valid and the worker not stopping. A nil Gate always allows.
type Gate interface {
	// Wait blocks until a delivery may start and reports whether it may;
	// false means stop.
	Wait() bool
	// Done is closed when the worker stops (gracefully or not).
	Done() <-chan struct{}
}

// Processor takes a record to an outcome: it calls the handler, retries per
// the policy and the handler's outcome, and dead-letters. It is not generic:
// decoding happens inside Handler, whose decode errors are *DecodeError.
type Processor struct {
	Handler Handler
	Policy  RetryPolicy
	// Sink, if set, receives dead letters; with none, a record that would be
	// dead-lettered is retried every MaxDelay, holding its shard.
	Sink Sink
	Log  *slog.Logger
	// Sleep waits d or until ctx ends; tests replace it. Nil means real time.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnAttempt, if set, is told of every delivery's error (nil for success).
	OnAttempt func(r *Record, err error)
	// OnDeadLetter, if set, is told of every dead letter a sink confirmed.
	OnDeadLetter func(dl *DeadLetter)
}

// Process delivers r until it is acknowledged, dropped or dead-lettered, or
// until the gate says stop. ctx is the handler's context: cancelled when the
// lease is lost or the shutdown timeout expires.
func (p *Processor) Process(ctx context.Context, r *Record, gate Gate) Outcome {
	log := p.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	failures := 0
	wait := p.waiter(ctx, gate)
	for attempt := 1; ; attempt++ {
		if gate != nil && !gate.Wait() {
			return Stopped
		}
		if ctx.Err() != nil {
			return Stopped
		}
		r.Attempt = attempt
		err := p.call(ctx, r, log)
		if p.OnAttempt != nil {
			p.OnAttempt(r, err)
		}
		if err == nil {
			return Acked
		}
		var (
			after  *RetryAfterError
			drop   *DropError
			dead   *DeadLetterError
			decode *DecodeError
			panicE *PanicError
		)
		switch {
		case errors.As(err, &drop):
			log.Info("kinesislease: record dropped by the handler", "seq", r.SequenceNumber, "sub", r.SubSequence, "err", err)
			return Dropped
		case errors.As(err, &decode):
			return p.deadLetter(ctx, r, attempt-1, ReasonDecode, err, log, wait)
		case errors.As(err, &dead):
			return p.deadLetter(ctx, r, attempt, ReasonDeadLetter, err, log, wait)
		case errors.As(err, &after):
			log.Info("kinesislease: handler asked to retry the record later", "seq", r.SequenceNumber, "delay", after.Delay, "err", after.Err)
			if !wait(after.Delay) {
				return Stopped
			}
			continue
		}
		failures++
		if failures >= p.Policy.Attempts {
			reason := ReasonRetriesExhausted
			if errors.As(err, &panicE) {
				reason = ReasonPanic
			}
			if p.Sink != nil {
				return p.deadLetter(ctx, r, attempt, reason, err, log, wait)
			}
			// No sink: hold the shard. Nothing is silently lost.
			log.Error("kinesislease: record keeps failing and no dead-letter sink is configured: holding the shard",
				"seq", r.SequenceNumber, "sub", r.SubSequence, "attempt", attempt, "err", err)
			if !wait(backoff(1, p.Policy.MaxDelay, p.Policy.MaxDelay)) {
				return Stopped
			}
			continue
		}
		delay := backoff(failures, p.Policy.InitialDelay, p.Policy.MaxDelay)
		log.Warn("kinesislease: handler failed; retrying the record",
			"seq", r.SequenceNumber, "sub", r.SubSequence, "attempt", attempt, "delay", delay, "err", err)
		if !wait(delay) {
			return Stopped
		}
	}
}

// DeadLetterNow sends r to the sink without calling the handler (a corrupt
// KPL aggregate), retrying the sink until it confirms or the gate closes.
func (p *Processor) DeadLetterNow(ctx context.Context, r *Record, reason string, cause error, gate Gate) Outcome {
	if gate != nil && !gate.Wait() {
		return Stopped
	}
	log := p.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return p.deadLetter(ctx, r, 0, reason, cause, log, p.waiter(ctx, gate))
}

// deadLetter hands r to the sink until it confirms. With no sink (a decode
// failure or a DeadLetterError without one) the record holds the shard.
func (p *Processor) deadLetter(ctx context.Context, r *Record, attempts int, reason string, cause error, log *slog.Logger, wait func(time.Duration) bool) Outcome {
	dl := &DeadLetter{Record: r, Attempts: attempts, Reason: reason, Err: cause}
	for try := 1; ; try++ {
		if p.Sink == nil {
			log.Error("kinesislease: record must be dead-lettered but no dead-letter sink is configured: holding the shard",
				"seq", r.SequenceNumber, "sub", r.SubSequence, "reason", reason, "err", cause)
		} else {
			err := p.Sink(ctx, dl)
			if err == nil {
				log.Warn("kinesislease: record dead-lettered", "seq", r.SequenceNumber, "sub", r.SubSequence, "reason", reason, "err", cause)
				if p.OnDeadLetter != nil {
					p.OnDeadLetter(dl)
				}
				return DeadLettered
			}
			log.Error("kinesislease: dead-letter sink failed; retrying", "seq", r.SequenceNumber, "reason", reason, "err", err)
		}
		if !wait(backoff(try, p.Policy.InitialDelay, p.Policy.MaxDelay)) {
			return Stopped
		}
	}
}

func (p *Processor) call(ctx context.Context, r *Record, log *slog.Logger) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Value: v, Stack: debug.Stack()}
			err = pe
			log.Error("kinesislease: handler panicked", "seq", r.SequenceNumber, "panic", v, "stack", string(pe.Stack))
		}
	}()
	return p.Handler(ctx, r)
}

// waiter returns a function that sleeps d, or less if ctx ends or the gate
// closes, and reports whether it slept the whole time.
func (p *Processor) waiter(ctx context.Context, gate Gate) func(time.Duration) bool {
	sleep := p.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	var done <-chan struct{}
	if gate != nil {
		done = gate.Done()
	}
	return func(d time.Duration) bool {
		if done == nil {
			return sleep(ctx, d) == nil
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-done:
				cancel()
			case <-wctx.Done():
			}
		}()
		return sleep(wctx, d) == nil
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error { return sleep(ctx, d) }
