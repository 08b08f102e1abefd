package balance

// What a member does of its plan this round (Hold): the load-driven
// handoffs the Mover holds back, and the takes it leaves until their
// holder lets go.

import (
	"maps"
	"time"

	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/leases"
)

// Recheck is how often a member reads the row of a shard the load plan
// gives it while its live holder keeps it (its Mover holds the handoff
// back), when nothing in the holder's entry changed: a holder that lets go
// of a shard publishes one lease fewer at its next heartbeat, and the row
// is read then; Recheck bounds the wait where a take of the holder hid the
// release from that count. It is also how long after the count plan
// changed, or the plan gave it a unit, a member reads every round the row
// of a unit the count plan gives it from another holder (Hold).
const Recheck = 10 * time.Second

// waiting is the row of a unit planned here, held by a live member, as
// last read (Hold).
type waiting struct {
	owner, inc string
	held       int64         // its holder's published lease count then
	at         time.Duration // when it was read
}

// Hold returns the plan a (of the last Plan) to act on this round, at now
// (the caller's monotonic clock, in nanoseconds): a itself, or a copy in
// which
//
//   - the held units that a gives to another member for load and that the
//     Mover does not hand over yet stay this member's (held: the units it
//     holds; the Mover counts their minimum hold from the round first seen
//     here, and knows the member a unit was taken from by the holder its
//     row showed, as last read, before the take: plan.Mover). Those it
//     hands over for load are lent: their load stays in what this member
//     publishes until their new holder publishes its take (Handover);
//   - the units a gives to this member, whose row (row: as last read)
//     shows a live member holding them, are that member's until it lets
//     go of them: their holder's Mover holds them back, and reading the
//     row every round would only find it held. The row is read again when
//     the holder's published lease count changes, or Recheck after the
//     last read; every round, though, for Recheck after a gave the unit
//     here or the count plan changed, where the count plan gives it to
//     this member and the holder is not one this member handed it over to
//     for load (a join, a departure, a unit the holder took from a free
//     row: it may let go at once). A free row planned here is taken.
//
// A unit a gives to nobody, or whose count-plan owner changed since the
// plan last gave it to its holder (members joined or left, capacities or
// caps changed), is not held back.
func (b *Balancer) Hold(now int64, a map[plan.Unit]string, held map[plan.Unit]plan.Held, row func(plan.Unit) leases.Lease) map[plan.Unit]string {
	t := time.Duration(now)
	if b.taken == nil {
		b.taken, b.waits = map[plan.Unit]time.Duration{}, map[plan.Unit]waiting{}
	}
	taken := make(map[plan.Unit]time.Duration, len(held))
	for u := range held {
		at, ok := b.taken[u]
		if !ok {
			at = t
		}
		taken[u] = at
	}
	b.taken = taken
	if b.recount {
		b.countAt, b.recount = t, false
	}
	if !b.mode.ByLoad || b.legacy || b.count == nil {
		return a
	}
	handed := map[plan.Unit]bool{}
	holder := func(u plan.Unit) string {
		if l := row(u); l.Held() {
			return l.Owner
		}
		return ""
	}
	for _, u := range b.mover.Handoffs(t, b.self, a, b.count, taken, holder) {
		handed[u] = true
	}
	var c map[plan.Unit]string
	set := func(u plan.Unit, o string) {
		if c == nil {
			c = maps.Clone(a)
		}
		c[u] = o
	}
	for u := range held {
		if o, ok := a[u]; ok && o != b.self && !handed[u] {
			set(u, b.self)
		}
		if o, ok := a[u]; ok && o != b.self && handed[u] && b.mover.ForLoad(u) {
			b.lend(u, o)
		}
	}
	planned := make(map[plan.Unit]time.Duration, len(b.planned))
	for u, o := range a {
		if _, h := held[u]; o == b.self && !h {
			since, ok := b.planned[u]
			if !ok {
				since = t
			}
			planned[u] = since
			if l := row(u); b.wait(t, u, l, since) {
				set(u, l.Owner)
			}
		}
	}
	b.planned = planned
	for u := range b.waits {
		if a[u] != b.self {
			delete(b.waits, u)
		}
	}
	for u := range b.lent {
		if _, h := held[u]; h && !handed[u] || a[u] == "" {
			delete(b.lent, u) // taken back, or gone from the plan
		}
	}
	if c == nil {
		return a
	}
	return c
}

// lend notes u, held, handed over for load to the member to: its load
// stays in what this member publishes until to publishes its take
// (Handover), and a take of it planned here waits while to holds it
// (wait).
func (b *Balancer) lend(u plan.Unit, to string) {
	if b.lent == nil {
		b.lent = map[plan.Unit]string{}
	}
	b.lent[u] = to
	b.hand.lend(u, to)
}

// wait reports whether the take of u, planned here since since, is left
// this round: its row as last read (l) shows a live member holding it,
// read since that member's lease count last changed and less than Recheck
// ago; but for Recheck after the plan gave u here, or after the count plan
// changed, where the count plan gives u to this member and the holder is
// not one this member handed u over to for load: that holder may let go
// at once (a join, a departure; a unit it took from a free row), and the
// row is read every round, as by count. Past that, such a holder keeps u,
// taken for load from another member, for its minimum hold. Otherwise the
// row is read this round, and noted.
func (b *Balancer) wait(now time.Duration, u plan.Unit, l leases.Lease, since time.Duration) bool {
	if to, ok := b.lent[u]; ok && (l.Owner == b.self || l.Held() && l.Owner != to) {
		delete(b.lent, u) // taken back, or by another
	}
	e, live := b.live[l.Owner]
	fresh := b.count[u] == b.self && b.lent[u] != l.Owner && (now-since < Recheck || now-b.countAt < Recheck)
	if !l.Held() || l.Owner == b.self || !live || e.Incarnation != l.Incarnation || fresh {
		delete(b.waits, u)
		return false
	}
	if w, ok := b.waits[u]; ok && w.owner == l.Owner && w.inc == l.Incarnation && w.held == e.Held && now-w.at < Recheck {
		return true
	}
	b.waits[u] = waiting{owner: l.Owner, inc: l.Incarnation, held: e.Held, at: now}
	return false
}
