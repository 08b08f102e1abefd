package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
)

// tally is what a run of the demo found.
type tally struct {
	Published  int // orders put on the stream
	Handled    int // distinct published orders handled
	Deliveries int // handler calls, duplicates included
	Lost       int // published orders never handled
	LostSample []string
	Unknown    int // handled orders that were never published (must be 0)

	// Duplicates counts deliveries beyond the first of an order;
	// DuplicatedOrders the orders delivered more than once.
	Duplicates, DuplicatedOrders int
	// KilledWindowDups counts the duplicated orders explained by the kill:
	// first handled by the killed instance after its last checkpoint (at or
	// after the point its taker resumed from), then again by the taker, at
	// the same shard and sequence number. OtherDups lists the rest.
	KilledWindowDups int
	OtherDups        []string

	// The SIGKILLed instance, when, and the shards it held then.
	Killed       string
	KilledAt     time.Time
	KilledShards []string
	// Takeover is, per shard of the killed instance, the time from the kill
	// until a survivor acquired its lease; TakenBy who. Failover is the
	// longest: from the kill until every shard was held again. Complete
	// says every shard of the killed instance was taken over.
	Takeover map[string]time.Duration
	TakenBy  map[string]string
	Failover time.Duration
	Complete bool
	// CheckpointWindow is, per shard of the killed instance, how many
	// records it handled after its last checkpoint: the taker resumed
	// before them and handled them again.
	CheckpointWindow map[string]int

	// Overlaps lists shards handled by two instances at overlapping times;
	// FenceOverlaps those overlaps the killed instance's fence window
	// allows (4/5 of the lease after its last renewal).
	Overlaps, FenceOverlaps []string

	// The run's lease settings, for the report.
	Lease, Renew, Scan time.Duration
}

// kill says which instance was SIGKILLed, when, and what it held then.
type kill struct {
	owner  string
	at     time.Time
	shards []string
}

// compute builds the tally from the reports of every instance.
func compute(published []string, ds []harness.Delivery, es []harness.LeaseEvent, k *kill, fence time.Duration) *tally {
	t := &tally{Published: len(published), Deliveries: len(ds)}
	pub := make(map[string]bool, len(published))
	for _, id := range published {
		pub[id] = true
	}
	byID := map[string][]harness.Delivery{}
	for _, d := range ds {
		byID[d.ID] = append(byID[d.ID], d)
	}
	for _, id := range published {
		if len(byID[id]) == 0 {
			t.Lost++
			if len(t.LostSample) < 10 {
				t.LostSample = append(t.LostSample, id)
			}
		} else {
			t.Handled++
		}
	}
	for id := range byID {
		if !pub[id] {
			t.Unknown++
		}
	}

	// Failover: per shard the killed instance held, the first acquisition by
	// another instance after the kill.
	resume := map[string]string{} // shard -> first sequence number its taker handled
	if k != nil {
		t.Killed, t.KilledAt, t.KilledShards = k.owner, k.at, k.shards
		t.Takeover, t.TakenBy, t.CheckpointWindow = map[string]time.Duration{}, map[string]string{}, map[string]int{}
		t.Complete = len(k.shards) > 0
		for _, s := range k.shards {
			var first *harness.LeaseEvent
			for i, e := range es {
				if e.Shard == s && e.Kind == "acquired" && e.Owner != k.owner && e.At.After(k.at) &&
					(first == nil || e.At.Before(first.At)) {
					first = &es[i]
				}
			}
			if first == nil {
				t.Complete = false
				continue
			}
			d := first.At.Sub(k.at)
			t.Takeover[s], t.TakenBy[s] = d, first.Owner
			t.Failover = max(t.Failover, d)
			// Where the taker resumed: its first record of the shard after
			// the takeover.
			for _, dv := range ds {
				if dv.Shard == s && dv.Owner == first.Owner && !dv.At.Before(first.At) &&
					(resume[s] == "" || harness.CmpSeq(dv.Seq, resume[s]) < 0) {
					resume[s] = dv.Seq
				}
			}
			for _, dv := range ds {
				if dv.Shard == s && dv.Owner == k.owner && resume[s] != "" && harness.CmpSeq(dv.Seq, resume[s]) >= 0 {
					t.CheckpointWindow[s]++
				}
			}
		}
	}

	// Duplicates, and whether the kill explains each.
	for id, dv := range byID {
		if len(dv) < 2 {
			continue
		}
		t.DuplicatedOrders++
		t.Duplicates += len(dv) - 1
		sort.Slice(dv, func(i, j int) bool { return dv[i].At.Before(dv[j].At) })
		if k != nil && explainedByKill(dv, k, t.TakenBy, resume) {
			t.KilledWindowDups++
		} else {
			t.OtherDups = append(t.OtherDups, id)
		}
	}
	slices.Sort(t.OtherDups)

	t.Overlaps, t.FenceOverlaps = overlaps(ds, es, k, fence)
	return t
}

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

