package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// demo is the state of one run.
type demo struct {
	cfg    config
	env    harness.Env
	out    *harness.Progress
	shards []string
	fleet  *harness.Fleet
	ins    []*harness.Instance
	store  *dynamo.Store

	published atomic.Int64
	customers sync.Map // order id -> its customer (the partition key), for the per-key order check

	mu      sync.Mutex
	reports harness.Reports
	owners  map[string]string // shard -> owner, from the lease table
	kill    *kill
}

// run runs the demo and returns its tally. The error reports a run that
// could not complete (an instance died, a timeout, ctx cancelled); the
// tally says whether what completed was right. Every process it started is
// gone when it returns.
func run(ctx context.Context, cfg config, env harness.Env) (*tally, error) {
	if cfg.Instances < 1 || cfg.Orders < 0 || cfg.Dir == "" {
		return nil, fmt.Errorf("demo: bad config: %d instances, %d orders, dir %q", cfg.Instances, cfg.Orders, cfg.Dir)
	}
	if cfg.Kill && cfg.Instances < 2 {
		return nil, errors.New("demo: killing an instance needs at least 2")
	}
	d := newDemo(cfg, env)
	var err error
	if d.shards, err = d.fleet.Prepare(ctx); err != nil {
		return nil, err
	}

	defer d.fleet.Cleanup()
	if err := d.startInstances(); err != nil {
		return nil, err
	}
	d.printf("started %d instances of the fulfilment service (%s, %s); logs and reports in %s\n",
		cfg.Instances, cfg.settings(), cfg.reading(), cfg.Dir)

	// Watch the lease table and the reports, print progress every second.
	d.printf("%s\n", d.header())
	stopWatch := harness.Watch(ctx, d.out, 100*time.Millisecond, d.poll, d.row)
	defer stopWatch()

	if err := d.waitSettled(ctx); err != nil {
		return nil, err
	}

	// Publish; kill on the way.
	type result struct {
		ids []string
		err error
	}
	published := make(chan result, 1)
	killNow := make(chan struct{})
	pubCtx, stopPub := context.WithCancel(ctx)
	defer stopPub()
	go func() {
		ids, err := d.publish(pubCtx, killNow)
		published <- result{ids, err}
	}()
	if cfg.Kill {
		select {
		case <-killNow:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if _, err := d.signalOne(ctx, "kill"); err != nil {
			return nil, err
		}
		if err := d.waitTakeover(ctx); err != nil {
			return nil, err
		}
	}
	res := <-published
	if res.err != nil {
		return nil, res.err
	}
	ids := res.ids
	if err := d.drain(ctx, ids, stopWatch); err != nil {
		return nil, err
	}
	t := compute(ids, d.reports.Deliveries, d.reports.Events, d.kill, cfg.fence())
	t.KeyOrder = keyOrder(ids, d.reports.Deliveries, func(id string) string { c, _ := d.customers.Load(id); s, _ := c.(string); return s })
	t.Settings, t.ExpectedFailover = cfg.settings(), cfg.expectedFailover()
	t.fanOut(cfg.FanOut)
	return t, nil
}

// newDemo returns the state of a run of cfg, its fleet not yet prepared.
func newDemo(cfg config, env harness.Env) *demo {
	if cfg.FanOut != nil {
		env = cfg.FanOut.On(env)
	}
	d := &demo{
		cfg: cfg, env: env, out: harness.NewProgress(cfg.Out, time.Now()),
		store:  dynamo.New(env.AWS, cfg.Table, dynamo.WithDynamoDBClient(env.Dynamo)),
		owners: map[string]string{},
	}
	d.fleet = &harness.Fleet{
		Name: "demo", Binary: cfg.Binary, Dir: cfg.Dir, Env: env, Stream: cfg.Stream, Table: cfg.Table,
		Heartbeat: cfg.Heartbeat, Timeout: cfg.Timeout, KeyConcurrency: cfg.KeyConcurrency, CheckpointInterval: cfg.CheckpointInterval,
		ShutdownTimeout: 10 * time.Second, Race: cfg.Race,
	}
	if cfg.FanOut != nil {
		d.fleet.FanOut = fanOutConsumer
	}
	return d
}

func (d *demo) printf(format string, args ...any) { d.out.Printf(format, args...) }

// drain ends a run once ids are published: it waits for them to be handled
// (a timeout is reported, and the tally says which are missing), stops
// every instance gracefully, stops the watcher and reads the reports to
// their end.
func (d *demo) drain(ctx context.Context, ids []string, stopWatch func()) error {
	d.printf("published %d orders\n", len(ids))
	if err := d.waitHandled(ctx, ids); err != nil {
		if errors.Is(err, errNotHandled) {
			d.printf("%v\n", err)
		} else {
			return err
		}
	}
	if err := d.stopAll(); err != nil {
		return err
	}
	stopWatch()
	return d.readReports()
}

func (d *demo) startInstances() error {
	for i := 1; i <= d.cfg.Instances; i++ {
		in, err := d.fleet.Start(fmt.Sprintf("instance-%d", i))
		if err != nil {
			return err
		}
		d.ins = append(d.ins, in)
	}
	return nil
}

// stopAll SIGINTs every live instance and waits for its graceful exit
// (drain, checkpoint, release), SIGKILLing one that takes too long.
func (d *demo) stopAll() error {
	var live []*harness.Instance
	for _, in := range d.ins {
		if !in.Exited() && !in.Expected() {
			in.Expect()
			_ = in.Interrupt()
			live = append(live, in)
		}
	}
	d.printf("SIGINT to %s: draining, checkpointing, releasing\n", names(live))
	timeout := time.After(20 * time.Second)
	var errs []error
	for _, in := range live {
		select {
		case <-in.Done():
			if err := in.Err(); err != nil {
				errs = append(errs, fmt.Errorf("demo: %s exited with %v after SIGINT; the end of its log:\n%s", in.Owner, err, in.LogTail()))
			}
		case <-timeout:
			errs = append(errs, fmt.Errorf("demo: %s still running 20s after SIGINT; killed", in.Owner))
			in.Kill()
		}
	}
	d.printf("every instance stopped\n")
	return errors.Join(errs...)
}

func names(ins []*harness.Instance) string {
	var s []string
	for _, in := range ins {
		s = append(s, in.Owner)
	}
	return strings.Join(s, ", ")
}

// readReports reads what the reports gained since the last read.
func (d *demo) readReports() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reports.Read(d.ins)
}

