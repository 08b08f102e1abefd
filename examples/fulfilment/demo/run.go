package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// config is one run of the demo: instances of the fulfilment service as
// separate processes on one stream and lease table (which must exist), a
// trickle of orders, one instance SIGKILLed on the way.
type config struct {
	Stream, Table string
	Orders        int           // orders to publish
	PublishOver   time.Duration // spread over this long
	Instances     int
	// Lease settings of every instance (--heartbeat, --timeout; 0 for the
	// library's defaults) and its checkpoint interval.
	Heartbeat, Timeout time.Duration
	// KeyConcurrency is the instances' --key-concurrency; 0 for the default.
	KeyConcurrency     int
	CheckpointInterval time.Duration
	// FanOut, if set, is an in-memory Kinesis on a local endpoint
	// (startFanOut), holding the stream: the demo publishes to it and the
	// instances read it with enhanced fan-out as the consumer
	// fanOutConsumer. The caller closes it. Nil: the instances poll the
	// emulator.
	FanOut *harness.FanOutKinesis
	// FanOutRule is FanOut's 5-second rule (its TakeoverAfter), for the
	// bounds; 0: fanOutTakeover, which startFanOut gives it.
	FanOutRule time.Duration
	// Kill SIGKILLs the instance holding the most shards once KillAt of the
	// orders are published (at once when there are none).
	Kill   bool
	KillAt float64
	// Dir holds the binary, the reports and the instances' logs.
	Dir string
	// Binary is a built examples/fulfilment; empty: build it into Dir
	// (with -race when Race).
	Binary string
	Race   bool
	// Out receives the progress; nil discards it.
	Out io.Writer
}

// fanOutConsumer is the stream consumer the instances read with in fan-out
// mode (their --fan-out).
const fanOutConsumer = "fulfilment-demo"

// fanOutTakeover is the 5-second rule of Kinesis, which the in-memory
// Kinesis keeps: a SubscribeToShard call for a shard within this of the
// previous successful one fails with ResourceInUseException (the library
// retries it every second), a later one takes the subscription over.
const fanOutTakeover = 5 * time.Second

// startFanOut serves an in-memory Kinesis with Kinesis' rules for
// SubscribeToShard (the 5-second rule rule; 0: fanOutTakeover) and a stream
// of shards on it. Close it once the instances are gone.
func startFanOut(stream string, shards int32, rule time.Duration) (*harness.FanOutKinesis, error) {
	fo := harness.StartFanOutKinesis(kinesisfake.FanOutRules{TakeoverAfter: cmp.Or(rule, fanOutTakeover)})
	if err := fo.CreateStream(context.Background(), stream, shards); err != nil {
		fo.Close()
		return nil, fmt.Errorf("demo: the fan-out stream: %w", err)
	}
	return fo, nil
}

// reading says how the instances read the stream.
func (c *config) reading() string {
	if c.FanOut == nil {
		return "polling"
	}
	return fmt.Sprintf("enhanced fan-out as consumer %s from the in-memory Kinesis at %s", fanOutConsumer, c.FanOut.URL())
}

// heartbeat and timeout are the instances' settings, as the fulfilment
// service resolves its flags: the library's defaults when neither is set,
// else a timeout of five heartbeats.
func (c *config) heartbeat() time.Duration {
	switch {
	case c.Heartbeat > 0:
		return c.Heartbeat
	case c.Timeout > 0:
		return c.Timeout / 5
	}
	return kinesislease.DefaultHeartbeat
}

func (c *config) timeout() time.Duration {
	switch {
	case c.Timeout > 0:
		return c.Timeout
	case c.Heartbeat > 0:
		return 5 * c.Heartbeat
	}
	return kinesislease.DefaultTimeout
}

// fence is how long after its last successful heartbeat was sent a holder
// goes on delivering: 5/6 of the timeout (kinesislease.WithHeartbeat).
func (c *config) fence() time.Duration { return c.timeout() - c.timeout()/6 }

