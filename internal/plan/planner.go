package plan

import (
	"maps"
	"slices"
	"strings"
)

// exactPairs is the size, members × units placed, up to which a Planner
// solves the plan exactly (see Assign); above it, it runs the greedy of
// large.go. The exact flow costs about 1–5 ms of CPU at 25,000 pairs
// (5 members × 5,000 units to 400 members × 62, one stream or thousands)
// and 5–180 ms at 200,000.
const exactPairs = 25_000

// A Planner computes Assign's plan round after round for one caller, and
// does only the work a change calls for:
//
//   - When the members, the units and maxLeases are the same as in the
//     last call (the same slices again, or the same sets in another order
//     or with duplicates), it returns the last plan without computing
//     anything: comparing the slices with the last ones costs a string
//     comparison per unit, and a sort of the members and of a stream's
//     shards only where their order changed.
//   - Otherwise it recomputes the plan from what it keeps across calls: the
//     hash of every unit and the sorted order of all of them, the ring of
//     the members' points, and the previous plan, which it updates in place
//     rather than building a new map.
//
// The plan is the same as Assign's for the same sets (Assign is a Planner
// used once), whatever the history of calls: nothing carried over changes
// the result, only the cost.
//
// The map Assign returns belongs to the Planner: the caller must not
// modify it, and it holds that plan until the Planner has returned two
// other plans, so that a caller may keep the previous plan to compare
// with the current one. A call that changes nothing returns the same map
// again.
//
// A Planner is not safe for concurrent use: each Group has its own, used
// from the goroutine that plans. The zero value is ready to use.
type Planner struct {
	exactLimit int // 0: exactPairs; tests set it to force a regime

	// The last call's arguments, as given: the common case is the same
	// slices, or equal ones, again.
	called    bool
	inMembers []string
	inUnits   []Unit
	inMax     int

	members []string            // distinct, sorted, without ""
	streams map[string]*pstream // by name
	epoch   int                 // stamps pstream.seen
	byHash  []*unitRec          // every unit, in processing order (unitLess)
	added   []*unitRec          // units new in this call, not yet in byHash
	dropped bool                // some units of byHash are gone
	removed []*unitRec          // units gone since the last plan, that had an owner

	ring ring // the members' points, for p.members (ring.go)
	g    greedy

	// The plan: cur was returned last, old the one before it (nil until
	// two plans were returned). rec.owner is the owner in cur; the units
	// in changed are those whose owner in old differs from cur.
	cur, old map[Unit]string
	changed  []*unitRec
	large    bool // cur was computed by the greedy (for tests)
	gen      int  // counts the plans published: the load plan's caches key on it

	// AssignWeighted's state (weighted.go, load.go): whether cur is a
	// weighted count plan and its members' quotas, and the load plan.
	weighted bool
	wq       []int
	wg       wgreedy
	w        weightedState
}

// A pstream is a stream as the Planner knows it.
type pstream struct {
	name string
	in   []string   // its shards as last given, in that order
	recs []*unitRec // its units, sorted by shard id, distinct
	seen int        // the call that last saw it
	runs [][2]int   // where it is in this call's units: [start, end)
	idx  int32      // its index among the streams sorted by name (scratch)
	keep int        // how many of its units are placed (scratch)
}

// A unitRec is one unit as the Planner knows it.
type unitRec struct {
	u     Unit
	hash  uint64 // unitHash(u)
	st    *pstream
	owner string // its owner in Planner.cur ("" for none)
	oi    int32  // and its index in Planner.members (-1 for none)
	ld    int64  // its load, when lep is the load plan's epoch (load.go)
	lep   int32  // the epoch of ld
	hot   int32  // the epoch of the load plan that found it hot
	gone  bool   // no longer a unit
	kept  bool   // placed this round (scratch)
}

// setMembers records the member set and reports whether it changed.
func (p *Planner) setMembers(members []string) bool {
	ms := make([]string, 0, len(members))
	for _, m := range members {
		if m != "" {
			ms = append(ms, m)
		}
	}
	if !slices.IsSorted(ms) {
		slices.Sort(ms)
	}
	ms = slices.Compact(ms)
	if slices.Equal(ms, p.members) {
		return false
	}
	p.ring.update(p.members, ms)
	p.members = ms
	return true
}

