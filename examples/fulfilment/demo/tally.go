package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/kinesisfake"
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
	// LostLeaseDups counts the duplicated orders explained by a lease an
	// instance lost (a fence: its heartbeats failed past it, which a
	// loaded machine's stalls can cause): first handled under that lease,
	// then again, at the same record, after the loss. At least once allows
	// it; the kill's window is counted apart. CI30: a fenced instance that
	// had not yet written a checkpoint redelivered its 55 records.
	LostLeaseDups int
	OtherDups     []string
	// KeyOrder lists the customers (partition keys) whose orders were not
	// first handled in stream order.
	KeyOrder []string

	// The SIGKILLed instance, when, and the shards it held then. With
	// --signal stop it was SIGSTOPped instead (Signal says which; empty for
	// SIGKILL) and SIGCONTed at Continued.
	Killed       string
	KilledAt     time.Time
	KilledShards []string
	Signal       string
	Continued    time.Time
	// After a SIGSTOP: InFlight lists the deliveries of the stopped
	// instance, on the shards it held, excused as in its handler at the
	// SIGSTOP (at most one per shard, stamped within inFlightSlack of the
	// SIGCONT); AfterStop every other delivery of it on those shards from
	// the SIGSTOP until it acquired the shard again (must be none).
	// InFlightDups counts the duplicated orders explained by an in-flight
	// record: the taker handled it too.
	InFlight, AfterStop []string
	InFlightDups        int
	// Takeover is, per shard of the killed instance, the time from the kill
	// until a survivor acquired its lease; TakenBy who. Failover is the
	// longest: from the kill until every shard was held again. Complete
	// says every shard of the killed instance was taken over.
	Takeover map[string]time.Duration
	TakenBy  map[string]string
	Failover time.Duration
	Complete bool
	// VictimHeld is, per shard of the killed instance it handled records of
	// in its last tenure before the kill, how long before the kill that
	// tenure began (it acquired the lease): its last SubscribeToShard call
	// for the shard, in fan-out mode, came after that.
	VictimHeld map[string]time.Duration
	// CheckpointWindow is, per shard of the killed instance, how many
	// records it handled after its last checkpoint: the taker resumed
	// before them and handled them again.
	CheckpointWindow map[string]int

	// Overlaps lists shards handled by two instances at overlapping times;
	// FenceOverlaps those overlaps the killed instance's fence window
	// allows (5/6 of the timeout after its last heartbeat).
	Overlaps, FenceOverlaps []string
	// Tenures counts the tenures that handled records: an instance's
	// handling of a shard under one acquisition of its lease.
	Tenures int

	// FanOut is what the in-memory Kinesis counted, in fan-out mode; nil
	// when the instances polled. Each tenure needs a subscription of its
	// own (a lost or released lease closes it), so FanOut.Subscribed must be
	// at least Tenures (see fanOutProblem).
	FanOut *kinesisfake.SubscribeStats

	// The run's lease settings and the failover they make for, for the
	// report.
	Settings         string
	ExpectedFailover time.Duration
}

// kill says which instance was SIGKILLed, when, and what it held then.
// With signal "SIGSTOP" it was SIGSTOPped at at instead, and SIGCONTed at
// cont (zero while it is stopped); an empty signal is SIGKILL.
type kill struct {
	owner  string
	at     time.Time
	shards []string
	signal string
	cont   time.Time
}

// stopped reports whether the instance is SIGSTOPped now.
func (k *kill) stopped() bool { return k.signal == "SIGSTOP" && k.cont.IsZero() }

// signalName is "SIGKILL" or "SIGSTOP".
func (k *kill) signalName() string {
	if k.signal == "" {
		return "SIGKILL"
	}
	return k.signal
}

// inFlightSlack: a record handed to the handler just before a SIGSTOP is
// stamped (in the handler) just after the SIGCONT, within this (as in the
// chaos run's tally).
const inFlightSlack = time.Second

