package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/codec"
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
	// Lease settings of every instance (--lease, --renew, --scan) and its
	// checkpoint interval.
	Lease, Renew, Scan time.Duration
	CheckpointInterval time.Duration
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

// env is where the emulators are.
type env struct {
	DynamoEndpoint, KinesisEndpoint string
	AWS                             aws.Config // region and credentials of the clients below
	Dynamo                          *dynamodb.Client
	Kinesis                         *kinesis.Client
}

// Timings derived from the lease settings.
func (c *config) fence() time.Duration { return c.Lease - c.Lease/5 }

// expectedFailover is the time from a SIGKILL until a survivor takes a lease
// over, as the library documents it: a survivor must see the row unchanged
// for a lease duration, and it reads the row every scan interval.
func (c *config) expectedFailover() time.Duration { return c.Lease + c.Scan }

// bestFailover and worstFailover bound it. The dead holder renewed last at
// most a renew interval before the kill, and the survivor's clock starts at
// the first scan that sees that renewal: no takeover before lease−renew.
// That scan comes at most 1.1 scan intervals (jittered) after the kill, and
// the one that finds the row a lease duration old at most 1.1 scan intervals
// after that; add a second for the Take write, scheduling and the report.
func (c *config) bestFailover() time.Duration { return c.Lease - c.Renew }
func (c *config) worstFailover() time.Duration {
	return c.Lease + 2*(c.Scan+c.Scan/10) + time.Second
}

// settleTimeout bounds the wait for every shard to be held before the orders
// start; takeoverTimeout the wait for a failover; drainTimeout the wait for
// the last orders once they are all published.
func (c *config) settleTimeout() time.Duration   { return 15*time.Second + 2*c.Lease }
func (c *config) takeoverTimeout() time.Duration { return 2*c.worstFailover() + 5*time.Second }
func (c *config) drainTimeout() time.Duration    { return 30 * time.Second }

// Order is the record the shop puts on the stream; its field names (JSON
// tags, which msgpack uses too) are the contract with examples/fulfilment.
type Order struct {
	ID        string    `json:"id"`
	Customer  string    `json:"customer"`
	Items     []Item    `json:"items"`
	Total     int64     `json:"total"` // cents
	CreatedAt time.Time `json:"created_at"`
}

// Item is one line of an order.
type Item struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
	Price    int64  `json:"price"` // cents per unit
}

// instance is one fulfilment process.
type instance struct {
	name, report, logPath string
	cmd                   *exec.Cmd
	logFile               *os.File
	done                  chan struct{} // closed once Wait returned
	err                   error         // Wait's
	killed, stopped       atomic.Bool   // SIGKILLed, SIGINTed by the demo
}

func (in *instance) exited() bool {
	select {
	case <-in.done:
		return true
	default:
		return false
	}
}

func (in *instance) signal(sig syscall.Signal) {
	if !in.exited() {
		_ = in.cmd.Process.Signal(sig)
	}
}

