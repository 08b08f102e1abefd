package engine

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/kinesiswire"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/lease"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/kpl"
	"github.com/kinesislease/kinesislease/leases"
)

// WorkerConfig configures the per-shard workers of a Group.
type WorkerConfig struct {
	Handler pipeline.Handler
	// Policy retries failing records (default DefaultRetryPolicy).
	Policy kltype.RetryPolicy
	// Sink receives dead letters; with none a failing record holds its shard.
	Sink pipeline.Sink
	// CheckpointEvery and CheckpointInterval: a checkpoint is written after
	// every CheckpointEvery acknowledged records or CheckpointInterval,
	// whichever comes first, and always on release. Defaults 10,000 and 5s.
	CheckpointEvery    int
	CheckpointInterval time.Duration
	// Reader settings (see read.ReaderConfig).
	Encoding     kinesiswire.Encoding // how GetRecords travels (see read.ReaderConfig)
	Limit        int32
	MinInterval  time.Duration
	IdleInterval time.Duration
	// HandlerTimeout, if positive, bounds each handler call (see
	// pipeline.Processor.Timeout).
	HandlerTimeout time.Duration
	// MaxAge, if positive, dead-letters records older than it at a
	// delivery (see pipeline.Processor.MaxAge).
	MaxAge time.Duration
	// Batch, if set, hands the records to a batch handler instead of
	// Handler (see BatchConfig).
	Batch *BatchConfig
	// KeyConcurrency, if above 1, handles records of different partition
	// keys concurrently, at most that many at a time per shard; records of
	// one key stay in order, one at a time (see byKey).
	KeyConcurrency int
	// Budget, if set, bounds what the instance holds fetched and not yet
	// handled; every worker of the instance shares it.
	Budget *Budget
	// FanOut, if set, reads with enhanced fan-out (SubscribeToShard)
	// instead of GetRecords; Limit, MinInterval and IdleInterval then do
	// not apply.
	FanOut *read.FanOutConfig
	// MaxDeferred bounds the shard's deferred acknowledgements not yet
	// resolved (Defer), in records: delivery waits at the bound (default
	// DefaultMaxDeferred).
	MaxDeferred int
	// DrainTimeout bounds how long a release waits for deferred
	// acknowledgements (the service's shutdown timeout; default 30s).
	DrainTimeout time.Duration
	// OnRelease, if set, is called on the worker's goroutine before the
	// shard is let go (see kltype.ReleaseInfo); ctx is cancelled when the
	// release stops waiting.
	OnRelease func(ctx context.Context, info kltype.ReleaseInfo)
}

