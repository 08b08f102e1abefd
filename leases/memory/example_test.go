package memory_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// Two instances race for one shard: the second take, made with the counter
// both saw, conflicts and changes nothing. The holder's writes name its
// incarnation: an earlier process of the same owner id cannot write the row.
func Example() {
	ctx := context.Background()
	s := memory.New()
	k := leases.Key{Stream: "orders", Shard: "shardId-000000000000"}
	row, _ := s.Create(ctx, k)

	a, err := s.TakeAs(ctx, row, "instance-a", "inc-1")
	fmt.Println("a takes:", err, "owner", a.Owner, "counter", a.Counter)

	_, err = s.TakeAs(ctx, row, "instance-b", "inc-7")
	fmt.Println("b takes with a stale counter:", errors.Is(err, leases.ErrConflict))

	old := a
	old.Incarnation = "inc-0" // an earlier process of instance-a
	_, err = s.Checkpoint(ctx, old, leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588898"})
	fmt.Println("another incarnation checkpoints:", errors.Is(err, leases.ErrConflict))

	a, _ = s.Checkpoint(ctx, a, leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588898"})
	a, _ = s.Release(ctx, a, leases.Checkpoint{})
	fmt.Println("released: owner", a.Owner == "", "checkpoint kept", a.Checkpoint.Sequence != "", "counter", a.Counter)
	// Output:
	// a takes: <nil> owner instance-a counter 2
	// b takes with a stale counter: true
	// another incarnation checkpoints: true
	// released: owner true checkpoint kept true counter 4
}
