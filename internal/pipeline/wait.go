package pipeline

import (
	"fmt"
	"time"
)

// WaitReason says why a Processor waits before going on with a record.
type WaitReason uint8

// The reasons a Processor waits. The first two retry the record per the
// policy or the handler's request; the others hold the shard (see
// Wait.Holding).
const (
	// WaitBackoff: the delivery failed with a plain error (or a panic) and
	// the retry policy allows another attempt after a backoff.
	WaitBackoff WaitReason = iota + 1
	// WaitRetryAfter: the handler asked for a retry after a delay
	// (*kltype.RetryAfterError); Wait.Delay is that delay.
	WaitRetryAfter
	// WaitRetriesExhausted: the delivery failed all Policy.Attempts and no
	// sink is configured: the record is retried every MaxDelay, holding
	// its shard.
	WaitRetriesExhausted
	// WaitNoSink: the record must be dead-lettered (Wait.DeadLetterReason:
	// a decode failure, a DeadLetterError, a corrupt aggregate) and no sink
	// is configured: it holds its shard.
	WaitNoSink
	// WaitSinkFailed: the sink failed to take the dead letter (Wait.Err is
	// its error); it is retried after a backoff, holding the shard.
	WaitSinkFailed
)

// String names the reason.
func (r WaitReason) String() string {
	if name, ok := waitReasons[r]; ok {
		return name
	}
	return fmt.Sprintf("WaitReason(%d)", uint8(r))
}

var waitReasons = map[WaitReason]string{
	WaitBackoff: "backoff", WaitRetryAfter: "retry-after", WaitRetriesExhausted: "retries-exhausted",
	WaitNoSink: "no-sink", WaitSinkFailed: "sink-failed",
}

// Wait is a Processor's decision to wait before going on with a record, as
// it reports it to Processor.OnWait.
type Wait struct {
	// Reason is why the Processor waits.
	Reason WaitReason
	// Delay is how long it waits (less if the context ends or the gate
	// closes first).
	Delay time.Duration
	// Err is what led to the wait: the delivery's error, the cause of the
	// dead letter for WaitNoSink, or the sink's error for WaitSinkFailed.
	Err error
	// DeadLetterReason is the dead letter's reason (kltype.ReasonDecode,
	// ...) for WaitNoSink and WaitSinkFailed; "" otherwise.
	DeadLetterReason string
}

// Holding reports whether the wait holds the shard (retries exhausted or a
// dead letter with no sink, or a failing sink) rather than retrying the
// record per the policy or the handler's request.
func (w Wait) Holding() bool {
	return w.Reason == WaitRetriesExhausted || w.Reason == WaitNoSink || w.Reason == WaitSinkFailed
}
