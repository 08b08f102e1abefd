package shard

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/kpl"
	"github.com/kinesislease/kinesislease/leases"
)

// respHold is a GetRecords answer whose records are not all resolved yet:
// it goes back to the budget once they are.
type respHold struct {
	b    read.Batch
	left int  // its records taken up and not resolved yet
	open bool // the worker may still take up records of it
}

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

// expand turns one Kinesis record into what is delivered, in order: the
// record itself (in slot), or each user record of a KPL aggregate (skipping
// those the checkpoint we resumed from covers), each with the checkpoint
// that marks it done; corrupt is the error splitting a corrupt aggregate,
// delivered whole to be dead-lettered. fn returns false to stop; so does
// expand.
func (w *Worker) expand(rec *types.Record, slot *recordContext, fn func(r *recordContext, corrupt error, done leases.Checkpoint) bool) bool {
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
