// Package roster is what an instance knows of the membership, pure: its
// view of the other members (View: who is alive as of when, who is dead,
// whom to time), its book of the membership rows and the header (Book:
// which rows to read, how often to read the header), and where an owner's
// entry goes (placement.go: home rows, the row a join tries). Every
// method takes the times it needs; internal/membership does the I/O and
// guards these with its locks (docs/lease-protocol.md, "Membership,
// heartbeats and the fence").
package roster

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// ID names one incarnation of one owner.
type ID struct{ Owner, Inc string }

// Obs is what this instance last saw of one incarnation, and since
// when, on its own monotonic clock, its heartbeat has stood still.
type Obs struct {
	m   leases.Member
	row int
	// since is when the read that first showed this heartbeat value (or,
	// for an absent incarnation, the first read of its row without it)
	// returned; confirm is when the latest read that still showed it was
	// sent. The incarnation is dead once confirm-since >= the timeout.
	since, confirm int64
	Absent         bool
	absentAt       int64 // since when it is absent, for forgetting it
	// unread: named by a lease row, its membership row not read since:
	// alive until a read of its row (since is that read's return).
	unread    bool
	Announced bool // this instance tried to mark it leaving
}

// Stale returns how long the incarnation has been seen unchanged.
func (o *Obs) Stale() time.Duration {
	if o.unread {
		return 0
	}
	return time.Duration(o.confirm - o.since)
}

// View is this instance's view of the membership: every incarnation
// it saw in a membership row (or that a lease row names), what it saw last
// and since when. It is pure: every method takes the times it needs, so
// that tests drive it directly. It is not safe for concurrent use;
// internal/membership's Member guards it with its viewMu.
type View struct {
	self    string
	timeout time.Duration
	// forget: an incarnation absent this long is forgotten (memory stays
	// bounded by the live fleet). If a row still names it, it is watched
	// afresh and found dead a timeout later: slower, never unsafe.
	forget time.Duration
	// Obs is what this instance saw of each incarnation.
	Obs map[ID]*Obs
	// Latest is the entry of each owner as last seen (the view the plan is
	// made over); this instance's own entry included.
	Latest map[string]leases.Member
	// Unknown holds the rows of incarnations a lease row named before any
	// read showed them: to read at the next refresh.
	Unknown map[int]bool
	// Dupes holds entries of this instance's owner id in rows other than
	// its own: another process with the same owner id.
	Dupes map[ID]leases.Member
}

// RowOf returns the membership row incarnation inc heartbeats in; -1 for an
// incarnation that names none (an earlier version's).
func RowOf(inc string) int {
	if r, ok := driver.IncarnationRow(inc); ok {
		return r
	}
	return -1
}

// NewView returns the view of owner self, which finds a member dead once
// its heartbeat stood still for timeout.
func NewView(self string, timeout time.Duration) *View {
	return &View{self: self, timeout: timeout, forget: 10 * timeout,
		Obs: map[ID]*Obs{}, Latest: map[string]leases.Member{}, Unknown: map[int]bool{}, Dupes: map[ID]leases.Member{}}
}

