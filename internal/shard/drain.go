package shard

import (
	"time"

	"github.com/kinesislease/kinesislease/kltype"
)

// letGo is the worker's last word on its deferred acknowledgements, once
// it stopped delivering: it tells the subscription's release callback, and
// unless the lease was lost waits (up to DrainTimeout, or until the
// handlers are cancelled) for the outstanding ones, so that the release
// checkpoints as far as they resolve; then it refuses any later one.
func (w *Worker) letGo() {
	defer w.trk.Close()
	a := w.acks
	lost := w.lease.IsLost()
	if w.toldRelease || (a == nil || a.held() == 0) && w.cfg.OnRelease == nil {
		return
	}
	info := kltype.ReleaseInfo{Stream: w.stream, ShardID: w.shard, Lost: lost, Ended: w.ended}
	if a != nil {
		info.Outstanding = a.held()
	}
	if !lost && !w.ended {
		info.Wait = w.cfg.DrainTimeout
	}
	if lost {
		w.trk.Close() // acknowledgements from now on are ignored
		w.hardCancel()
	}
	if fn := w.cfg.OnRelease; fn != nil {
		fn(w.hardCtx, info)
	}
	if lost || a == nil || a.awaited() == 0 {
		return
	}
	w.log.Info("kinesislease: waiting for deferred acknowledgements before releasing", "outstanding", a.held(), "timeout", w.cfg.DrainTimeout)
	timer := time.NewTimer(w.cfg.DrainTimeout)
	defer timer.Stop()
	for a.awaited() > 0 {
		select {
		case <-w.trk.Notify():
			if !a.settle(true) {
				return
			}
		case <-timer.C:
			w.log.Warn("kinesislease: deferred acknowledgements still outstanding at the timeout; releasing at the resolved prefix", "outstanding", a.held())
			return
		case <-w.hardCtx.Done():
			return
		}
	}
}

// endShard waits, at the shard's end, until every deferred acknowledgement
// resolved (telling the release callback first), so that SHARD_END passes
// no unresolved record; false if the worker stops or the lease is lost
// first.
func (w *Worker) endShard(q *ackQueue) bool {
	if q.outstanding == 0 {
		return true
	}
	w.toldRelease = true
	if fn := w.cfg.OnRelease; fn != nil {
		fn(w.hardCtx, kltype.ReleaseInfo{Stream: w.stream, ShardID: w.shard, Outstanding: q.outstanding, Ended: true})
	}
	for q.outstanding > 0 {
		if !q.wait() {
			return false
		}
	}
	return true
}