// settings describes the lease settings, for the progress and the tally.
func (c *config) settings() string {
	return fmt.Sprintf("heartbeat %v, timeout %v, fence %v", c.heartbeat(), c.timeout(), c.fence().Round(time.Millisecond))
}

// expectedFailover is the time from a SIGKILL until a survivor takes a lease
// over, as the library documents it: a survivor must see the dead
// instance's heartbeat unchanged for the timeout, and it reads the
// membership rows every heartbeat.
func (c *config) expectedFailover() time.Duration { return c.timeout() + c.heartbeat() }

// bestFailover and worstFailover bound it. The dead holder's last heartbeat
// was at most a heartbeat interval before the kill, and a survivor times
// the value from the first read that shows it: no takeover before
// timeout−heartbeat. That read comes at most a jittered heartbeat interval
// after the kill, and the one that finds the value a timeout old at most
// another after that; add a second for the take, scheduling and the report.
// With fan-out the taker's first subscription may come up against the
// 5-second rule (the dead holder subscribed just before the kill): up to
// the rule's length more, as the library documents.
func (c *config) bestFailover() time.Duration { return c.timeout() - c.heartbeat() }

func (c *config) worstFailover() time.Duration {
	w := c.timeout() + 2*c.heartbeat() + time.Second
	if c.FanOut != nil {
		w += c.fanOutRule()
	}
	return w
}

func (c *config) fanOutRule() time.Duration {
	if c.FanOutRule > 0 {
		return c.FanOutRule
	}
	return fanOutTakeover
}

// settleTimeout bounds the wait for every shard to be held before the orders
// start; takeoverTimeout the wait for a failover; drainTimeout the wait for
// the last orders once they are all published. The settle is a
// precondition, not what is measured: it waits up to a minute, as the chaos
// run does, for a fleet starting on a machine loaded past its cores.
func (c *config) settleTimeout() time.Duration   { return 60*time.Second + 2*c.timeout() }
func (c *config) takeoverTimeout() time.Duration { return 2*c.worstFailover() + 5*time.Second }
func (c *config) drainTimeout() time.Duration    { return 30 * time.Second }

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

// publish puts the orders on the stream in a steady trickle over
// PublishOver, in PutRecords calls of at most 500, partitioned by customer.
// It closes killNow once KillAt of them are published, and returns the ids
// of the orders put.
func (d *demo) publish(ctx context.Context, killNow chan struct{}) ([]string, error) {
	c := d.cfg
	var once sync.Once
	signalKill := func() { once.Do(func() { close(killNow) }) }
	defer signalKill()
	killAt := int(float64(c.Orders) * c.KillAt)
	if c.Orders == 0 || killAt <= 0 {
		signalKill()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var ids []string
	var pending []ktypes.PutRecordsRequestEntry
	var pendingIDs []string
	next := 0
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for len(ids) < c.Orders {
		select {
		case <-ctx.Done():
			return ids, ctx.Err()
		case <-tick.C:
		}
		due := c.Orders
		if c.PublishOver > 0 {
			due = min(c.Orders, int(float64(c.Orders)*float64(time.Since(start))/float64(c.PublishOver))+1)
		}
		for ; next < due; next++ {
			o := newOrder(rng, next)
			data, err := codec.Msgpack.Marshal(&o)
			if err != nil {
				return ids, err
			}
			pending = append(pending, ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(o.Customer)})
			pendingIDs = append(pendingIDs, o.ID)
			d.customers.Store(o.ID, o.Customer)
		}
		for len(pending) > 0 {
			n := min(500, len(pending))
			out, err := d.env.Kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{
				StreamName: aws.String(c.Stream), Records: pending[:n],
			})
			if err != nil {
				return ids, fmt.Errorf("demo: PutRecords: %w", err)
			}
			// Keep the failed entries (throttled) for the next tick.
			var retry []ktypes.PutRecordsRequestEntry
			var retryIDs []string
			for i, r := range out.Records {
				if r.ErrorCode != nil {
					retry, retryIDs = append(retry, pending[i]), append(retryIDs, pendingIDs[i])
				} else {
					ids = append(ids, pendingIDs[i])
				}
			}
			pending = append(retry, pending[n:]...)
			pendingIDs = append(retryIDs, pendingIDs[n:]...)
			d.published.Store(int64(len(ids)))
			if len(retry) > 0 {
				break
			}
		}
		if c.Kill && len(ids) >= killAt {
			signalKill()
		}
	}
	return ids, nil
}