// readOwners reads who holds each shard from the lease table.
func (d *demo) readOwners(ctx context.Context) (map[string]string, error) {
	owners := map[string]string{}
	err := harness.ReadRows(ctx, d.store, d.cfg.Stream, d.shards, func(s string, l leases.Lease) {
		owners[s] = l.Owner
	})
	if err != nil {
		return nil, fmt.Errorf("demo: reading the lease table: %w", err)
	}
	return owners, nil
}

// poll is the watcher's (harness.Watch) round: it follows the reports and
// the lease table.
func (d *demo) poll(ctx context.Context) {
	if err := d.readReports(); err != nil {
		d.printf("reading reports: %v\n", err)
	}
	if owners, err := d.readOwners(ctx); err == nil {
		d.mu.Lock()
		d.owners = owners
		d.mu.Unlock()
	}
}

const colWidth = 22

func (d *demo) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%9s %8s", "published", "handled")
	for _, in := range d.ins {
		fmt.Fprintf(&b, " | %-*s", colWidth, in.Owner+" shards handled")
	}
	return b.String()
}

// row is one progress line: what each instance holds (lease table) and
// handled (its report).
func (d *demo) row() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%9d %8d", d.published.Load(), len(d.reports.Handled))
	for _, in := range d.ins {
		var held []string
		for _, s := range d.shards {
			if d.owners[s] == in.Owner {
				held = append(held, harness.ShortShard(s))
			}
		}
		shards := "[" + strings.Join(held, " ") + "]"
		switch {
		case in.Expected() && d.kill != nil && d.kill.owner == in.Owner:
			shards = "KILLED"
		case d.kill != nil && d.kill.owner == in.Owner && d.kill.stopped():
			shards = "STOPPED"
		case in.Exited():
			shards = "exited"
		}
		fmt.Fprintf(&b, " | %-*s", colWidth, fmt.Sprintf("%-12s %6d", shards, d.reports.PerOwner[in.Owner]))
	}
	return b.String()
}

// allHeld reports whether owners names an owner for every shard.
func (d *demo) allHeld(owners map[string]string) bool {
	held := len(owners) == len(d.shards)
	for _, o := range owners {
		held = held && o != ""
	}
	return held
}

// waitSettled waits until every shard is held by an instance and the
// assignment has not changed for two heartbeats (bounded).
func (d *demo) waitSettled(ctx context.Context) error {
	deadline := time.Now().Add(d.cfg.settleTimeout())
	stable := 2 * d.cfg.heartbeat()
	var last map[string]string
	var since time.Time
	return harness.Poll(ctx, 100*time.Millisecond, d.fleet.Died, func() (bool, error) {
		owners, err := d.readOwners(ctx)
		if err != nil && ctx.Err() == nil {
			return false, err
		}
		allHeld := d.allHeld(owners) && d.allSubscribed()
		if !maps.Equal(owners, last) {
			last, since = owners, time.Now()
		}
		if allHeld && time.Since(since) >= stable {
			d.printf("every shard held: %s\n", describe(owners))
			return true, nil
		}
		if time.Now().After(deadline) {
			if allHeld {
				d.printf("every shard held, assignment still moving: %s\n", describe(owners))
				return true, nil
			}
			if d.allHeld(owners) {
				return false, fmt.Errorf("demo: %v after starting, not every shard has a subscription open: %s", d.cfg.settleTimeout(), describe(owners))
			}
			return false, fmt.Errorf("demo: %v after starting, not every shard is held: %s", d.cfg.settleTimeout(), describe(owners))
		}
		return false, nil
	})
}

// allSubscribed reports, with enhanced fan-out, whether every shard has a
// subscription open: a holder that took a shard within the 5-second rule of
// the previous holder's subscription (the start's balancing moves, which a
// loaded machine stretches) reads nothing until the rule lets it
// subscribe, and killed before then it leaves the kill's checks (its
// tenures, the takers refused by the rule) nothing to see (CI24: the victim
// took two shards 9.2 s after start, the rule 10 s, the kill at 13.2 s).
// Polling: always.
func (d *demo) allSubscribed() bool {
	fo := d.cfg.FanOut
	if fo == nil {
		return true
	}
	for _, s := range d.shards {
		if fo.Subscriptions(s) == 0 {
			return false
		}
	}
	return true
}

// describe lists shard -> owner.
func describe(owners map[string]string) string {
	var s []string
	for shard, o := range owners {
		if o == "" {
			o = "free"
		}
		s = append(s, harness.ShortShard(shard)+":"+o)
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}
