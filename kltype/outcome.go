package kltype

import (
	"context"
	"fmt"
	"time"
)

// RetryPolicy says how a record whose handler returns a plain error is
// retried: up to Attempts deliveries in all, waiting InitialDelay after the
// first failure and doubling (with jitter) up to MaxDelay. Then the record
// goes to the dead-letter sink; with no sink it is retried every MaxDelay,
// holding its shard (each failure logged at ERROR), so nothing is lost.
type RetryPolicy struct {
	// Attempts is the number of deliveries in all, at least 1.
	Attempts int
	// InitialDelay is the wait after the first failure.
	InitialDelay time.Duration
	// MaxDelay caps the doubling waits, and is the period at which a record
	// with no dead-letter sink is retried once its attempts are used up.
	MaxDelay time.Duration
}

// DefaultRetryPolicy: 5 deliveries, waits from 100ms doubling to 30s.
var DefaultRetryPolicy = RetryPolicy{Attempts: 5, InitialDelay: 100 * time.Millisecond, MaxDelay: 30 * time.Second}

// Validate reports whether p can work.
func (p RetryPolicy) Validate() error {
	if p.Attempts < 1 || p.InitialDelay <= 0 || p.MaxDelay < p.InitialDelay {
		return fmt.Errorf("retry policy %+v: want Attempts >= 1 and 0 < InitialDelay <= MaxDelay", p)
	}
	return nil
}

// RetryAfterError delivers the record again after Delay; it does not count
// against the retry policy's attempts. kinesislease.RetryAfter returns one.
type RetryAfterError struct {
	Delay time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("retry after %v: %v", e.Delay, e.Err)
}

// Unwrap returns the handler's error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// DropError acknowledges the record without processing it, logged at INFO.
// kinesislease.Drop returns one.
type DropError struct{ Err error }

func (e *DropError) Error() string { return fmt.Sprintf("drop: %v", e.Err) }

// Unwrap returns the handler's error.
func (e *DropError) Unwrap() error { return e.Err }

// DeadLetterError sends the record to the dead-letter sink at once, without
// retrying. kinesislease.DeadLetter returns one.
type DeadLetterError struct{ Err error }

func (e *DeadLetterError) Error() string { return fmt.Sprintf("dead-letter: %v", e.Err) }

// Unwrap returns the handler's error.
func (e *DeadLetterError) Unwrap() error { return e.Err }

// PanicError is what a handler's panic becomes: an error like any other,
// retried per the policy, its stack logged.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }

// Reasons a record is dead-lettered (DeadLetterRecord.Reason).
const (
	ReasonRetriesExhausted = "retries-exhausted" // the handler failed Attempts times
	ReasonDeadLetter       = "dead-letter"       // the handler asked for it (DeadLetterError)
	ReasonDecode           = "decode"            // the codec could not decode the data
	ReasonPanic            = "panic"             // the handler panicked on the last attempt
	ReasonCorrupt          = "corrupt-aggregate" // a KPL aggregate that cannot be split
	ReasonExpired          = "expired"           // older than the subscription's maximum age (ExpiredError)
)

// ExpiredError is why a record older than its subscription's maximum age
// (kinesislease.WithMaxRecordAge) at a delivery was dead-lettered, with
// Reason ReasonExpired, instead of reaching the handler.
type ExpiredError struct {
	// Arrival is the record's ApproximateArrivalTimestamp.
	Arrival time.Time
	// Age is how old it was when it was found expired.
	Age time.Duration
	// MaxAge is the subscription's maximum age.
	MaxAge time.Duration
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("kinesislease: record expired: it arrived %s, %v ago, over the maximum age of %v",
		e.Arrival.UTC().Format(time.RFC3339Nano), e.Age.Round(time.Millisecond), e.MaxAge)
}

// DeadLetterRecord is a record that could not be processed, as a dead-letter
// sink receives it.
type DeadLetterRecord struct {
	// Record is the record, its raw bytes intact.
	Record *Record
	// Attempts counts deliveries to the handler (0 for decode failures and
	// corrupt aggregates; those before it expired for an expired record).
	Attempts int
	// Reason is one of the Reason constants.
	Reason string
	// Err is the last error.
	Err error
}

// Outcome is what became of a record, as HookRecordHandled reports it.
type Outcome int

// Outcomes. The zero Outcome means none yet.
const (
	// Acked: the handler acknowledged the record.
	Acked Outcome = iota + 1
	// Dropped: the handler dropped it (DropError).
	Dropped
	// DeadLettered: a dead-letter sink confirmed it.
	DeadLettered
)

func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

var outcomeNames = [...]string{0: "none", Acked: "acknowledged", Dropped: "dropped", DeadLettered: "dead-lettered"}

// HandlerTimeoutError is a handler call that overran the subscription's
// handler timeout (kinesislease.WithHandlerTimeout): its context was
// cancelled, and the attempt counts as failed, retried per the retry
// policy, whatever the handler returned (Err).
type HandlerTimeoutError struct {
	Timeout time.Duration
	Err     error
}

func (e *HandlerTimeoutError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("kinesislease: the handler ran past its timeout of %v", e.Timeout)
	}
	return fmt.Sprintf("kinesislease: the handler ran past its timeout of %v: %v", e.Timeout, e.Err)
}

// Unwrap returns context.DeadlineExceeded, not the handler's error: an
// overrun attempt is a failure, even if the handler asked for a Drop or a
// RetryAfter.
func (e *HandlerTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// ItemFailure is one item of a batch the handler did not acknowledge:
// Index is its position in the batch the handler was given, Err its error,
// read as a single record's would be (an outcome error — Drop,
// DeadLetter, RetryAfter — or a plain error: a failed attempt).
type ItemFailure struct {
	Index int
	Err   error
}

// BatchError is what a batch handler returns to acknowledge every item of
// its batch but the failed ones (AWS Lambda's partial batch response): the
// failed items are retried as a batch of their own per the retry policy,
// then dead-lettered; the others are done. Build it with
// kinesislease.FailItems.
type BatchError struct {
	Failures []ItemFailure
}

func (e *BatchError) Error() string {
	if len(e.Failures) == 1 {
		return fmt.Sprintf("kinesislease: 1 item of the batch failed (index %d): %v", e.Failures[0].Index, e.Failures[0].Err)
	}
	return fmt.Sprintf("kinesislease: %d items of the batch failed", len(e.Failures))
}
