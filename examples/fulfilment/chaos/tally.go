package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/kinesisfake"
)

// procInfo is one process of a run, as the tally needs it.
type procInfo struct {
	Owner string
	Slot  int
	// Started and Exited; Killed is when it was SIGKILLed (zero: never),
	// Interrupted when it was SIGINTed; Stops its SIGSTOP episodes.
	Started, Exited, Killed, Interrupted time.Time
	Stops                                []episode
	// From its log: checkpoints refused because the lease was lost,
	// re-reads of held rows that found the lease taken, ERROR lines, leases
	// taken.
	RefusedCheckpoints, FoundLost, Errors int
	Takes                                 []take
}

// take is a lease a process took, from its log: From is the owner it took
// the lease over from, empty for a free lease. At has millisecond precision.
type take struct {
	Shard, From string
	At          time.Time
}

// rowRun is a run of lease-table reads of one row that showed the same
// owner ("" for free): the reads were sent from First to Last (each read
// is strongly consistent and sent after its time).
type rowRun struct {
	Owner       string
	First, Last time.Time
}

// observations is everything a run saw: what was published, the instances'
// reports, the processes and what the chaos did to them, the owners of the
// lease table's rows as polled, and the problems found while running (lease
// table checks, failed graceful stops).
type observations struct {
	Begin              time.Time
	Published          []published
	Deliveries         []harness.Delivery
	Events             []harness.LeaseEvent
	Procs              []procInfo
	Actions            []actionRecord
	Rows               map[string][]rowRun // by shard
	Problems           []string
	Heartbeat, Timeout time.Duration
	CheckpointInterval time.Duration
	Seed               uint64
	Duration           time.Duration
	Instances, Shards  int
	// FanOut is what the in-memory Kinesis counted once every instance
	// stopped, in fan-out mode; nil when the instances polled.
	FanOut *kinesisfake.SubscribeStats
}

const (
	// inFlightSlack: a record handed to the handler just before a SIGSTOP
	// is stamped (in the handler) just after the SIGCONT, within this.
	inFlightSlack = time.Second
	// killSlack: a process may still stamp a delivery this long after the
	// kill(2) that SIGKILLs it returned.
	killSlack = 100 * time.Millisecond
)

// tenure is one holding of one shard's lease by one process: from its
// "acquired" report line to its "released", "lost" or "ended" line, or to
// its process's SIGKILL.
type tenure struct {
	owner, shard string
	acq          time.Time // the "acquired" line's time (see adjusted)
	end          time.Time // zero: never ended
	endKind      string    // released, lost, ended, killed, open
	// adjusted: the tenure delivered nothing and its "acquired" line came
	// right after a SIGCONT of its process; the take may have landed before
	// the SIGSTOP, so acq is moved back to the SIGSTOP, or only as far back
	// as the lease table shows it may have landed (see takeBound).
	adjusted bool
	// from is the owner it took the lease over from, "" for a free lease,
	// per the log line of the take (fromKnown: one was found).
	from      string
	fromKnown bool
	ds        []int   // its deliveries (indices), in time order
	next      *tenure // the shard's next tenure
}

func (tn *tenure) String() string { return tn.owner }

