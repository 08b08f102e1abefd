package plan

// The exact plan, up to exactPairs: the extras of the streams shared out
// among the members first, then each stream's units, both by spread's
// min-cost flow; and the cap on what one member holds (capCounts).

import (
	"cmp"
	"slices"
)

// exact is Assign up to 25,000 pairs.
//
// How: a stream of s units gives every member ⌊s/n⌋ of them and s mod n
// members one more. Which members get the one more of which stream is
// decided first, for all the streams together: each member gets ⌊R/n⌋ or
// ⌈R/n⌉ of the R extras (so that the totals balance), at most one per
// stream, with the highest total score of the (stream, member) pairs. Then,
// stream by stream, the units go to the members with those quotas with the
// highest total score of the (unit, member) pairs. Both steps are the same
// min-cost flow (spread.solve).
func exact(members []string, units []Unit, maxLeases int) map[Unit]string {
	ms := slices.DeleteFunc(slices.Clone(members), func(m string) bool { return m == "" })
	slices.Sort(ms)
	ms = slices.Compact(ms)
	n := len(ms)
	if n == 0 {
		return nil
	}
	us := slices.Clone(units)
	slices.SortFunc(us, CompareUnits)
	us = slices.Compact(us)
	streams := byStream(us)
	if maxLeases > 0 && maxLeases < (len(us)+n-1)/n {
		streams = capStreams(streams, len(us), n*maxLeases)
	}

	out := make(map[Unit]string, len(us))
	extra := extras(ms, streams)
	for k, st := range streams {
		if len(st) == 0 {
			continue // capped to nothing
		}
		// The members with a quota of this stream: all of them, or when the
		// stream has fewer units than members, those with its extras.
		var to []string
		for m, id := range ms {
			if len(st)/n > 0 || extra[k] != nil && extra[k][m] {
				to = append(to, id)
			}
		}
		if len(to) == 1 {
			for _, u := range st {
				out[u] = to[0]
			}
			continue
		}
		nt := len(to)
		p := spread{n: nt, w: make([]int64, len(st)*nt), mult: make([]int, len(st)), low: make([]int, nt)}
		for i, u := range st {
			h := fnvSep(fnvString(fnvSep(fnvString(fnvOffset, u.Stream)), u.Shard))
			for m, id := range to {
				p.w[i*nt+m] = score(fnvString(h, id))
			}
			p.mult[i] = 1
		}
		j := 0
		for m := range ms {
			if q := len(st)/n + b2i(extra[k] != nil && extra[k][m]); q > 0 {
				p.low[j] = q
				j++
			}
		}
		held := p.solve()
		for i, u := range st {
			for m := range nt {
				if held[i*nt+m] {
					out[u] = to[m]
				}
			}
		}
	}
	return out
}

// extras returns, for the streams whose units do not divide evenly among
// the members, which members hold one unit more than the others: extra[k][m]
// for stream k and member m (nil for a stream that divides evenly). Every
// member gets ⌊R/n⌋ or ⌈R/n⌉ of the R extras of all the streams, so that the
// totals balance too, and which ones maximises the total score of the
// (stream, member) pairs, so that the extras stay where they are as members
// come and go.
func extras(ms []string, streams [][]Unit) [][]bool {
	n := len(ms)
	var uneven []int // the streams with a remainder
	for k, st := range streams {
		if len(st)%n != 0 {
			uneven = append(uneven, k)
		}
	}
	extra := make([][]bool, len(streams))
	if len(uneven) == 0 {
		return extra
	}
	p := spread{n: n, w: make([]int64, len(uneven)*n), mult: make([]int, len(uneven)), low: make([]int, n)}
	total := 0
	for i, k := range uneven {
		h := fnvSep(fnvString(fnvOffset, streams[k][0].Stream))
		for m, id := range ms {
			p.w[i*n+m] = score(fnvString(h, id) ^ pairTag)
		}
		p.mult[i] = len(streams[k]) % n
		total += p.mult[i]
	}
	for m := range p.low {
		p.low[m] = total / n
	}
	p.pool = total % n
	held := p.solve()
	for i, k := range uneven {
		extra[k] = held[i*n : (i+1)*n]
	}
	return extra
}

// byStream splits units, sorted, into one slice per stream.
func byStream(us []Unit) [][]Unit {
	var streams [][]Unit
	for i := 0; i < len(us); {
		j := i + 1
		for j < len(us) && us[j].Stream == us[i].Stream {
			j++
		}
		streams = append(streams, us[i:j:j])
		i = j
	}
	return streams
}

// capStreams keeps c of the total units of streams: to each stream its
// share (capCounts), the first of its units.
func capStreams(streams [][]Unit, total, c int) [][]Unit {
	sizes := make([]int, len(streams))
	for k, st := range streams {
		sizes[k] = len(st)
	}
	keep := capCounts(sizes, total, c)
	capped := make([][]Unit, len(streams))
	for k, st := range streams {
		capped[k] = st[:keep[k]]
	}
	return capped
}

// capCounts shares c of the total units out among streams of the given
// sizes (in the order of their names) in proportion to their sizes,
// rounded by largest remainders; ties go to the stream with fewer kept,
// then to the earlier stream. (In 64 bits: size × c overflows a 32-bit int
// from 46,341 units.)
func capCounts(sizes []int, total, c int) []int {
	keep := make([]int, len(sizes))
	rem := make([]int64, len(sizes))
	left := c
	for k, sz := range sizes {
		q := int64(sz) * int64(c)
		keep[k], rem[k] = int(q/int64(total)), q%int64(total)
		left -= keep[k]
	}
	order := make([]int, len(sizes))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if rem[a] != rem[b] {
			return cmp.Compare(rem[b], rem[a])
		}
		return keep[a] - keep[b]
	})
	for _, k := range order[:left] {
		keep[k]++
	}
	return keep
}
