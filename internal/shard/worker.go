// Package shard reads one held shard and hands its records over. A Worker
// runs the one consume loop in the subscription's shape (one record at a
// time, in batches, or per partition key on lanes), acknowledges records
// to its checkpointer in the shard's order as they resolve (the ack queue,
// deferred acknowledgements included), holds what it fetched within the
// instance's Budget, skips the user records of KPL aggregates that hash
// outside the shard, and when it stops drains, writes its final checkpoint
// and releases its lease (or applies an operator's rewind, keeping it).
//
// Records go to outcomes through internal/pipeline; the shard is read
// through internal/read; the lease is an internal/lease.Held. The engine's
// Group builds each worker whole (New), runs it, and stops it.
package shard

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/lease"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/kpl"
	"github.com/kinesislease/kinesislease/leases"
)

// Worker reads one held shard and hands its records to the handler. Its
// Run goes on one goroutine; its other methods may be called from any.
type Worker struct {
	cfg    *WorkerConfig
	log    *slog.Logger
	client kinesisx.Reader
	stream string
	shard  string
	start  kltype.StartPosition
	resume leases.Checkpoint // the checkpoint the worker started from
	lease  *lease.Held
	proc   *pipeline.Processor
	hooks  *Hooks

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
	// For Health: the oldest unresolved record and the records failing.
	unres unresolved

	// Set by Run, read after done.
	ended   bool  // the shard was read to its end and released with SHARD_END
	rewound bool  // the rewind was applied; the lease is still held
	err     error // a permanent error
}

// New returns the worker of cfg.Shard, built whole; it reads nothing
// before Run. Its reads and handlers run on a context of their own, made
// from parent without its cancellation: Kill and Cancel cancel it, Stop
// lets what is in flight finish.
func New(parent context.Context, cfg Config) *Worker {
	s, log, hooks := cfg.Settings, cfg.Log, cfg.Hooks
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if hooks == nil {
		hooks = &Hooks{}
	}
	w := &Worker{
		cfg: s, log: log.With("shard", cfg.Shard), client: cfg.Client, stream: cfg.Stream, shard: cfg.Shard,
		start: cfg.Start, resume: cfg.Lease.Current().Checkpoint, lease: cfg.Lease, hooks: hooks, hashRange: cfg.HashRange,
		graceful: make(chan struct{}), done: make(chan struct{}),
		trk: pipeline.NewTracker(),
	}
	w.proc = &pipeline.Processor{Handler: s.Handler, Policy: s.Policy, Sink: s.Sink, Log: w.log, Timeout: s.HandlerTimeout, MaxAge: s.MaxAge}
	if cfg.Hooks != nil {
		w.proc.OnDeadLetter = cfg.Hooks.deadLettered
	}
	w.proc.OnWait = func(r *kltype.Record, wt pipeline.Wait) { w.unres.waiting(r, wt, time.Now()) }
	w.lag.Store(-1)
	w.hardCtx, w.hardCancel = context.WithCancel(context.WithoutCancel(parent))
	return w
}

// Stop asks the worker to drain, checkpoint and release.
func (w *Worker) Stop() { w.gracefulOnce.Do(func() { close(w.graceful) }) }

// StopWithin asks the worker to drain, checkpoint and release, and cancels
// what is still in flight if the drain takes longer than d (a planned
// handoff must not wait on a hung handler): the release then checkpoints
// what was acknowledged.
func (w *Worker) StopWithin(d time.Duration) {
	w.Stop()
	time.AfterFunc(d, func() {
		select {
		case <-w.done:
		default:
			w.log.Warn("kinesislease: drain for a handoff took too long; cancelling the records in flight", "after", d)
			w.hardCancel()
		}
	})
}

// Rewind asks the worker to drain and apply the lease's pending rewind
// instead of releasing.
func (w *Worker) Rewind() { w.rewinding.Store(true); w.Stop() }

// Kill cancels the worker's handler and reads at once; it releases nothing.
func (w *Worker) Kill() { w.Stop(); w.hardCancel() }

// Cancel cancels what the worker has in flight (its handler and reads)
// without asking it to stop (Kill does both): its release then
// checkpoints what was acknowledged.
func (w *Worker) Cancel() { w.hardCancel() }

