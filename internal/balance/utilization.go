package balance

// A member's utilization: what it publishes of it (its decayed average,
// changed only past a step: PublishedUtilization), and the correction of
// the load plan it feeds (CostFactors).

import (
	"math"
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/internal/plan"
)

// Mode is how a member balances: the planner's Balance, and where its
// utilization comes from.
type Mode struct {
	plan.Balance
	// Utilization returns the instance's utilization of its capacity now
	// (kinesislease.WithUtilization): 1 when it is fully used; a negative
	// value, NaN or an infinity is no measure. nil: none is published.
	// Published only by load (Balance.ByLoad). It is called once a
	// heartbeat, on the heartbeat's goroutine.
	Utilization func() float64
}

// UtilizationStep is how far a member's measured utilization must move
// from what it publishes, relative to it, before it publishes it anew:
// hysteresis at the source, so that the plan, which a published
// utilization corrects, does not follow noise.
const UtilizationStep = 0.1

// UtilizationWindow is the time constant of the decayed average of a
// member's utilization samples: a quarter of a Meter's Window, because a
// shard's load moves with it at once (its new holder's meter starts from
// the row), while what its handler costs leaves the old holder's
// utilization only as the average follows. Long enough to smooth the
// samples of a heartbeat each (a process's CPU over 1.25 s is noisy).
const UtilizationWindow = 15 * time.Second

// MaxUtilization is the highest utilization a member publishes (a
// measure above counts as it), so that entries stay small.
const MaxUtilization = 100

// The bounds of a member's Cost (plan.Member.Cost, in thousandths), and
// its step: see CostFactors.
const (
	MinCost  = 1000
	MaxCost  = 3000
	CostStep = 50
)

// utilization is a Balancer's measure of its instance's utilization: the
// samples of its Mode.Utilization, a decayed average (UtilizationWindow),
// and the value it publishes. Publish keeps it on the heartbeat's
// goroutine.
type utilization struct {
	mu  sync.Mutex
	f   func() float64
	at  time.Time // of the last sample
	avg float64   // decayed average of the samples; valid once at is set
	pub int64     // published, in thousandths; 0: none yet
}

// publish samples the utilization at now and returns what to publish, in
// thousandths (0: none).
func (u *utilization) publish(now time.Time) int64 {
	if u == nil || u.f == nil {
		return 0
	}
	v := u.f()
	u.mu.Lock()
	defer u.mu.Unlock()
	if v >= 0 && !math.IsInf(v, 0) {
		v = min(v, MaxUtilization)
		switch {
		case u.at.IsZero():
			u.avg, u.at = v, now
		case now.After(u.at):
			w := 1 - math.Exp(-float64(now.Sub(u.at))/float64(UtilizationWindow))
			u.avg += (v - u.avg) * w
			u.at = now
		}
	}
	if u.at.IsZero() {
		return 0
	}
	u.pub = PublishedUtilization(u.pub, u.avg)
	return u.pub
}

// PublishedUtilization returns the utilization a member publishes, in
// thousandths, when it measures v (a fraction of its capacity, averaged)
// and published before (0: nothing yet): before while v is within
// UtilizationStep of it (or 0.01, for small values), else v to two
// significant digits (Quantize), at least 1 (0 is unpublished).
func PublishedUtilization(before int64, v float64) int64 {
	if !(v >= 0) {
		return before
	}
	m := int64(math.Round(min(v, MaxUtilization) * 1000))
	if before > 0 && math.Abs(float64(m-before)) <= max(float64(before)*UtilizationStep, 10) {
		return before
	}
	return max(Quantize(m), 1)
}

// Usage is what a member publishes that its Cost is computed from: its
// capacity (thousandths; 0 counts as 1000), total load (bytes per second)
// and utilization (thousandths; 0: unpublished).
type Usage struct {
	Capacity, Load, Utilization int64
}

// CostFactors returns the Cost of each member of us in the load plan
// (plan.Member.Cost, thousandths): its cost per byte over the fleet's,
// where a member's cost per byte is the work it publishes (utilization ×
// capacity) over its load, and the fleet's the sum of the works over the
// sum of the loads, both over the members that publish a utilization and
// a load. A member whose shards cost more per byte than the fleet's gets a
// smaller share of the load, and sheds load first. Clamped to
// [MinCost, MaxCost] and rounded to CostStep: a member at or below the
// fleet's cost, or that publishes no utilization or no load, counts as
// 1000 (it is not given more than its share: a member that received a
// costly shard would otherwise have its share shrink back, and the shard
// go round the fleet); one that costs three times the fleet's or more,
// 3000 (its fair share of the load a third), so that a utilization that
// misleads (work that is not the stream's) costs at most that. Deterministic: integer sums, and
// floating-point operations each rounded (no fused multiply-add), so every
// member computes the same Costs from the same entries.
func CostFactors(us []Usage) []int64 {
	out := make([]int64, len(us))
	var work, load int64
	for i, u := range us {
		out[i] = MinCost
		if w, l, ok := usage(u); ok {
			work += w
			load += l
		}
	}
	if work <= 0 || load <= 0 {
		return out
	}
	fleet := float64(float64(work) / float64(load))
	for i, u := range us {
		w, l, ok := usage(u)
		if !ok {
			continue
		}
		f := float64(float64(float64(w)/float64(l)) / fleet)
		c := int64(math.Round(float64(f*1000/CostStep))) * CostStep
		out[i] = min(max(c, MinCost), MaxCost)
	}
	return out
}

// usage returns a member's work (utilization × capacity, in thousandths
// of a weight-1 member fully used) and load, bounded so that the sums over
// a million members fit 64 bits; ok: it publishes both.
func usage(u Usage) (work, load int64, ok bool) {
	if u.Utilization <= 0 || u.Load <= 0 {
		return 0, 0, false
	}
	c := u.Capacity
	if c <= 0 {
		c = 1000
	}
	c = min(c, 1_000_000_000)                       // WithCapacity's largest
	util := min(u.Utilization, MaxUtilization*1000) // ≤ 10^5
	return util * c / 1000, min(u.Load, plan.MaxLoad), true
}