// tally is what a chaos run found.
type tally struct {
	Seed      uint64
	Duration  time.Duration
	Instances int
	Shards    int

	Published  int // orders put on the stream
	Handled    int // distinct published orders handled
	Deliveries int // handler calls, duplicates included
	Lost       int // published orders never handled (must be 0)
	LostSample []string
	Unknown    int // handled orders never published (must be 0)
	// Republished: orders delivered under a sequence number other than the
	// one PutRecords returned (a producer retry put them twice).
	Republished int

	// Duplicates counts deliveries beyond the first of an order;
	// DuplicatedOrders the orders delivered more than once. Causes counts
	// the redeliveries explained by a checkpoint window, by why the first
	// holder stopped before checkpointing past the record; Unexplained
	// lists the others (must be none).
	Duplicates, DuplicatedOrders int
	Causes                       map[string]int
	Unexplained                  []string
	// MaxWindow is the largest checkpoint window redelivered after one
	// takeover: records, and the span of their first deliveries.
	MaxWindow     int
	MaxWindowSpan time.Duration
	MaxWindowAt   string

	// Overlaps lists shards handled by two processes at overlapping times
	// (must be none); InFlight the deliveries excused as in flight across a
	// SIGSTOP. Tenures lists lease-tenure violations (deliveries outside a
	// tenure, gaps and reorders within one, resumes past undelivered
	// records, lease events out of order).
	Overlaps, InFlight, Tenures []string
	// Order lists keys whose first deliveries are not in counter order.
	Order []string
	Keys  int

	// Takeovers, by what disrupted the holder: the longest time from the
	// signal until another process acquired a shard the disrupted process
	// held, and how many were measured. Early lists takeovers sooner than
	// half the timeout after a SIGKILL or SIGSTOP (a live lease taken), Missing
	// shards never taken over after a SIGKILL.
	Longest        map[kind]time.Duration
	LongestAt      map[kind]string
	TakeoverCount  map[kind]int
	Early, Missing []string
	// StopsKept counts leases a stopped process still held after SIGCONT
	// (stopped for less than a takeover takes).
	StopsKept int
	// PutBack counts tenures that delivered nothing, acquired right after
	// a SIGCONT, whose acquisition was put back because the take may have
	// landed before the SIGSTOP; PutBackBounded those the lease table kept
	// from going back all the way to the SIGSTOP (see takeBound).
	PutBack, PutBackBounded int

	// The fence: leases taken from stopped processes, and how many of
	// those the process itself then saw lost; checkpoints refused and held
	// rows found taken, for a lost lease (instance logs); ERROR log lines.
	TakenFromStopped, NoticedLost int
	RefusedCheckpoints            int
	FoundLost                     int
	ErrorLines                    int

	// Chaos carried out (by kind), longer-than-timeout stops, and skipped
	// actions.
	Done      map[kind]int
	LongStops int
	Skipped   int

	// Problems found while running: checkpoint regressions, final rows,
	// failed graceful stops, catch-up timeouts.
	Problems []string

	// ReadTenures counts the tenures that handled records. FanOut is what
	// the in-memory Kinesis counted, in fan-out mode (nil: polling): each
	// tenure is a worker of its own that subscribes before it reads, so
	// FanOut.Subscribed must be at least ReadTenures (see fanOutProblem).
	ReadTenures int
	FanOut      *kinesisfake.SubscribeStats

	Heartbeat, Timeout, CheckpointInterval time.Duration
}

// Violations lists every broken invariant; empty means the run passed.
func (t *tally) Violations() []string {
	var v []string
	if t.Lost > 0 {
		v = append(v, fmt.Sprintf("%d orders lost, e.g. %s", t.Lost, strings.Join(t.LostSample, " ")))
	}
	if t.Unknown > 0 {
		v = append(v, fmt.Sprintf("%d handled orders were never published", t.Unknown))
	}
	add := func(what string, list []string) {
		for _, s := range list {
			v = append(v, what+": "+s)
		}
	}
	add("overlap", t.Overlaps)
	add("unexplained duplicate", t.Unexplained)
	add("tenure", t.Tenures)
	add("per-key order", t.Order)
	add("early takeover", t.Early)
	add("no takeover", t.Missing)
	add("problem", t.Problems)
	if p := t.fanOutProblem(); p != "" {
		v = append(v, p)
	}
	return v
}

// fanOutProblem says, in fan-out mode, why the records were not all read
// with fan-out: fewer successful SubscribeToShard calls than tenures that
// handled records. Empty: none (or polling).
func (t *tally) fanOutProblem() string {
	if t.FanOut == nil || t.FanOut.Subscribed >= t.ReadTenures {
		return ""
	}
	return fmt.Sprintf("fan-out: %d SubscribeToShard calls succeeded for %d tenures that handled records: some were not read with fan-out",
		t.FanOut.Subscribed, t.ReadTenures)
}

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

