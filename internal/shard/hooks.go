package shard

import (
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// Hooks are the instance's hooks a worker calls, by interface, sorted once
// (the engine sorts every registered hook), so that an event nobody
// listens to costs one length check. Each list holds the hooks that
// implement its interface, in the order they were registered.
type Hooks struct {
	Started      []kltype.HookShardStarted
	Batch        []kltype.HookBatchFetched
	Record       []kltype.HookRecordHandled
	Checkpoint   []kltype.HookCheckpointWritten
	Throttled    []kltype.HookThrottled
	DeadLettered []kltype.HookDeadLettered
	Filtered     []kltype.HookUserRecordsFiltered
}

// deadLettered tells the hooks of a dead letter a sink confirmed
// (pipeline.Processor.OnDeadLetter).
func (h *Hooks) deadLettered(dl *kltype.DeadLetterRecord) {
	for _, x := range h.DeadLettered {
		x.OnDeadLettered(dl)
	}
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

func (w *Worker) batchFetched(b read.Batch) {
	info := kltype.BatchInfo{Stream: w.stream, ShardID: w.shard, Records: len(b.Records), MillisBehindLatest: b.MillisBehindLatest}
	for i := range b.Records {
		info.Bytes += len(b.Records[i].Data)
	}
	for _, x := range w.hooks.Batch {
		x.OnBatchFetched(info)
	}
}