// Stopping reports whether the worker was asked to stop.
func (w *Worker) Stopping() bool {
	select {
	case <-w.graceful:
		return true
	default:
		return false
	}
}

// Finished returns a channel closed once Run has returned: Ended, Rewound
// and Err may be read then.
func (w *Worker) Finished() <-chan struct{} { return w.done }

// Ended reports whether the shard was read to its end and released with
// SHARD_END.
func (w *Worker) Ended() bool { return w.ended }

// Rewound reports whether the operator's rewind was applied: the lease is
// still held, for a worker to read on from the new checkpoint.
func (w *Worker) Rewound() bool { return w.rewound }

// Err returns the permanent error the worker stopped for, if any.
func (w *Worker) Err() error { return w.err }

// Lease returns the shard's lease.
func (w *Worker) Lease() *lease.Held { return w.lease }

// Log returns the worker's logger (the stream's, with its shard).
func (w *Worker) Log() *slog.Logger { return w.log }

// Stream returns the stream the shard belongs to, as subscribed.
func (w *Worker) Stream() string { return w.stream }

// Lag returns the MillisBehindLatest of the last batch with records, -1
// before one.
func (w *Worker) Lag() int64 { return w.lag.Load() }

// ReadErr returns the last read error retried, nil once a read succeeds.
func (w *Worker) ReadErr() error {
	if e := w.readErr.Load(); e != nil {
		return *e
	}
	return nil
}

// drainer is what letGo drains: the consume loop's shape (see consume).
type drainer interface {
	// settle takes up the resolutions handed back; false ends the consume
	// loop (the worker stops, or the lease is lost). draining: the loop
	// ended (letGo), and a failure cannot be delivered again; false then
	// means the lease was lost.
	settle(draining bool) bool
	// awaited counts records whose deferred acknowledgement has not come
	// back; held those deferred and not resolved.
	awaited() int
	held() int
}

// Hook calls. Each costs one length check when no hook listens.

// now reads the clock only for record hooks.
func (w *Worker) now() time.Time {
	if len(w.hooks.Record) == 0 {
		return time.Time{}
	}
	return time.Now()
}

func (w *Worker) handled(r *kltype.Record, o kltype.Outcome, start time.Time) {
	w.unres.settled(r)
	if len(w.hooks.Record) == 0 {
		return
	}
	info := kltype.RecordInfo{Stream: w.stream, ShardID: w.shard, SequenceNumber: r.SequenceNumber, SubSequence: r.SubSequence,
		Bytes: len(r.Data), Attempts: r.Attempt, Outcome: o, Duration: time.Since(start)}
	for _, x := range w.hooks.Record {
		x.OnRecordHandled(info)
	}
}

func (w *Worker) checkpointed(cp leases.Checkpoint, err error) {
	for _, x := range w.hooks.Checkpoint {
		x.OnCheckpointWritten(kltype.CheckpointInfo{Stream: w.stream, ShardID: w.shard, Checkpoint: cp, Err: err})
	}
}

func (w *Worker) throttled(err error, d time.Duration) {
	op := "GetRecords"
	switch msg := err.Error(); {
	case strings.Contains(msg, "GetShardIterator"):
		op = "GetShardIterator"
	case strings.Contains(msg, "SubscribeToShard"):
		op = "SubscribeToShard"
	}
	for _, x := range w.hooks.Throttled {
		x.OnThrottled(kltype.ThrottleInfo{Stream: w.stream, ShardID: w.shard, Op: op, Delay: d, Err: err})
	}
}

// measure counts a batch fetched in the shard's throughput (its lease's
// meter): a pass over its records, no allocation.
func (w *Worker) measure(b *read.Batch) {
	m := w.lease.Meter()
	if m == nil {
		return
	}
	n := 0
	for i := range b.Records {
		n += len(b.Records[i].Data)
	}
	m.Add(len(b.Records), n, time.Now())
}

func (w *Worker) batchFetched(b read.Batch) {
	info := kltype.BatchInfo{Stream: w.stream, ShardID: w.shard, Records: len(b.Records), MillisBehindLatest: b.MillisBehindLatest}
	for i := range b.Records {
		info.Bytes += len(b.Records[i].Data)
	}
	for _, x := range w.hooks.Batch {
		x.OnBatchFetched(info)
	}
}
