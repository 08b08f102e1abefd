package engine

import (
	"github.com/kinesislease/kinesislease/leases"
)

// keyItem is one record waiting for, or in, a lane of consumeByKey.
type keyItem struct {
	slot    *recordContext
	corrupt error
	done    leases.Checkpoint
	k       int       // its place in the shard's order
	resp    *keyBatch // the GetRecords answer it came in
	outcome bool      // written by the lane before it hands the item back: it reached an outcome
	acked   bool      // written by consumeByKey once the lane handed it back
}

// keyBatch is a GetRecords answer whose records are spread over keys: it is
// returned to the budget once each is resolved.
type keyBatch struct {
	b    Batch
	left int
}

// maxKeyWindow bounds the records consumeByKey holds dispatched or queued
// and not yet acknowledged: past it, it reads no further answers until
// some are (a key held by RetryAfter holds at most this much behind it).
const maxKeyWindow = 10_000

// consumeByKey is consume with per-key concurrency: records of one
// partition key are handled in order, one at a time; records of different
// keys run on up to KeyConcurrency lanes at once. The checkpoint advances
// to the newest record such that it and every record before it are
// resolved, so a restart never skips an unacknowledged record. A retry or
// RetryAfter holds only its key. On a stop, records in flight finish
// (their waits cut short by the stop) and nothing queued starts; a lost
// lease cancels what is in flight.
func (w *worker) consumeByKey(f *feed, cp *checkpointer) (permanent error, lost bool) {
	lanes := w.cfg.KeyConcurrency
	ready := make(chan *keyItem, lanes)
	results := make(chan *keyItem, lanes)
	for range lanes {
		go func() {
			for it := range ready {
				it.outcome = w.process(it.slot, it.corrupt)
				results <- it
			}
		}()
	}
	queues := map[string][]*keyItem{} // per key, in order; its head is in a lane while busy[key]
	busy := map[string]bool{}
	var runnable []string // keys with queued items and none in a lane
	free := lanes
	pending := map[int]*keyItem{} // not yet acknowledged to the checkpointer, by k
	nextK, ackK := 0, 0           // the next k to give out; the lowest k not acknowledged
	ending := false               // the shard's last answer was read

	dispatch := func() {
		for free > 0 && len(runnable) > 0 {
			key := runnable[0]
			runnable = runnable[1:]
			busy[key] = true
			free--
			ready <- queues[key][0]
		}
	}
	// stop waits for the lanes to hand their items back (unacknowledged),
	// then ends them.
	stop := func() {
		for free < lanes {
			<-results
			free++
		}
		close(ready)
	}
	for {
		batches := f.batches
		if ending || len(pending) >= maxKeyWindow {
			batches = nil
		}
		select {
		case <-w.graceful:
			stop()
			return nil, false
		case <-cp.ticker.C:
			if cp.since > 0 && !cp.write() {
				w.hardCancel()
				stop()
				return nil, true
			}
		case err := <-f.errs:
			var permanent error
			if w.hardCtx.Err() == nil {
				w.log.Error("kinesislease: cannot read shard", "err", err)
				permanent = err
			}
			stop()
			return permanent, false
		case it := <-results:
			free++
			if !it.outcome {
				stop() // stopping, or the lease lost: nothing more is acknowledged
				return nil, false
			}
			key := it.slot.rec.PartitionKey
			if queues[key] = queues[key][1:]; len(queues[key]) > 0 {
				runnable = append(runnable, key)
				busy[key] = false
			} else {
				delete(queues, key)
				delete(busy, key)
			}
			if it.resp.left--; it.resp.left == 0 {
				f.done(&it.resp.b)
			}
			it.acked = true
			for p := pending[ackK]; p != nil && p.acked; p = pending[ackK] {
				delete(pending, ackK)
				ackK++
				if !cp.ack(p.done) {
					w.hardCancel()
					stop()
					return nil, true
				}
			}
			dispatch()
		case b := <-batches:
			slots := make([]recordContext, len(b.Records))
			resp := &keyBatch{b: b}
			for i := range b.Records {
				w.expand(&b.Records[i], &slots[i], func(r *recordContext, corrupt error, done leases.Checkpoint) bool {
					it := &keyItem{slot: r, corrupt: corrupt, done: done, k: nextK, resp: resp}
					nextK++
					resp.left++
					pending[it.k] = it
					key := r.rec.PartitionKey
					queues[key] = append(queues[key], it)
					if len(queues[key]) == 1 && !busy[key] {
						runnable = append(runnable, key)
					}
					return true
				})
			}
			if resp.left == 0 {
				f.done(&resp.b)
			}
			ending = b.End
			dispatch()
		}
		if ending && len(pending) == 0 {
			stop()
			w.ended = true
			return nil, false
		}
	}
}
