package engine

import (
	"slices"
	"time"

	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// keyItem is one record waiting for, or in, a lane of consumeByKey.
type keyItem struct {
	slot    *recordContext
	corrupt error
	done    leases.Checkpoint
	k       int            // its place in the shard's order
	resp    *keyBatch      // the GetRecords answer it came in
	o       kltype.Outcome // written by the lane before it hands the item back (Stopped, Deferred or an outcome)
	resume  *Deferral      // its deferred acknowledgement came back failed: the lane resumes it
	acked   bool           // written by consumeByKey once the item resolved
	defer_  bool           // its acknowledgement is deferred and not resolved yet
	fresh   bool           // in a lane for its first delivery
	start   time.Time      // when its first delivery began, for the hooks
	inLane  bool           // handed to a lane and not back yet
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
// RetryAfter holds only its key. A record whose acknowledgement is deferred
// frees its key; if it comes back failed it is delivered again before the
// key's records not delivered yet. On a stop, records in flight finish
// (their waits cut short by the stop) and nothing queued starts; a lost
// lease cancels what is in flight.
func (w *worker) consumeByKey(f *feed, cp *checkpointer) (permanent error, lost bool) {
	lanes := w.cfg.KeyConcurrency
	ready := make(chan *keyItem, lanes)
	results := make(chan *keyItem, lanes)
	for range lanes {
		go func() {
			for it := range ready {
				if d := it.resume; d != nil {
					it.resume = nil
					it.o = w.resumeOutcome(it.slot, d)
				} else {
					it.o, it.start = w.outcome(it.slot, it.corrupt)
				}
				results <- it
			}
		}()
	}
	k := &byKey{w: w, f: f, cp: cp, queues: map[string][]*keyItem{}, busy: map[string]bool{}, pending: map[int]*keyItem{}}
	w.acks = k
	free := lanes
	ending := false // the shard's last answer was read

	// fresh counts the lanes' first deliveries: each may defer, so they
	// count towards the bound.
	fresh := 0
	dispatch := func() {
		for i := 0; free > 0 && i < len(k.runnable); {
			key := k.runnable[i]
			it := k.queues[key][0]
			if it.resume == nil && k.outstanding+fresh >= w.cfg.MaxDeferred {
				i++ // no new delivery at the bound: only those coming back
				continue
			}
			if it.resume == nil && !it.defer_ {
				fresh++
				it.fresh = true
			}
			k.runnable = append(k.runnable[:i], k.runnable[i+1:]...)
			k.busy[key] = true
			free--
			it.inLane = true
			ready <- it
		}
	}
	back := func(it *keyItem) {
		free++
		it.inLane = false
		if it.fresh {
			it.fresh = false
			fresh--
		}
	}
	// stop waits for the lanes to hand their items back (unacknowledged,
	// unless deferred meanwhile), then ends them.
	stop := func() {
		for free < lanes {
			it := <-results
			back(it)
			if it.o == Deferred {
				if d := k.deferred(it); d != nil {
					k.early = append(k.early, d) // for letGo's drain
				}
			}
		}
		close(ready)
	}
	for {
		batches := f.batches
		if ending || len(k.pending) >= maxKeyWindow {
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
		case <-w.trk.notify:
			if !k.settleLive() {
				w.hardCancel()
				stop()
				return nil, true
			}
			dispatch()
		case err := <-f.errs:
			var permanent error
			if w.hardCtx.Err() == nil {
				w.log.Error("kinesislease: cannot read shard", "err", err)
				permanent = err
			}
			stop()
			return permanent, false
		case it := <-results:
			back(it)
			if it.o == Stopped {
				stop() // stopping, or the lease lost: nothing more is acknowledged
				return nil, false
			}
			k.next(it.slot.rec.PartitionKey)
			if it.o == Deferred {
				if d := k.deferred(it); d != nil && !k.settleLiveOf([]*Deferral{d}) {
					w.hardCancel()
					stop()
					return nil, true
				}
			} else if !k.resolved(it) {
				w.hardCancel()
				stop()
				return nil, true
			}
			dispatch()
		case b := <-batches:
			slots := make([]recordContext, len(b.Records))
			resp := &keyBatch{b: b}
			for i := range b.Records {
				w.expand(&b.Records[i], &slots[i], func(r *recordContext, corrupt error, done leases.Checkpoint) bool {
					it := &keyItem{slot: r, corrupt: corrupt, done: done, k: k.nextK, resp: resp}
					r.order = int64(k.nextK)
					k.nextK++
					resp.left++
					k.pending[it.k] = it
					key := r.rec.PartitionKey
					k.queues[key] = append(k.queues[key], it)
					if len(k.queues[key]) == 1 && !k.busy[key] {
						k.runnable = append(k.runnable, key)
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
		if ending && len(k.pending) == 0 {
			stop()
			w.ended = true
			return nil, false
		}
		if ending && len(k.pending) == k.outstanding && k.outstanding > 0 && !w.toldRelease {
			// Only deferred records keep the shard from its end: tell the
			// release callback, so that a sink flushes them.
			w.toldRelease = true
			if fn := w.cfg.OnRelease; fn != nil {
				fn(w.hardCtx, kltype.ReleaseInfo{Stream: w.stream, ShardID: w.shard, Outstanding: k.outstanding, Ended: true})
			}
		}
	}
}

// byKey is consumeByKey's state, kept on its goroutine.
type byKey struct {
	w  *worker
	f  *feed
	cp *checkpointer

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
	early []*Deferral
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
func (k *byKey) deferred(it *keyItem) *Deferral {
	d := it.slot.del.d
	d.key, d.slot, d.n = it, it.slot, 1
	if d.start.IsZero() {
		d.start = it.start
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
	return true
}

// settleLive takes up the resolutions handed back while delivering: an
// acknowledgement resolves its record here; a failure goes back to the
// front of its key's queue, for a lane to resume. false if the lease was
// lost.
func (k *byKey) settleLive() bool {
	return k.settleLiveOf(k.w.trk.take())
}

func (k *byKey) settleLiveOf(ds []*Deferral) bool {
	for _, d := range ds {
		it := d.key
		if it == nil || it.inLane {
			k.early = append(k.early, d) // its lane has not handed it back yet
			continue
		}
		k.awaiting--
		if d.result() != nil {
			k.requeue(it, d)
			continue
		}
		if o := k.w.resumeOutcome(it.slot, d); o != Stopped && !k.resolved(it) {
			return false
		}
	}
	return true
}

// requeue puts it, whose deferred acknowledgement came back failed, first
// among its key's records waiting for a lane.
func (k *byKey) requeue(it *keyItem, d *Deferral) {
	it.resume = d
	key := it.slot.rec.PartitionKey
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

// settle implements drainer: once the lanes ended, resolutions are taken
// up on this goroutine (a failure cannot be delivered again while
// stopping: its record stays unresolved).
func (k *byKey) settle(bool) bool {
	ds := append(k.early, k.w.trk.take()...)
	k.early = nil
	for _, d := range ds {
		k.awaiting--
		it := d.key
		switch k.w.resumeOutcome(it.slot, d) {
		case Stopped:
		case Deferred:
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