// afterStop sorts the deliveries of a SIGSTOPped (and since SIGCONTed)
// instance on the shards it held: from the SIGSTOP until it acquired a
// shard again after the SIGCONT, it may have handled at most one record of
// it, the one already in its handler at the SIGSTOP, which it stamps just
// after the SIGCONT. It returns the indices into ds of those excused
// records, and a message for each other delivery in that span.
func afterStop(ds []harness.Delivery, es []harness.LeaseEvent, k *kill) (inFlight map[int]bool, bad []string) {
	inFlight = map[int]bool{}
	if k == nil || k.signal != "SIGSTOP" {
		return inFlight, nil
	}
	reacq := map[string]time.Time{} // shard -> the victim's first acquisition after the SIGCONT
	for _, e := range es {
		if e.Owner == k.owner && e.Kind == "acquired" && slices.Contains(k.shards, e.Shard) && !k.cont.IsZero() &&
			!e.At.Before(k.cont) && (reacq[e.Shard].IsZero() || e.At.Before(reacq[e.Shard])) {
			reacq[e.Shard] = e.At
		}
	}
	late := map[string][]int{}
	for i, d := range ds {
		if d.Owner == k.owner && slices.Contains(k.shards, d.Shard) && !d.At.Before(k.at) &&
			(reacq[d.Shard].IsZero() || d.At.Before(reacq[d.Shard])) {
			late[d.Shard] = append(late[d.Shard], i)
		}
	}
	for _, s := range k.shards {
		is := late[s]
		sort.Slice(is, func(a, b int) bool { return ds[is[a]].At.Before(ds[is[b]].At) })
		if len(is) > 0 {
			if d := ds[is[0]]; !k.cont.IsZero() && !d.At.Before(k.cont) && d.At.Sub(k.cont) <= inFlightSlack {
				inFlight[is[0]] = true
				is = is[1:]
			}
		}
		for _, i := range is {
			d := ds[i]
			when := "while stopped"
			if !k.cont.IsZero() && !d.At.Before(k.cont) {
				when = fmt.Sprintf("%v after its SIGCONT", d.At.Sub(k.cont).Round(time.Millisecond))
			}
			bad = append(bad, fmt.Sprintf("%s handled %s (shard %s seq %s) at %s, %s, before acquiring the shard again",
				d.Owner, d.ID, harness.ShortShard(s), d.Seq, d.At.Format("15:04:05.000"), when))
		}
	}
	return inFlight, bad
}

