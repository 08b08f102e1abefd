package shard

import (
	"slices"
	"time"

	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// keyItem is one record waiting for, or in, a lane of byKey.
type keyItem struct {
	slot    *recordContext
	corrupt error
	done    leases.Checkpoint
	k       int                // its place in the shard's order
	resp    *keyBatch          // the GetRecords answer it came in
	o       kltype.Outcome     // written by the lane before it hands the item back (Stopped, Deferred or an outcome)
	resume  *pipeline.Deferral // its deferred acknowledgement came back failed: the lane resumes it
	acked   bool               // written by byKey once the item resolved
	defer_  bool               // its acknowledgement is deferred and not resolved yet
	fresh   bool               // in a lane for its first delivery
	start   time.Time          // when its first delivery began, for the hooks
	inLane  bool               // handed to a lane and not back yet
}

// keyBatch is a GetRecords answer whose records are spread over keys: it is
// returned to the budget once each is resolved.
type keyBatch struct {
	b    read.Batch
	left int
}

// maxKeyWindow bounds the records byKey holds dispatched or queued
// and not yet acknowledged: past it, it reads no further answers until
// some are (a key held by RetryAfter holds at most this much behind it).
const maxKeyWindow = 10_000

// byKey hands a shard's records over with per-key concurrency: records of
// one partition key are handled in order, one at a time; records of
// different keys run on up to KeyConcurrency lanes at once. The checkpoint
// advances to the newest record such that it and every record before it
// are resolved, so a restart never skips an unacknowledged record. A retry
// or RetryAfter holds only its key. A record whose acknowledgement is
// deferred frees its key; if it comes back failed it is delivered again
// before the key's records not delivered yet. On a stop, records in flight
// finish (their waits cut short by the stop) and nothing queued starts; a
// lost lease cancels what is in flight. Its state is kept on the worker's
// goroutine; the lanes get items on ready and hand them back on results.
type byKey struct {
	w  *Worker
	f  *feed
	cp *checkpointer

	lanes          int
	ready, results chan *keyItem
	free           int  // lanes without an item
	fresh          int  // lanes on a first delivery: each may defer, so they count towards MaxDeferred
	ending         bool // the shard's last answer was read

	queues   map[string][]*keyItem // per key, in order; its head is in a lane while busy[key]
	busy     map[string]bool
	runnable []string         // keys with queued items and none in a lane
	pending  map[int]*keyItem // not yet acknowledged to the checkpointer, by k
	nextK    int              // the next k to give out
	ackK     int              // the lowest k not acknowledged

	outstanding int // records deferred and not resolved
	awaiting    int // of those, records whose resolution has not come back yet
	// early holds resolutions that came back before their lane handed the
	// item back: taken up once it does.
	early []*pipeline.Deferral
}

// newByKey starts the lanes of a byKey.
func (w *Worker) newByKey(f *feed, cp *checkpointer) *byKey {
	n := w.cfg.KeyConcurrency
	k := &byKey{w: w, f: f, cp: cp, lanes: n, free: n, ready: make(chan *keyItem, n), results: make(chan *keyItem, n),
		queues: map[string][]*keyItem{}, busy: map[string]bool{}, pending: map[int]*keyItem{}}
	for range n {
		go func() {
			for it := range k.ready {
				if d := it.resume; d != nil {
					it.resume = nil
					it.o = w.resumeOutcome(it.slot, d)
				} else {
					it.o, it.start = w.outcome(it.slot, it.corrupt)
				}
				k.results <- it
			}
		}()
	}
	return k
}

// reading reports whether another answer may be read: not past the
// shard's end, nor past maxKeyWindow records unacknowledged.
func (k *byKey) reading() bool { return !k.ending && len(k.pending) < maxKeyWindow }

// take queues b's records by key and starts what it can.
func (k *byKey) take(b read.Batch) bool {
	slots := make([]recordContext, len(b.Records))
	resp := &keyBatch{b: b}
	queue := func(r *recordContext, corrupt error, done leases.Checkpoint) bool {
		it := &keyItem{slot: r, corrupt: corrupt, done: done, k: k.nextK, resp: resp}
		r.order = int64(k.nextK)
		k.nextK++
		resp.left++
		k.pending[it.k] = it
		key := r.Record.PartitionKey
		k.queues[key] = append(k.queues[key], it)
		if len(k.queues[key]) == 1 && !k.busy[key] {
			k.runnable = append(k.runnable, key)
		}
		return true
	}
	for i := range b.Records {
		k.w.expand(&b.Records[i], &slots[i], queue)
	}
	if resp.left == 0 {
		k.f.done(&resp.b)
	}
	k.ending = b.End
	k.publish()
	k.dispatch()
	return k.atEnd()
}

// events is the lanes' results.
func (k *byKey) events() <-chan *keyItem { return k.results }

// event takes up an item a lane handed back.
func (k *byKey) event(it *keyItem) bool {
	k.back(it)
	if it.o == pipeline.Stopped {
		return false // stopping, or the lease lost: nothing more is acknowledged
	}
	k.next(it.slot.Record.PartitionKey)
	if it.o == pipeline.Deferred {
		if d := k.deferred(it); d != nil && !k.settleLive([]*pipeline.Deferral{d}) {
			return k.lost()
		}
	} else if !k.resolved(it) {
		return k.lost()
	}
	k.dispatch()
	return k.atEnd()
}

// flush implements shape: nothing is gathered.
func (k *byKey) flush() bool { return true }

// lost cancels what is in flight, the lease being lost, and ends the loop.
func (k *byKey) lost() bool {
	k.w.hardCancel()
	return false
}

// atEnd returns false, setting w.ended, once the shard's last answer was
// read and every record resolved. When only deferred records keep the
// shard from its end, it tells the release callback, so that a sink
// flushes them.
func (k *byKey) atEnd() bool {
	w := k.w
	if k.ending && len(k.pending) == 0 {
		w.ended = true
		return false
	}
	if k.ending && len(k.pending) == k.outstanding && k.outstanding > 0 && !w.toldRelease {
		w.toldRelease = true
		if fn := w.cfg.OnRelease; fn != nil {
			fn(w.hardCtx, kltype.ReleaseInfo{Stream: w.stream, ShardID: w.shard, Outstanding: k.outstanding, Ended: true})
		}
	}
	return true
}

// dispatch hands the runnable keys' heads to free lanes; at MaxDeferred
// only deliveries coming back from a failed deferral start.
func (k *byKey) dispatch() {
	for i := 0; k.free > 0 && i < len(k.runnable); {
		key := k.runnable[i]
		it := k.queues[key][0]
		if it.resume == nil && k.outstanding+k.fresh >= k.w.cfg.MaxDeferred {
			i++ // no new delivery at the bound: only those coming back
			continue
		}
		if it.resume == nil && !it.defer_ {
			k.fresh++
			it.fresh = true
		}
		k.runnable = append(k.runnable[:i], k.runnable[i+1:]...)
		k.busy[key] = true
		k.free--
		it.inLane = true
		k.ready <- it
	}
}

// back counts it, handed back by its lane, out of the lanes.
func (k *byKey) back(it *keyItem) {
	k.free++
	it.inLane = false
	if it.fresh {
		it.fresh = false
		k.fresh--
	}
}

// stop waits for the lanes to hand their items back (unacknowledged,
// unless deferred meanwhile), then ends them.
func (k *byKey) stop() {
	for k.free < k.lanes {
		it := <-k.results
		k.back(it)
		if it.o == pipeline.Deferred {
			if d := k.deferred(it); d != nil {
				k.early = append(k.early, d) // for letGo's drain
			}
		}
	}
	close(k.ready)
}

// next pops the head of key's queue (the item a lane handed back) and
// makes the key runnable again if more of it wait.
func (k *byKey) next(key string) {
	if k.queues[key] = k.queues[key][1:]; len(k.queues[key]) > 0 {
		k.runnable = append(k.runnable, key)
		k.busy[key] = false
	} else {
		delete(k.queues, key)
		delete(k.busy, key)
	}
}

// deferred counts it, handed back deferred, as awaited. It returns its
// resolution if that came back already (early), else nil.
func (k *byKey) deferred(it *keyItem) *pipeline.Deferral {
	d := it.slot.Deferral()
	d.Held.Owner, d.Held.Order, d.Held.Records = it, it.slot.order, 1
	if d.Held.Start.IsZero() {
		d.Held.Start = it.start
	}
	k.awaiting++
	if !it.defer_ {
		it.defer_ = true
		k.outstanding++
	}
	if i := slices.Index(k.early, d); i >= 0 {
		k.early = slices.Delete(k.early, i, i+1)
		return d
	}
	return nil
}

// resolved acknowledges it and the resolved prefix; false if the lease was
// lost.
func (k *byKey) resolved(it *keyItem) bool {
	if it.defer_ {
		it.defer_ = false
		k.outstanding--
	}
	if it.resp.left--; it.resp.left == 0 {
		k.f.done(&it.resp.b)
	}
	it.acked = true
	for p := k.pending[k.ackK]; p != nil && p.acked; p = k.pending[k.ackK] {
		delete(k.pending, k.ackK)
		k.ackK++
		if !k.cp.ack(p.done) {
			return false
		}
	}
	k.publish()
	return true
}

// publish makes the oldest record not acknowledged the oldest unresolved
// record, for Health (see unresolved).
func (k *byKey) publish() {
	var slot *recordContext
	if it := k.pending[k.ackK]; it != nil {
		slot = it.slot
	}
	k.w.unres.publish(slot)
}

// settleLive takes up resolutions handed back while delivering: an
// acknowledgement resolves its record here; a failure goes back to the
// front of its key's queue, for a lane to resume. false if the lease was
// lost.
func (k *byKey) settleLive(ds []*pipeline.Deferral) bool {
	for _, d := range ds {
		it, _ := d.Held.Owner.(*keyItem)
		if it == nil || it.inLane {
			k.early = append(k.early, d) // its lane has not handed it back yet
			continue
		}
		k.awaiting--
		if d.Result() != nil {
			k.requeue(it, d)
			continue
		}
		if o := k.w.resumeOutcome(it.slot, d); o != pipeline.Stopped && !k.resolved(it) {
			return false
		}
	}
	return true
}

// requeue puts it, whose deferred acknowledgement came back failed, first
// among its key's records waiting for a lane.
func (k *byKey) requeue(it *keyItem, d *pipeline.Deferral) {
	it.resume = d
	key := it.slot.Record.PartitionKey
	q := k.queues[key]
	switch {
	case k.busy[key]: // its head is in a lane: next after it
		k.queues[key] = append(q[:1], append([]*keyItem{it}, q[1:]...)...)
	case len(q) > 0: // runnable already
		k.queues[key] = append([]*keyItem{it}, q...)
	default:
		k.queues[key] = []*keyItem{it}
		k.runnable = append(k.runnable, key)
	}
}

// settle implements drainer. In the loop (not draining) it takes up the
// resolutions handed back (settleLive) and starts what they free; once the
// lanes ended (draining) resolutions are taken up on this goroutine (a
// failure cannot be delivered again while stopping: its record stays
// unresolved).
func (k *byKey) settle(draining bool) bool {
	if !draining {
		if !k.settleLive(k.w.trk.Take()) {
			return k.lost()
		}
		k.dispatch()
		return k.atEnd()
	}
	ds := append(k.early, k.w.trk.Take()...)
	k.early = nil
	for _, d := range ds {
		k.awaiting--
		it, _ := d.Held.Owner.(*keyItem)
		switch k.w.resumeOutcome(it.slot, d) {
		case pipeline.Stopped:
		case pipeline.Deferred:
			k.deferred(it)
		default:
			if !k.resolved(it) {
				return false
			}
		}
	}
	return true
}

func (k *byKey) awaited() int { return k.awaiting }

func (k *byKey) held() int { return k.outstanding }
