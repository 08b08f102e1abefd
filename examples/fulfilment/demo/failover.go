package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
)

// This file is --measure-failover's trial. Failover is measured as the
// issue defines it: the time from the signal (SIGKILL or SIGSTOP of the
// instance holding the most shards) until a survivor handles, on each shard
// the victim held, the first record put after the signal, with records
// flowing on every shard. The trial's failover is the longest over the
// victim's shards.

// put is one record the failover publisher put on the stream: its order id,
// the shard it landed on (from the PutRecords response) and when its
// PutRecords call was sent.
type put struct {
	ID, Shard string
	Sent      time.Time
}

// shardFailover is the failover of each of the victim's shards: the time
// from the signal at until the first delivery, by an owner other than the
// victim, of the first record put on the shard after the signal (the put
// with the earliest send time strictly after at). pending lists, in the
// order of shards, the shards not measured yet: no record put after the
// signal, or that record not yet handled by a survivor. first is, per
// shard, the id of that first record (absent while none was put).
func shardFailover(puts []put, ds []harness.Delivery, victim string, shards []string, at time.Time) (per map[string]time.Duration, first map[string]string, pending []string) {
	firstPut := map[string]put{}
	for _, p := range puts {
		if !slices.Contains(shards, p.Shard) || !p.Sent.After(at) {
			continue
		}
		if f, ok := firstPut[p.Shard]; !ok || p.Sent.Before(f.Sent) {
			firstPut[p.Shard] = p
		}
	}
	first = map[string]string{}
	wanted := map[string]string{} // id -> shard
	for s, p := range firstPut {
		first[s] = p.ID
		wanted[p.ID] = s
	}
	per = map[string]time.Duration{}
	for _, d := range ds {
		s, ok := wanted[d.ID]
		if !ok || d.Shard != s || d.Owner == victim {
			continue
		}
		if f, ok := per[s]; !ok || d.At.Sub(at) < f {
			per[s] = d.At.Sub(at)
		}
	}
	for _, s := range shards {
		if _, ok := per[s]; !ok {
			pending = append(pending, s)
		}
	}
	return per, first, pending
}

// trial is what one failover trial found.
type trial struct {
	Victim string
	Shards []string // the victim's, at the signal
	// PerShard is every victim shard's failover (see shardFailover);
	// Failover the longest.
	PerShard map[string]time.Duration
	Failover time.Duration
	// Acquired is the longest time from the signal until a survivor
	// acquired a victim shard's lease (the former definition).
	Acquired time.Duration
	// ShareBack: after a SIGSTOP, the time from the SIGCONT until the lease
	// table showed the victim holding its share again.
	ShareBack time.Duration
	Tally     *tally
	// Problems says why the trial failed; none: it passed.
	Problems []string
}

// failoverPublisher puts one record on every shard about every 100ms, each
// PutRecords entry with the ExplicitHashKey of its shard's first hash key,
// and remembers every record put.
type failoverPublisher struct {
	d         *demo
	hashKeys  []string // the first hash key of every shard
	throttled int      // entries PutRecords refused (not put, not retried)

	mu   sync.Mutex
	puts []put
	err  error // run's, once it returned one
}

// failed returns the error run returned, or nil; with the fleet's (see
// Fleet.Died), what the trial's waits check.
func (p *failoverPublisher) failed() error {
	if err := p.d.fleet.Died(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// newFailoverPublisher reads the shards' hash key ranges.
func newFailoverPublisher(ctx context.Context, d *demo) (*failoverPublisher, error) {
	p := &failoverPublisher{d: d}
	in := &kinesis.ListShardsInput{StreamName: aws.String(d.cfg.Stream)}
	for {
		out, err := d.env.Kinesis.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("demo: ListShards %s: %w", d.cfg.Stream, err)
		}
		for _, s := range out.Shards {
			if s.HashKeyRange == nil || s.HashKeyRange.StartingHashKey == nil {
				return nil, fmt.Errorf("demo: shard %s has no hash key range", aws.ToString(s.ShardId))
			}
			p.hashKeys = append(p.hashKeys, *s.HashKeyRange.StartingHashKey)
		}
		if out.NextToken == nil {
			return p, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// run publishes until stop is closed (it finishes the PutRecords call under
// way first) or ctx is done; it returns nil then, or the error of a
// PutRecords call that failed.
func (p *failoverPublisher) run(ctx context.Context, stop <-chan struct{}) (err error) {
	defer func() {
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	next := 0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-stop:
			return nil
		case <-tick.C:
		}
		entries := make([]ktypes.PutRecordsRequestEntry, len(p.hashKeys))
		ids := make([]string, len(p.hashKeys))
		for i, hk := range p.hashKeys {
			o := newOrder(rng, next)
			next++
			data, err := codec.Msgpack.Marshal(&o)
			if err != nil {
				return err
			}
			entries[i] = ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(o.Customer), ExplicitHashKey: aws.String(hk)}
			ids[i] = o.ID
		}
		sent := time.Now()
		out, err := p.d.env.Kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(p.d.cfg.Stream), Records: entries})
		if err != nil {
			return fmt.Errorf("demo: PutRecords: %w", err)
		}
		p.mu.Lock()
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				p.throttled++
				continue
			}
			p.puts = append(p.puts, put{ID: ids[i], Shard: aws.ToString(r.ShardId), Sent: sent})
		}
		p.d.published.Store(int64(len(p.puts)))
		p.mu.Unlock()
	}
}