// tenure is one instance's handling of one shard under one lease
// acquisition: the span from its first to its last record.
type tenure struct {
	owner       string
	first, last time.Time
	records     int
}

// overlaps finds shards handled by two instances at once. Each instance's
// records of a shard are grouped by lease acquisition (its "acquired"
// events); two groups of different instances whose spans intersect overlap.
// An overlap involving the killed instance and no longer than the fence is
// listed apart: the fence is the longest a holder that cannot renew goes on
// delivering.
func overlaps(ds []harness.Delivery, es []harness.LeaseEvent, k *kill, fence time.Duration) (bad, fenced []string) {
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
	return bad, fenced
}

// print writes the tally for people.
func (t *tally) print(w io.Writer) {
	fmt.Fprintf(w, "tally\n")
	fmt.Fprintf(w, "  published            %d\n", t.Published)
	fmt.Fprintf(w, "  handled (distinct)   %d  (%d deliveries)\n", t.Handled, t.Deliveries)
	fmt.Fprintf(w, "  lost                 %d", t.Lost)
	if t.Lost > 0 {
		fmt.Fprintf(w, "  e.g. %s", strings.Join(t.LostSample, " "))
	}
	fmt.Fprintln(w)
	if t.Unknown > 0 {
		fmt.Fprintf(w, "  never published      %d\n", t.Unknown)
	}
	fmt.Fprintf(w, "  duplicates           %d deliveries of %d orders", t.Duplicates, t.DuplicatedOrders)
	if t.Killed != "" {
		fmt.Fprintf(w, ": %d from %s's checkpoint window, %d other", t.KilledWindowDups, t.Killed, len(t.OtherDups))
	}
	fmt.Fprintln(w)
	if len(t.OtherDups) > 0 {
		fmt.Fprintf(w, "    not explained by the kill: %s\n", strings.Join(t.OtherDups[:min(10, len(t.OtherDups))], " "))
	}
	if t.Killed != "" {
		fmt.Fprintf(w, "  killed               %s, holding shards %s\n", t.Killed, harness.ShortList(t.KilledShards))
		for _, s := range t.KilledShards {
			if d, ok := t.Takeover[s]; ok {
				fmt.Fprintf(w, "    shard %-3s taken over by %s %.2fs after the kill; %d records of its checkpoint window redelivered\n",
					harness.ShortShard(s), t.TakenBy[s], d.Seconds(), t.CheckpointWindow[s])
			} else {
				fmt.Fprintf(w, "    shard %-3s NOT taken over\n", harness.ShortShard(s))
			}
		}
		if t.Complete {
			fmt.Fprintf(w, "  failover             %.2fs from SIGKILL to every shard held again (lease %v, renew %v, scan %v: lease+scan = %v)\n",
				t.Failover.Seconds(), t.Lease, t.Renew, t.Scan, t.Lease+t.Scan)
		} else {
			fmt.Fprintf(w, "  failover             INCOMPLETE\n")
		}
	}
	switch {
	case len(t.Overlaps) > 0:
		fmt.Fprintf(w, "  overlaps             %d shards handled by two instances at once:\n", len(t.Overlaps))
		for _, o := range t.Overlaps {
			fmt.Fprintf(w, "    %s\n", o)
		}
	case len(t.FenceOverlaps) > 0:
		fmt.Fprintf(w, "  overlaps             none beyond the killed instance's fence window (%d within it)\n", len(t.FenceOverlaps))
	default:
		fmt.Fprintf(w, "  overlaps             none: no shard was handled by two instances at once\n")
	}
}
