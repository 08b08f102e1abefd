package shard

import (
	"time"

	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// ackQueue acknowledges a shard's records to the checkpointer in the
// shard's order as they resolve, in or out of order: the checkpoint never
// passes a record that is not resolved. A record resolved while the queue
// is empty is acknowledged at once (no bookkeeping); others wait in q
// behind the first unresolved one. It is the singles and batches shapes'
// (see consume), used from the worker's goroutine only.
type ackQueue struct {
	w  *Worker
	f  *feed
	cp *checkpointer
	t  *pipeline.Tracker

	q    []*recordContext // unacknowledged records, in order, from head
	head int
	next int64 // the next record's order

	outstanding int // records deferred and not resolved (bounded by max)
	awaiting    int // of those, records whose resolution has not come back yet
	max         int
}

func (w *Worker) newAckQueue(f *feed, cp *checkpointer) *ackQueue {
	return &ackQueue{w: w, f: f, cp: cp, t: w.trk, max: w.cfg.MaxDeferred}
}

// hold counts slot as taken up from its answer, in the shard's order.
func (q *ackQueue) hold(slot *recordContext, done leases.Checkpoint, resp *respHold) {
	slot.order, slot.done, slot.resp = q.next, done, resp
	q.next++
	if resp != nil {
		resp.left++
	}
}

// closeResp says every record of resp was taken up: it goes back to the
// budget once they are resolved.
func (q *ackQueue) closeResp(resp *respHold) {
	resp.open = false
	if resp.left == 0 {
		q.f.done(&resp.b)
	}
}

// deliver takes slot (held) to an outcome, or to a deferral, once there is
// room for another deferral; false when the worker stops or the lease is
// lost first.
func (q *ackQueue) deliver(slot *recordContext, corrupt error) bool {
	if !q.room() {
		return false
	}
	q.publish(slot)
	defer q.publish(nil)
	switch o, start := q.w.outcome(slot, corrupt); o {
	case pipeline.Stopped:
		return false
	case pipeline.Deferred:
		d := slot.Deferral()
		d.Held.Owner, d.Held.Start = slot, start
		q.deferred(d, slot)
		q.enqueue(slot)
		return true
	default:
		if q.head == len(q.q) {
			// Nothing before it unresolved: acknowledged at once.
			q.release(slot)
			return q.cp.ack(slot.done)
		}
		q.enqueue(slot)
		return q.resolved(slot)
	}
}

// publish makes the oldest unresolved record the head of the queue, or
// current (the record being delivered, if any) when the queue is empty:
// what Health reports (see unresolved).
func (q *ackQueue) publish(current *recordContext) {
	if q.head < len(q.q) {
		current = q.q[q.head]
	}
	q.w.unres.publish(current)
}

func (q *ackQueue) enqueue(slot *recordContext) {
	if q.head > 0 && q.head == len(q.q) {
		clear(q.q)
		q.q, q.head = q.q[:0], 0
	}
	q.q = append(q.q, slot)
}

// deferred counts the deferral d of slots (a record, or a batch's
// unresolved records, in order) as awaited, in the shard's order of the
// first.
func (q *ackQueue) deferred(d *pipeline.Deferral, slots ...*recordContext) {
	d.Held.Records, d.Held.Order = len(slots), slots[0].order
	q.awaiting += d.Held.Records
	for _, s := range slots {
		if !s.deferred {
			s.deferred = true
			q.outstanding++
		}
	}
}

// resolved marks slot (queued) resolved and acknowledges the resolved
// prefix; false if the lease was lost.
func (q *ackQueue) resolved(slot *recordContext) bool {
	slot.resolved = true
	q.release(slot)
	for q.head < len(q.q) && q.q[q.head].resolved {
		s := q.q[q.head]
		q.q[q.head] = nil
		q.head++
		if !q.cp.ack(s.done) {
			return false
		}
	}
	q.publish(nil)
	if q.head > 1024 && q.head*2 > len(q.q) {
		q.q = append(q.q[:0], q.q[q.head:]...)
		clear(q.q[len(q.q):cap(q.q)])
		q.head = 0
	}
	return true
}

// release returns slot's part of its answer to the budget, and its place
// among the outstanding deferrals.
func (q *ackQueue) release(slot *recordContext) {
	if slot.deferred {
		slot.deferred = false
		q.outstanding--
	}
	if r := slot.resp; r != nil {
		slot.resp = nil
		if r.left--; r.left == 0 && !r.open {
			q.f.done(&r.b)
		}
	}
}

// room waits until a new delivery may start: the resolutions handed back
// are taken up first (a failed one delivered again), and while max
// deferrals are outstanding it waits for some to resolve, writing
// checkpoints on the ticker meanwhile. false: the worker stops or the
// lease is lost first.
func (q *ackQueue) room() bool {
	select {
	case <-q.t.Notify():
		if !q.settle(false) {
			return false
		}
	default:
	}
	for q.outstanding >= q.max {
		if !q.wait() {
			return false
		}
	}
	return true
}

// wait waits for a resolution and takes it up, writing checkpoints on the
// ticker meanwhile; false when the worker stops or the lease is lost.
func (q *ackQueue) wait() bool {
	w := q.w
	select {
	case <-q.t.Notify():
		return q.settle(false)
	case <-q.cp.ticker.C:
		return q.cp.since == 0 || q.cp.write()
	case <-w.graceful:
		return false
	case <-w.hardCtx.Done():
		return false
	}
}

// settle takes up the resolutions handed back, in the shard's order. It
// returns false when the worker stops or the lease is lost first; while
// draining (a release) a failed record cannot be delivered again and stays
// unresolved, and settle goes on.
func (q *ackQueue) settle(draining bool) bool {
	for _, d := range q.t.Take() {
		q.awaiting -= d.Held.Records
		if !q.settleOne(d) && !draining {
			return false
		}
	}
	return !draining || !q.w.lease.IsLost()
}

func (q *ackQueue) settleOne(d *pipeline.Deferral) bool {
	w := q.w
	if sb, ok := d.Held.Owner.(*shardBatch); ok {
		switch w.proc.ResumeBatch(sb.run, w, d) {
		case pipeline.Stopped:
			return false
		case pipeline.Deferred:
			q.deferred(d, sb.unresolved()...)
		}
		return true
	}
	slot, _ := d.Held.Owner.(*recordContext)
	switch o := w.resumeOutcome(slot, d); o {
	case pipeline.Stopped:
		return false
	case pipeline.Deferred:
		q.deferred(d, slot)
		return true
	default:
		return q.resolved(slot)
	}
}

// awaited and held implement drainer.
func (q *ackQueue) awaited() int { return q.awaiting }
func (q *ackQueue) held() int    { return q.outstanding }

// outcome takes slot to an outcome (or a deferral) through the Processor,
// reporting a resolved one to the hooks; start is when it began, for the
// hooks (zero without record hooks). A deferral's worker-side fields are
// the caller's to set, on the goroutine that takes up its resolutions.
func (w *Worker) outcome(slot *recordContext, corrupt error) (o kltype.Outcome, start time.Time) {
	start = w.now()
	r := &slot.Record
	if corrupt != nil {
		o = w.proc.DeadLetterNow(slot, r, kltype.ReasonCorrupt, corrupt, w)
	} else {
		o = w.proc.Process(slot, r, w)
	}
	switch o {
	case pipeline.Stopped:
	case pipeline.Deferred:
		w.unres.settled(r)
	default:
		w.handled(r, o, start)
	}
	return o, start
}

// resumeOutcome takes up slot's deferred acknowledgement d, resolved, as the
// handler's return: Process goes on from there.
func (w *Worker) resumeOutcome(slot *recordContext, d *pipeline.Deferral) kltype.Outcome {
	o := w.proc.Resume(slot, &slot.Record, w, d)
	switch o {
	case pipeline.Stopped:
	case pipeline.Deferred:
		w.unres.settled(&slot.Record)
	default:
		w.handled(&slot.Record, o, d.Held.Start)
	}
	return o
}

// shardBatch is a batch of the worker's records on its way to outcomes
// (run): what the ack queue holds of a deferred batch.
type shardBatch struct {
	run   *pipeline.BatchRun
	items []*recordContext // the worker's records, as run's
}

// unresolved returns the worker's records of the batch not resolved yet.
func (sb *shardBatch) unresolved() []*recordContext {
	pending := sb.run.Pending()
	out := make([]*recordContext, 0, len(pending))
	for _, i := range pending {
		out = append(out, sb.items[i])
	}
	return out
}