// snapshot returns the records put so far.
func (p *failoverPublisher) snapshot() []put {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.puts)
}

// runFailover runs one failover trial of cfg: the instances started, every
// shard held, a record per shard every 100ms for about 2s, then the
// instance holding the most shards SIGKILLed (signal "kill") or
// SIGSTOPped ("stop"), the failover measured per shard (shardFailover),
// publishing stopped, everything drained and the tally made. After a
// SIGSTOP the victim is SIGCONTed once every one of its shards was handled
// by a survivor, records flow on until the lease table shows it holding its
// share (⌊S/N⌋ or ⌈S/N⌉ shards) again, and the tally checks that it handled
// nothing of its former shards meanwhile but a record in flight at the
// SIGSTOP. The error reports a trial that could not complete; the trial's
// Problems a completed one that went wrong.
func runFailover(ctx context.Context, cfg config, env harness.Env, signal string) (*trial, error) {
	if cfg.Instances < 2 || cfg.Dir == "" || (signal != "kill" && signal != "stop") {
		return nil, fmt.Errorf("demo: bad failover config: %d instances, dir %q, signal %q", cfg.Instances, cfg.Dir, signal)
	}
	d := newDemo(cfg, env)
	var err error
	if d.shards, err = d.fleet.Prepare(ctx); err != nil {
		return nil, err
	}
	defer d.fleet.Cleanup()
	pub, err := newFailoverPublisher(ctx, d)
	if err != nil {
		return nil, err
	}
	if len(pub.hashKeys) != len(d.shards) {
		return nil, fmt.Errorf("demo: %d shards listed, %d hash key ranges", len(d.shards), len(pub.hashKeys))
	}
	if err := d.startInstances(); err != nil {
		return nil, err
	}
	d.printf("started %d instances of the fulfilment service (%s, %s); logs and reports in %s\n",
		cfg.Instances, cfg.settings(), cfg.reading(), cfg.Dir)

	// The watcher follows the reports every 100ms but the lease table only
	// every second: with many shards, reading every row ten times a second
	// would load the DynamoDB endpoint the instances share.
	d.printf("%s\n", d.header())
	var ownersAt time.Time
	stopWatch := harness.Watch(ctx, d.out, 100*time.Millisecond, func(ctx context.Context) {
		if err := d.readReports(); err != nil {
			d.printf("reading reports: %v\n", err)
		}
		if time.Since(ownersAt) >= time.Second {
			ownersAt = time.Now()
			if owners, err := d.readOwners(ctx); err == nil {
				d.mu.Lock()
				d.owners = owners
				d.mu.Unlock()
			}
		}
	}, d.row)
	defer stopWatch()

	if _, err := d.waitStable(ctx, 2*cfg.heartbeat(), false, d.fleet.Died); err != nil {
		return nil, err
	}

	stopPub := make(chan struct{})
	var stopOnce sync.Once
	defer stopOnce.Do(func() { close(stopPub) })
	pubDone := make(chan error, 1)
	go func() { pubDone <- pub.run(ctx, stopPub) }()
	stopPublishing := func() error {
		stopOnce.Do(func() { close(stopPub) })
		err := <-pubDone
		pubDone <- nil // a second call returns nil
		if pub.throttled > 0 {
			d.printf("%d entries refused by PutRecords (throttled), not published\n", pub.throttled)
		}
		return err
	}
	// Records flow on every shard for 2s of an unchanged assignment.
	if _, err := d.waitStable(ctx, 2*time.Second, true, pub.failed); err != nil {
		return nil, err
	}

	victim, err := d.signalOne(ctx, signal)
	if err != nil {
		return nil, err
	}
	k := d.kill
	sig := k.signalName()

	// Failover: poll the reports until a survivor handled, on every shard
	// of the victim, the first record put after the signal.
	deadline := k.at.Add(cfg.takeoverTimeout())
	reported := map[string]bool{}
	err = harness.Poll(ctx, 50*time.Millisecond, pub.failed, func() (bool, error) {
		puts := pub.snapshot()
		d.mu.Lock()
		per, first, pending := shardFailover(puts, d.reports.Deliveries, k.owner, k.shards, k.at)
		d.mu.Unlock()
		for _, s := range k.shards {
			if f, ok := per[s]; ok && !reported[s] {
				reported[s] = true
				d.printf("shard %s: first record put after the %s (%s) handled by a survivor %.2fs after it\n",
					harness.ShortShard(s), sig, first[s], f.Seconds())
			}
		}
		if len(pending) == 0 {
			return true, nil
		}
		if time.Now().After(deadline) {
			var why []string
			for _, s := range pending {
				if first[s] == "" {
					why = append(why, harness.ShortShard(s)+": no record put after the signal")
				} else {
					why = append(why, harness.ShortShard(s)+": "+first[s]+" not handled by a survivor")
				}
			}
			return false, fmt.Errorf("demo: FAILOVER TIMEOUT: %v after the %s of %s, shards %s not failed over (%s)",
				cfg.takeoverTimeout(), sig, k.owner, harness.ShortList(pending), strings.Join(why, "; "))
		}
		return false, nil
	})
	if err != nil {
		_ = stopPublishing()
		return nil, err
	}

	tr := &trial{Victim: k.owner, Shards: k.shards}
	if signal == "stop" {
		cont := time.Now()
		if err := victim.Continue(); err != nil {
			return nil, fmt.Errorf("demo: SIGCONT %s: %w", victim.Owner, err)
		}
		d.mu.Lock()
		k.cont = cont
		d.mu.Unlock()
		d.printf("SIGCONT %s, %.2fs after its SIGSTOP\n", victim.Owner, cont.Sub(k.at).Seconds())
		back, err := d.waitShare(ctx, victim.Owner, cont, pub.failed)
		if err != nil {
			if ctx.Err() != nil || pub.failed() != nil {
				_ = stopPublishing()
				return nil, err
			}
			tr.Problems = append(tr.Problems, err.Error())
		}
		tr.ShareBack = back
	}
	if err := stopPublishing(); err != nil {
		return nil, err
	}
	puts := pub.snapshot()
	ids := make([]string, len(puts))
	for i, p := range puts {
		ids[i] = p.ID
	}
	if err := d.drain(ctx, ids, stopWatch); err != nil {
		return nil, err
	}

	// The measure, from the complete reports.
	tr.PerShard, _, _ = shardFailover(puts, d.reports.Deliveries, k.owner, k.shards, k.at)
	for _, f := range tr.PerShard {
		tr.Failover = max(tr.Failover, f)
	}
	t := compute(ids, d.reports.Deliveries, d.reports.Events, k, cfg.fence())
	t.Settings, t.ExpectedFailover = cfg.settings(), cfg.expectedFailover()
	t.fanOut(cfg.FanOut)
	tr.Tally, tr.Acquired = t, t.Failover
	if p := t.fanOutProblem(); p != "" {
		tr.Problems = append(tr.Problems, p)
	}
	if t.Lost > 0 {
		tr.Problems = append(tr.Problems, fmt.Sprintf("%d orders lost, e.g. %s", t.Lost, strings.Join(t.LostSample, " ")))
	}
	if t.Unknown > 0 {
		tr.Problems = append(tr.Problems, fmt.Sprintf("%d handled orders never published", t.Unknown))
	}
	for _, o := range t.Overlaps {
		tr.Problems = append(tr.Problems, "overlap: "+o)
	}
	for _, m := range t.AfterStop {
		tr.Problems = append(tr.Problems, "after the SIGSTOP: "+m)
	}
	if len(t.OtherDups) > 0 {
		tr.Problems = append(tr.Problems, fmt.Sprintf("%d duplicated orders not explained by the %s's checkpoint window, e.g. %s",
			len(t.OtherDups), sig, strings.Join(t.OtherDups[:min(10, len(t.OtherDups))], " ")))
	}
	return tr, nil
}

// stats returns the median, min and max of ds (not empty).
func stats(ds []time.Duration) (median, lo, hi time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	median = s[len(s)/2]
	if len(s)%2 == 0 {
		median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return median, s[0], s[len(s)-1]
}

// perShard formats a trial's per-shard failovers, in shard order: "1:5.61".
func perShard(tr *trial) string {
	shards := slices.Clone(tr.Shards)
	sort.Slice(shards, func(i, j int) bool { return shards[i] < shards[j] })
	var b []string
	for _, s := range shards {
		if f, ok := tr.PerShard[s]; ok {
			b = append(b, fmt.Sprintf("%s:%.2f", harness.ShortShard(s), f.Seconds()))
		} else {
			b = append(b, harness.ShortShard(s)+":-")
		}
	}
	return strings.Join(b, " ")
}
