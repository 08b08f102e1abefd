package lease_test

import (
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/internal/lease"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestRecreatedAtRewindOrphanKnowsTheRewind: a holder recreates its
// vanished row at an operator's rewind and the take's answer is lost; the
// lease still holds the version before, at its own checkpoint. An orphan
// made of it (a hand-over whose release found the row missing) knows the
// rewind's position, never the checkpoint from before it (seed 99110336).
func TestRecreatedAtRewindOrphanKnowsTheRewind(t *testing.T) {
	var f fence.Fence
	f.Store(fence.Mono() + int64(time.Minute))
	l := leases.Lease{Key: leases.Key{Stream: "s", Shard: "shardId-000000000000"}, Owner: "a", Incarnation: "0.A", Counter: 17, Checkpoint: leases.Checkpoint{Sequence: "265"}}
	h := lease.New(lease.Config{Store: memory.New(), Lease: l, Fence: &f, Sent: fence.Mono(), Proof: time.Minute})
	to := leases.Checkpoint{Sequence: leases.AtSequencePrefix + "228"}
	h.RewoundAt(to)
	if got := h.AsOrphan().Checkpoint; got != to {
		t.Fatalf("orphan of a lease recreated at a rewind, take unanswered: %v, want the rewind's position %v", got, to)
	}
}
