package balance

// What a member goes on publishing of the hot units it let go of
// (Handover).

import (
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/internal/plan"
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
}

type gone struct {
	load int64
	at   time.Time
}

// goneAt returns the hot units let go of to name with the units held now
// (loads), as of now: those named before and not held any more, until
// Handover after they were let go of, or another member names them.
func (h *handover) goneAt(now time.Time, loads map[plan.Unit]int64) map[plan.Unit]int64 {
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
	return out
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
