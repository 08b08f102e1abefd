package membership

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// memberID names one incarnation of one owner.
type memberID struct{ owner, inc string }

// memberObs is what this instance last saw of one incarnation, and since
// when, on its own monotonic clock, its heartbeat has stood still.
type memberObs struct {
	m   leases.Member
	row int
	// since is when the read that first showed this heartbeat value (or,
	// for an absent incarnation, the first read of its row without it)
	// returned; confirm is when the latest read that still showed it was
	// sent. The incarnation is dead once confirm-since >= the timeout.
	since, confirm int64
	absent         bool
	absentAt       int64 // since when it is absent, for forgetting it
	// unread: named by a lease row, its membership row not read since:
	// alive until a read of its row (since is that read's return).
	unread    bool
	announced bool // this instance tried to mark it leaving
}

// stale returns how long the incarnation has been seen unchanged.
func (o *memberObs) stale() time.Duration {
	if o.unread {
		return 0
	}
	return time.Duration(o.confirm - o.since)
}

// memberView is this instance's view of the membership: every incarnation
// it saw in a membership row (or that a lease row names), what it saw last
// and since when. It is pure: every method takes the times it needs, so
// that tests drive it directly. It is not safe for concurrent use; the
// Member guards it with viewMu.
type memberView struct {
	self    string
	timeout time.Duration
	// forget: an incarnation absent this long is forgotten (memory stays
	// bounded by the live fleet). If a row still names it, it is watched
	// afresh and found dead a timeout later: slower, never unsafe.
	forget time.Duration
	obs    map[memberID]*memberObs
	// latest is the entry of each owner as last seen (the view the plan is
	// made over); this instance's own entry included.
	latest map[string]leases.Member
	// unknown holds the rows of incarnations a lease row named before any
	// read showed them: to read at the next refresh.
	unknown map[int]bool
	// dupes holds entries of this instance's owner id in rows other than
	// its own: another process with the same owner id.
	dupes map[memberID]leases.Member
}

// RowOf returns the membership row incarnation inc heartbeats in; -1 for an
// incarnation that names none (an earlier version's).
func RowOf(inc string) int {
	if r, ok := driver.IncarnationRow(inc); ok {
		return r
	}
	return -1
}

func newMemberView(self string, timeout time.Duration) *memberView {
	return &memberView{self: self, timeout: timeout, forget: 10 * timeout,
		obs: map[memberID]*memberObs{}, latest: map[string]leases.Member{}, unknown: map[int]bool{}, dupes: map[memberID]leases.Member{}}
}

// observe records membership row r as read by a call sent at sent that
// returned at ret. selfInc is this instance's current incarnation, whose
// entry is only recorded. It returns the owners whose Ended count changed
// (a shard ended: its children are in the shard lists now). An unreadable
// row is never observed: its members' ages freeze, they never grow.
//
// Only the heartbeat counts as a sign of life: a notice bumped by someone
// else, or an Ended count, does not restart a taker's timer.
func (v *memberView) observe(r int, rows []leases.Member, selfInc string, sent, ret int64) (endedMoved []string) {
	present := map[memberID]bool{}
	for _, m := range rows {
		id := memberID{m.Owner, m.Incarnation}
		present[id] = true
		if prev, ok := v.latest[m.Owner]; ok && prev.Ended != m.Ended && m.Owner != v.self {
			endedMoved = append(endedMoved, m.Owner)
		}
		if m.Owner == v.self {
			if r == RowOf(selfInc) {
				v.latest[m.Owner] = m
			} else if !m.Leaving {
				v.dupes[id] = m // another process with this owner id, in another row
			}
			if m.Incarnation == selfInc {
				continue
			}
		} else if prev, ok := v.latest[m.Owner]; !ok || !m.Leaving || prev.Leaving || prev.Incarnation == m.Incarnation || RowOf(prev.Incarnation) == r {
			// Not a leaving entry of the owner over another incarnation
			// of it in another row that is not (see preferLive).
			v.latest[m.Owner] = m
		}
		o := v.obs[id]
		if o != nil && !o.absent && o.m.Heartbeat == m.Heartbeat {
			o.confirm = max(o.confirm, sent)
			o.m = m
			continue
		}
		v.obs[id] = &memberObs{m: m, row: r, since: ret, confirm: ret}
	}
	for id, o := range v.obs {
		if o.row != r || present[id] {
			continue
		}
		if !o.absent {
			// Gone from its row (removed, or replaced by a new incarnation):
			// watch its absence from now.
			o.absent, o.since, o.absentAt = true, ret, ret
			if cur, ok := v.latest[id.owner]; ok && cur.Incarnation == id.inc {
				delete(v.latest, id.owner)
				v.preferLive(id.owner)
			}
		}
		if o.unread {
			// The first read of its row since a lease row named it: its
			// absence counts from this read's return.
			o.unread, o.since = false, ret
		}
		o.confirm = max(o.confirm, sent)
	}
	if cur, ok := v.latest[v.self]; ok && RowOf(cur.Incarnation) == r && !present[memberID{v.self, cur.Incarnation}] {
		delete(v.latest, v.self)
	}
	for _, m := range rows {
		if cur := v.latest[m.Owner]; m.Owner != v.self && m.Leaving && cur.Incarnation == m.Incarnation {
			v.preferLive(m.Owner)
		}
	}
	return endedMoved
}

