package main

// The tally written for people (print): the chaos carried out, the orders
// published, handled and duplicated with their causes, the takeovers, and
// the violations.

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

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
