package kinesisfake

import (
	"context"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Events returns the channel of events, closed when the subscription ends.
func (s *subscription) Events() <-chan *types.SubscribeToShardEvent { return s.ch }

// Err returns why the subscription ended: nil for a clean end (its
// lifetime, or Close), else the exception or error.
func (s *subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription and waits for its goroutine.
func (s *subscription) Close() error {
	s.end(nil)
	<-s.done
	return nil
}

// end stops the subscription with err (nil: a clean end), unless it has
// ended already; it reports whether this call ended it.
func (s *subscription) end(err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.ended, s.err = true, err
	close(s.stop)
	return true
}

// run streams events until the subscription ends.
func (s *subscription) run(ctx context.Context) {
	k := s.k
	defer func() {
		k.mu.Lock()
		if calls := k.subs[s.key]; calls != nil && calls.active == s {
			calls.active = nil
		}
		k.mu.Unlock()
		close(s.ch)
		close(s.done)
	}()
	lastEvent := time.Now()
	for {
		k.mu.Lock()
		ev, final, err := s.nextLocked()
		changed := k.changedLocked()
		k.mu.Unlock()
		if err != nil {
			s.end(err)
			return
		}
		now := time.Now()
		if ev == nil && now.Sub(lastEvent) >= k.rules.EventInterval {
			cont := s.cont
			ev = &types.SubscribeToShardEvent{Records: []types.Record{}, ContinuationSequenceNumber: &cont, MillisBehindLatest: aws.Int64(0)}
		}
		if ev != nil {
			select {
			case s.ch <- ev:
				lastEvent = time.Now()
			case <-s.stop:
				return
			case <-ctx.Done():
				s.end(ctx.Err())
				return
			}
			if final {
				s.end(nil)
				return
			}
			if len(ev.Records) > 0 {
				if gap := k.rules.EventGap; gap > 0 && !s.wait(ctx, gap, nil) {
					return
				}
				continue // more may be waiting
			}
		}
		if !now.Before(s.deadline) {
			s.end(nil)
			return
		}
		if !s.wait(ctx, min(k.rules.EventInterval-time.Since(lastEvent), time.Until(s.deadline)), changed) {
			return
		}
	}
}

// wait waits d, or until wake is closed (nil: never), unless the
// subscription ends first (then false).
func (s *subscription) wait(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-wake:
		return true
	case <-s.stop:
		return false
	case <-ctx.Done():
		s.end(ctx.Err())
		return false
	}
}

// nextLocked returns the next event with records, or the final event of a
// closed shard read to its end (final), or nil if there is nothing new; or
// the error that ends the subscription. k.mu is held.
func (s *subscription) nextLocked() (ev *types.SubscribeToShardEvent, final bool, err error) {
	k := s.k
	if k.streams[s.stream.name] != s.stream {
		return nil, false, streamNotFound(s.stream.name)
	}
	if k.consumers[s.consumer.arn] != s.consumer {
		return nil, false, consumerNotFound(s.consumer.arn)
	}
	sh := s.shard
	end := min(len(sh.records), s.pos+k.rules.MaxEventRecords)
	if end > s.pos {
		recs := make([]types.Record, 0, end-s.pos)
		for i := s.pos; i < end; i++ {
			r := sh.records[i]
			recs = append(recs, types.Record{
				Data: slices.Clone(r.data), PartitionKey: aws.String(r.key), SequenceNumber: aws.String(sh.seq(i)),
				ApproximateArrivalTimestamp: aws.Time(r.arrival), EncryptionType: types.EncryptionTypeNone,
			})
		}
		s.pos, s.cont = end, sh.seq(end-1)
		behind := int64(0)
		if end < len(sh.records) {
			behind = max(1, time.Since(sh.records[end].arrival).Milliseconds())
		}
		cont := s.cont
		ev = &types.SubscribeToShardEvent{Records: recs, ContinuationSequenceNumber: &cont, MillisBehindLatest: aws.Int64(behind)}
		return ev, false, nil
	}
	if sh.closed {
		return &types.SubscribeToShardEvent{Records: []types.Record{}, MillisBehindLatest: aws.Int64(0),
			ChildShards: s.stream.childShards(sh)}, true, nil
	}
	return nil, false, nil
}
