package main

// The tenures compute judges and its helpers: tenure (one holding of a
// shard's lease by one process) and the slack allowed around a SIGSTOP or
// a SIGKILL, the earliest a take after a SIGCONT may have landed
// (takeBound), a delivery in flight across a SIGSTOP (inFlightAcrossStop),
// why a record was handled again (explain), and minTime and maxTime.

import (
	"fmt"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
)

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
