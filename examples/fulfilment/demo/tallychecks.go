package main

// The tally's checks of the deliveries: whether an order handled twice is
// explained by the kill (explainedByKill) or by a lost lease
// (explainedByLoss), which shards two instances handled at once (tenure,
// overlaps), and which customers' orders were first handled out of stream
// order (keyOrder).

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
)

// explainedByKill reports whether the deliveries of one order (sorted by
// time) are: first by the killed instance, inside its checkpoint window,
// then only by the shard's taker after the kill, of the same record.
func explainedByKill(dv []harness.Delivery, k *kill, takenBy, resume map[string]string) bool {
	first := dv[0]
	if first.Owner != k.owner || !first.At.Before(k.at) || resume[first.Shard] == "" ||
		harness.CmpSeq(first.Seq, resume[first.Shard]) < 0 {
		return false
	}
	for _, d := range dv[1:] {
		if d.Owner != takenBy[first.Shard] || d.Shard != first.Shard || d.Seq != first.Seq || !d.At.After(k.at) {
			return false
		}
	}
	return true
}

// explainedByLoss reports whether the deliveries dv of one order (in time
// order) are a record delivered again after a lease was lost: the first by
// an instance that then reported the shard's lease lost, every later one
// of the same shard and record and after that loss.
func explainedByLoss(dv []harness.Delivery, es []harness.LeaseEvent) bool {
	first := dv[0]
	var lost time.Time
	for _, e := range es {
		if e.Kind == "lost" && e.Owner == first.Owner && e.Shard == first.Shard && !e.At.Before(first.At) &&
			(lost.IsZero() || e.At.Before(lost)) {
			lost = e.At
		}
	}
	if lost.IsZero() {
		return false
	}
	for _, d := range dv[1:] {
		if d.Shard != first.Shard || d.Seq != first.Seq || d.At.Before(lost) {
			return false
		}
	}
	return true
}

// tenure is one instance's handling of one shard under one lease
// acquisition: the span from its first to its last record.
type tenure struct {
	owner       string
	first, last time.Time
	records     int
}

// overlaps finds shards handled by two instances at once. Each instance's
// records of a shard are grouped by lease acquisition (its "acquired"
// events) into tenures, which it counts; two tenures of different
// instances whose spans intersect overlap. An overlap involving the killed
// instance and no longer than the fence is listed apart: the fence is the
// longest a holder that cannot heartbeat goes on delivering.
func overlaps(ds []harness.Delivery, es []harness.LeaseEvent, k *kill, fence time.Duration) (bad, fenced []string, count int) {
	type key struct{ owner, shard string }
	acq := map[key][]time.Time{}
	for _, e := range es {
		if e.Kind == "acquired" {
			acq[key{e.Owner, e.Shard}] = append(acq[key{e.Owner, e.Shard}], e.At)
		}
	}
	for _, ts := range acq {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	}
	tenures := map[string]map[string]*tenure{} // shard -> owner#n -> tenure
	for _, d := range ds {
		ts := acq[key{d.Owner, d.Shard}]
		n := sort.Search(len(ts), func(i int) bool { return ts[i].After(d.At) }) // acquisitions up to d.At
		if n == 0 {
			bad = append(bad, fmt.Sprintf("%s handled %s of shard %s at %s before acquiring its lease",
				d.Owner, d.ID, d.Shard, d.At.Format("15:04:05.000")))
			continue
		}
		if tenures[d.Shard] == nil {
			tenures[d.Shard] = map[string]*tenure{}
		}
		tk := fmt.Sprintf("%s#%d", d.Owner, n)
		tn := tenures[d.Shard][tk]
		if tn == nil {
			tn = &tenure{owner: d.Owner, first: d.At, last: d.At}
			tenures[d.Shard][tk] = tn
			count++
		}
		tn.records++
		if d.At.Before(tn.first) {
			tn.first = d.At
		}
		if d.At.After(tn.last) {
			tn.last = d.At
		}
	}
	shards := make([]string, 0, len(tenures))
	for s := range tenures {
		shards = append(shards, s)
	}
	slices.Sort(shards)
	for _, s := range shards {
		var ts []*tenure
		for _, tn := range tenures[s] {
			ts = append(ts, tn)
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].first.Before(ts[j].first) })
		for i, a := range ts {
			for _, b := range ts[i+1:] {
				if a.owner == b.owner || !b.first.Before(a.last) {
					continue
				}
				end := a.last
				if b.last.Before(end) {
					end = b.last
				}
				over := end.Sub(b.first)
				msg := fmt.Sprintf("shard %s: %s (%s..%s) and %s (%s..%s) overlap by %v", harness.ShortShard(s),
					a.owner, a.first.Format("15:04:05.000"), a.last.Format("15:04:05.000"),
					b.owner, b.first.Format("15:04:05.000"), b.last.Format("15:04:05.000"), over)
				if k != nil && (a.owner == k.owner || b.owner == k.owner) && over <= fence {
					fenced = append(fenced, msg)
				} else {
					bad = append(bad, msg)
				}
			}
		}
	}
	return bad, fenced, count
}

// keyOrder returns the customers (partition keys) whose orders were not
// first handled in stream order (their sequence numbers, on the one shard
// a key maps to): per-key order, what a shard guarantees with or without
// key concurrency, across failovers. customerOf maps an order id to its
// customer; ids outside published are ignored.
func keyOrder(published []string, ds []harness.Delivery, customerOf func(string) string) []string {
	known := make(map[string]bool, len(published))
	for _, id := range published {
		known[id] = true
	}
	sorted := slices.Clone(ds)
	slices.SortStableFunc(sorted, func(a, b harness.Delivery) int { return a.At.Compare(b.At) })
	seen := map[string]bool{}
	last := map[string]string{} // customer -> newest sequence number first handled
	var bad []string
	for _, d := range sorted {
		if !known[d.ID] || seen[d.ID] {
			continue
		}
		seen[d.ID] = true
		c := customerOf(d.ID)
		if prev, had := last[c]; had && harness.CmpSeq(d.Seq, prev) < 0 {
			bad = append(bad, fmt.Sprintf("%s: %s (seq %s) first handled after seq %s", c, d.ID, d.Seq, prev))
			continue
		}
		last[c] = d.Seq
	}
	return bad
}
