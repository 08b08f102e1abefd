package lease_test

import (
	"context"
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

// TestPendingRewindOutlivesAnotherRead: a checkpoint's answer shows an
// operator's rewind pending; before this holder applies it, its write meets
// the row as another member left it (taken and rewound there, RewindTo
// cleared). The lease's orphan (its ResumeAt) starts at the rewind's
// position, not at the checkpoint this holder attempted before the rewind:
// records the operator asked to replay are never skipped by a recreation
// (seed 95880482: 1 of 60 replays recreated the row after the table was
// dropped at the holder's checkpoint from before the rewind). Once this
// lease applies the rewind itself, it no longer holds it back.
func TestPendingRewindOutlivesAnotherRead(t *testing.T) {
	ctx := context.Background()
	var f fence.Fence
	f.Store(fence.Mono() + int64(time.Minute))
	key := leases.Key{Stream: "s", Shard: "shardId-000000000000"}
	store := memory.New()
	created, err := store.Create(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := store.TakeAs(ctx, created, "a", "0.A")
	if err != nil {
		t.Fatal(err)
	}
	h := lease.New(lease.Config{Store: store, Lease: l, Fence: &f, Sent: fence.Mono(), Proof: time.Minute})
	if err := h.Checkpoint(ctx, leases.Checkpoint{Sequence: "179"}); err != nil {
		t.Fatal(err)
	}
	to := leases.Checkpoint{Sequence: leases.RewindTrimHorizon}
	answer := h.Current()
	answer.RewindTo = to
	h.Adopt(answer) // a checkpoint's answer: the rewind pending
	other := leases.Lease{Key: key, Owner: "b", Incarnation: "0.B", Counter: answer.Counter + 3, Checkpoint: leases.Checkpoint{Sequence: "41"}}
	h.Adopt(other) // the row as another left it: taken, rewound there and read on
	if got := h.AsOrphan().Checkpoint; got != to {
		t.Fatalf("orphan after the pending rewind was seen: %v, want the rewind's position %v", got, to)
	}
	fresh := lease.New(lease.Config{Store: store, Lease: answer, Fence: &f, Sent: fence.Mono(), Proof: time.Minute})
	if got := fresh.ResumeAt(); got != to {
		t.Errorf("a lease taken with the rewind pending resumes at %v, want %v", got, to)
	}
}
