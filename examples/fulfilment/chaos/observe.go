package main

// What a run watches and gathers: the watcher's round (poll) following the
// reports and the lease table, each row's checkpoint checked never to go
// back (pollRows), the progress row, the rows checked once every instance
// stopped (checkFinalRows), and the observations handed to compute,
// each process's log scanned for its takes and refused checkpoints
// (scanLog).

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/leases"
)

// poll is the watcher's (harness.Watch) round: it follows the reports and
// the lease table, and checks that no process died by itself.
func (r *runner) poll(ctx context.Context) {
	if err := r.readReports(); err != nil {
		r.fail(err)
	}
	if err := r.pollRows(ctx); err != nil && ctx.Err() == nil {
		r.printf("reading the lease table: %v\n", err)
	}
	if err := r.fleet.Died(); err != nil {
		r.fail(err)
	}
}

// readReports reads what the reports gained since the last read.
func (r *runner) readReports() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ins := make([]*harness.Instance, len(r.procs))
	for i, p := range r.procs {
		ins[i] = p.Instance
	}
	return r.reports.Read(ins)
}

// pollRows reads every row of the lease table and checks that no
// checkpoint went backwards: a checkpoint lands only while its writer holds
// the lease, and every holder resumes from the row's checkpoint, so a late
// checkpoint of a fenced holder is the only way back. It also records each
// row's owner (see rowRun), for the tally.
func (r *runner) pollRows(ctx context.Context) error {
	sent := time.Now() // each row's read (strongly consistent) is sent after this
	return harness.ReadRows(ctx, r.store, r.cfg.Stream, r.shards, func(s string, l leases.Lease) {
		r.mu.Lock()
		runs := r.seen[s]
		if n := len(runs); n > 0 && runs[n-1].Owner == l.Owner {
			runs[n-1].Last = sent
		} else {
			r.seen[s] = append(runs, rowRun{Owner: l.Owner, First: sent, Last: sent})
		}
		prev, ok := r.rows[s]
		if ok && prev.Checkpoint.Sequence != "" && harness.CmpSeq(l.Checkpoint.Sequence, prev.Checkpoint.Sequence) < 0 {
			r.regress = append(r.regress, fmt.Sprintf("shard %s: checkpoint went back from %s (counter %d, owner %q) to %s (counter %d, owner %q) at %s",
				harness.ShortShard(s), prev.Checkpoint.Sequence, prev.Counter, prev.Owner, l.Checkpoint.Sequence, l.Counter, l.Owner, r.since(time.Now())))
		}
		r.rows[s] = l
		r.mu.Unlock()
	})
}

func (r *runner) row() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "published %6d handled %6d", len(r.pub), len(r.reports.Handled))
	for _, p := range r.slots {
		var held []string
		for _, s := range r.shards {
			if r.rows[s].Owner == p.Owner {
				held = append(held, harness.ShortShard(s))
			}
		}
		state := "[" + strings.Join(held, " ") + "]"
		switch {
		case p.dead:
			state = "KILLED"
		case p.stopped:
			state = "STOPPED" + state
		case p.draining:
			state = "DRAINING" + state
		}
		fmt.Fprintf(&b, " | %-5s %-14s %5d", p.Owner, state, r.reports.PerOwner[p.Owner])
	}
	return b.String()
}

// checkFinalRows reads the lease table once every instance stopped: each row
// must be free (released), its checkpoint at the shard's last record.
func (r *runner) checkFinalRows(ctx context.Context) error {
	if err := r.pollRows(ctx); err != nil {
		return fmt.Errorf("chaos: reading the lease table: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.shards {
		l, ok := r.rows[s]
		switch {
		case !ok:
			r.problems = append(r.problems, fmt.Sprintf("final row: shard %s has no row", harness.ShortShard(s)))
		case l.Owner != "":
			r.problems = append(r.problems, fmt.Sprintf("final row: shard %s still held by %s after every instance stopped gracefully", harness.ShortShard(s), l.Owner))
		case l.Checkpoint.Sequence != r.lastSeq[s]:
			r.problems = append(r.problems, fmt.Sprintf("final row: shard %s checkpoint %q, its last record is %q", harness.ShortShard(s), l.Checkpoint.Sequence, r.lastSeq[s]))
		}
	}
	return nil
}

// observations gathers what the run saw, for compute.
func (r *runner) observations() *observations {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := &observations{
		Begin: r.begin, Published: slices.Clone(r.pub), Deliveries: slices.Clone(r.reports.Deliveries), Events: slices.Clone(r.reports.Events),
		Actions: slices.Clone(r.actions), Problems: slices.Concat(r.problems, r.regress), Rows: maps.Clone(r.seen),
		Heartbeat: r.cfg.Heartbeat, Timeout: r.cfg.Timeout, CheckpointInterval: r.cfg.CheckpointInterval,
		Seed: r.cfg.Seed, Duration: r.cfg.Duration, Instances: r.cfg.Instances, Shards: len(r.shards),
	}
	if r.cfg.FanOut != nil {
		st := r.cfg.FanOut.SubscribeStats()
		o.FanOut = &st
	}
	for _, p := range r.procs {
		pi := procInfo{Owner: p.Owner, Slot: p.slot, Started: p.started, Exited: p.ExitedAt(), Killed: p.killedAt,
			Interrupted: p.interruptAt, Stops: slices.Clone(p.stops)}
		pi.RefusedCheckpoints, pi.FoundLost, pi.Errors, pi.Takes = scanLog(p.LogPath)
		o.Procs = append(o.Procs, pi)
	}
	return o
}

// scanLog reads an instance's log: the checkpoints refused because the
// lease was lost (the worker's "lease lost; stopping without checkpoint"),
// the re-reads of held rows that found the lease taken ("lease lost"), the
// ERROR lines,
// and every lease it took: free ("lease acquired") or from another owner
// ("lease taken over ... from=").
func scanLog(path string) (refused, lost, errs int, takes []take) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, 0, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, `msg="kinesislease: lease lost; stopping without checkpoint"`):
			refused++
		case strings.Contains(line, `msg="kinesislease: lease lost"`):
			lost++
		case strings.Contains(line, `msg="kinesislease: lease acquired"`), strings.Contains(line, `msg="kinesislease: lease taken over"`):
			if m := takeLine.FindStringSubmatch(line); m != nil {
				if at, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
					takes = append(takes, take{Shard: m[2], From: m[3], At: at})
				}
			}
		}
		if strings.Contains(line, "level=ERROR") {
			errs++
		}
	}
	return refused, lost, errs, takes
}

// takeLine matches the time, shard and previous owner of a take in a log line.
var takeLine = regexp.MustCompile(`^time=(\S+) .* shard=(\S+)(?: from=(\S+))?`)
