package shard

import (
	"context"
	"errors"
	"time"

	"github.com/kinesislease/kinesislease/internal/lease"
)

// Done implements pipeline.Gate: its channel is closed once the worker
// is asked to stop.
func (w *Worker) Done() <-chan struct{} { return w.graceful }

// touchRetry is how long Wait waits before it proves an idle row again
// after a touch failed (the store did not answer, or answered an error).
const touchRetry = 50 * time.Millisecond

// Wait implements pipeline.Gate: it blocks while the lease cannot be
// trusted (lost, its row missing, or the instance's fence passed: its last
// successful heartbeat is too old) and reports whether delivery may go on.
// It wakes when the fence moves or the row is recreated
// (lease.Held.Recreated), never on a poll. An idle lease past its proof
// bound proves its row first (Touch); a touch that fails is tried again
// after touchRetry.
func (w *Worker) Wait() bool {
	for ok, _ := w.lease.Deliverable(); !ok; {
		// The channels first, then the check: a change made after the
		// check closes the channels taken before it.
		moved, back := w.lease.Moved()
		var proven bool
		if ok, proven = w.lease.Deliverable(); ok {
			break
		}
		var retry *time.Timer
		if !proven {
			// Idle past the proof bound: prove the row still exists and is
			// ours before delivering again (a row deleted meanwhile may have
			// been recreated by its next holder).
			tctx, cancel := context.WithTimeout(w.hardCtx, 5*time.Second)
			err := w.lease.Touch(tctx)
			cancel()
			if err == nil {
				continue
			}
			if errors.Is(err, lease.ErrLost) {
				return false
			}
			retry = time.NewTimer(touchRetry)
		}
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C
		}
		select {
		case <-w.graceful:
		case <-w.hardCtx.Done():
		case <-moved:
		case <-back:
		case <-retryC:
		}
		if retry != nil {
			retry.Stop()
		}
		if w.Stopping() || w.hardCtx.Err() != nil {
			return false
		}
	}
	return !w.Stopping() && w.hardCtx.Err() == nil
}