// takeBound is the earliest time the take of tenure tn may have landed:
// tn delivered nothing, and its "acquired" line came right after the
// SIGCONT of stop episode ep, so the take may have landed before the
// SIGSTOP (its answer read only after the SIGCONT) and is put back at the
// SIGSTOP, unless the observations show it came later.
//
// Had the take landed before the stop, the row would have been tn's
// owner's from then until the "acquired" line, unless another tenure took
// it from tn's owner meanwhile; if one did (or may have: its take's log
// line not found), the SIGSTOP it is. Otherwise the take came after
//   - every read of the row sent after the stop (and before the line) that
//     showed another owner, or none (the reads are strongly consistent);
//   - every delivery, after the SIGCONT and before the line, of an earlier
//     tenure of tn's own process, but its first (in flight across the
//     stop): that process took the row again only once it had lost the
//     lease its worker delivered under;
//   - every delivery, after the stop and before the line, of a tenure of
//     another process (not the one tn took the lease from, and not taking
//     it from tn's owner) that ended by releasing the lease: the row was
//     that tenure's from its take until its release, which came after its
//     deliveries, and tn's take cannot have landed in that span, nor before
//     it (that tenure would then have taken the lease from tn's owner).
//
// The bound is the latest of these, or the SIGSTOP.
//
// This matters with enhanced fan-out: a taker's first subscription after
// a SIGCONT is often refused for seconds by the 5-second rule, so a
// tenure acquired right after a SIGCONT and ended by the next chaos
// action before it delivered anything is common; put back at the SIGSTOP,
// it would be taken for the successor of the holder that kept the shard
// across the stop, and that holder's deliveries during the stop for
// overlaps.
func takeBound(tn *tenure, ep episode, all []*tenure, ds []harness.Delivery, rows []rowRun) time.Time {
	for _, o := range all {
		if o != tn && o.shard == tn.shard && !o.acq.Before(ep.Stop) && !o.acq.After(tn.acq) &&
			(!o.fromKnown || o.from == tn.owner) {
			return ep.Stop // taken from tn's owner while it was stopped (or maybe)
		}
	}
	bound := ep.Stop
	for _, run := range rows {
		if run.Owner == tn.owner || run.Last.Before(ep.Stop) {
			continue
		}
		last := run.Last
		if !last.Before(tn.acq) { // the latest read of the run sent before the "acquired" line
			if !run.First.Before(tn.acq) {
				continue
			}
			last = run.First
		}
		bound = maxTime(bound, last)
	}
	for _, o := range all {
		if o == tn || o.shard != tn.shard || o.owner != tn.owner {
			continue
		}
		// The same process's earlier tenure of the shard, delivering after
		// the SIGCONT: its worker delivers only while its lease is valid,
		// and the process takes the row again only once that lease is
		// lost, so tn's take came after those deliveries, but the first
		// (handed over before the stop, in flight across it).
		after := 0
		for _, i := range o.ds {
			if d := ds[i].At; d.After(ep.Cont) && d.Before(tn.acq) {
				if after++; after > 1 {
					bound = maxTime(bound, d)
				}
			}
		}
	}
	for _, o := range all {
		if o.shard != tn.shard || o.owner == tn.owner || o.owner == tn.from || !o.fromKnown || o.from == tn.owner ||
			(o.endKind != "released" && o.endKind != "ended") {
			continue
		}
		for _, i := range o.ds {
			if d := ds[i].At; d.After(ep.Stop) && d.Before(tn.acq) {
				bound = maxTime(bound, d)
			}
		}
	}
	return bound
}

