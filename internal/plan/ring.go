package plan

// The ring of the greedy: the members' points, sorted, with a bucket index,
// updated in place as members come and go, and the look-up of a probe.

import (
	"cmp"
	"math/bits"
	"slices"
)

const (
	// ringPoints is the points of a member on the ring: more even out the
	// arcs (a member's share varies by about 1/√ringPoints), so fewer
	// offers are refused and fewer units move on a change, at the cost of
	// a larger ring (32,000 points for 1,000 members).
	ringPoints = 32

	pointStep = 0x9e3779b97f4a7c15
)

// A ring holds the points of the members, sorted, with a bucket index: the
// points at or after position p start at first[p>>shift].
type ring struct {
	pts   []point
	spare []point  // the buffer of the next update
	hm    []uint64 // memberHash of each member
	first []int32
	shift uint
}

// A point is at pos, of the member of index m among the sorted members.
type point struct {
	pos uint64
	m   int32
}

func comparePoints(a, b point) int {
	return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.m, b.m))
}

// update changes the ring of the members old (sorted, distinct) into that
// of ms: it drops the points of the members gone, renumbers the others,
// and merges in those of the members new.
func (r *ring) update(old, ms []string) {
	renum := make([]int32, len(old)) // old index → new index, -1: gone
	hm := make([]uint64, len(ms))
	var fresh []point
	i := 0
	for j, id := range ms {
		for i < len(old) && old[i] < id {
			renum[i] = -1
			i++
		}
		if i < len(old) && old[i] == id {
			renum[i] = int32(j)
			hm[j] = r.hm[i]
			i++
			continue
		}
		hm[j] = memberHash(id)
		for k := range ringPoints {
			fresh = append(fresh, point{mix(hm[j] + uint64(k+1)*pointStep), int32(j)})
		}
	}
	for ; i < len(old); i++ {
		renum[i] = -1
	}
	slices.SortFunc(fresh, comparePoints)
	pts := resize(r.spare, len(ms)*ringPoints)
	w := 0
	f := fresh
	for _, p := range r.pts {
		m := renum[p.m]
		if m < 0 {
			continue
		}
		p.m = m
		for len(f) > 0 && comparePoints(f[0], p) < 0 {
			pts[w] = f[0]
			w++
			f = f[1:]
		}
		pts[w] = p
		w++
	}
	w += copy(pts[w:], f)
	r.spare, r.pts, r.hm = r.pts, pts[:w], hm

	b := 0
	if w > 1 {
		b = bits.Len(uint(w - 1))
	}
	r.shift = uint(64 - b)
	r.first = resize(r.first, 1<<b)
	k := 0
	for bucket := range r.first {
		start := uint64(bucket) << r.shift
		if b == 0 {
			start = 0
		}
		for k < w && pts[k].pos < start {
			k++
		}
		r.first[bucket] = int32(k)
	}
}

// lookup returns the member of the first point at or after p (the first
// point if none).
func (r *ring) lookup(p uint64) int32 {
	pts := r.pts
	i := int(r.first[p>>r.shift])
	for i < len(pts) && pts[i].pos < p {
		i++
	}
	if i == len(pts) {
		i = 0
	}
	return pts[i].m
}