// setUnits records the unit set and reports whether it changed. A stream
// given in one run of units with its shards in the same order as last
// time costs a string comparison per shard; one given otherwise, a sort of
// its shards; one whose shards changed, a merge with the old ones and a
// hash per new shard.
func (p *Planner) setUnits(units []Unit) bool {
	if p.streams == nil {
		p.streams = map[string]*pstream{}
	}
	p.epoch++
	for i := 0; i < len(units); {
		name := units[i].Stream
		j := i + 1
		for j < len(units) && units[j].Stream == name {
			j++
		}
		st := p.streams[name]
		if st == nil {
			st = &pstream{name: name}
			p.streams[name] = st
		}
		if st.seen != p.epoch {
			st.seen = p.epoch
			st.runs = st.runs[:0]
		}
		st.runs = append(st.runs, [2]int{i, j})
		i = j
	}
	changed := false
	var shards []string
	for name, st := range p.streams {
		if st.seen != p.epoch {
			for _, r := range st.recs {
				p.drop(r)
			}
			delete(p.streams, name)
			changed = true
			continue
		}
		if len(st.runs) == 1 && sameShards(units[st.runs[0][0]:st.runs[0][1]], st.in) {
			continue
		}
		shards = shards[:0]
		for _, r := range st.runs {
			for _, u := range units[r[0]:r[1]] {
				shards = append(shards, u.Shard)
			}
		}
		st.in = append(st.in[:0], shards...)
		if !slices.IsSorted(shards) {
			slices.Sort(shards)
		}
		shards = slices.Compact(shards)
		if p.mergeShards(st, shards) {
			changed = true
		}
	}
	return changed
}

func sameShards(units []Unit, shards []string) bool {
	if len(units) != len(shards) {
		return false
	}
	for i, u := range units {
		if u.Shard != shards[i] {
			return false
		}
	}
	return true
}

// mergeShards makes shards (sorted, distinct) the units of st and reports
// whether they changed: units no longer there are marked gone, new ones
// hashed and queued for byHash.
func (p *Planner) mergeShards(st *pstream, shards []string) bool {
	old := st.recs
	if len(old) == len(shards) {
		same := true
		for i, r := range old {
			if r.u.Shard != shards[i] {
				same = false
				break
			}
		}
		if same {
			return false
		}
	}
	recs := make([]*unitRec, 0, len(shards))
	i := 0
	for _, sh := range shards {
		for i < len(old) && old[i].u.Shard < sh {
			p.drop(old[i])
			i++
		}
		if i < len(old) && old[i].u.Shard == sh {
			recs = append(recs, old[i])
			i++
			continue
		}
		r := &unitRec{u: Unit{Stream: st.name, Shard: sh}, st: st}
		r.hash = unitHash(r.u)
		recs = append(recs, r)
		p.added = append(p.added, r)
	}
	for ; i < len(old); i++ {
		p.drop(old[i])
	}
	st.recs = recs
	return true
}

// drop marks r gone.
func (p *Planner) drop(r *unitRec) {
	r.gone, p.dropped = true, true
	if r.owner != "" {
		p.removed = append(p.removed, r)
	}
}

// unitLess is the processing order of the greedy: by hash, then by unit
// (a tie of 64-bit hashes is all but impossible, but must not depend on
// anything but the units).
func unitLess(a, b *unitRec) int {
	switch {
	case a.hash < b.hash:
		return -1
	case a.hash > b.hash:
		return 1
	}
	return CompareUnits(a.u, b.u)
}

// sortUnits brings byHash up to date: drops the units gone, merges in the
// new ones.
func (p *Planner) sortUnits() {
	if len(p.added) == 0 && !p.dropped {
		return
	}
	slices.SortFunc(p.added, unitLess)
	merged := make([]*unitRec, 0, len(p.byHash)+len(p.added))
	a := p.added
	for _, r := range p.byHash {
		if r.gone {
			continue
		}
		for len(a) > 0 && unitLess(a[0], r) < 0 {
			merged = append(merged, a[0])
			a = a[1:]
		}
		merged = append(merged, r)
	}
	merged = append(merged, a...)
	p.byHash, p.added, p.dropped = merged, p.added[:0], false
}

// sortedStreams sorts the units (sortUnits) and returns the streams by
// name, each numbered by its place (idx) and with all of its units kept,
// and how many units there are in all: the start of replan and
// replanQuota.
func (p *Planner) sortedStreams() (sts []*pstream, total int) {
	p.sortUnits()
	sts = make([]*pstream, 0, len(p.streams))
	for _, st := range p.streams {
		sts = append(sts, st)
	}
	slices.SortFunc(sts, func(a, b *pstream) int { return strings.Compare(a.name, b.name) })
	for k, st := range sts {
		st.idx = int32(k)
		st.keep = len(st.recs)
		total += len(st.recs)
	}
	return sts, total
}