func (c *WorkerConfig) defaults() {
	if c.CheckpointEvery <= 0 {
		c.CheckpointEvery = 10000
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = 5 * time.Second
	}
	if c.Policy == (kltype.RetryPolicy{}) {
		c.Policy = kltype.DefaultRetryPolicy
	}
	if c.MaxDeferred <= 0 {
		c.MaxDeferred = DefaultMaxDeferred
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
}

// worker reads one held shard and hands its records to the handler.
type worker struct {
	cfg    *WorkerConfig
	log    *slog.Logger
	client kinesisx.Reader
	stream string
	shard  string
	start  kltype.StartPosition
	resume leases.Checkpoint // the checkpoint the worker started from
	lease  *lease.Held
	proc   *pipeline.Processor
	h      *hooks

	// graceful asks for a drain, final checkpoint and release; hard (the
	// lease is lost, or the drain took too long) cancels the handler.
	graceful     chan struct{}
	gracefulOnce sync.Once
	hardCtx      context.Context
	hardCancel   context.CancelFunc
	done         chan struct{}

	rewinding atomic.Bool // stop to apply the lease's pending rewind, keeping the lease

	// hashRange is the shard's hash key range (from ListShards), against
	// which the user records of KPL aggregates are filtered (see expand);
	// nil when unknown or the whole key space: nothing is filtered.
	hashRange *kpl.HashRange

	// Deferred acknowledgements: trk receives their resolutions; acks is
	// what letGo drains (set by the consume loop).
	trk         *pipeline.Tracker
	acks        drainer
	toldRelease bool // the release callback was called (at the shard's end)

	// For Health: the lag of the last batch with records (-1 before one)
	// and the last read error retried (nil once a read succeeds).
	lag     atomic.Int64
	readErr atomic.Pointer[error]

	// Set by run, read after done.
	ended   bool  // the shard was read to its end and released with SHARD_END
	rewound bool  // the rewind was applied; the lease is still held
	err     error // a permanent error
}

func newWorker(parent context.Context, cfg *WorkerConfig, log *slog.Logger, client kinesisx.Reader, stream, shardID string, start kltype.StartPosition, h *lease.Held) *worker {
	w := &worker{
		cfg: cfg, log: log.With("shard", shardID), client: client, stream: stream, shard: shardID,
		start: start, resume: h.Current().Checkpoint, lease: h, graceful: make(chan struct{}), done: make(chan struct{}),
		trk: pipeline.NewTracker(),
	}
	w.proc = &pipeline.Processor{Handler: cfg.Handler, Policy: cfg.Policy, Sink: cfg.Sink, Log: w.log, Timeout: cfg.HandlerTimeout, MaxAge: cfg.MaxAge}
	w.h = &hooks{}
	w.lag.Store(-1)
	w.hardCtx, w.hardCancel = context.WithCancel(context.WithoutCancel(parent))
	return w
}

// stop asks the worker to drain, checkpoint and release.
func (w *worker) stop() { w.gracefulOnce.Do(func() { close(w.graceful) }) }

// stopWithin asks the worker to drain, checkpoint and release, and cancels
// what is still in flight if the drain takes longer than d (a planned
// handoff must not wait on a hung handler): the release then checkpoints
// what was acknowledged.
func (w *worker) stopWithin(d time.Duration) {
	w.stop()
	time.AfterFunc(d, func() {
		select {
		case <-w.done:
		default:
			w.log.Warn("kinesislease: drain for a handoff took too long; cancelling the records in flight", "after", d)
			w.hardCancel()
		}
	})
}

// rewind asks the worker to drain and apply the lease's pending rewind
// instead of releasing.
func (w *worker) rewind() { w.rewinding.Store(true); w.stop() }

// kill cancels the worker's handler and reads at once; it releases nothing.
func (w *worker) kill() { w.stop(); w.hardCancel() }

func (w *worker) stopping() bool {
	select {
	case <-w.graceful:
		return true
	default:
		return false
	}
}

// run reads the shard and hands its records to the handler until the worker
// stops, the shard ends or reading fails for good; then it releases the
// lease with the final checkpoint (or applies the pending rewind).
func (w *worker) run() {
	defer close(w.done)
	defer w.hardCancel()

	f := w.startReader()
	defer f.stop()
	cp := w.newCheckpointer()
	defer cp.stop()

	permanent := w.consume(f, cp)
	w.letGo()
	w.finish(cp.acked, permanent) // nothing, if the lease was lost
}

// feed is the goroutine reading the shard ahead of the worker.
type feed struct {
	batches chan read.Batch // unbuffered: the reader holds at most one batch ahead
	errs    chan error      // why the reader stopped, unless it reached the shard's end
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	share   *share // the budget's share of this shard; nil without a budget
}

// stop stops the reader and waits for its goroutine; what the shard held
// of the budget is returned.
func (f *feed) stop() {
	f.cancel()
	f.wg.Wait()
	if f.share != nil {
		f.share.leave()
	}
}

// done returns a handled batch's cost to the budget.
func (f *feed) done(b *read.Batch) {
	if f.share != nil {
		f.share.release(b.Cost, int64(len(b.Records)))
	}
}

// startReader reports the shard started to the hooks and starts reading it
// in a goroutine of its own.
func (w *worker) startReader() *feed {
	readCtx, cancel := context.WithCancel(w.hardCtx)
	f := &feed{batches: make(chan read.Batch), errs: make(chan error, 1), cancel: cancel}
	var reserve func(context.Context, int32) (int32, error)
	if w.cfg.Budget != nil {
		f.share = w.cfg.Budget.join()
		reserve = f.share.reserve
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
	for _, x := range w.h.started {
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
			}
			if f.share != nil {
				var n int64
				b.Cost, n = batchCost(&b)
				f.share.charge(b.Cost, n)
			}
			if len(w.h.batch) > 0 && len(b.Records) > 0 { // not the empty last batch of a closed shard
				w.batchFetched(b)
			}
			select {
			case f.batches <- b:
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

// checkpointer writes the newest acknowledged record as the lease's
// checkpoint after every CheckpointEvery records or CheckpointInterval,
// whichever comes first.
type checkpointer struct {
	w      *worker
	acked  leases.Checkpoint // newest acknowledged record
	since  int               // records acknowledged since the last checkpoint written
	ticker *time.Ticker
}

func (w *worker) newCheckpointer() *checkpointer {
	c := &checkpointer{w: w, ticker: time.NewTicker(w.cfg.CheckpointInterval)}
	c.acked = w.lease.Current().Checkpoint
	return c
}

func (c *checkpointer) stop() { c.ticker.Stop() }

// ack records cp as acknowledged, writing it if CheckpointEvery records
// were acknowledged since the last checkpoint. It returns false if the
// lease was lost.
func (c *checkpointer) ack(cp leases.Checkpoint) bool {
	c.acked = cp
	c.since++
	return c.since < c.w.cfg.CheckpointEvery || c.write()
}

// write writes the acknowledged checkpoint. It returns false if the lease
// was lost; a failed write is tried again on the next tick.
func (c *checkpointer) write() bool {
	w := c.w
	if c.acked.IsZero() {
		return true
	}
	err := w.lease.Checkpoint(w.hardCtx, c.acked)
	w.checkpointed(c.acked, err)
	if err != nil {
		if errors.Is(err, lease.ErrLost) {
			w.log.Warn("kinesislease: lease lost; stopping without checkpoint")
			return false
		}
		if w.hardCtx.Err() == nil {
			w.log.Warn("kinesislease: checkpoint failed", "err", err, "seq", c.acked.Sequence)
		}
		c.since = 1 // still unwritten: the next tick tries again
		return true
	}
	c.since = 0
	if l := w.lease.Current(); l.RewindTo.Sequence != "" && !w.stopping() {
		// The row's answer shows an operator's rewind pending: apply it
		// now, whatever the notice (its bump may be lost, or the re-read
		// it asks for skip this worker; seed 2102075 left a rewind pending
		// for 26 s after the faults while its holder checkpointed past it
		// thirty times).
		w.log.Info("kinesislease: rewinding", "from", l.Checkpoint.Sequence, "to", l.RewindTo.Sequence)
		w.rewind()
	}
	return true
}

// finish ends the worker's hold on the shard once reading stopped: nothing
// if the lease is lost, the pending rewind if one was asked for, else a
// release with the final checkpoint (acked, or SHARD_END). permanent is the
// reading error the worker stops for, if any.
func (w *worker) finish(acked leases.Checkpoint, permanent error) {
	if w.lease.IsLost() {
		return // another owner holds it: no checkpoint
	}
	if w.rewinding.Load() && !w.ended && permanent == nil {
		if w.applyRewind() {
			return
		}
		// The rewind may have landed with its answer lost: release without
		// a checkpoint, or the one acknowledged before the rewind would
		// undo it. If it did not land, the next holder applies it anyway.
		acked = leases.Checkpoint{}
	}
	w.release(acked, permanent)
}

// applyRewind moves the checkpoint where the operator asked, keeping the
// lease. It returns true if the worker is done: the rewind was applied
// (w.rewound) or the lease is lost; false means release the lease instead.
func (w *worker) applyRewind() bool {
	// The records in flight are done; the checkpoint moves where the
	// operator asked, and the Group starts reading from there.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(w.hardCtx), 10*time.Second)
	l, err := w.lease.ApplyRewind(rctx)
	cancel()
	if err == nil {
		w.log.Info("kinesislease: rewind applied", "seq", l.Checkpoint.Sequence)
		w.rewound = true
		return true
	}
	if errors.Is(err, lease.ErrLost) {
		return true
	}
	w.log.Warn("kinesislease: applying the rewind failed; releasing the lease for the next holder to apply it", "err", err)
	return false
}

// release releases the lease with the final checkpoint (acked, or
// SHARD_END if the shard was read to its end) and sets w.err to permanent.
func (w *worker) release(acked leases.Checkpoint, permanent error) {
	// The write uses a context of its own: a cancelled Run must still hand
	// the shard over.
	final := acked
	if w.ended {
		final = leases.Checkpoint{Sequence: leases.ShardEnd}
	}
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(w.hardCtx), 10*time.Second)
	defer cancel()
	err := w.lease.Release(relCtx, final)
	if !final.IsZero() { // nothing acknowledged, no checkpoint ever: the release writes none
		w.checkpointed(final, err)
	}
	if err != nil {
		if !errors.Is(err, lease.ErrLost) {
			w.log.Warn("kinesislease: release failed; the lease will expire", "err", err, "seq", final.Sequence)
		}
		w.ended = false
		w.err = permanent
		return
	}
	w.log.Info("kinesislease: lease released", "seq", final.Sequence)
	w.err = permanent
}

// expand turns one Kinesis record into what is delivered, in order: the
// record itself (in slot), or each user record of a KPL aggregate (skipping
// those the checkpoint we resumed from covers), each with the checkpoint
// that marks it done; corrupt is the error splitting a corrupt aggregate,
// delivered whole to be dead-lettered. fn returns false to stop; so does
// expand.
func (w *worker) expand(rec *types.Record, slot *recordContext, fn func(r *recordContext, corrupt error, done leases.Checkpoint) bool) bool {
	seq := aws.ToString(rec.SequenceNumber)
	slot.Init(w.hardCtx, w.trk)
	slot.Record = kltype.Record{
		Stream:         w.stream,
		ShardID:        w.shard,
		SequenceNumber: seq,
		PartitionKey:   aws.ToString(rec.PartitionKey),
		ArrivalTime:    aws.ToTime(rec.ApproximateArrivalTimestamp),
		Data:           rec.Data,
	}
	users, err := kpl.Split(rec.Data)
	if err != nil || users == nil { // a corrupt aggregate (dead-lettered whole), or a plain record
		return fn(slot, err, leases.Checkpoint{Sequence: seq})
	}
	skip := 0
	if w.resume.Sequence == seq {
		skip = int(w.resume.SubSequence)
	}
	out := w.outOfRange(seq, users, skip)
	last := len(users) - 1 // the last user record delivered
	for last >= skip && out != nil && out[last] {
		last--
	}
	subs := make([]recordContext, len(users))
	for i := skip; i <= last; i++ {
		if out != nil && out[i] {
			continue
		}
		sub := &subs[i]
		sub.Init(w.hardCtx, w.trk)
		sub.Record = slot.Record
		r := &sub.Record
		r.SubSequence = int64(i)
		r.PartitionKey = users[i].PartitionKey
		r.ExplicitHashKey = users[i].ExplicitHashKey
		r.Data = users[i].Data
		// SubSequence counts the user records done; 0 means all of them
		// (those after last are filtered out: done too).
		done := leases.Checkpoint{Sequence: seq, SubSequence: int64(i + 1)}
		if i == last {
			done.SubSequence = 0
		}
		if !fn(sub, nil, done) {
			return false
		}
	}
	return true
}

// Hook calls. Each costs one length check when no hook listens.

// now reads the clock only for record hooks.
func (w *worker) now() time.Time {
	if len(w.h.record) == 0 {
		return time.Time{}
	}
	return time.Now()
}

func (w *worker) handled(r *kltype.Record, o kltype.Outcome, start time.Time) {
	if len(w.h.record) == 0 {
		return
	}
	info := kltype.RecordInfo{Stream: w.stream, ShardID: w.shard, SequenceNumber: r.SequenceNumber, SubSequence: r.SubSequence,
		Bytes: len(r.Data), Attempts: r.Attempt, Outcome: o, Duration: time.Since(start)}
	for _, x := range w.h.record {
		x.OnRecordHandled(info)
	}
}

func (w *worker) checkpointed(cp leases.Checkpoint, err error) {
	for _, x := range w.h.checkpoint {
		x.OnCheckpointWritten(kltype.CheckpointInfo{Stream: w.stream, ShardID: w.shard, Checkpoint: cp, Err: err})
	}
}

func (w *worker) throttled(err error, d time.Duration) {
	op := "GetRecords"
	switch msg := err.Error(); {
	case strings.Contains(msg, "GetShardIterator"):
		op = "GetShardIterator"
	case strings.Contains(msg, "SubscribeToShard"):
		op = "SubscribeToShard"
	}
	for _, x := range w.h.throttled {
		x.OnThrottled(kltype.ThrottleInfo{Stream: w.stream, ShardID: w.shard, Op: op, Delay: d, Err: err})
	}
}

func (w *worker) batchFetched(b read.Batch) {
	info := kltype.BatchInfo{Stream: w.stream, ShardID: w.shard, Records: len(b.Records), MillisBehindLatest: b.MillisBehindLatest}
	for i := range b.Records {
		info.Bytes += len(b.Records[i].Data)
	}
	for _, x := range w.h.batch {
		x.OnBatchFetched(info)
	}
}

// Done implements pipeline.Gate.
func (w *worker) Done() <-chan struct{} { return w.graceful }

// touchRetry is how long Wait waits before it proves an idle row again
// after a touch failed (the store did not answer, or answered an error).
const touchRetry = 50 * time.Millisecond

// Wait implements pipeline.Gate: it blocks while the lease cannot be trusted (lost,
// its row missing, or the instance's fence passed: its last successful
// heartbeat is too old) and reports whether delivery may go on. It wakes
// when the fence moves or the Group recreates the row, never on a poll. An
// idle lease past its proof bound proves its row first (touch); a touch
// that fails is tried again after touchRetry.
func (w *worker) Wait() bool {
	for ok, _ := w.lease.Deliverable(); !ok; {
		// The channels first, then the check: a change made after the
		// check closes the channels taken before it.
		moved, back := w.lease.Moved()
		var proven bool
		if ok, proven = w.lease.Deliverable(); ok {
			break
		}
		var retry *time.Timer
		if !proven {
			// Idle past the proof bound: prove the row still exists and is
			// ours before delivering again (a row deleted meanwhile may have
			// been recreated by its next holder).
			tctx, cancel := context.WithTimeout(w.hardCtx, 5*time.Second)
			err := w.lease.Touch(tctx)
			cancel()
			if err == nil {
				continue
			}
			if errors.Is(err, lease.ErrLost) {
				return false
			}
			retry = time.NewTimer(touchRetry)
		}
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C
		}
		select {
		case <-w.graceful:
		case <-w.hardCtx.Done():
		case <-moved:
		case <-back:
		case <-retryC:
		}
		if retry != nil {
			retry.Stop()
		}
		if w.stopping() || w.hardCtx.Err() != nil {
			return false
		}
	}
	return !w.stopping() && w.hardCtx.Err() == nil
}