// preferLive makes the owner's latest entry one of its incarnations seen
// present and not leaving in another row, if its latest is leaving or
// gone and there is one (the most recently changed). An owner has entries
// in two rows when a process restarted with a fixed owner id joined a row
// other than its predecessor's (a join reads only its owner's home rows:
// the predecessor's entry written by an earlier version of the library, or
// in a row whose roster bump was lost); the predecessor's entry, found dead
// and removed by the fleet, must not hide the live one until its row is
// read again (the plan would leave the owner out meanwhile).
func (v *memberView) preferLive(owner string) {
	cur, ok := v.latest[owner]
	if ok && !cur.Leaving {
		return
	}
	var best *memberObs
	for id, o := range v.obs {
		if id.owner == owner && !o.absent && !o.unread && !o.m.Leaving && id.inc != cur.Incarnation && (best == nil || o.since > best.since) {
			best = o
		}
	}
	if best != nil {
		v.latest[owner] = best.m
	}
}

// alive reports whether incarnation inc of owner may still hold leases at
// now: seen heartbeating (or present) within the timeout, and not marked
// leaving. An incarnation never seen is alive until a read of its row,
// and then for a timeout from that read's return: timed from the lookup,
// it could be judged dead before its fence passes (a heartbeat sent just
// before the lookup moves its fence a timeout on from its send). One that
// names no row (an earlier version's) is timed from the lookup.
func (v *memberView) alive(owner, inc string, now int64) bool {
	id := memberID{owner, inc}
	o := v.obs[id]
	if o == nil {
		v.obs[id] = &memberObs{m: leases.Member{Owner: owner, Incarnation: inc}, row: RowOf(inc),
			since: now, confirm: now, absent: true, absentAt: now, unread: RowOf(inc) >= 0}
		v.unknown[RowOf(inc)] = true
		return true
	}
	if o.m.Leaving && !o.absent {
		return false
	}
	if o.absent && o.row >= 0 && o.stale() < v.timeout && now-o.since >= int64(v.timeout) {
		// Absent from its row a timeout ago, as far as this instance read
		// it, and a row still names it: read its row again, so that it is
		// found dead (its row may be one this instance never reads
		// otherwise: neither its own nor watched, its roster unchanged).
		v.unknown[o.row] = true
	}
	return o.stale() < v.timeout
}

// markDead records that inc of owner is known dead at now (its entry was
// replaced after it was seen stale, or it left).
func (v *memberView) markDead(owner, inc string, now int64) {
	v.obs[memberID{owner, inc}] = &memberObs{m: leases.Member{Owner: owner, Incarnation: inc}, row: RowOf(inc),
		since: now - int64(v.timeout), confirm: now, absent: true, absentAt: now}
}

// live returns the owners the plan spreads the shards over, sorted: self
// and every owner whose latest entry is an incarnation seen alive.
func (v *memberView) live(now int64) []string {
	owners := []string{v.self}
	for owner, m := range v.latest {
		if owner != v.self && v.alive(owner, m.Incarnation, now) {
			owners = append(owners, owner)
		}
	}
	slices.Sort(owners)
	return owners
}

// suspects returns the rows of the incarnations this instance times (in
// the rows timed says: its own and the watched ones; the others are timed
// by the members of the rows before them) seen unchanged for less than the
// timeout, not yet announced dead, whose timeout has run out at now
// (a read sent now would show them dead), and the earliest future instant
// at which another one's will (0: none). A round reads those rows at once,
// and the next round is due then: a death is found a timeout after the
// last heartbeat was first seen, not up to a round later.
func (v *memberView) suspects(now int64, timed func(row int) bool) (rows []int, next int64) {
	for _, o := range v.obs {
		if o.absent || o.announced || o.m.Leaving || o.m.Owner == v.self || o.row < 0 || o.stale() >= v.timeout || !timed(o.row) {
			continue
		}
		due := o.since + int64(v.timeout)
		switch {
		case due <= now:
			rows = append(rows, o.row)
		case next == 0 || due < next:
			next = due
		}
	}
	slices.Sort(rows)
	return slices.Compact(rows), next
}

// dead returns the entries seen unchanged for a timeout that nobody has
// marked leaving yet, and that this instance has not tried to mark: the
// ones to announce.
func (v *memberView) dead() []leases.Member {
	return v.others(func(o *memberObs) bool { return !o.announced && !o.m.Leaving && o.stale() >= v.timeout })
}

// staleEntries returns the entries seen unchanged for three timeouts: to remove,
// so that membership rows stay the size of the live fleet.
func (v *memberView) staleEntries() []leases.Member {
	return v.others(func(o *memberObs) bool { return o.stale() >= 3*v.timeout })
}

// others returns the entries present (not absent) of the other owners'
// incarnations that keep selects, sorted by owner, then incarnation.
func (v *memberView) others(keep func(o *memberObs) bool) []leases.Member {
	var ms []leases.Member
	for _, o := range v.obs {
		if !o.absent && o.m.Owner != v.self && keep(o) {
			ms = append(ms, o.m)
		}
	}
	slices.SortFunc(ms, func(a, b leases.Member) int {
		return cmp.Or(strings.Compare(a.Owner, b.Owner), strings.Compare(a.Incarnation, b.Incarnation))
	})
	return ms
}

// prune forgets incarnations absent for longer than forget at now.
func (v *memberView) prune(now int64) {
	maps.DeleteFunc(v.obs, func(_ memberID, o *memberObs) bool { return o.absent && time.Duration(now-o.absentAt) >= v.forget })
}