// replan computes the plan for the recorded sets and makes it p.cur.
func (p *Planner) replan(maxLeases int) {
	n := len(p.members)
	// The streams by name, and how many units of each are placed.
	sts, total := p.sortedStreams()
	if n == 0 {
		p.publish(nil, nil)
		return
	}
	placed := total
	if maxLeases > 0 && maxLeases < (total+n-1)/n {
		sizes := make([]int, len(sts))
		for k, st := range sts {
			sizes[k] = len(st.recs)
		}
		keep := capCounts(sizes, total, n*maxLeases)
		for k, st := range sts {
			st.keep = keep[k]
		}
		placed = n * maxLeases
	}
	for _, st := range sts {
		for i, r := range st.recs {
			r.kept = i < st.keep
		}
	}

	limit := p.exactLimit
	if limit == 0 {
		limit = exactPairs
	}
	if n == 1 || int64(n)*int64(placed) <= int64(limit) {
		var us []Unit
		for _, st := range sts {
			for _, r := range st.recs[:st.keep] {
				us = append(us, r.u)
			}
		}
		p.publish(exact(p.members, us, 0), nil)
		return
	}
	p.publish(nil, nonNil(p.g.run(p)))
}

// nonNil returns own, or an empty slice for none: a greedy's plan of no
// units.
func nonNil(own []int32) []int32 {
	if own == nil {
		return []int32{}
	}
	return own
}

// publish makes the new plan p.cur: the map exact computed, or, for a
// greedy (own: the owner of every unit kept, in the order of p.byHash), one
// built from own. It updates the owner of every unit and patches the older
// of the two maps with the changes rather than building a new one.
func (p *Planner) publish(exactPlan map[Unit]string, own []int32) {
	changed := p.removed
	p.removed = nil
	p.gen++
	large := own != nil
	switch {
	case large:
		i := 0
		for _, r := range p.byHash {
			o, oi := "", int32(-1)
			if r.kept {
				oi = own[i]
				o = p.members[oi]
				i++
			}
			r.oi = oi
			if o != r.owner {
				r.owner = o
				changed = append(changed, r)
			}
		}
	case exactPlan != nil:
		for _, r := range p.byHash {
			o, oi := "", int32(-1)
			if r.kept {
				o = exactPlan[r.u]
				if i, ok := slices.BinarySearch(p.members, o); ok {
					oi = int32(i)
				}
			}
			r.oi = oi
			if o != r.owner {
				r.owner = o
				changed = append(changed, r)
			}
		}
	default: // no members
		for _, r := range p.byHash {
			r.owner, r.oi = "", -1
		}
		p.cur, p.old, p.changed, p.large = nil, nil, nil, false
		return
	}
	p.large = large
	switch {
	case p.cur == nil:
		p.old, p.changed = nil, nil
		if exactPlan != nil {
			p.cur = exactPlan
		} else {
			p.cur = p.build()
		}
		return
	case len(changed) == 0:
		return // the same plan
	case 4*len(changed) > len(p.byHash):
		// Mostly new: build rather than patch.
		p.old = p.cur
		if exactPlan != nil {
			p.cur = exactPlan
		} else {
			p.cur = p.build()
		}
	case p.old == nil:
		p.old, p.cur = p.cur, maps.Clone(p.cur)
		patch(p.cur, changed)
	default:
		// old holds the plan before last: bring it up to date with the
		// changes since, the last ones and these.
		patch(p.old, p.changed)
		patch(p.old, changed)
		p.old, p.cur = p.cur, p.old
	}
	p.changed = changed
}

// patch sets, in m, the owner of every unit of recs to rec.owner (deleting
// the units without one, and those gone).
func patch(m map[Unit]string, recs []*unitRec) {
	for _, r := range recs {
		if r.gone || r.owner == "" {
			delete(m, r.u)
		} else {
			m[r.u] = r.owner
		}
	}
}

// build returns a new map of the owners of p.byHash.
func (p *Planner) build() map[Unit]string {
	m := make(map[Unit]string, len(p.byHash))
	for _, r := range p.byHash {
		if r.owner != "" {
			m[r.u] = r.owner
		}
	}
	return m
}
