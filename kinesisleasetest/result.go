package kinesisleasetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/kltype"
)

// Result is what became of one record and how.
type Result struct {
	// Outcome is where the record ended: acknowledged, dropped or
	// dead-lettered. The zero Outcome ("none") is a record left unresolved:
	// it held its shard (Held), or the context passed to Handle ended first
	// (it is not acknowledged; in production it would be redelivered).
	Outcome kltype.Outcome
	// Held reports a record that holds its shard: it must be dead-lettered
	// with no sink configured (WithoutDeadLetter), or the sink keeps
	// failing, or it is still unresolved after MaxWaits waits. In
	// production it would be retried for as long as that lasts; the harness
	// stops it after WithHoldAttempts extra rounds. Outcome is zero then.
	Held bool
	// Record is the record as the handler saw it through
	// kinesislease.RecordFrom; its Attempt is the last delivery's.
	Record *kltype.Record
	// Attempts counts the handler's calls. A record that cannot be decoded
	// never reaches the handler: 0.
	Attempts int
	// Delays are the waits the pipeline asked for, in order: retry
	// backoffs (jittered, as in production: the n-th is between d/2 and d
	// for d = min(InitialDelay·2^(n-1), MaxDelay)), RetryAfter delays
	// exactly, and waits while holding the shard. None took any time.
	Delays []time.Duration
	// Errors holds each delivery's error in order, nil for the delivery
	// that acknowledged the record. A decode failure is a delivery the
	// handler never saw: it has an entry here but none in Attempts.
	Errors []error
	// DeadLetter is the record as the dead-letter sink confirmed it, with
	// its Reason ("retries-exhausted", "dead-letter", "decode", "panic"),
	// Attempts and last error; nil unless Outcome is kltype.DeadLettered.
	DeadLetter *kltype.DeadLetterRecord

	why string // why the record was held or stopped
}

// String describes the result, as the Require methods report it.
func (r Result) String() string {
	var b strings.Builder
	b.WriteString(resolution(r.Outcome, r.Held))
	if r.Outcome == kltype.DeadLettered && r.DeadLetter != nil {
		fmt.Fprintf(&b, " (reason %q)", r.DeadLetter.Reason)
	}
	if r.why != "" {
		fmt.Fprintf(&b, " (%s)", r.why)
	}
	fmt.Fprintf(&b, " after %d handler attempt(s)", r.Attempts)
	if len(r.Errors) > 0 {
		fmt.Fprintf(&b, "; errors: %v", r.Errors)
	}
	if len(r.Delays) > 0 {
		fmt.Fprintf(&b, "; waits: %v", r.Delays)
	}
	return b.String()
}

// RequireAcked fails the test unless the handler acknowledged the record.
func (r Result) RequireAcked(tb testing.TB) {
	tb.Helper()
	r.require(tb, r.Outcome == kltype.Acked, "the record acknowledged")
}

// RequireDropped fails the test unless the handler dropped the record.
func (r Result) RequireDropped(tb testing.TB) {
	tb.Helper()
	r.require(tb, r.Outcome == kltype.Dropped, "the record dropped")
}

// RequireDeadLettered fails the test unless the record was dead-lettered
// with reason ("retries-exhausted", "dead-letter", "decode", "panic").
func (r Result) RequireDeadLettered(tb testing.TB, reason string) {
	tb.Helper()
	r.require(tb, r.Outcome == kltype.DeadLettered && r.DeadLetter != nil && r.DeadLetter.Reason == reason,
		fmt.Sprintf("the record dead-lettered with reason %q", reason))
}

// RequireHeld fails the test unless the record held its shard (see Held).
func (r Result) RequireHeld(tb testing.TB) {
	tb.Helper()
	r.require(tb, r.Outcome == 0 && r.Held, "the record holding its shard")
}

// RequireAttempts fails the test unless the handler was called n times.
func (r Result) RequireAttempts(tb testing.TB, n int) {
	tb.Helper()
	r.require(tb, r.Attempts == n, fmt.Sprintf("%d handler attempt(s)", n))
}

// resolution names an outcome, or for none whether the record held its
// shard or was stopped.
func resolution(o kltype.Outcome, held bool) string {
	switch {
	case o != 0:
		return o.String()
	case held:
		return "held"
	}
	return "stopped"
}

// require fails the test, saying what it wanted and what r is, unless ok.
func (r Result) require(tb testing.TB, ok bool, want string) {
	tb.Helper()
	if !ok {
		tb.Fatalf("kinesisleasetest: want %s, got %v", want, r)
	}
}
