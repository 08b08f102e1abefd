package main

// compute, which builds the tally from a run's observations: the tenures
// of every shard's lease, the deliveries checked against them (overlaps,
// duplicates and their causes, per-key order), and the takeovers after
// each SIGKILL and SIGSTOP, timed and checked.

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
)

// compute builds the tally from the observations.
func compute(o *observations) *tally {
	t := &tally{
		Seed: o.Seed, Duration: o.Duration, Instances: o.Instances, Shards: o.Shards,
		Published: len(o.Published), Deliveries: len(o.Deliveries),
		Causes:  map[string]int{},
		Longest: map[kind]time.Duration{}, LongestAt: map[kind]string{}, TakeoverCount: map[kind]int{},
		Done:      map[kind]int{},
		Problems:  slices.Clone(o.Problems),
		Heartbeat: o.Heartbeat, Timeout: o.Timeout, CheckpointInterval: o.CheckpointInterval,
		FanOut: o.FanOut,
	}
	at := func(tm time.Time) string { return fmt.Sprintf("%.3fs", tm.Sub(o.Begin).Seconds()) }
	procs := map[string]*procInfo{}
	for i := range o.Procs {
		p := &o.Procs[i]
		procs[p.Owner] = p
		t.RefusedCheckpoints += p.RefusedCheckpoints
		t.FoundLost += p.FoundLost
		t.ErrorLines += p.Errors
	}

	// Tenures, from each process's lease events.
	type ownerShard struct{ owner, shard string }
	events := slices.Clone(o.Events)
	slices.SortStableFunc(events, func(a, b harness.LeaseEvent) int { return a.At.Compare(b.At) })
	byOS := map[ownerShard][]*tenure{}
	open := map[ownerShard]*tenure{}
	var all []*tenure
	for _, e := range events {
		k := ownerShard{e.Owner, e.Shard}
		if e.Kind == "acquired" {
			if cur := open[k]; cur != nil {
				t.Tenures = append(t.Tenures, fmt.Sprintf("%s acquired shard %s at %s while holding it since %s",
					e.Owner, harness.ShortShard(e.Shard), at(e.At), at(cur.acq)))
				cur.end, cur.endKind = e.At, "reacquired"
			}
			tn := &tenure{owner: e.Owner, shard: e.Shard, acq: e.At}
			open[k] = tn
			byOS[k] = append(byOS[k], tn)
			all = append(all, tn)
			continue
		}
		cur := open[k]
		if cur == nil {
			t.Tenures = append(t.Tenures, fmt.Sprintf("%s reported shard %s %s at %s without holding it",
				e.Owner, harness.ShortShard(e.Shard), e.Kind, at(e.At)))
			continue
		}
		cur.end, cur.endKind = e.At, e.Kind
		delete(open, k)
	}
	for _, tn := range open {
		p := procs[tn.owner]
		switch {
		case p != nil && !p.Killed.IsZero() && p.Killed.After(tn.acq):
			tn.end, tn.endKind = p.Killed, "killed"
		default:
			tn.endKind = "open"
			if p != nil && !p.Exited.IsZero() {
				t.Tenures = append(t.Tenures, fmt.Sprintf("%s exited gracefully at %s without reporting the end of its lease on shard %s (acquired %s)",
					tn.owner, at(p.Exited), harness.ShortShard(tn.shard), at(tn.acq)))
			}
		}
	}

	// Whom each tenure took its lease from: the log line of the take, just
	// before the "acquired" report line.
	for _, tn := range all {
		p := procs[tn.owner]
		if p == nil {
			continue
		}
		best := time.Second
		for _, tk := range p.Takes {
			if d := tn.acq.Sub(tk.At); tk.Shard == tn.shard && d > -time.Millisecond && d < best {
				best, tn.from, tn.fromKnown = d, tk.From, true
			}
		}
	}

	// Each delivery belongs to its process's latest tenure of the shard.
	ds := o.Deliveries
	order := make([]int, len(ds))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return ds[a].At.Compare(ds[b].At) })
	owner := make([]*tenure, len(ds))
	for _, i := range order {
		d := ds[i]
		tns := byOS[ownerShard{d.Owner, d.Shard}]
		var tn *tenure
		for _, c := range tns {
			if !c.acq.After(d.At) {
				tn = c
			}
		}
		if tn == nil {
			t.Overlaps = append(t.Overlaps, fmt.Sprintf("%s handled %s (shard %s) at %s without holding its lease",
				d.Owner, d.ID, harness.ShortShard(d.Shard), at(d.At)))
			continue
		}
		slack := time.Duration(0)
		if tn.endKind == "killed" {
			slack = killSlack
		}
		if !tn.end.IsZero() && d.At.After(tn.end.Add(slack)) {
			t.Tenures = append(t.Tenures, fmt.Sprintf("%s handled %s (shard %s) at %s after its lease ended (%s at %s)",
				d.Owner, d.ID, harness.ShortShard(d.Shard), at(d.At), tn.endKind, at(tn.end)))
		}
		tn.ds = append(tn.ds, i)
		owner[i] = tn
	}
	for _, tn := range all {
		if len(tn.ds) > 0 {
			t.ReadTenures++
		}
	}
	type putBack struct{ acq, stop time.Time }
	adjust := map[*tenure]putBack{}
	for _, tn := range all {
		if len(tn.ds) > 0 || procs[tn.owner] == nil {
			continue
		}
		for _, ep := range procs[tn.owner].Stops {
			if !tn.acq.Before(ep.Cont) && tn.acq.Sub(ep.Cont) <= inFlightSlack {
				adjust[tn] = putBack{takeBound(tn, ep, all, ds, o.Rows[tn.shard]), ep.Stop}
			}
		}
	}
	for tn, pb := range adjust {
		t.PutBack++
		if pb.acq.After(pb.stop) {
			t.PutBackBounded++
		}
		tn.acq, tn.adjusted = pb.acq, true
	}

	// Overlaps: per shard, tenures in acquisition order; a tenure's
	// deliveries must all come before the next tenure's acquisition. The
	// taker acquires only after the holder's fence closed (the holder stops
	// delivering a sixth of the timeout before anyone may take over), so a
	// delivery stamped after the next acquisition was handed over after it,
	// unless the holder was paused between handing the record over and the
	// handler's timestamp: a SIGSTOP. That one record per SIGSTOP is
	// excused as in flight; any other is an overlap.
	byShard := map[string][]*tenure{}
	for _, tn := range all {
		byShard[tn.shard] = append(byShard[tn.shard], tn)
	}
	inFlight := map[int]bool{}
	for _, s := range slices.Sorted(maps.Keys(byShard)) {
		tns := byShard[s]
		slices.SortStableFunc(tns, func(a, b *tenure) int { return a.acq.Compare(b.acq) })
		for i, tn := range tns {
			if i+1 < len(tns) {
				tn.next = tns[i+1]
			}
		}
		for _, tn := range tns {
			if tn.next == nil {
				continue
			}
			n := tn.next.acq
			var late []int
			for j, i := range tn.ds {
				if ds[i].At.After(n) {
					late = tn.ds[j:]
					break
				}
			}
			if len(late) == 0 {
				continue
			}
			if ep, ok := inFlightAcrossStop(tn, late[0], ds, procs[tn.owner], n); ok {
				inFlight[late[0]] = true
				t.InFlight = append(t.InFlight, fmt.Sprintf("shard %s: %s handled %s at %s, %v after its SIGCONT (stopped %s..%s); %s acquired the shard at %s",
					harness.ShortShard(s), tn.owner, ds[late[0]].ID, at(ds[late[0]].At), ds[late[0]].At.Sub(ep.Cont).Round(time.Millisecond),
					at(ep.Stop), at(ep.Cont), tn.next.owner, at(n)))
				late = late[1:]
			}
			if len(late) == 0 {
				continue
			}
			first, last := ds[late[0]], ds[late[len(late)-1]]
			t.Overlaps = append(t.Overlaps, fmt.Sprintf("shard %s: %s (acquired %s) handled %d records after %s acquired the shard at %s: from %s (%s) to %s (%s, %v after)",
				harness.ShortShard(s), tn.owner, at(tn.acq), len(late), tn.next.owner, at(n),
				first.ID, at(first.At), last.ID, at(last.At), last.At.Sub(n).Round(time.Millisecond)))
		}
	}

	// Orders: lost, unknown, duplicates.
	pubByID := make(map[string]*published, len(o.Published))
	for i := range o.Published {
		pubByID[o.Published[i].id] = &o.Published[i]
	}
	byID := map[string][]int{}
	for _, i := range order {
		d := ds[i]
		byID[d.ID] = append(byID[d.ID], i)
		p := pubByID[d.ID]
		switch {
		case p == nil:
			t.Unknown++
		case p.shard != d.Shard || p.seq != d.Seq:
			t.Republished++
		}
	}
	for _, p := range o.Published {
		if len(byID[p.id]) == 0 {
			t.Lost++
			if len(t.LostSample) < 10 {
				t.LostSample = append(t.LostSample, p.id)
			}
		} else {
			t.Handled++
		}
	}
	type pair struct{ from, to *tenure }
	type window struct {
		n           int
		first, last time.Time
	}
	windows := map[pair]*window{}
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		is := byID[id]
		if len(is) < 2 {
			continue
		}
		t.DuplicatedOrders++
		t.Duplicates += len(is) - 1
		// In tenure order: each redelivery must follow a takeover from a
		// holder that never checkpointed past the record.
		slices.SortStableFunc(is, func(a, b int) int {
			ta, tb := owner[a], owner[b]
			if ta != nil && tb != nil && ta != tb {
				return ta.acq.Compare(tb.acq)
			}
			return ds[a].At.Compare(ds[b].At)
		})
		for j := 1; j < len(is); j++ {
			a, b := is[j-1], is[j]
			cause, why := explain(owner[a], owner[b], ds[a], inFlight[a], procs)
			if why != "" {
				t.Unexplained = append(t.Unexplained, fmt.Sprintf("%s (shard %s seq %s) handled by %s at %s and by %s at %s: %s",
					id, harness.ShortShard(ds[a].Shard), ds[a].Seq, ds[a].Owner, at(ds[a].At), ds[b].Owner, at(ds[b].At), why))
				continue
			}
			t.Causes[cause]++
			k := pair{owner[a], owner[b]}
			w := windows[k]
			if w == nil {
				w = &window{first: ds[a].At, last: ds[a].At}
				windows[k] = w
			}
			w.n++
			w.first = minTime(w.first, ds[a].At)
			w.last = maxTime(w.last, ds[a].At)
		}
	}
	for k, w := range windows {
		if w.n > t.MaxWindow || (w.n == t.MaxWindow && w.last.Sub(w.first) > t.MaxWindowSpan) {
			t.MaxWindow, t.MaxWindowSpan = w.n, w.last.Sub(w.first)
			t.MaxWindowAt = fmt.Sprintf("shard %s, %s to %s at %s", harness.ShortShard(k.from.shard), k.from.owner, k.to.owner, at(k.to.acq))
		}
	}

	// Per shard, in sequence order: each tenure handles a contiguous run of
	// records, and resumes only past records handled before it acquired
	// the lease (its checkpoint cannot be ahead of the deliveries).
	firstAt := map[string]time.Time{}
	for _, i := range order {
		if _, ok := firstAt[ds[i].ID]; !ok {
			firstAt[ds[i].ID] = ds[i].At
		}
	}
	index := map[string]int{} // shard+seq -> position in its shard
	shardPubs := map[string][]*published{}
	for i := range o.Published {
		p := &o.Published[i]
		shardPubs[p.shard] = append(shardPubs[p.shard], p)
	}
	prefixMax := map[string][]time.Time{} // latest first delivery up to each position (zero: one never delivered)
	for s, ps := range shardPubs {
		slices.SortFunc(ps, func(a, b *published) int { return harness.CmpSeq(a.seq, b.seq) })
		pm := make([]time.Time, len(ps))
		var latest time.Time
		never := false
		for i, p := range ps {
			index[s+" "+p.seq] = i
			f, ok := firstAt[p.id]
			never = never || !ok
			latest = maxTime(latest, f)
			if !never {
				pm[i] = latest
			}
		}
		prefixMax[s] = pm
	}
	for _, tn := range all {
		prev := -1
		var bad []string
		for j, i := range tn.ds {
			pos, ok := index[tn.shard+" "+ds[i].Seq]
			if !ok {
				continue
			}
			if j == 0 && pos > 0 {
				if pm := prefixMax[tn.shard][pos-1]; pm.IsZero() || !pm.Before(tn.acq) {
					t.Tenures = append(t.Tenures, fmt.Sprintf("%s acquired shard %s at %s and resumed at %s, past a record not handled before (lost or handled later)",
						tn.owner, harness.ShortShard(tn.shard), at(tn.acq), ds[i].ID))
				}
			}
			if prev >= 0 && pos != prev+1 {
				bad = append(bad, fmt.Sprintf("%s after position %d at position %d", ds[i].ID, prev, pos))
			}
			prev = pos
		}
		if len(bad) > 0 {
			t.Tenures = append(t.Tenures, fmt.Sprintf("%s skipped or reordered records of shard %s (acquired %s): %s",
				tn.owner, harness.ShortShard(tn.shard), at(tn.acq), strings.Join(bad[:min(3, len(bad))], "; ")))
		}
	}

	// Per key, first deliveries in counter order.
	byKey := map[string][]*published{}
	for i := range o.Published {
		p := &o.Published[i]
		byKey[p.key] = append(byKey[p.key], p)
	}
	t.Keys = len(byKey)
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		ps := byKey[k]
		slices.SortFunc(ps, func(a, b *published) int { return cmp.Compare(a.counter, b.counter) })
		for i := 1; i < len(ps); i++ {
			fa, oka := firstAt[ps[i-1].id]
			fb, okb := firstAt[ps[i].id]
			if oka && okb && fb.Before(fa) {
				t.Order = append(t.Order, fmt.Sprintf("key %s: counter %d first handled at %s, before counter %d (%s)",
					k, ps[i].counter, at(fb), ps[i-1].counter, at(fa)))
				break
			}
		}
	}

	// Takeovers: per action, the shards its process held when the signal
	// went out, and the first acquisition by another process after it.
	byOwner := map[string][]*tenure{}
	for _, tn := range all {
		byOwner[tn.owner] = append(byOwner[tn.owner], tn)
	}
	for _, a := range o.Actions {
		if a.Skipped != "" {
			t.Skipped++
			continue
		}
		t.Done[a.Kind]++
		if a.Kind == stop && a.End.Sub(a.Start) > o.Timeout {
			t.LongStops++
		}
		if a.Start.IsZero() {
			continue
		}
		for _, tn := range byOwner[a.Owner] {
			if !tn.acq.Before(a.Start) || (!tn.end.IsZero() && tn.end.Before(a.Start)) {
				continue // not held when the signal went out
			}
			nx := tn.next
			if nx == nil {
				if a.Kind == kill {
					t.Missing = append(t.Missing, fmt.Sprintf("shard %s of %s never taken over after its SIGKILL at %s",
						harness.ShortShard(tn.shard), a.Owner, at(a.Start)))
				}
				continue
			}
			if !nx.acq.After(a.Start) {
				continue // handed over before the signal (its "released" line comes late or was cut off)
			}
			if a.Kind != interrupt && nx.fromKnown && nx.from != a.Owner {
				continue // released just before the signal, taken free: not a takeover
			}
			if a.Kind == stop {
				// Taken while stopped, or right after the SIGCONT before the
				// process could heartbeat (it then saw the lease lost); else
				// it kept the lease and a later move is not this stop's.
				racedCont := tn.endKind == "lost" && !nx.acq.After(tn.end) && !nx.acq.After(a.End.Add(o.Timeout))
				if nx.acq.After(a.End) && !racedCont {
					t.StopsKept++
					continue
				}
				t.TakenFromStopped++
				if tn.endKind == "lost" || tn.endKind == "killed" {
					t.NoticedLost++
				}
			}
			d := nx.acq.Sub(a.Start)
			t.TakeoverCount[a.Kind]++
			if d > t.Longest[a.Kind] {
				t.Longest[a.Kind] = d
				t.LongestAt[a.Kind] = fmt.Sprintf("shard %s, %s to %s at %s", harness.ShortShard(tn.shard), a.Owner, nx.owner, at(nx.acq))
			}
			if a.Kind != interrupt && d < o.Timeout/2 {
				t.Early = append(t.Early, fmt.Sprintf("shard %s taken by %s at %s, %v after the %s of its holder %s (at %s): sooner than half the timeout",
					harness.ShortShard(tn.shard), nx.owner, at(nx.acq), d.Round(time.Millisecond), a.Kind, a.Owner, at(a.Start)))
			}
		}
	}
	return t
}
