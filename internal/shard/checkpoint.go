package shard

import (
	"context"
	"errors"
	"time"

	"github.com/kinesislease/kinesislease/internal/lease"
	"github.com/kinesislease/kinesislease/leases"
)

// checkpointer writes the newest acknowledged record as the lease's
// checkpoint after every CheckpointEvery records or CheckpointInterval,
// whichever comes first.
type checkpointer struct {
	w      *Worker
	acked  leases.Checkpoint // newest acknowledged record
	since  int               // records acknowledged since the last checkpoint written
	ticker *time.Ticker
}

func (w *Worker) newCheckpointer() *checkpointer {
	c := &checkpointer{w: w, ticker: time.NewTicker(w.cfg.CheckpointInterval)}
	c.acked = w.lease.Current().Checkpoint
	return c
}

func (c *checkpointer) stop() { c.ticker.Stop() }

// ack records cp as acknowledged, writing it if CheckpointEvery records
// were acknowledged since the last checkpoint. It returns false if the
// lease was lost.
func (c *checkpointer) ack(cp leases.Checkpoint) bool {
	c.acked = cp
	c.since++
	return c.since < c.w.cfg.CheckpointEvery || c.write()
}

// write writes the acknowledged checkpoint. It returns false if the lease
// was lost; a failed write is tried again on the next tick.
func (c *checkpointer) write() bool {
	w := c.w
	if c.acked.IsZero() {
		return true
	}
	err := w.lease.Checkpoint(w.hardCtx, c.acked)
	w.checkpointed(c.acked, err)
	if err != nil {
		if errors.Is(err, lease.ErrLost) {
			w.log.Warn("kinesislease: lease lost; stopping without checkpoint")
			return false
		}
		if w.hardCtx.Err() == nil {
			w.log.Warn("kinesislease: checkpoint failed", "err", err, "seq", c.acked.Sequence)
		}
		c.since = 1 // still unwritten: the next tick tries again
		return true
	}
	c.since = 0
	if l := w.lease.Current(); l.RewindTo.Sequence != "" && !w.Stopping() {
		// The row's answer shows an operator's rewind pending: apply it
		// now, whatever the notice (its bump may be lost, or the re-read
		// it asks for skip this worker; seed 2102075 left a rewind pending
		// for 26 s after the faults while its holder checkpointed past it
		// thirty times).
		w.log.Info("kinesislease: rewinding", "from", l.Checkpoint.Sequence, "to", l.RewindTo.Sequence)
		w.Rewind()
	}
	return true
}

// finish ends the worker's hold on the shard once reading stopped: nothing
// if the lease is lost, the pending rewind if one was asked for, else a
// release with the final checkpoint (acked, or SHARD_END). permanent is the
// reading error the worker stops for, if any.
func (w *Worker) finish(acked leases.Checkpoint, permanent error) {
	if w.lease.IsLost() {
		return // another owner holds it: no checkpoint
	}
	if w.rewinding.Load() && !w.ended && permanent == nil {
		if w.applyRewind() {
			return
		}
		// The rewind may have landed with its answer lost: release without
		// a checkpoint, or the one acknowledged before the rewind would
		// undo it. If it did not land, the next holder applies it anyway.
		acked = leases.Checkpoint{}
	}
	w.release(acked, permanent)
}

// applyRewind moves the checkpoint where the operator asked, keeping the
// lease. It returns true if the worker is done: the rewind was applied
// (w.rewound) or the lease is lost; false means release the lease instead.
func (w *Worker) applyRewind() bool {
	// The records in flight are done; the checkpoint moves where the
	// operator asked, and the Group starts reading from there.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(w.hardCtx), 10*time.Second)
	l, err := w.lease.ApplyRewind(rctx)
	cancel()
	if err == nil {
		w.log.Info("kinesislease: rewind applied", "seq", l.Checkpoint.Sequence)
		w.rewound = true
		return true
	}
	if errors.Is(err, lease.ErrLost) {
		return true
	}
	w.log.Warn("kinesislease: applying the rewind failed; releasing the lease for the next holder to apply it", "err", err)
	return false
}

// release releases the lease with the final checkpoint (acked, or
// SHARD_END if the shard was read to its end) and sets w.err to permanent.
func (w *Worker) release(acked leases.Checkpoint, permanent error) {
	// The write uses a context of its own: a cancelled Run must still hand
	// the shard over.
	final := acked
	if w.ended {
		final = leases.Checkpoint{Sequence: leases.ShardEnd}
	}
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(w.hardCtx), 10*time.Second)
	defer cancel()
	err := w.lease.Release(relCtx, final)
	if !final.IsZero() { // nothing acknowledged, no checkpoint ever: the release writes none
		w.checkpointed(final, err)
	}
	if err != nil {
		if !errors.Is(err, lease.ErrLost) {
			w.log.Warn("kinesislease: release failed; the lease will expire", "err", err, "seq", final.Sequence)
		}
		w.ended = false
		w.err = permanent
		return
	}
	w.log.Info("kinesislease: lease released", "seq", final.Sequence)
	w.err = permanent
}
