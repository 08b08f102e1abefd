package plan

// The hysteresis of the load plan on the side of the member that lets go:
// which held units to hand over now (Mover).

import (
	"cmp"
	"slices"
	"time"
)

// The defaults of a Mover.
const (
	// DefaultHoldTime is how long the load plan must give a held unit to
	// another member, without a break, before it is handed over. Loads are
	// decayed averages published with the heartbeats: 30 s is several
	// heartbeats and rounds, long enough that a burst, or views of the
	// members settling, moves nothing, and short enough that a hot spot is
	// spread within a minute or two of showing.
	DefaultHoldTime = 30 * time.Second
	// DefaultMinHold is how long after taking a unit a member keeps it
	// whatever the load plan says. Its new holder measures its load anew,
	// and a decayed average needs about that long to settle: a unit moved
	// again sooner would move on the old holder's figures, and could come
	// straight back.
	DefaultMinHold = 2 * time.Minute
	// DefaultMaxMovesPerMinute bounds the units one member hands over for
	// load in any minute. Every move drains, checkpoints and releases a
	// shard, and its records wait for the new holder: 2 a minute lets a
	// member shed its excess of the usual imbalances (a hot shard or two)
	// within a minute or two while a fleet of n members moves at most 2n
	// shards a minute however wrong the loads are.
	DefaultMaxMovesPerMinute = 2
)

// A Mover decides, for one member, which of the units it holds to hand
// over now, from the plan of each round: a unit the plan gives to nobody,
// or that the count plan gives to another member (members joined or left,
// capacities or caps changed, which every member sees), goes at once, as
// without a Mover, so that a join or a failover is as fast as ever; a unit
// moved for load only (the count plan gives it to this member, the load
// plan to another) goes once the plan has said so for HoldTime without a
// break, never within MinHold of its take, and at most MaxMovesPerMinute
// of them in any minute, those waiting longest first.
//
// It is pure but for its memory of the rounds: time is the caller's
// monotonic clock. The zero value is ready to use, with the defaults. A
// Mover is not safe for concurrent use: each member keeps one, used from
// the goroutine that plans.
type Mover struct {
	// HoldTime is how long a load move must stand before it is made: 0
	// means DefaultHoldTime, a negative value none.
	HoldTime time.Duration
	// MinHold is how long a unit is kept after its take before it moves
	// for load: 0 means DefaultMinHold, a negative value none.
	MinHold time.Duration
	// MaxMovesPerMinute bounds the load moves in any minute: 0 means
	// DefaultMaxMovesPerMinute, a negative value no bound.
	MaxMovesPerMinute int

	since map[Unit]time.Duration // held units planned elsewhere for load: since when
	given map[Unit]bool          // held units handed over for load already
	moves []time.Duration        // when they were, within the last minute
}

// Handoffs returns, sorted, the units of held (each with the time it was
// taken) that self should let go of now: those the plan gives to another
// member or to nobody, without delay where the count plan (the plan
// balanced by count the load plan started from, Planner.CountPlan; the
// plan itself in count mode) gives them to another member or to nobody
// too, and after the Mover's delays where it gives them to self. A unit
// returned for load is returned again in the next rounds while it is
// held, counted once.
func (mv *Mover) Handoffs(now time.Duration, self string, plan, count map[Unit]string, held map[Unit]time.Duration) []Unit {
	if mv.since == nil {
		mv.since, mv.given = map[Unit]time.Duration{}, map[Unit]bool{}
	}
	for u := range mv.since {
		if _, ok := held[u]; !ok {
			delete(mv.since, u)
		}
	}
	for u := range mv.given {
		if _, ok := held[u]; !ok {
			delete(mv.given, u)
		}
	}
	hold := or(mv.HoldTime, DefaultHoldTime)
	minHold := or(mv.MinHold, DefaultMinHold)
	var out, ready []Unit
	for u, taken := range held {
		owner, ok := plan[u]
		switch {
		case ok && owner == self:
			delete(mv.since, u)
		case !ok || count[u] != self:
			delete(mv.since, u)
			out = append(out, u)
		case mv.given[u]:
			out = append(out, u)
		default:
			s, seen := mv.since[u]
			if !seen {
				s = now
				mv.since[u] = now
			}
			if now-s >= hold && now-taken >= minHold {
				ready = append(ready, u)
			}
		}
	}
	mv.moves = slices.DeleteFunc(mv.moves, func(t time.Duration) bool { return now-t >= time.Minute })
	slices.SortFunc(ready, func(a, b Unit) int { return cmp.Or(cmp.Compare(mv.since[a], mv.since[b]), CompareUnits(a, b)) })
	if limit := mv.MaxMovesPerMinute; limit >= 0 {
		if limit == 0 {
			limit = DefaultMaxMovesPerMinute
		}
		ready = ready[:min(len(ready), max(limit-len(mv.moves), 0))]
	}
	for _, u := range ready {
		mv.given[u] = true
		delete(mv.since, u)
		mv.moves = append(mv.moves, now)
	}
	out = append(out, ready...)
	slices.SortFunc(out, CompareUnits)
	return out
}

// ForLoad reports whether u, held, is one the Mover handed over for load
// (returned by Handoffs after its delays, not at once).
func (mv *Mover) ForLoad(u Unit) bool { return mv.given[u] }

// or returns d, def for 0, and 0 for a negative d.
func or(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}
