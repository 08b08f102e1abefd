package balance

// What a member goes on publishing of the units it let go of (Handover):
// the hot ones, and those it handed over for load.

import (
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/leases"
)

// Handover is how long a member goes on naming, in its entry, a hot unit
// it let go of (handed over, released, lost), with its load counted in its
// total, unless another member names it sooner. From the release of a hot
// shard until its new holder publishes it (a round and a heartbeat or
// two), nobody would name it otherwise: every member would plan it as a
// cold shard for those seconds, and its count-plan owner, often the member
// that just let it go, would take it straight back (and keep it for its
// minimum hold). A unit named by two members counts once (Inputs), so
// naming it a little too long changes nothing. Longer than any handoff
// takes; short enough that a shard that nobody takes (its new holder
// failed) is soon planned on the loads that are published of it.
//
// A unit handed over for load, hot or cold, is counted in the total of
// the member that let go of it likewise (not named, unless hot), until
// its new holder's entry shows another lease count or incarnation than
// when it was let go of (it published its take), or for Handover: a cold
// unit's load is in nobody's entry otherwise for those seconds, the
// fleet's total and fair shares dip, and the plan can give the unit
// straight back (seed 93600757 of the random simulation handed two cold
// shards over and took them back 2 s later, every minimum hold).
const Handover = 30 * time.Second

// handover is a Balancer's memory of the hot units it named (Publish):
// those it names, and those it let go of since, with when. Publish keeps
// it on the heartbeat's goroutine; others, the hot units the other
// members name, is set by Inputs on the round's.
type handover struct {
	mu     sync.Mutex
	named  map[plan.Unit]int64 // named at the last Publish, with their loads
	gone   map[plan.Unit]gone  // let go of since they were named
	others map[string]bool     // UnitIDs named by the other members
	lent   map[plan.Unit]lent  // handed over for load (Hold), held still or let go of since
	loads  map[plan.Unit]int64 // the loads of the units held at the last Publish
	// fleet is the entries of the last Plan by owner, while units lent
	// are watched (Plan, on the round's goroutine).
	fleet map[string]leases.Member
}

// lent is a unit handed over for load: to whom, its load when last held,
// and once let go of, when, with its new holder's entry then.
type lent struct {
	to   string
	load int64
	at   time.Time // zero while held
	inc  string    // the new holder's incarnation, at
	held int64     // and its lease count
}

type gone struct {
	load int64
	at   time.Time
}

// goneAt returns the hot units let go of to name with the units held now
// (loads), as of now: those named before and not held any more, until
// Handover after they were let go of, or another member names them; and
// the load of the other units handed over for load to count in the total
// (lentAt).
func (h *handover) goneAt(now time.Time, loads map[plan.Unit]int64) (map[plan.Unit]int64, int64) {
	for u, l := range h.named {
		if _, held := loads[u]; !held {
			if _, ok := h.gone[u]; !ok {
				if h.gone == nil {
					h.gone = map[plan.Unit]gone{}
				}
				h.gone[u] = gone{l, now}
			}
		}
	}
	var out map[plan.Unit]int64
	for u, g := range h.gone {
		if _, held := loads[u]; held || now.Sub(g.at) >= Handover || h.others[UnitID(u)] {
			delete(h.gone, u)
			continue
		}
		if out == nil {
			out = map[plan.Unit]int64{}
		}
		out[u] = g.load
	}
	lent := h.lentAt(now, loads)
	h.loads = loads
	return out, lent
}

// lentAt returns the load of the units handed over for load and let go
// of, not named (gone), whose new holder's entry has not changed its
// lease count or incarnation since they were let go of, for Handover at
// most; it forgets the others, and those held again.
func (h *handover) lentAt(now time.Time, loads map[plan.Unit]int64) int64 {
	var sum int64
	for u, l := range h.lent {
		if load, held := loads[u]; held {
			if !l.at.IsZero() {
				delete(h.lent, u) // taken back
				continue
			}
			l.load = load
			h.lent[u] = l
			continue
		}
		if _, g := h.gone[u]; g || h.named[u] > 0 {
			delete(h.lent, u) // named: counted as such until its new holder names it
			continue
		}
		if l.at.IsZero() {
			e := h.fleet[l.to]
			l.at, l.inc, l.held = now, e.Incarnation, e.Held
			if load, ok := h.loads[u]; ok {
				l.load = load // let go of since the last Publish
			}
			h.lent[u] = l
		}
		e, live := h.fleet[l.to]
		if now.Sub(l.at) >= Handover || !live || e.Incarnation != l.inc || e.Held != l.held {
			delete(h.lent, u)
			continue
		}
		sum += max(l.load, 0)
	}
	return sum
}

// lend notes u handed over for load to the member to (Hold).
func (h *handover) lend(u plan.Unit, to string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.lent[u]; ok {
		return
	}
	if h.lent == nil {
		h.lent = map[plan.Unit]lent{}
	}
	h.lent[u] = lent{to: to}
}

// setFleet notes the entries of the live members (Plan), while units lent
// are watched.
func (h *handover) setFleet(entries []leases.Member) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.lent) == 0 {
		h.fleet = nil
		return
	}
	h.fleet = make(map[string]leases.Member, len(entries))
	for _, e := range entries {
		h.fleet[e.Owner] = e
	}
}

// setOthers notes the hot units the other members name (their UnitIDs),
// if this member has any let go of to watch for.
func (h *handover) setOthers(ids func() map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.gone) > 0 || len(h.others) > 0 {
		h.others = ids()
	}
}
