package shard

import (
	"context"
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/internal/budget"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
)

// feed is the goroutine reading the shard ahead of the worker.
type feed struct {
	answers chan read.Batch // what the reader read, in order; unbuffered: it holds at most one ahead
	errs    chan error      // why the reader stopped, unless it reached the shard's end
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	share   *budget.Share // the budget's share of this shard; nil without a budget
}

// stop stops the reader and waits for its goroutine; what the shard held
// of the budget is returned.
func (f *feed) stop() {
	f.cancel()
	f.wg.Wait()
	if f.share != nil {
		f.share.Leave()
	}
}

// done returns a handled batch's cost to the budget.
func (f *feed) done(b *read.Batch) {
	if f.share != nil {
		f.share.Release(b.Cost, int64(len(b.Records)))
	}
}

// startReader reports the shard started to the hooks and starts reading it
// in a goroutine of its own.
func (w *Worker) startReader() *feed {
	readCtx, cancel := context.WithCancel(w.hardCtx)
	f := &feed{answers: make(chan read.Batch), errs: make(chan error, 1), cancel: cancel}
	var reserve func(context.Context, int32) (int32, error)
	if w.cfg.Budget != nil {
		f.share = w.cfg.Budget.Join()
		reserve = f.share.Reserve
	}
	onRetry := func(err error, d time.Duration) {
		w.readErr.Store(&err)
		switch {
		case kinesisx.IsThrottled(err):
			w.log.Debug("kinesislease: throttled; backing off", "err", err, "delay", d)
			w.throttled(err, d)
		case kinesisx.IsResourceInUse(err):
			// SubscribeToShard within 5 seconds of the shard's previous
			// subscription (a handoff, a failover, a rewind).
			w.log.Info("kinesislease: shard's previous subscription is less than 5 seconds old; subscribing again", "err", err, "delay", d)
		default:
			w.log.Warn("kinesislease: reading shard failed; retrying", "err", err, "delay", d)
		}
	}
	var reader read.Source
	if fo := w.cfg.FanOut; fo != nil {
		reader = read.NewSubscriber(read.SubscriberConfig{
			FanOut: fo, Stream: w.stream, ShardID: w.shard, Start: w.start,
			ValidFor: w.lease.ValidFor, Reserve: reserve, OnRetry: onRetry,
			OnEvent:  func(ms int64) { w.lag.Store(ms) },
			Encoding: w.cfg.Encoding,
		})
	} else {
		reader = read.NewReader(read.ReaderConfig{
			Reserve: reserve,
			Client:  w.client, Stream: w.stream, ShardID: w.shard, Start: w.start,
			Limit: w.cfg.Limit, MinInterval: w.cfg.MinInterval, IdleInterval: w.cfg.IdleInterval,
			OnRetry: onRetry, Encoding: w.cfg.Encoding,
			OnFallback: func(endpoint string, err error) {
				w.log.Info("kinesislease: the Kinesis endpoint does not answer GetRecords in CBOR; reading it in JSON", "endpoint", endpoint, "err", err)
			},
		})
	}
	for _, x := range w.hooks.Started {
		x.OnShardStarted(kltype.ShardInfo{Stream: w.stream, ShardID: w.shard, Start: w.start})
	}
	f.wg.Go(func() {
		defer reader.Close()
		for {
			b, err := reader.Next(readCtx)
			if err != nil {
				f.errs <- err
				return
			}
			w.readErr.Store(nil)
			if len(b.Records) > 0 {
				w.lag.Store(b.MillisBehindLatest)
				w.measure(&b)
			}
			if f.share != nil {
				var n int64
				b.Cost, n = budget.BatchCost(&b)
				f.share.Charge(b.Cost, n)
			}
			if len(w.hooks.Batch) > 0 && len(b.Records) > 0 { // not the empty last batch of a closed shard
				w.batchFetched(b)
			}
			select {
			case f.answers <- b:
			case <-readCtx.Done():
				f.errs <- readCtx.Err()
				return
			}
			if b.End {
				return
			}
		}
	})
	return f
}