// Observe records membership row r as read by a call sent at sent that
// returned at ret. selfInc is this instance's current incarnation, whose
// entry is only recorded. It returns the owners whose Ended count changed
// (a shard ended: its children are in the shard lists now). An unreadable
// row is never observed: its members' ages freeze, they never grow.
//
// Only the heartbeat counts as a sign of life: a notice bumped by someone
// else, or an Ended count, does not restart a taker's timer.
func (v *View) Observe(r int, rows []leases.Member, selfInc string, sent, ret int64) (endedMoved []string) {
	present := map[ID]bool{}
	for _, m := range rows {
		id := ID{m.Owner, m.Incarnation}
		present[id] = true
		if prev, ok := v.Latest[m.Owner]; ok && prev.Ended != m.Ended && m.Owner != v.self {
			endedMoved = append(endedMoved, m.Owner)
		}
		if m.Owner == v.self {
			if r == RowOf(selfInc) {
				v.Latest[m.Owner] = m
			} else if !m.Leaving {
				v.Dupes[id] = m // another process with this owner id, in another row
			}
			if m.Incarnation == selfInc {
				continue
			}
		} else if prev, ok := v.Latest[m.Owner]; !ok || !m.Leaving || prev.Leaving || prev.Incarnation == m.Incarnation || RowOf(prev.Incarnation) == r {
			// Not a leaving entry of the owner over another incarnation
			// of it in another row that is not (see preferLive).
			v.Latest[m.Owner] = m
		}
		o := v.Obs[id]
		if o != nil && !o.Absent && o.m.Heartbeat == m.Heartbeat {
			o.confirm = max(o.confirm, sent)
			o.m = m
			continue
		}
		v.Obs[id] = &Obs{m: m, row: r, since: ret, confirm: ret}
	}
	for id, o := range v.Obs {
		if o.row != r || present[id] {
			continue
		}
		if !o.Absent {
			// Gone from its row (removed, or replaced by a new incarnation):
			// watch its absence from now.
			o.Absent, o.since, o.absentAt = true, ret, ret
			if cur, ok := v.Latest[id.Owner]; ok && cur.Incarnation == id.Inc {
				delete(v.Latest, id.Owner)
				v.preferLive(id.Owner)
			}
		}
		if o.unread {
			// The first read of its row since a lease row named it: its
			// absence counts from this read's return.
			o.unread, o.since = false, ret
		}
		o.confirm = max(o.confirm, sent)
	}
	if cur, ok := v.Latest[v.self]; ok && RowOf(cur.Incarnation) == r && !present[ID{v.self, cur.Incarnation}] {
		delete(v.Latest, v.self)
	}
	for _, m := range rows {
		if cur := v.Latest[m.Owner]; m.Owner != v.self && m.Leaving && cur.Incarnation == m.Incarnation {
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
func (v *View) preferLive(owner string) {
	cur, ok := v.Latest[owner]
	if ok && !cur.Leaving {
		return
	}
	var best *Obs
	for id, o := range v.Obs {
		if id.Owner == owner && !o.Absent && !o.unread && !o.m.Leaving && id.Inc != cur.Incarnation && (best == nil || o.since > best.since) {
			best = o
		}
	}
	if best != nil {
		v.Latest[owner] = best.m
	}
}

// Alive reports whether incarnation inc of owner may still hold leases at
// now: seen heartbeating (or present) within the timeout, and not marked
// leaving. An incarnation never seen is alive until a read of its row,
// and then for a timeout from that read's return: timed from the lookup,
// it could be judged dead before its fence passes (a heartbeat sent just
// before the lookup moves its fence a timeout on from its send). One that
// names no row (an earlier version's) is timed from the lookup.
func (v *View) Alive(owner, inc string, now int64) bool {
	id := ID{owner, inc}
	o := v.Obs[id]
	if o == nil {
		v.Obs[id] = &Obs{m: leases.Member{Owner: owner, Incarnation: inc}, row: RowOf(inc),
			since: now, confirm: now, Absent: true, absentAt: now, unread: RowOf(inc) >= 0}
		v.Unknown[RowOf(inc)] = true
		return true
	}
	if o.m.Leaving && !o.Absent {
		return false
	}
	if o.Absent && o.row >= 0 && o.Stale() < v.timeout && now-o.since >= int64(v.timeout) {
		// Absent from its row a timeout ago, as far as this instance read
		// it, and a row still names it: read its row again, so that it is
		// found dead (its row may be one this instance never reads
		// otherwise: neither its own nor watched, its roster unchanged).
		v.Unknown[o.row] = true
	}
	return o.Stale() < v.timeout
}

// MarkDead records that inc of owner is known dead at now (its entry was
// replaced after it was seen stale, or it left).
func (v *View) MarkDead(owner, inc string, now int64) {
	v.Obs[ID{owner, inc}] = &Obs{m: leases.Member{Owner: owner, Incarnation: inc}, row: RowOf(inc),
		since: now - int64(v.timeout), confirm: now, Absent: true, absentAt: now}
}

// Live returns the owners the plan spreads the shards over, sorted: self
// and every owner whose latest entry is an incarnation seen alive.
func (v *View) Live(now int64) []string {
	owners := []string{v.self}
	for owner, m := range v.Latest {
		if owner != v.self && v.Alive(owner, m.Incarnation, now) {
			owners = append(owners, owner)
		}
	}
	slices.Sort(owners)
	return owners
}

// Suspects returns the rows of the incarnations this instance times (in
// the rows timed says: its own and the watched ones; the others are timed
// by the members of the rows before them) seen unchanged for less than the
// timeout, not yet announced dead, whose timeout has run out at now
// (a read sent now would show them dead), and the earliest future instant
// at which another one's will (0: none). A round reads those rows at once,
// and the next round is due then: a death is found a timeout after the
// last heartbeat was first seen, not up to a round later.
func (v *View) Suspects(now int64, timed func(row int) bool) (rows []int, next int64) {
	for _, o := range v.Obs {
		if o.Absent || o.Announced || o.m.Leaving || o.m.Owner == v.self || o.row < 0 || o.Stale() >= v.timeout || !timed(o.row) {
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

// Dead returns the entries seen unchanged for a timeout that nobody has
// marked leaving yet, and that this instance has not tried to mark: the
// ones to announce.
func (v *View) Dead() []leases.Member {
	return v.others(func(o *Obs) bool { return !o.Announced && !o.m.Leaving && o.Stale() >= v.timeout })
}

// StaleEntries returns the entries seen unchanged for three timeouts: to remove,
// so that membership rows stay the size of the live fleet.
func (v *View) StaleEntries() []leases.Member {
	return v.others(func(o *Obs) bool { return o.Stale() >= 3*v.timeout })
}

// others returns the entries present (not absent) of the other owners'
// incarnations that keep selects, sorted by owner, then incarnation.
func (v *View) others(keep func(o *Obs) bool) []leases.Member {
	var ms []leases.Member
	for _, o := range v.Obs {
		if !o.Absent && o.m.Owner != v.self && keep(o) {
			ms = append(ms, o.m)
		}
	}
	slices.SortFunc(ms, func(a, b leases.Member) int {
		return cmp.Or(strings.Compare(a.Owner, b.Owner), strings.Compare(a.Incarnation, b.Incarnation))
	})
	return ms
}

// Prune forgets incarnations absent for longer than forget at now.
func (v *View) Prune(now int64) {
	maps.DeleteFunc(v.Obs, func(_ ID, o *Obs) bool { return o.Absent && time.Duration(now-o.absentAt) >= v.forget })
}
