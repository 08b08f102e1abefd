package shard

import (
	"github.com/kinesislease/kinesislease/kltype"
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
