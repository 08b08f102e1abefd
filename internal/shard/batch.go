package shard

import (
	"time"

	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// batches hands a shard's records to the batch handler in batches of at
// most MaxRecords records and MaxBytes bytes, in order; a batch not full
// goes after Linger (see BatchConfig). A corrupt aggregate is dead-lettered
// whole, in its place between two batches. The checkpoint advances over
// the resolved prefix as records resolve.
type batches struct {
	*ackQueue
	cfg    *BatchConfig
	items  []*recordContext // the batch being gathered
	bytes  int              // its records' data
	linger *time.Timer      // running while a batch not full waits for more
}

func (s *batches) reading() bool { return true }

// take gathers b's records, handing each batch over as it fills, and the
// rest at once unless it may linger; at the shard's end it waits for the
// deferred acknowledgements (endShard) and ends the loop.
func (s *batches) take(b read.Batch) bool {
	w := s.w
	resp := &respHold{b: b, open: true}
	slots := make([]recordContext, len(b.Records))
	gather := func(r *recordContext, corrupt error, done leases.Checkpoint) bool {
		s.hold(r, done, resp)
		if corrupt != nil {
			return s.flush() && s.deliver(r, corrupt)
		}
		s.items = append(s.items, r)
		s.bytes += len(r.Record.Data)
		return len(s.items) < s.cfg.MaxRecords && s.bytes < s.cfg.MaxBytes || s.flush()
	}
	for i := range b.Records {
		if !w.expand(&b.Records[i], &slots[i], gather) {
			return false
		}
	}
	s.closeResp(resp)
	switch {
	case b.End:
		if s.flush() && w.endShard(s.ackQueue) {
			w.ended = true
		}
		return false
	case s.cfg.Linger <= 0:
		return s.flush()
	case s.linger == nil && len(s.items) > 0:
		s.linger = time.NewTimer(s.cfg.Linger)
	}
	return true
}

// events is the linger timer's channel while one runs.
func (s *batches) events() <-chan time.Time {
	if s.linger == nil {
		return nil
	}
	return s.linger.C
}

// event hands over the batch that lingered.
func (s *batches) event(time.Time) bool { return s.flush() }

// flush hands the gathered batch to outcomes (or to a deferral) through
// the Processor, once there is room for another deferral. It returns false
// when the worker stops or the lease is lost first.
func (s *batches) flush() bool {
	s.stop()
	items := s.items
	if len(items) == 0 {
		return true
	}
	s.items, s.bytes = nil, 0
	if !s.room() {
		return false
	}
	w := s.w
	recs := make([]*kltype.Record, len(items))
	for i, it := range items {
		recs[i] = &it.Record
		s.enqueue(it)
	}
	s.publish(nil)
	br := pipeline.NewBatchRun(w.hardCtx, recs, s.cfg.Handler, w.trk, func(i int, o kltype.Outcome) bool {
		w.handled(recs[i], o, time.Time{})
		return s.resolved(items[i])
	})
	switch w.proc.RunBatch(br, w) {
	case pipeline.Stopped:
		return false
	case pipeline.Deferred:
		sb := &shardBatch{run: br, items: items}
		d := br.Deferral()
		d.Held.Owner = sb
		s.deferred(d, sb.unresolved()...)
	}
	return true
}

// stop stops the linger timer.
func (s *batches) stop() {
	if s.linger != nil {
		s.linger.Stop()
		s.linger = nil
	}
}
