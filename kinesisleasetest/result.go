package kinesisleasetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/kltype"
)

// Outcome is what became of a record.
type Outcome int

// Outcomes. A record acknowledged after retries is Acked, with Attempts > 1
// and its waits in Result.Delays.
const (
	// Stopped: the context passed to Handle ended first; the record is not
	// acknowledged (in production it would be redelivered).
	Stopped Outcome = iota
	// Acked: the handler returned nil.
	Acked
	// Dropped: the handler returned kinesislease.Drop.
	Dropped
	// DeadLettered: the dead-letter sink confirmed the record.
	DeadLettered
	// Held: the record holds its shard — it must be dead-lettered with no
	// sink configured (WithoutDeadLetter), or the sink keeps failing, or it
	// is still unresolved after MaxWaits waits. In production it would be
	// retried for as long as that lasts; the harness stops it after
	// WithHoldAttempts extra rounds.
	Held
)

func (o Outcome) String() string {
	switch o {
	case Stopped:
		return "stopped"
	case Acked:
		return "acknowledged"
	case Dropped:
		return "dropped"
	case DeadLettered:
		return "dead-lettered"
	case Held:
		return "held"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is what became of one record and how.
type Result struct {
	// Outcome is where the record ended.
	Outcome Outcome
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
	// Attempts and last error; nil unless Outcome is DeadLettered.
	DeadLetter *kltype.DeadLetterRecord

	why string // why the record was held or stopped
}

// String describes the result, as the Require methods report it.
func (r Result) String() string {
	var b strings.Builder
	b.WriteString(r.Outcome.String())
	if r.Outcome == DeadLettered && r.DeadLetter != nil {
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
	if r.Outcome != Acked {
		tb.Fatalf("kinesisleasetest: want the record acknowledged, got %v", r)
	}
}

// RequireDropped fails the test unless the handler dropped the record.
func (r Result) RequireDropped(tb testing.TB) {
	tb.Helper()
	if r.Outcome != Dropped {
		tb.Fatalf("kinesisleasetest: want the record dropped, got %v", r)
	}
}

// RequireDeadLettered fails the test unless the record was dead-lettered
// with reason ("retries-exhausted", "dead-letter", "decode", "panic").
func (r Result) RequireDeadLettered(tb testing.TB, reason string) {
	tb.Helper()
	if r.Outcome != DeadLettered || r.DeadLetter == nil || r.DeadLetter.Reason != reason {
		tb.Fatalf("kinesisleasetest: want the record dead-lettered with reason %q, got %v", reason, r)
	}
}

// RequireHeld fails the test unless the record held its shard (see Held).
func (r Result) RequireHeld(tb testing.TB) {
	tb.Helper()
	if r.Outcome != Held {
		tb.Fatalf("kinesisleasetest: want the record holding its shard, got %v", r)
	}
}

// RequireAttempts fails the test unless the handler was called n times.
func (r Result) RequireAttempts(tb testing.TB, n int) {
	tb.Helper()
	if r.Attempts != n {
		tb.Fatalf("kinesisleasetest: want %d handler attempt(s), got %v", n, r)
	}
}
