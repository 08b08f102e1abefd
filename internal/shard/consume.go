package shard

import (
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/leases"
)

// Run reads the shard and hands its records to the handler until the worker
// stops, the shard ends or reading fails for good; then it releases the
// lease with the final checkpoint (or applies the pending rewind). It
// closes Finished when it returns.
func (w *Worker) Run() {
	defer close(w.done)
	defer w.hardCancel()
	go w.watchAge()

	f := w.startReader()
	defer f.stop()
	cp := w.newCheckpointer()
	defer cp.stop()

	permanent := w.consume(f, cp)
	w.letGo()
	w.finish(cp.acked, permanent) // nothing, if the lease was lost
}

// consume hands the feed's records over in the subscription's shape (one
// at a time, in batches, or per partition key) until the worker stops, the
// shard ends (w.ended) or reading fails for good: the error returned.
func (w *Worker) consume(f *feed, cp *checkpointer) error {
	switch {
	case w.cfg.Batch != nil:
		return consumeAs(w, f, cp, &batches{ackQueue: w.newAckQueue(f, cp), cfg: w.cfg.Batch})
	case w.cfg.KeyConcurrency > 1:
		return consumeAs(w, f, cp, w.newByKey(f, cp))
	}
	return consumeAs(w, f, cp, singles{w.newAckQueue(f, cp)})
}

// shape is how the consume loop hands a shard's records over: one at a
// time (singles), in batches (batches) or per partition key (byKey). Its
// methods run on the worker's goroutine; one that returns false ends the
// loop: the worker stops, the lease is lost, or the shard was read to its
// end and every record resolved (w.ended). E is what the shape's own timers
// or goroutines hand back to the loop (events).
type shape[E any] interface {
	// drainer: settle(false) takes up, in the loop, the deferred
	// acknowledgements resolved meanwhile; letGo drains the rest.
	drainer
	// reading reports whether the loop may take another GetRecords answer
	// now.
	reading() bool
	// take takes up one GetRecords answer.
	take(b read.Batch) bool
	// events is what the shape's timers or goroutines hand back (nil: none);
	// event takes one up.
	events() <-chan E
	event(e E) bool
	// flush hands over what is gathered, before the loop returns a read
	// error.
	flush() bool
	// stop ends what the shape runs (timers, goroutines) once the loop
	// returns.
	stop()
}

// consumeAs is the consume loop: it takes up GetRecords answers,
// resolutions of deferred acknowledgements and the shape's own events, and
// writes a checkpoint on the ticker, until the shape, a stop or a read
// error ends it.
func consumeAs[E any](w *Worker, f *feed, cp *checkpointer, s shape[E]) error {
	w.acks = s
	defer s.stop()
	for {
		in := f.answers
		if !s.reading() {
			in = nil
		}
		select {
		case <-w.graceful:
			return nil // what is gathered or queued is not acknowledged: the next holder reads it again
		case <-cp.ticker.C:
			if cp.since > 0 && !cp.write() {
				w.hardCancel() // the lease is lost: what is in flight is cancelled
				return nil
			}
		case <-w.trk.Notify():
			if !s.settle(false) {
				return nil
			}
		case err := <-f.errs:
			if w.hardCtx.Err() != nil || !s.flush() {
				return nil
			}
			w.log.Error("kinesislease: cannot read shard", "err", err)
			return err
		case e := <-s.events():
			if !s.event(e) {
				return nil
			}
		case b := <-in:
			if !s.take(b) {
				return nil
			}
		}
	}
}

// singles hands a shard's records to the handler one at a time, in order:
// each Kinesis record, or each user record of a KPL aggregate, skipping
// those the checkpoint the worker resumed from covers. Each is acknowledged
// to the checkpointer once it and every record before it resolved.
type singles struct{ *ackQueue }

// singles reads every answer as it comes, runs no timer or goroutine of
// its own, and gathers nothing.
func (s singles) reading() bool           { return true }
func (s singles) events() <-chan struct{} { return nil }
func (s singles) event(struct{}) bool     { return true }
func (s singles) flush() bool             { return true }
func (s singles) stop()                   {}

// take delivers b's records in order; at the shard's end it waits for the
// deferred acknowledgements (endShard) and ends the loop.
func (s singles) take(b read.Batch) bool {
	w := s.w
	// One record context per record, allocated with the batch.
	slots := make([]recordContext, len(b.Records))
	resp := &respHold{b: b, open: true}
	deliver := func(r *recordContext, corrupt error, done leases.Checkpoint) bool {
		s.hold(r, done, resp)
		return s.deliver(r, corrupt)
	}
	for i := range b.Records {
		if !w.expand(&b.Records[i], &slots[i], deliver) {
			return false // stopping (or lost) before the end of this record
		}
	}
	s.closeResp(resp)
	if b.End && w.endShard(s.ackQueue) {
		w.ended = true
	}
	return !b.End
}