// logTail returns the last lines of the instance's log.
func (in *instance) logTail() string {
	data, _ := os.ReadFile(in.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// demo is the state of one run.
type demo struct {
	cfg    config
	env    env
	out    *syncWriter
	begin  time.Time
	shards []string
	ins    []*instance
	store  *dynamo.Store

	published atomic.Int64

	mu         sync.Mutex
	tails      []*tail
	deliveries []delivery
	events     []leaseEvent
	handled    map[string]bool // distinct order ids
	perOwner   map[string]int
	owners     map[string]string // shard -> owner, from the lease table
	kill       *kill
}

// run runs the demo and returns its tally. The error reports a run that
// could not complete (an instance died, a timeout, ctx cancelled); the
// tally says whether what completed was right. Every process it started is
// gone when it returns.
func run(ctx context.Context, cfg config, env env) (*tally, error) {
	if cfg.Instances < 1 || cfg.Orders < 0 || cfg.Dir == "" {
		return nil, fmt.Errorf("demo: bad config: %d instances, %d orders, dir %q", cfg.Instances, cfg.Orders, cfg.Dir)
	}
	if cfg.Kill && cfg.Instances < 2 {
		return nil, errors.New("demo: killing an instance needs at least 2")
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	d := &demo{
		cfg: cfg, env: env, out: &syncWriter{w: out}, begin: time.Now(),
		store:    dynamo.New(env.AWS, cfg.Table, dynamo.WithClient(env.Dynamo)),
		handled:  map[string]bool{},
		perOwner: map[string]int{},
		owners:   map[string]string{},
	}

	if d.cfg.Binary == "" {
		bin, err := build(ctx, cfg.Dir, cfg.Race)
		if err != nil {
			return nil, err
		}
		d.cfg.Binary = bin
	}
	var err error
	if d.shards, err = listShards(ctx, env.Kinesis, cfg.Stream); err != nil {
		return nil, err
	}

	defer d.cleanup()
	if err := d.startInstances(); err != nil {
		return nil, err
	}
	d.printf("started %d instances of the fulfilment service (lease %v, renew %v, scan %v); logs and reports in %s\n",
		cfg.Instances, cfg.Lease, cfg.Renew, cfg.Scan, cfg.Dir)

	// Watch the lease table and the reports, print progress every second.
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	watchers.Go(func() { d.watch(watchCtx) })
	defer func() { stopWatch(); watchers.Wait() }()

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
		if err := d.killOne(ctx); err != nil {
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
	d.printf("published %d orders\n", len(ids))
	if err := d.waitHandled(ctx, ids); err != nil {
		if errors.Is(err, errNotHandled) {
			d.printf("%v\n", err) // the tally says which are missing
		} else {
			return nil, err
		}
	}
	if err := d.stopAll(); err != nil {
		return nil, err
	}
	stopWatch()
	watchers.Wait()
	if err := d.readReports(); err != nil {
		return nil, err
	}
	t := compute(ids, d.deliveries, d.events, d.kill, cfg.fence())
	t.Lease, t.Renew, t.Scan = cfg.Lease, cfg.Renew, cfg.Scan
	return t, nil
}

func (d *demo) printf(format string, args ...any) {
	fmt.Fprintf(d.out, "%6.1fs  "+format, append([]any{time.Since(d.begin).Seconds()}, args...)...)
}

// build builds examples/fulfilment into dir.
func build(ctx context.Context, dir string, race bool) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("demo: the go command is not in PATH")
	}
	gomod, err := exec.CommandContext(ctx, goBin, "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return "", fmt.Errorf("demo: run me inside the kinesislease module (go env GOMOD: %v)", err)
	}
	bin := filepath.Join(dir, "fulfilment")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, goBin, append(args, "./examples/fulfilment")...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("demo: go build ./examples/fulfilment: %v\n%s", err, out)
	}
	return bin, nil
}

func listShards(ctx context.Context, client *kinesis.Client, stream string) ([]string, error) {
	var ids []string
	in := &kinesis.ListShardsInput{StreamName: aws.String(stream)}
	for {
		out, err := client.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("demo: ListShards %s: %w", stream, err)
		}
		for _, s := range out.Shards {
			ids = append(ids, aws.ToString(s.ShardId))
		}
		if out.NextToken == nil {
			return ids, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// instanceEnv is the instances' environment: ours without AWS_*, plus the
// emulators' region and static credentials.
func instanceEnv(race bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	env = append(env, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_EC2_METADATA_DISABLED=true")
	if race {
		env = append(env, "GORACE=halt_on_error=1")
	}
	return env
}

func (d *demo) startInstances() error {
	c := d.cfg
	for i := 1; i <= c.Instances; i++ {
		name := fmt.Sprintf("instance-%d", i)
		in := &instance{
			name:    name,
			report:  filepath.Join(c.Dir, name+".report"),
			logPath: filepath.Join(c.Dir, name+".log"),
			done:    make(chan struct{}),
		}
		// Reports are appended to: start from none.
		if err := os.Remove(in.report); err != nil && !os.IsNotExist(err) {
			return err
		}
		f, err := os.Create(in.logPath)
		if err != nil {
			return err
		}
		in.logFile = f
		in.cmd = exec.Command(c.Binary,
			"--stream", c.Stream, "--table", c.Table, "--owner", name,
			"--dynamodb-endpoint-url", d.env.DynamoEndpoint, "--kinesis-endpoint-url", d.env.KinesisEndpoint,
			"--start", "TRIM_HORIZON",
			"--lease", c.Lease.String(), "--renew", c.Renew.String(), "--scan", c.Scan.String(),
			"--checkpoint-interval", c.CheckpointInterval.String(),
			"--shutdown-timeout", "10s",
			"--report", in.report)
		in.cmd.Stdout, in.cmd.Stderr = f, f
		in.cmd.Env = instanceEnv(c.Race)
		in.cmd.SysProcAttr = sysProcAttr()
		if err := in.cmd.Start(); err != nil {
			f.Close()
			return fmt.Errorf("demo: starting %s: %w", name, err)
		}
		go func() { in.err = in.cmd.Wait(); close(in.done) }()
		d.ins = append(d.ins, in)
		d.tails = append(d.tails, &tail{path: in.report})
	}
	return nil
}

// died returns an error for an instance that exited without being told to.
func (d *demo) died() error {
	for _, in := range d.ins {
		if in.exited() && !in.killed.Load() && !in.stopped.Load() {
			return fmt.Errorf("demo: %s exited by itself (%v); the end of its log:\n%s", in.name, in.err, in.logTail())
		}
	}
	return nil
}

// cleanup kills whatever still runs and waits for it.
func (d *demo) cleanup() {
	for _, in := range d.ins {
		if !in.exited() {
			in.killed.Store(true)
			killGroup(in.cmd)
		}
	}
	for _, in := range d.ins {
		select {
		case <-in.done:
		case <-time.After(10 * time.Second):
			fmt.Fprintf(os.Stderr, "demo: %s (pid %d) did not exit after SIGKILL\n", in.name, in.cmd.Process.Pid)
		}
		in.logFile.Close()
	}
}

// stopAll SIGINTs every live instance and waits for its graceful exit
// (drain, checkpoint, release), SIGKILLing one that takes too long.
func (d *demo) stopAll() error {
	var live []*instance
	for _, in := range d.ins {
		if !in.exited() && !in.killed.Load() {
			in.stopped.Store(true)
			in.signal(syscall.SIGINT)
			live = append(live, in)
		}
	}
	d.printf("SIGINT to %s: draining, checkpointing, releasing\n", names(live))
	timeout := time.After(20 * time.Second)
	var errs []error
	for _, in := range live {
		select {
		case <-in.done:
			if in.err != nil {
				errs = append(errs, fmt.Errorf("demo: %s exited with %v after SIGINT; the end of its log:\n%s", in.name, in.err, in.logTail()))
			}
		case <-timeout:
			errs = append(errs, fmt.Errorf("demo: %s still running 20s after SIGINT; killed", in.name))
			in.killed.Store(true)
			killGroup(in.cmd)
		}
	}
	d.printf("every instance stopped\n")
	return errors.Join(errs...)
}

func names(ins []*instance) string {
	var s []string
	for _, in := range ins {
		s = append(s, in.name)
	}
	return strings.Join(s, ", ")
}

// readReports reads what the reports gained since the last read.
func (d *demo) readReports() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, t := range d.tails {
		ds, es, err := t.read()
		errs = append(errs, err)
		d.deliveries = append(d.deliveries, ds...)
		d.events = append(d.events, es...)
		for _, dv := range ds {
			d.handled[dv.id] = true
			d.perOwner[dv.owner]++
		}
	}
	return errors.Join(errs...)
}

// readOwners reads who holds each shard from the lease table.
func (d *demo) readOwners(ctx context.Context) (map[string]string, error) {
	owners := map[string]string{}
	for _, s := range d.shards {
		l, err := d.store.Get(ctx, leases.Key{Stream: d.cfg.Stream, Shard: s})
		if errors.Is(err, leases.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		owners[s] = l.Owner
	}
	return owners, nil
}

// watch follows the reports and the lease table, and prints a progress row
// every second.
func (d *demo) watch(ctx context.Context) {
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	row := time.NewTicker(time.Second)
	defer row.Stop()
	d.printf("%s\n", d.header())
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			if err := d.readReports(); err != nil {
				d.printf("reading reports: %v\n", err)
			}
			if owners, err := d.readOwners(ctx); err == nil {
				d.mu.Lock()
				d.owners = owners
				d.mu.Unlock()
			}
		case <-row.C:
			d.printf("%s\n", d.row())
		}
	}
}

const colWidth = 22

func (d *demo) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%9s %8s", "published", "handled")
	for _, in := range d.ins {
		fmt.Fprintf(&b, " | %-*s", colWidth, in.name+" shards handled")
	}
	return b.String()
}

// row is one progress line: what each instance holds (lease table) and
// handled (its report).
func (d *demo) row() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%9d %8d", d.published.Load(), len(d.handled))
	for _, in := range d.ins {
		var held []string
		for _, s := range d.shards {
			if d.owners[s] == in.name {
				held = append(held, shortShard(s))
			}
		}
		shards := "[" + strings.Join(held, " ") + "]"
		switch {
		case in.killed.Load() && d.kill != nil && d.kill.owner == in.name:
			shards = "KILLED"
		case in.exited():
			shards = "exited"
		}
		fmt.Fprintf(&b, " | %-*s", colWidth, fmt.Sprintf("%-12s %6d", shards, d.perOwner[in.name]))
	}
	return b.String()
}