// inFlightAcrossStop reports whether delivery i, tn's first one after the
// next tenure's acquisition at n, was in flight across a SIGSTOP of its
// process: its previous delivery came before the stop, the stop began no
// later than n, and it was stamped right after the SIGCONT.
func inFlightAcrossStop(tn *tenure, i int, ds []harness.Delivery, p *procInfo, n time.Time) (episode, bool) {
	if p == nil {
		return episode{}, false
	}
	var prev *harness.Delivery
	for j, k := range tn.ds {
		if k == i && j > 0 {
			prev = &ds[tn.ds[j-1]]
		}
	}
	d := ds[i]
	for _, ep := range p.Stops {
		if !ep.Stop.After(n) && !d.At.Before(ep.Cont) && d.At.Sub(ep.Cont) <= inFlightSlack &&
			(prev == nil || prev.At.Before(ep.Stop)) {
			return ep, true
		}
	}
	return episode{}, false
}

// explain says why a record first handled under tenure a (delivery da) was
// handled again under tenure b: the cause, or why it is not explained by a
// checkpoint window (a holder that lost its lease or was killed before
// checkpointing past the record, then a takeover).
func explain(a, b *tenure, da harness.Delivery, inFlight bool, procs map[string]*procInfo) (cause, why string) {
	switch {
	case a == nil || b == nil:
		return "", "a delivery outside any lease"
	case a == b:
		return "", fmt.Sprintf("twice by %s under one lease", a.owner)
	case inFlight:
		return "in flight at SIGSTOP", ""
	case a.endKind != "killed" && a.endKind != "lost":
		return "", fmt.Sprintf("%s's lease ended %s, not lost: a planned handover must not redeliver", a.owner, a.endKind)
	case !da.At.Before(b.acq):
		return "", fmt.Sprintf("%s handled it after %s had acquired the shard", a.owner, b.owner)
	case a.endKind == "killed":
		return "SIGKILL", ""
	}
	if p := procs[a.owner]; p != nil {
		for _, ep := range p.Stops {
			if ep.Stop.Before(b.acq) && ep.Cont.After(da.At) {
				return "SIGSTOP", ""
			}
		}
	}
	return "lease lost without chaos", ""
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// print writes the tally for people.
func (t *tally) print(w io.Writer) {
	v := t.Violations()
	fmt.Fprintf(w, "chaos tally: seed %d, %v of chaos, %d instances, %d shards (heartbeat %v, timeout %v, checkpoint every %v)\n",
		t.Seed, t.Duration, t.Instances, t.Shards, t.Heartbeat, t.Timeout, t.CheckpointInterval)
	fmt.Fprintf(w, "  chaos                   %d SIGKILL, %d SIGSTOP (%d longer than the timeout), %d SIGINT; %d skipped\n",
		t.Done[kill], t.Done[stop], t.LongStops, t.Done[interrupt], t.Skipped)
	fmt.Fprintf(w, "  published               %d\n", t.Published)
	fmt.Fprintf(w, "  handled (distinct)      %d  (%d deliveries)\n", t.Handled, t.Deliveries)
	fmt.Fprintf(w, "  duplicated              %d deliveries of %d orders", t.Duplicates, t.DuplicatedOrders)
	if len(t.Causes) > 0 {
		var cs []string
		for _, c := range slices.Sorted(maps.Keys(t.Causes)) {
			cs = append(cs, fmt.Sprintf("%d %s", t.Causes[c], c))
		}
		fmt.Fprintf(w, ": %s", strings.Join(cs, ", "))
	}
	fmt.Fprintln(w)
	if t.MaxWindow > 0 {
		fmt.Fprintf(w, "    largest checkpoint window redelivered: %d records first handled over %v (%s)\n",
			t.MaxWindow, t.MaxWindowSpan.Round(time.Microsecond), t.MaxWindowAt)
	}
	fmt.Fprintf(w, "  lost                    %d", t.Lost)
	if t.Lost > 0 {
		fmt.Fprintf(w, "  e.g. %s", strings.Join(t.LostSample, " "))
	}
	fmt.Fprintln(w)
	if t.Unknown > 0 || t.Republished > 0 {
		fmt.Fprintf(w, "  never published         %d; put twice by the producer %d\n", t.Unknown, t.Republished)
	}
	fmt.Fprintf(w, "  overlaps                %d", len(t.Overlaps))
	if len(t.InFlight) > 0 {
		fmt.Fprintf(w, "  (%d record(s) in flight across a SIGSTOP excused)", len(t.InFlight))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  unexplained duplicates  %d\n", len(t.Unexplained))
	fmt.Fprintf(w, "  per-key order           %d keys whose first deliveries are out of counter order (of %d keys)\n", len(t.Order), t.Keys)
	fmt.Fprintf(w, "  lease tenures           %d violations (deliveries outside a lease, gaps, resumes past unhandled records)\n", len(t.Tenures))
	for _, k := range []kind{kill, stop, interrupt} {
		name := map[kind]string{kill: "after SIGKILL", stop: "after SIGSTOP", interrupt: "after SIGINT (graceful)"}[k]
		if t.TakeoverCount[k] == 0 {
			fmt.Fprintf(w, "  takeover %-23s none measured\n", name)
			continue
		}
		fmt.Fprintf(w, "  takeover %-23s longest %.2fs of %d (%s)\n", name, t.Longest[k].Seconds(), t.TakeoverCount[k], t.LongestAt[k])
	}
	fmt.Fprintf(w, "  longest takeover        %.2fs (from a SIGKILL or SIGSTOP to another process acquiring the shard)\n", t.longestTakeover().Seconds())
	fmt.Fprintf(w, "  fence                   %d leases taken from stopped processes (%d seen lost by them), %d kept through a short stop; %d checkpoints refused and %d held rows found taken, for a lost lease\n",
		t.TakenFromStopped, t.NoticedLost, t.StopsKept, t.RefusedCheckpoints, t.FoundLost)
	if t.PutBack > 0 {
		fmt.Fprintf(w, "  after SIGCONT           %d tenures acquired right after a SIGCONT delivered nothing: their take may have landed before the SIGSTOP; %d put back to it, %d only as far as the lease table allows\n",
			t.PutBack, t.PutBack-t.PutBackBounded, t.PutBackBounded)
	}
	if st := t.FanOut; st != nil {
		fmt.Fprintf(w, "  fan-out                 %d SubscribeToShard calls succeeded for %d tenures that handled records; refused: %d ResourceInUse (5-second rule), %d LimitExceeded (one call a second); %d subscriptions taken over",
			st.Subscribed, t.ReadTenures, st.ResourceInUse, st.LimitExceeded, st.TakenOver)
		if n := st.Open; n > 0 {
			fmt.Fprintf(w, "; %d still open at the end", n)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, "  reading                 polling (GetRecords); %d tenures handled records\n", t.ReadTenures)
	}
	if t.ErrorLines > 0 {
		fmt.Fprintf(w, "  instance ERROR lines    %d\n", t.ErrorLines)
	}
	for _, s := range t.InFlight {
		fmt.Fprintf(w, "  in flight across SIGSTOP: %s\n", s)
	}
	if len(v) == 0 {
		fmt.Fprintf(w, "  violations              none\n")
		return
	}
	fmt.Fprintf(w, "  violations              %d:\n", len(v))
	for _, s := range v[:min(30, len(v))] {
		fmt.Fprintf(w, "    %s\n", s)
	}
	if len(v) > 30 {
		fmt.Fprintf(w, "    ... and %d more\n", len(v)-30)
	}
}

// longestTakeover is the longest time from a SIGKILL or SIGSTOP of a
// holder to another process acquiring one of its shards.
func (t *tally) longestTakeover() time.Duration { return max(t.Longest[kill], t.Longest[stop]) }
