package kinesislease

import (
	"fmt"
	"math"

	"github.com/kinesislease/kinesislease/internal/plan"
)

// A Balance is how the instances of a fleet share the shards
// (WithBalance): ByThroughput, the default, or ByCount. Every instance
// computes the same plan from what the others publish in the lease table,
// with no leader; see docs/balance.md.
type Balance interface {
	plan() (plan.Balance, error)
}

// defaultBalance is the plan's without WithBalance: ByThroughput{}.
var defaultBalance = plan.Balance{ByLoad: true}

// DefaultTolerance is ByThroughput's default Tolerance: 0.2.
const DefaultTolerance = float64(plan.DefaultTolerance) / 100

// ByThroughput shares the shards by their throughput: each shard weighs
// the bytes per second its holder measures (a decayed average over about
// a minute), each instance takes a share of the fleet's total in
// proportion to its capacity (WithCapacity), and no instance holds more
// than its own cap (WithMaxLeases). The plan starts from ByCount's and
// moves a shard only off an instance whose load exceeds its share by more
// than Tolerance, the hottest shards spread first. A shard moved for load
// is handed over gracefully (drained, checkpointed, released) once the
// plan has said so for 30 s, never within 2 minutes of its take, at most 2
// a minute per instance; moves caused by instances joining or leaving are
// as fast as with ByCount. With no throughput at all (idle shards) it is
// ByCount's plan.
type ByThroughput struct {
	// Tolerance is how far above its fair share an instance's load may go
	// before shards move off it, as a fraction: 0.2 lets an instance carry
	// 20% more than its share. Zero means DefaultTolerance.
	Tolerance float64
}

func (b ByThroughput) plan() (plan.Balance, error) {
	if b.Tolerance < 0 || b.Tolerance > 10 || math.IsNaN(b.Tolerance) {
		return plan.Balance{}, fmt.Errorf("%w: WithBalance(ByThroughput{Tolerance: %v}): want 0 <= Tolerance <= 10", ErrInvalidOption, b.Tolerance)
	}
	pct := int(math.Round(b.Tolerance * 100))
	if b.Tolerance > 0 && pct == 0 {
		pct = 1
	}
	return plan.Balance{ByLoad: true, Tolerance: pct}, nil
}

// ByCount shares the shards by their number: each instance holds a number
// of shards in proportion to its capacity (WithCapacity), at most its own
// cap (WithMaxLeases), whatever their throughput.
type ByCount struct{}

func (ByCount) plan() (plan.Balance, error) { return plan.Balance{}, nil }

// WithBalance sets how the plan shares the shards: ByThroughput (the
// default, with DefaultTolerance) or ByCount. Give every instance sharing a
// lease table the same: each computes the plan with its own.
func WithBalance(b Balance) Option {
	return serviceOption(func(c *config) {
		if b == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithBalance(nil)", ErrInvalidOption))
			return
		}
		pb, err := b.plan()
		if err != nil {
			c.errs = append(c.errs, err)
		}
		c.balance = pb
	})
}

// WithCapacity sets this instance's weight in the plan, relative to the
// others' (default 1): an instance of capacity 2 is given twice the
// throughput (ByThroughput) or twice the shards (ByCount) of one of
// capacity 1. It is published in the instance's membership entry, so
// instances of different sizes may each set their own. Capacities are
// kept to thousandths; a weight must be between 0.001 and 1,000,000.
func WithCapacity(weight float64) Option {
	return serviceOption(func(c *config) {
		if !(weight >= 0.001 && weight <= 1e6) {
			c.errs = append(c.errs, fmt.Errorf("%w: WithCapacity(%v): want 0.001 <= weight <= 1e6", ErrInvalidOption, weight))
			return
		}
		c.capacity = int64(math.Round(weight * 1000))
	})
}