// waitSettled waits until every shard is held by an instance and the
// assignment has not changed for two renew intervals (bounded).
func (d *demo) waitSettled(ctx context.Context) error {
	deadline := time.Now().Add(d.cfg.settleTimeout())
	stable := 2 * d.cfg.Renew
	var last map[string]string
	var since time.Time
	for {
		if err := d.died(); err != nil {
			return err
		}
		owners, err := d.readOwners(ctx)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("demo: reading the lease table: %w", err)
		}
		allHeld := len(owners) == len(d.shards)
		for _, o := range owners {
			allHeld = allHeld && o != ""
		}
		if !maps.Equal(owners, last) {
			last, since = owners, time.Now()
		}
		if allHeld && time.Since(since) >= stable {
			d.printf("every shard held: %s\n", describe(owners))
			return nil
		}
		if time.Now().After(deadline) {
			if allHeld {
				d.printf("every shard held, assignment still moving: %s\n", describe(owners))
				return nil
			}
			return fmt.Errorf("demo: %v after starting, not every shard is held: %s", d.cfg.settleTimeout(), describe(owners))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// describe lists shard -> owner.
func describe(owners map[string]string) string {
	var s []string
	for shard, o := range owners {
		if o == "" {
			o = "free"
		}
		s = append(s, shortShard(shard)+":"+o)
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

func newOrder(rng *rand.Rand, n int) Order {
	o := Order{
		ID:        fmt.Sprintf("ord-%06d", n),
		Customer:  fmt.Sprintf("customer-%03d", rng.IntN(200)),
		CreatedAt: time.Now().UTC(),
	}
	for range 1 + rng.IntN(3) {
		it := Item{SKU: fmt.Sprintf("sku-%04d", rng.IntN(1000)), Quantity: 1 + rng.IntN(3), Price: int64(100 + rng.IntN(9900))}
		o.Items = append(o.Items, it)
		o.Total += int64(it.Quantity) * it.Price
	}
	return o
}

// killOne SIGKILLs the instance holding the most shards.
func (d *demo) killOne(ctx context.Context) error {
	if err := d.died(); err != nil {
		return err
	}
	owners, err := d.readOwners(ctx)
	if err != nil {
		return fmt.Errorf("demo: reading the lease table: %w", err)
	}
	count := map[string]int{}
	for _, o := range owners {
		count[o]++
	}
	var victim *instance
	for _, in := range d.ins {
		if count[in.name] > 0 && (victim == nil || count[in.name] >= count[victim.name]) {
			victim = in
		}
	}
	if victim == nil {
		return fmt.Errorf("demo: no instance holds a shard: %s", describe(owners))
	}
	victim.killed.Store(true)
	killGroup(victim.cmd)
	at := time.Now()
	<-victim.done
	// The shards it held: the rows it owns now that it is dead (nobody can
	// take them over before a lease duration less a renew interval).
	if owners, err = d.readOwners(ctx); err != nil {
		return fmt.Errorf("demo: reading the lease table: %w", err)
	}
	k := &kill{owner: victim.name, at: at}
	for _, s := range d.shards {
		if owners[s] == victim.name {
			k.shards = append(k.shards, s)
		}
	}
	d.mu.Lock()
	d.kill = k
	d.mu.Unlock()
	d.printf("SIGKILL %s, which held shards %s (%d orders published)\n", victim.name, shortList(k.shards), d.published.Load())
	if len(k.shards) == 0 {
		return fmt.Errorf("demo: %s held no shard when it was killed", victim.name)
	}
	return nil
}

// waitTakeover waits until a survivor acquired every shard the killed
// instance held, printing each takeover.
func (d *demo) waitTakeover(ctx context.Context) error {
	k := d.kill
	deadline := time.After(d.cfg.takeoverTimeout())
	reported := map[string]bool{}
	for {
		if err := d.died(); err != nil {
			return err
		}
		d.mu.Lock()
		for _, e := range d.events {
			if e.kind == "acquired" && e.owner != k.owner && e.at.After(k.at) && slices.Contains(k.shards, e.shard) && !reported[e.shard] {
				reported[e.shard] = true
				d.printf("%s took shard %s over, %.2fs after the kill\n", e.owner, shortShard(e.shard), e.at.Sub(k.at).Seconds())
			}
		}
		d.mu.Unlock()
		if len(reported) == len(k.shards) {
			d.printf("every shard held again %.2fs after the kill (lease %v + scan %v = %v; bounds %.1fs..%.1fs)\n",
				d.lastTakeover().Sub(k.at).Seconds(), d.cfg.Lease, d.cfg.Scan, d.cfg.expectedFailover(),
				d.cfg.bestFailover().Seconds(), d.cfg.worstFailover().Seconds())
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("demo: %v after killing %s, shards %s are not all taken over", d.cfg.takeoverTimeout(), k.owner, shortList(k.shards))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (d *demo) lastTakeover() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := d.kill
	var last time.Time
	for _, s := range k.shards {
		var first time.Time
		for _, e := range d.events {
			if e.shard == s && e.kind == "acquired" && e.owner != k.owner && e.at.After(k.at) && (first.IsZero() || e.at.Before(first)) {
				first = e.at
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
	deadline := time.After(d.cfg.drainTimeout())
	for {
		if err := d.died(); err != nil {
			return err
		}
		d.mu.Lock()
		missing := 0
		for _, id := range ids {
			if !d.handled[id] {
				missing++
			}
		}
		d.mu.Unlock()
		if missing == 0 {
			d.printf("every published order handled\n")
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("%w: %d orders not handled %v after publishing", errNotHandled, missing, d.cfg.drainTimeout())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// syncWriter serialises writes from the watcher and the main flow.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
