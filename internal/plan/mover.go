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
	// whatever the load plan says, but for a unit it took for load that
	// the plan moves on to a third member (see Mover). Its new holder
	// measures its load anew, and a decayed average needs about that long
	// to settle: a unit moved again sooner would move on the old holder's
	// figures, and could come straight back.
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
// over now, from the plan of each round. A unit the plan gives to nobody,
// or whose count-plan owner changed since the last round the plan gave it
// to this member (or since its take: members joined or left, capacities
// or caps changed, which every member sees), goes at once, as without a
// Mover, so that a join or a failover is as fast as ever; so does a unit
// taken for load (the count plan gives it to another member) from a free
// row that no member was seen holding (members starting: there is no
// holder to go back to, and no figures). Any other unit the plan gives
// away is a move for load, made once the plan has said so for HoldTime
// without a break, at most MaxMovesPerMinute of them in any minute, those
// waiting longest first, and never within MinHold of the unit's take
// where it goes back: a unit of the count plan (the count plan gives it
// to this member), or one this member took for load from another member
// that goes to its count-plan owner or to the member it was taken from.
// So when the plan changes its mind after a take for load (the new
// holder's published load now counts the unit), the unit does not go
// straight back. A unit taken for load that the plan gives to a third
// member (as the costs of the members that took units change) moves on
// after the hold time.
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
	// back for load: 0 means DefaultMinHold, a negative value none.
	MinHold time.Duration
	// MaxMovesPerMinute bounds the load moves in any minute: 0 means
	// DefaultMaxMovesPerMinute, a negative value no bound.
	MaxMovesPerMinute int

	since  map[Unit]time.Duration // held units planned elsewhere for load: since when
	given  map[Unit]bool          // held units handed over for load already
	anchor map[Unit]origin        // held units: whose they were (origin)
	taking map[Unit]origin        // units the plan gave here, not held (takes): whose they are
	moves  []time.Duration        // when they were, within the last minute
}

// origin is whose a unit is, for a Mover: its count-plan owner when the
// plan last gave it to this member ("": never; the round before its take
// until then), and the member it was taken from, as its row last showed
// it held before the take ("": unknown).
type origin struct{ count, from string }

// Handoffs returns, sorted, the units of held (each with the time it was
// taken) that self should let go of now: those the plan gives to another
// member or to nobody, without delay where the plan gives them to nobody,
// the count plan (the plan balanced by count the load plan started from,
// Planner.CountPlan; the plan itself in count mode) changed their owner
// since the plan last gave them to self (or since their take, the round
// before they were first held), or they were taken for load from a row no
// member was seen holding, and after the Mover's delays otherwise (see
// Mover). holder returns the owner of a unit that the plan gives to
// self and self does not hold, as its row was last read ("": free or
// unknown); nil knows none. A unit returned for load is returned again in
// the next rounds while it is held, counted once (ForLoad).
func (mv *Mover) Handoffs(now time.Duration, self string, plan, count map[Unit]string, held map[Unit]time.Duration, holder func(Unit) string) []Unit {
	if mv.since == nil {
		mv.since, mv.given = map[Unit]time.Duration{}, map[Unit]bool{}
		mv.anchor, mv.taking = map[Unit]origin{}, map[Unit]origin{}
	}
	forget(mv.since, held)
	forget(mv.given, held)
	forget(mv.anchor, held)
	hold := or(mv.HoldTime, DefaultHoldTime)
	minHold := or(mv.MinHold, DefaultMinHold)
	var out, ready []Unit
	for u, taken := range held {
		owner, ok := plan[u]
		a, seen := mv.anchor[u]
		if !seen {
			a = mv.taking[u] // zero: not planned here the round before (not a take of the plan)
		}
		if ok && owner == self {
			a.count = count[u]
		}
		mv.anchor[u] = a
		switch {
		case ok && owner == self:
			delete(mv.since, u)
		case !ok || count[u] != self && (count[u] != a.count || a.from == ""):
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
			back := count[u] == self || owner == a.count || owner == a.from
			if now-s >= hold && (!back || now-taken >= minHold) {
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
	mv.note(self, plan, count, held, holder)
	return out
}

// note keeps, of the units the plan gives to self that self does not hold
// (its takes), their count-plan owner and their holder as last seen.
func (mv *Mover) note(self string, plan, count map[Unit]string, held map[Unit]time.Duration, holder func(Unit) string) {
	for u := range mv.taking {
		if _, h := held[u]; h || plan[u] != self {
			delete(mv.taking, u)
		}
	}
	for u, o := range plan {
		if _, h := held[u]; o != self || h {
			continue
		}
		t := mv.taking[u]
		t.count = count[u]
		if holder != nil {
			if h := holder(u); h != "" && h != self {
				t.from = h
			}
		}
		mv.taking[u] = t
	}
}

// ForLoad reports whether u, held, is one the Mover handed over for load
// (returned by Handoffs after its delays, not at once).
func (mv *Mover) ForLoad(u Unit) bool { return mv.given[u] }

// forget deletes from m the units not in held.
func forget[V any](m map[Unit]V, held map[Unit]time.Duration) {
	for u := range m {
		if _, ok := held[u]; !ok {
			delete(m, u)
		}
	}
}

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
