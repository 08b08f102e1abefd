package main

// The victim of a kill and the failover trial's waits around it: the
// assignment waited on until stable (waitStable), the instance holding the
// most shards SIGKILLed or SIGSTOPped (signalOne, by a run's kill and by the
// trial), and, after a SIGSTOP, the wait until the SIGCONTed victim holds
// its share again (shareTimeout, waitShare).

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
)

// waitStable waits until every shard is held and the assignment (the lease
// table) has not changed for stable; with flowing also until every shard
// had a record handled. Past twice the settle timeout it goes on with an
// assignment still moving, saying so, and fails when a shard is free or had
// no record handled. It returns the assignment.
func (d *demo) waitStable(ctx context.Context, stable time.Duration, flowing bool, failed func() error) (map[string]string, error) {
	deadline := time.Now().Add(2 * d.cfg.settleTimeout())
	var last map[string]string
	var since time.Time
	err := harness.Poll(ctx, 250*time.Millisecond, failed, func() (bool, error) {
		owners, err := d.readOwners(ctx)
		if err != nil {
			return false, cmp.Or(ctx.Err(), err)
		}
		allHeld := d.allHeld(owners)
		if !maps.Equal(owners, last) {
			last, since = owners, time.Now()
		}
		var quiet []string // shards without a record handled
		if flowing {
			d.mu.Lock()
			seen := map[string]bool{}
			for _, dv := range d.reports.Deliveries {
				seen[dv.Shard] = true
			}
			d.mu.Unlock()
			for _, s := range d.shards {
				if !seen[s] {
					quiet = append(quiet, s)
				}
			}
		}
		what := "every shard held"
		if flowing {
			what = "records handled on every shard"
		}
		if allHeld && len(quiet) == 0 && time.Since(since) >= stable {
			d.printf("%s: %s\n", what, describe(owners))
			return true, nil
		}
		if time.Now().After(deadline) {
			if allHeld && len(quiet) == 0 {
				d.printf("%s, assignment still moving: %s\n", what, describe(owners))
				return true, nil
			}
			return false, fmt.Errorf("demo: %v, not every shard is held or had a record handled (%s without): %s",
				2*d.cfg.settleTimeout(), harness.ShortList(quiet), describe(owners))
		}
		return false, nil
	})
	return last, err
}

// signalOne SIGKILLs (signal "kill") or SIGSTOPs ("stop") the instance
// holding the most shards, and records it in d.kill: the
// time the signal was sent (taken once kill(2) returned) and the shards the
// victim holds in the lease table right after it (nobody can take them
// over that soon).
func (d *demo) signalOne(ctx context.Context, signal string) (*harness.Instance, error) {
	if err := d.fleet.Died(); err != nil {
		return nil, err
	}
	owners, err := d.readOwners(ctx)
	if err != nil {
		return nil, err
	}
	count := map[string]int{}
	for _, o := range owners {
		count[o]++
	}
	var victim *harness.Instance
	for _, in := range d.ins {
		if count[in.Owner] > 0 && (victim == nil || count[in.Owner] >= count[victim.Owner]) {
			victim = in
		}
	}
	if victim == nil {
		return nil, fmt.Errorf("demo: no instance holds a shard: %s", describe(owners))
	}
	k := &kill{owner: victim.Owner}
	if signal == "stop" {
		k.signal = "SIGSTOP"
		if err := victim.Stop(); err != nil {
			return nil, fmt.Errorf("demo: SIGSTOP %s: %w", victim.Owner, err)
		}
		k.at = time.Now()
	} else {
		victim.Expect()
		victim.Kill()
		k.at = time.Now()
		<-victim.Done()
	}
	after, err := d.readOwners(ctx)
	if err != nil {
		return nil, err
	}
	var before []string
	for _, s := range d.shards {
		if after[s] == victim.Owner {
			k.shards = append(k.shards, s)
		}
		if owners[s] == victim.Owner {
			before = append(before, s)
		}
	}
	d.mu.Lock()
	d.kill = k
	d.mu.Unlock()
	d.printf("%s %s, which held shards %s (%d orders published)\n", k.signalName(), victim.Owner, harness.ShortList(k.shards), d.published.Load())
	if !slices.Equal(before, k.shards) {
		d.printf("note: just before the signal it held %s\n", harness.ShortList(before))
	}
	if len(k.shards) == 0 {
		return nil, fmt.Errorf("demo: %s held no shard at the %s", victim.Owner, k.signalName())
	}
	return victim, nil
}

// shareTimeout bounds the wait for a SIGCONTed victim to hold its share
// again.
func (c *config) shareTimeout() time.Duration { return 60*time.Second + 4*c.timeout() }

// waitShare waits until the lease table shows owner holding its share of
// the shards, ⌊S/N⌋ or ⌈S/N⌉ of S shards over N instances, and returns how
// long that took after cont (when it was read).
func (d *demo) waitShare(ctx context.Context, owner string, cont time.Time, failed func() error) (time.Duration, error) {
	n, s := d.cfg.Instances, len(d.shards)
	lo, hi := s/n, (s+n-1)/n
	deadline := cont.Add(d.cfg.shareTimeout())
	var back time.Duration
	err := harness.Poll(ctx, 250*time.Millisecond, failed, func() (bool, error) {
		owners, err := d.readOwners(ctx)
		if err != nil {
			return false, cmp.Or(ctx.Err(), err)
		}
		read := time.Now()
		held := 0
		for _, o := range owners {
			if o == owner {
				held++
			}
		}
		if held >= max(lo, 1) && held <= hi {
			back = read.Sub(cont)
			d.printf("%s holds its share again (%d shards), %.2fs after its SIGCONT: %s\n", owner, held, back.Seconds(), describe(owners))
			return true, nil
		}
		if read.After(deadline) {
			return false, fmt.Errorf("SHARE NOT BACK: %v after its SIGCONT, %s holds %d shards, not %d..%d: %s",
				d.cfg.shareTimeout(), owner, held, lo, hi, describe(owners))
		}
		return false, nil
	})
	return back, err
}