func newOrder(rng *rand.Rand, n int) harness.Order {
	o := harness.Order{
		ID:        fmt.Sprintf("ord-%06d", n),
		Customer:  fmt.Sprintf("customer-%03d", rng.IntN(200)),
		CreatedAt: time.Now().UTC(),
	}
	for range 1 + rng.IntN(3) {
		it := harness.Item{SKU: fmt.Sprintf("sku-%04d", rng.IntN(1000)), Quantity: 1 + rng.IntN(3), Price: int64(100 + rng.IntN(9900))}
		o.Items = append(o.Items, it)
		o.Total += int64(it.Quantity) * it.Price
	}
	return o
}

// waitTakeover waits until a survivor acquired every shard the killed
// instance held, printing each takeover.
func (d *demo) waitTakeover(ctx context.Context) error {
	k := d.kill
	deadline := time.Now().Add(d.cfg.takeoverTimeout())
	reported := map[string]bool{}
	return harness.Poll(ctx, 50*time.Millisecond, d.fleet.Died, func() (bool, error) {
		d.mu.Lock()
		for _, e := range d.reports.Events {
			if e.Kind == "acquired" && e.Owner != k.owner && e.At.After(k.at) && slices.Contains(k.shards, e.Shard) && !reported[e.Shard] {
				reported[e.Shard] = true
				d.printf("%s took shard %s over, %.2fs after the kill\n", e.Owner, harness.ShortShard(e.Shard), e.At.Sub(k.at).Seconds())
			}
		}
		d.mu.Unlock()
		if len(reported) == len(k.shards) {
			d.printf("every shard held again %.2fs after the kill (timeout %v + heartbeat %v = %v; bounds %.1fs..%.1fs)\n",
				d.lastTakeover().Sub(k.at).Seconds(), d.cfg.timeout(), d.cfg.heartbeat(), d.cfg.expectedFailover(),
				d.cfg.bestFailover().Seconds(), d.cfg.worstFailover().Seconds())
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("demo: %v after killing %s, shards %s are not all taken over", d.cfg.takeoverTimeout(), k.owner, harness.ShortList(k.shards))
		}
		return false, nil
	})
}

func (d *demo) lastTakeover() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := d.kill
	var last time.Time
	for _, s := range k.shards {
		var first time.Time
		for _, e := range d.reports.Events {
			if e.Shard == s && e.Kind == "acquired" && e.Owner != k.owner && e.At.After(k.at) && (first.IsZero() || e.At.Before(first)) {
				first = e.At
			}
		}
		if first.After(last) {
			last = first
		}
	}
	return last
}

var errNotHandled = errors.New("demo: timeout")

// waitHandled waits until every published order was handled.
func (d *demo) waitHandled(ctx context.Context, ids []string) error {
	deadline := time.Now().Add(d.cfg.drainTimeout())
	return harness.Poll(ctx, 100*time.Millisecond, d.fleet.Died, func() (bool, error) {
		d.mu.Lock()
		missing := 0
		for _, id := range ids {
			if !d.reports.Handled[id] {
				missing++
			}
		}
		d.mu.Unlock()
		if missing == 0 {
			d.printf("every published order handled\n")
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("%w: %d orders not handled %v after publishing", errNotHandled, missing, d.cfg.drainTimeout())
		}
		return false, nil
	})
}
