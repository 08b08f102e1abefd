package engine

import (
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/leases"
)

// recordContext is one record and the handler context that carries it
// (pipeline.RecordContext), with the worker's bookkeeping while the record
// waits to be acknowledged to the checkpointer (ackQueue). The worker
// allocates them with the batch, one per record, so that handing a record
// to the handler allocates nothing.
type recordContext struct {
	pipeline.RecordContext

	order    int64             // its place in the shard (counted by the worker)
	done     leases.Checkpoint // the checkpoint that marks it done
	resp     *respHold         // the GetRecords answer it came in, for the budget
	resolved bool              // it reached an outcome
	deferred bool              // its acknowledgement is deferred and not resolved yet
}
