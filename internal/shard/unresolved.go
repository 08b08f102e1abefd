package shard

// What Health reports of a shard's oldest unresolved record: its age, and
// whether it blocks the shard (it keeps failing); and the WARN once that
// age passes half the stream's retention.
//
// The consume loop publishes the oldest record taken up for delivery and
// not resolved (oldest: one atomic store as records resolve). The
// Processor's waits (OnWait: a retry's backoff, a RetryAfter, a dead letter
// no sink takes, a failing sink) record the failures of the record waited
// on; its resolution forgets them. Failures are rare: a record that never
// fails costs one atomic load to forget nothing.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/kltype"
)

// DefaultRetention is a stream's retention when none was read or given:
// Kinesis' default, 24 hours.
const DefaultRetention = 24 * time.Hour

// unresolved is a worker's record of its oldest unresolved record and of
// the records failing. Its methods may be called from any goroutine.
type unresolved struct {
	oldest atomic.Pointer[recordContext] // published by the consume loop

	nfailing atomic.Int32 // len(failing), read without the lock
	mu       sync.Mutex
	failing  map[*kltype.Record]*failure
}

// failure is a record's failures in a row.
type failure struct {
	since    time.Time
	attempts int
	err      error
}

// publish makes slot (nil: none) the oldest unresolved record.
func (u *unresolved) publish(slot *recordContext) {
	if u.oldest.Load() != slot {
		u.oldest.Store(slot)
	}
}

// waiting records that r (its attempts read now, on the goroutine
// delivering it) waits after a failure (the Processor's OnWait).
func (u *unresolved) waiting(r *kltype.Record, w pipeline.Wait, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f := u.failing[r]
	if f == nil {
		if u.failing == nil {
			u.failing = map[*kltype.Record]*failure{}
		}
		f = &failure{since: now}
		u.failing[r] = f
		u.nfailing.Add(1)
	}
	f.attempts, f.err = r.Attempt, w.Err
}

// settled forgets r's failures: it resolved, or its handler deferred its
// acknowledgement.
func (u *unresolved) settled(r *kltype.Record) {
	if u.nfailing.Load() == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.failing[r]; ok {
		delete(u.failing, r)
		u.nfailing.Add(-1)
	}
}

// report returns the age of the oldest unresolved record at now (0: none)
// and, if it has been failing for longer than threshold, what blocks the
// shard.
func (u *unresolved) report(now time.Time, threshold time.Duration) (time.Duration, *kltype.BlockedRecord) {
	slot := u.oldest.Load()
	if slot == nil {
		return 0, nil
	}
	r := &slot.Record
	age := ageAt(r.ArrivalTime, now)
	if u.nfailing.Load() == 0 {
		return age, nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	f := u.failing[r]
	if f == nil || !blockedAt(f.since, now, threshold) {
		return age, nil
	}
	return age, &kltype.BlockedRecord{SequenceNumber: r.SequenceNumber, SubSequence: r.SubSequence, ArrivalTime: r.ArrivalTime,
		Since: f.since, Attempts: f.attempts, LastErr: f.err}
}

// ageAt is how old a record that arrived at arrival is at now: 0 if its
// arrival is unknown, or later than now (the clocks' skew).
func ageAt(arrival, now time.Time) time.Duration {
	if arrival.IsZero() {
		return 0
	}
	return max(now.Sub(arrival), 0)
}

// blockedAt reports whether a record failing since since has been failing
// for longer than threshold (a retry's delay) at now.
func blockedAt(since, now time.Time, threshold time.Duration) bool {
	return now.Sub(since) > threshold
}

// pastHalfRetention reports whether age has passed half of retention
// (DefaultRetention if retention is not positive).
func pastHalfRetention(age, retention time.Duration) bool {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return age > retention/2
}

// watchInterval is how often a worker compares its oldest unresolved
// record's age with half the stream's retention: a fortieth of the
// retention (36 minutes past half of the default 24 hours at the most),
// between a second and a minute.
func watchInterval(retention time.Duration) time.Duration {
	if retention <= 0 {
		retention = DefaultRetention
	}
	return min(max(retention/40, time.Second), time.Minute)
}

// Unresolved returns the age of the shard's oldest unresolved record now (0
// while none is) and, if that record has been failing for longer than the
// retry policy's first delay, what blocks the shard (see
// kltype.ShardHealth).
func (w *Worker) Unresolved() (time.Duration, *kltype.BlockedRecord) {
	return w.unres.report(time.Now(), w.cfg.Policy.InitialDelay)
}

// watchAge logs a WARN once the oldest unresolved record's age passes half
// the stream's retention, and again only after the age fell back below
// it, until the worker's Run returns.
func (w *Worker) watchAge() {
	retention := w.cfg.Retention
	if retention <= 0 {
		retention = DefaultRetention
	}
	t := time.NewTicker(watchInterval(retention))
	defer t.Stop()
	warned := false
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
		}
		age, blocked := w.Unresolved()
		switch past := pastHalfRetention(age, retention); {
		case past && !warned:
			warned = true
			args := []any{"age", age.Round(time.Second), "retention", retention}
			if slot := w.unres.oldest.Load(); slot != nil {
				args = append(args, "seq", slot.Record.SequenceNumber, "sub", slot.Record.SubSequence)
			}
			if blocked != nil {
				args = append(args, "attempts", blocked.Attempts, "failing_since", blocked.Since, "err", blocked.LastErr)
			}
			w.log.Warn("kinesislease: the shard's oldest unresolved record is older than half the stream's retention: "+
				"the records behind it expire unread once it passes the retention", args...)
		case !past:
			warned = false
		}
	}
}
