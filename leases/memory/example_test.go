package memory_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// Two owners race for one shard: the second write, made with the counter
// both saw, conflicts and changes nothing.
func Example() {
	ctx := context.Background()
	s := memory.New()
	k := leases.Key{Stream: "orders", Shard: "shardId-000000000000"}
	row, _ := s.Create(ctx, k)

	a, err := s.Take(ctx, row, "instance-a", 10*time.Second)
	fmt.Println("a takes:", err, "owner", a.Owner, "counter", a.Counter)

	_, err = s.Take(ctx, row, "instance-b", 10*time.Second)
	fmt.Println("b takes with a stale counter:", errors.Is(err, leases.ErrConflict))

	a, _ = s.Checkpoint(ctx, a, leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588898"})
	a, _ = s.Release(ctx, a, leases.Checkpoint{})
	fmt.Println("released: owner", a.Owner == "", "checkpoint kept", a.Checkpoint.Sequence != "", "counter", a.Counter)
	// Output:
	// a takes: <nil> owner instance-a counter 2
	// b takes with a stale counter: true
	// released: owner true checkpoint kept true counter 4
}
