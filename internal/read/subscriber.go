package read

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/kinesiswire"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
)

// FanOutConfig turns a subscription's reading from GetRecords polling to
// enhanced fan-out: SubscribeToShard, the records pushed as they arrive.
type FanOutConfig struct {
	Consumer *Consumer
	// Renew is how long a subscription is kept before it is renewed from
	// the last record received; Kinesis ends each after 5 minutes. The
	// default is 4m50s.
	Renew time.Duration
	// Idle is how long a subscription may go without an event (Kinesis
	// sends one at least every few seconds, records or not) before it is
	// taken as dead and renewed; the default is 30s.
	Idle time.Duration
	// MaxBackoff caps the delay between failed subscribe attempts; the
	// default is 5s.
	MaxBackoff time.Duration
}

// Fan-out defaults and limits.
const (
	defaultRenew = 4*time.Minute + 50*time.Second
	defaultIdle  = 30 * time.Second
	// subscribeInterval is Kinesis' limit: one SubscribeToShard call a
	// second per consumer and shard.
	subscribeInterval = time.Second
	// subscribeMargin is added to it: the previous call may have reached
	// Kinesis later than it was sent.
	subscribeMargin = 50 * time.Millisecond
	// validPoll is how often a subscriber waiting for its lease checks it.
	validPoll = 25 * time.Millisecond
	// watchMax is the longest an open subscription goes without checking
	// its lease.
	watchMax = time.Second
)

// Source is what a shard is read from: a Reader (polling) or a
// Subscriber (enhanced fan-out). Close releases what it holds open.
type Source interface {
	Next(ctx context.Context) (Batch, error)
	Close()
}

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	FanOut  *FanOutConfig
	Stream  string
	ShardID string
	Start   kltype.StartPosition
	// ValidFor returns how long the lease stays valid without another
	// heartbeat (0 or less: not valid): the subscriber neither subscribes nor
	// keeps a subscription open while it is not.
	ValidFor func() time.Duration
	// Reserve, if set, waits until the budget has room for another event.
	Reserve func(ctx context.Context, limit int32) (int32, error)
	// OnRetry, if set, is told of each error the subscriber retries.
	OnRetry func(err error, delay time.Duration)
	// OnEvent, if set, is told of every event's MillisBehindLatest,
	// records or not.
	OnEvent func(millisBehind int64)
	// Encoding is the reader's: EncodingSDK has the SDK's event decoder
	// decode the events.
	Encoding kinesiswire.Encoding
}

// Subscriber reads one shard with SubscribeToShard, from a start position,
// in order, renewing the subscription from the last record received when
// Kinesis ends it (every 5 minutes), when it is older than Renew, when it
// breaks or goes quiet. It never has a subscription open while the lease
// is not valid.
type Subscriber struct {
	cfg SubscriberConfig
	fo  FanOutConfig

	sub     *kinesiswire.Subscription // the open subscription, read on the caller's goroutine
	cancel  context.CancelFunc        // ends the open subscription's request
	reasons chan error                // the watch's reason for ending the subscription
	// waiting is when the Next under way started waiting for an event
	// (nanoseconds since epoch, on the monotonic clock; 0: not waiting):
	// the watch takes a subscription that waits longer than Idle as dead.
	// Time spent handling events is not the subscription's silence.
	waiting atomic.Int64
	epoch   time.Time

	last     string    // sequence number of the last record returned
	cont     string    // the last event's ContinuationSequenceNumber
	lastCall time.Time // the last SubscribeToShard call
	failed   int
	done     bool
}

// NewSubscriber returns a Subscriber of cfg.FanOut's consumer (which must
// be set); it calls Kinesis only on Next.
func NewSubscriber(cfg SubscriberConfig) *Subscriber {
	fo := *cfg.FanOut
	if fo.Renew <= 0 {
		fo.Renew = defaultRenew
	}
	if fo.Idle <= 0 {
		fo.Idle = defaultIdle
	}
	if fo.MaxBackoff <= 0 {
		fo.MaxBackoff = 5 * time.Second
	}
	return &Subscriber{cfg: cfg, fo: fo, epoch: time.Now()}
}

// Errors that end a subscription for the subscriber's own reasons; each
// is followed by a new subscription from the last record received.
var (
	errFenced = errors.New("lease not valid: subscription closed")
	errIdle   = errors.New("no event: subscription taken as dead")
	errRenew  = errors.New("subscription renewed")
)

// Next returns the next event that holds records, or the last event of a
// closed shard (marked End). Subscription failures (throttling, the
// 5-second rule, broken connections, the 5-minute end) are retried inside
// Next with a new subscription from the last record returned; none skips a
// record. Next returns an error only when ctx ends or on an error no retry
// can cure (the shard does not exist, access denied).
func (s *Subscriber) Next(ctx context.Context) (Batch, error) {
	if s.done {
		return Batch{}, ErrShardEnded
	}
	b, err := s.next(ctx)
	if err != nil || s.done {
		s.close()
	}
	return b, err
}