// compute builds the tally from the reports of every instance.
//
// After a SIGSTOP (k.signal) the records the instance had in its handler at
// the SIGSTOP (see afterStop) are set apart: they count as handled, and a
// duplicate they make with the taker's delivery is explained as in flight,
// but they take no part in the checkpoint windows and overlaps. A stopped
// instance delivers nothing in its fence window, so no overlap is excused
// by the fence (fence is taken as 0).
func compute(published []string, ds []harness.Delivery, es []harness.LeaseEvent, k *kill, fence time.Duration) *tally {
	t := &tally{Published: len(published), Deliveries: len(ds)}
	all := ds
	inFlight, bad := afterStop(ds, es, k)
	if k != nil && k.signal == "SIGSTOP" {
		t.Signal, t.Continued, t.AfterStop = k.signal, k.cont, bad
		fence = 0
		ds = nil
		for i, d := range all {
			if inFlight[i] {
				t.InFlight = append(t.InFlight, fmt.Sprintf("%s handled %s (shard %s seq %s) at %s, %v after its SIGCONT",
					d.Owner, d.ID, harness.ShortShard(d.Shard), d.Seq, d.At.Format("15:04:05.000"), d.At.Sub(k.cont).Round(time.Millisecond)))
			} else {
				ds = append(ds, d)
			}
		}
	}
	pub := make(map[string]bool, len(published))
	for _, id := range published {
		pub[id] = true
	}
	byID := map[string][]harness.Delivery{}
	inFlightID := map[string]harness.Delivery{}
	for i, d := range all {
		if inFlight[i] {
			inFlightID[d.ID] = d
		} else {
			byID[d.ID] = append(byID[d.ID], d)
		}
	}
	for id := range inFlightID { // counted as handled, then as a duplicate below
		byID[id] = append(byID[id], inFlightID[id])
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
		t.VictimHeld = map[string]time.Duration{}
		t.Complete = len(k.shards) > 0
		for _, s := range k.shards {
			var since time.Time // the victim's last acquisition of s before the signal
			for _, e := range es {
				if e.Shard == s && e.Kind == "acquired" && e.Owner == k.owner && e.At.Before(k.at) && e.At.After(since) {
					since = e.At
				}
			}
			if !since.IsZero() && slices.ContainsFunc(ds, func(d harness.Delivery) bool {
				return d.Shard == s && d.Owner == k.owner && !d.At.Before(since) && d.At.Before(k.at)
			}) {
				t.VictimHeld[s] = k.at.Sub(since)
			}
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
				// After a SIGSTOP the instance may acquire the shard again
				// later: only what it handled before the signal counts.
				if dv.Shard == s && dv.Owner == k.owner && resume[s] != "" && harness.CmpSeq(dv.Seq, resume[s]) >= 0 &&
					(k.signal != "SIGSTOP" || dv.At.Before(k.at)) {
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
		if f, ok := inFlightID[id]; ok {
			// The stopped instance's in-flight record: explained when the
			// only other delivery is its taker's, of the same record.
			var rest []harness.Delivery
			for _, d := range dv {
				if d != f {
					rest = append(rest, d)
				}
			}
			if len(rest) == 1 && rest[0].Owner == t.TakenBy[f.Shard] && rest[0].Shard == f.Shard && rest[0].Seq == f.Seq && rest[0].At.After(k.at) {
				t.InFlightDups++
			} else {
				t.OtherDups = append(t.OtherDups, id)
			}
			continue
		}
		switch {
		case k != nil && explainedByKill(dv, k, t.TakenBy, resume):
			t.KilledWindowDups++
		case explainedByLoss(dv, es):
			t.LostLeaseDups++
		default:
			t.OtherDups = append(t.OtherDups, id)
		}
	}
	slices.Sort(t.OtherDups)

	t.Overlaps, t.FenceOverlaps, t.Tenures = overlaps(ds, es, k, fence)
	return t
}

// fanOut records what fo counted (nothing when fo is nil: polling).
func (t *tally) fanOut(fo *harness.FanOutKinesis) {
	if fo == nil {
		return
	}
	st := fo.SubscribeStats()
	t.FanOut = &st
}

// fanOutProblem says, in fan-out mode, why the records were not all read
// with fan-out: fewer successful SubscribeToShard calls than tenures that
// handled records. Empty: none (or polling).
func (t *tally) fanOutProblem() string {
	if t.FanOut == nil || t.FanOut.Subscribed >= t.Tenures {
		return ""
	}
	return fmt.Sprintf("fan-out: %d SubscribeToShard calls succeeded for %d tenures that handled records: some were not read with fan-out",
		t.FanOut.Subscribed, t.Tenures)
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
	if len(t.KeyOrder) == 0 {
		fmt.Fprintf(w, "  key order            every customer's orders first handled in stream order\n")
	} else {
		fmt.Fprintf(w, "  key order            %d VIOLATIONS, e.g. %s\n", len(t.KeyOrder), t.KeyOrder[0])
	}
	fmt.Fprintf(w, "  duplicates           %d deliveries of %d orders", t.Duplicates, t.DuplicatedOrders)
	if t.Killed != "" {
		fmt.Fprintf(w, ": %d from %s's checkpoint window, ", t.KilledWindowDups, t.Killed)
		if t.Signal == "SIGSTOP" {
			fmt.Fprintf(w, "%d in flight at the SIGSTOP, ", t.InFlightDups)
		}
		if t.LostLeaseDups > 0 {
			fmt.Fprintf(w, "%d after a lease lost to a fence, ", t.LostLeaseDups)
		}
		fmt.Fprintf(w, "%d other", len(t.OtherDups))
	}
	fmt.Fprintln(w)
	if len(t.OtherDups) > 0 {
		fmt.Fprintf(w, "    not explained by the kill: %s\n", strings.Join(t.OtherDups[:min(10, len(t.OtherDups))], " "))
	}
	if t.Killed != "" {
		sig, what := "SIGKILL", "killed"
		if t.Signal == "SIGSTOP" {
			sig, what = "SIGSTOP", "stopped"
		}
		fmt.Fprintf(w, "  %-20s %s, holding shards %s\n", what, t.Killed, harness.ShortList(t.KilledShards))
		for _, s := range t.KilledShards {
			if d, ok := t.Takeover[s]; ok {
				fmt.Fprintf(w, "    shard %-3s taken over by %s %.2fs after the %s; %d records of its checkpoint window redelivered\n",
					harness.ShortShard(s), t.TakenBy[s], d.Seconds(), sig, t.CheckpointWindow[s])
			} else {
				fmt.Fprintf(w, "    shard %-3s NOT taken over\n", harness.ShortShard(s))
			}
		}
		if t.Signal == "SIGSTOP" {
			fmt.Fprintf(w, "  after the SIGSTOP    %d deliveries by %s on those shards until it acquired them again; %d in flight at the SIGSTOP, excused\n",
				len(t.AfterStop)+len(t.InFlight), t.Killed, len(t.InFlight))
			for _, m := range t.InFlight {
				fmt.Fprintf(w, "    in flight: %s\n", m)
			}
			for _, m := range t.AfterStop {
				fmt.Fprintf(w, "    NOT ALLOWED: %s\n", m)
			}
		}
		if t.Complete {
			fmt.Fprintf(w, "  failover             %.2fs from %s to every shard held again (%s: timeout+heartbeat = %v)\n",
				t.Failover.Seconds(), sig, t.Settings, t.ExpectedFailover)
		} else {
			fmt.Fprintf(w, "  failover             INCOMPLETE\n")
		}
	}
	if st := t.FanOut; st != nil {
		fmt.Fprintf(w, "  fan-out              consumer %s: %d SubscribeToShard calls succeeded (%d tenures handled records), %d refused by the 5-second rule (ResourceInUse), %d by the one-call-a-second limit, %d subscriptions taken over\n",
			fanOutConsumer, st.Subscribed, t.Tenures, st.ResourceInUse, st.LimitExceeded, st.TakenOver)
		if p := t.fanOutProblem(); p != "" {
			fmt.Fprintf(w, "    FAILED: %s\n", p)
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