func (s *Subscriber) next(ctx context.Context) (Batch, error) {
	for {
		if s.sub == nil {
			if err := s.open(ctx); err != nil {
				if ctx.Err() != nil {
					return Batch{}, ctx.Err()
				}
				if s.permanent(ctx, err) {
					return Batch{}, err
				}
				if err := s.retry(ctx, err); err != nil {
					return Batch{}, err
				}
				continue
			}
		}
		b, ok, err := s.receive(ctx)
		if err != nil {
			return Batch{}, err
		}
		if ok {
			return b, nil
		}
	}
}

// Close ends the open subscription, if any.
func (s *Subscriber) Close() { s.close() }

// registerError is a failure to register the consumer again (it was found
// deleted): permanent if Kinesis' error is.
type registerError struct{ err error }

func (e *registerError) Error() string { return e.err.Error() }
func (e *registerError) Unwrap() error { return e.err }

// open waits for the per-second limit, the consumer (registered again if
// it was found deleted) and the lease to be valid, then subscribes from
// the last record returned (or the start position). The lease is checked
// last, right before the call: a fenced instance never subscribes.
func (s *Subscriber) open(ctx context.Context) error {
	c := s.fo.Consumer
	var arn string
	for {
		if err := backoff.Sleep(ctx, time.Until(s.lastCall.Add(subscribeInterval+subscribeMargin))); err != nil {
			return err
		}
		if arn = c.ARN(); arn == "" {
			if err := c.Register(ctx); err != nil {
				return &registerError{err}
			}
			continue // the lease again, after the wait
		}
		if s.cfg.ValidFor == nil || s.cfg.ValidFor() > 0 {
			break
		}
		if err := backoff.Sleep(ctx, validPoll); err != nil {
			return err
		}
	}
	pos := s.resumeAt()
	subCtx, cancel := context.WithCancel(ctx)
	s.lastCall = time.Now()
	sub, err := kinesiswire.SubscribeToShard(subCtx, c.Client, &kinesis.SubscribeToShardInput{
		ConsumerARN: aws.String(arn), ShardId: aws.String(s.cfg.ShardID), StartingPosition: kinesisx.StartingPosition(pos),
	}, s.cfg.Encoding, kinesisx.WithoutThrottleRetries, kinesisx.StableRequestBody)
	if err != nil {
		cancel()
		var invalid *types.InvalidArgumentException
		if pos.Sequence != "" && errors.As(err, &invalid) {
			return &kltype.CheckpointError{Stream: s.cfg.Stream, ShardID: s.cfg.ShardID, Position: pos, Err: err}
		}
		return fmt.Errorf("shard %s: SubscribeToShard %s (consumer %s): %w", s.cfg.ShardID, pos, arn, err)
	}
	s.sub, s.cancel = sub, cancel
	s.reasons = make(chan error, 1)
	s.waiting.Store(0)
	go s.watch(subCtx, func() { cancel(); _ = sub.Close() }, s.reasons, time.Now().Add(s.fo.Renew))
	return nil
}

// watch ends the subscription of subCtx (end: its request cancelled, its
// body closed, so that nothing the connection holds is read after), with
// its reason, when the lease is found not valid (errFenced), when the
// subscription is due for renewal (errRenew), or when it has waited for an
// event longer than Idle (errIdle). It sleeps until the first of them
// could come (at most watchMax while there is a lease to check), then
// looks again; a lost lease cancels the worker, and with it the
// subscription, at once. Reading the events needs no timer of its own.
func (s *Subscriber) watch(subCtx context.Context, end func(), reasons chan<- error, renewAt time.Time) {
	next := func(now time.Time) (time.Duration, error) {
		if s.cfg.ValidFor != nil && s.cfg.ValidFor() <= 0 {
			return 0, errFenced
		}
		if !now.Before(renewAt) {
			return 0, errRenew
		}
		wait := renewAt.Sub(now)
		if w := s.waiting.Load(); w != 0 {
			idle := s.fo.Idle - (now.Sub(s.epoch) - time.Duration(w))
			if idle <= 0 {
				return 0, errIdle
			}
			wait = min(wait, idle)
		} else {
			wait = min(wait, s.fo.Idle) // handling: the next wait starts later
		}
		if s.cfg.ValidFor != nil {
			wait = min(wait, s.cfg.ValidFor(), watchMax)
		}
		return max(wait, time.Millisecond), nil
	}
	wait, _ := next(time.Now())
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-subCtx.Done():
			return
		case <-t.C:
			wait, reason := next(time.Now())
			if reason != nil {
				reasons <- reason
				end()
				return
			}
			t.Reset(wait)
		}
	}
}

// resumeAt is where the next subscription starts: after the last record
// returned; before any, after the last event's continuation if the start
// position moves with time (LATEST, AT_TIMESTAMP: subscribing there again
// would skip what came meanwhile); else the start position.
func (s *Subscriber) resumeAt() kltype.StartPosition {
	switch t := s.cfg.Start.Type; {
	case s.last != "":
		return kltype.AfterSequenceNumber(s.last)
	case s.cont != "" && (t == kltype.PositionLatest || t == kltype.PositionAtTimestamp):
		return kltype.AfterSequenceNumber(s.cont)
	}
	return s.cfg.Start
}

// receive reads the open subscription's next event. ok reports a batch
// to return; false means the subscription ended (or the event held no
// records) and Next goes on.
func (s *Subscriber) receive(ctx context.Context) (b Batch, ok bool, err error) {
	if s.cfg.Reserve != nil {
		// Room for one more event: until then the subscription's events
		// wait in the connection's flow-control window.
		if _, err := s.cfg.Reserve(ctx, 0); err != nil {
			s.close()
			return Batch{}, false, err
		}
	}
	s.waiting.Store(int64(time.Since(s.epoch)) + 1) // never 0
	ev, err := s.sub.Next()
	s.waiting.Store(0)
	if err != nil {
		return Batch{}, false, s.ended(ctx, err)
	}
	s.failed = 0
	millis := aws.ToInt64(ev.MillisBehindLatest)
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(millis)
	}
	b = Batch{Records: ev.Records, MillisBehindLatest: millis}
	if n := len(ev.Records); n > 0 {
		s.last = aws.ToString(ev.Records[n-1].SequenceNumber)
	}
	if ev.ContinuationSequenceNumber == nil {
		// The shard is closed and every record was sent; ChildShards
		// names its children, which the shard listing finds too.
		b.End = true
		s.done = true
	} else {
		s.cont = *ev.ContinuationSequenceNumber
	}
	return b, len(b.Records) > 0 || b.End, nil
}

// ended handles the end of the open subscription, whose reading failed
// with err: the watch's reason (the lease not valid, renewal, silence),
// ctx's end, the stream's clean end (Kinesis ends each after 5 minutes),
// or a failure, retried unless permanent. A nil return means Next goes on.
func (s *Subscriber) ended(ctx context.Context, err error) error {
	s.close()
	select {
	case reason := <-s.reasons:
		switch reason {
		case errFenced: // open waits for the lease
			return nil
		case errRenew: // a new subscription from the last record
			return nil
		}
		s.failed++
		if s.cfg.OnRetry != nil {
			s.cfg.OnRetry(fmt.Errorf("shard %s: %w after %v", s.cfg.ShardID, reason, s.fo.Idle), 0)
		}
		return nil
	default:
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	err = fmt.Errorf("shard %s: SubscribeToShard event stream: %w", s.cfg.ShardID, err)
	if s.permanent(ctx, err) {
		return err
	}
	return s.retry(ctx, err)
}

// close ends the open subscription, if any.
func (s *Subscriber) close() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	_ = s.sub.Close()
	s.cancel, s.sub = nil, nil
}

// permanent reports whether err is one no new subscription can cure. A
// consumer found deleted (or being deleted) is registered again; a missing shard, denied
// access, an invalid request or a checkpoint not in the shard are for good.
func (s *Subscriber) permanent(ctx context.Context, err error) bool {
	var cpErr *kltype.CheckpointError
	var regErr *registerError
	switch {
	case errors.As(err, &cpErr), errors.Is(err, kltype.ErrConsumerLimit):
		return true
	case errors.As(err, &regErr):
		return kinesisx.Permanent(err) // the stream is gone, access denied
	}
	c := s.fo.Consumer
	switch {
	case kinesisx.IsNotFound(err):
		arn := c.ARN()
		gone, gerr := c.gone(ctx)
		if gerr != nil {
			return false // not known: the next attempt asks again
		}
		if gone {
			c.forget(arn) // the next open registers it again
			return false
		}
		return true
	case kinesisx.IsResourceInUse(err) && s.failed >= 6:
		// Past the 5-second rule and still in use: the consumer may be
		// being deleted.
		if arn := c.ARN(); arn != "" {
			if gone, _ := c.gone(ctx); gone {
				c.forget(arn)
			}
		}
		return false
	}
	return kinesisx.Permanent(err)
}

// retry reports err and waits before the next subscribe: a second for
// the per-second limit and the 5-second rule (ResourceInUseException: the
// previous subscription is less than 5 seconds old), backing off up to
// MaxBackoff for other errors.
func (s *Subscriber) retry(ctx context.Context, err error) error {
	s.failed++
	delay := subscribeInterval
	if !kinesisx.IsResourceInUse(err) && !kinesisx.IsLimitExceeded(err) {
		delay = backoff.Delay(s.failed, subscribeInterval, s.fo.MaxBackoff)
	}
	delay += rand.N(delay / 10) // later, never sooner: the limits count from Kinesis' clock
	if s.cfg.OnRetry != nil {
		s.cfg.OnRetry(err, delay)
	}
	return backoff.Sleep(ctx, delay)
}
