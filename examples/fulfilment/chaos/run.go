package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// config is one chaos run: Instances processes of examples/fulfilment on one
// stream and lease table (both must exist), a producer publishing Rate
// orders a second, and the chaos schedule drawn from Seed for Duration.
type config struct {
	Stream, Table string
	Instances     int
	MaxDown       int // at most this many instances disrupted at once
	Rate          int // orders published per second
	Keys          int // partition keys (customers); orders go round-robin over them
	Duration      time.Duration
	Seed          uint64
	// Lease settings of every instance (--heartbeat, --timeout), its
	// checkpoint interval and shutdown timeout.
	Heartbeat, Timeout time.Duration
	CheckpointInterval time.Duration
	ShutdownTimeout    time.Duration
	// Dir holds the binary, the reports and the instances' logs.
	Dir string
	// Binary is a built examples/fulfilment; empty: build it into Dir (with
	// -race when Race).
	Binary string
	Race   bool
	// FanOut, if set, is an in-memory Kinesis on a local endpoint holding
	// the stream (kinesalite has no SubscribeToShard): the run publishes to
	// it and the instances read it with enhanced fan-out as the consumer
	// fanOutConsumer. The caller closes it once run returned. Nil: the
	// instances poll the emulator.
	FanOut *harness.FanOutKinesis
	// Out receives the progress; nil discards it.
	Out io.Writer
}

// fanOutConsumer is the stream consumer the instances read with in fan-out
// mode (their --fan-out).
const fanOutConsumer = "chaos"

// reading says how the instances read the stream.
func (c *config) reading() string {
	if c.FanOut == nil {
		return "polling"
	}
	return fmt.Sprintf("enhanced fan-out as consumer %s from the in-memory Kinesis at %s", fanOutConsumer, c.FanOut.URL())
}

func (c *config) defaults() {
	if c.Instances == 0 {
		c.Instances = 4
	}
	if c.MaxDown == 0 {
		c.MaxDown = min(2, c.Instances-1)
	}
	if c.Rate == 0 {
		c.Rate = 200
	}
	if c.Keys == 0 {
		c.Keys = 64
	}
	if c.Timeout == 0 {
		c.Heartbeat, c.Timeout = 500*time.Millisecond, 2*time.Second
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = c.Timeout / 5
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = time.Second
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
}

func (c *config) planConfig() planConfig {
	return planConfig{
		Duration: c.Duration, Instances: c.Instances, MaxDown: c.MaxDown, Timeout: c.Timeout,
		Drain: 1500 * time.Millisecond, Settle: time.Second,
		MinGap: 300 * time.Millisecond, MaxGap: 2 * time.Second,
	}
}

// settleTimeout bounds the wait for every shard to be held before the chaos;
// catchUpTimeout the wait, after the chaos, for every order to be handled
// and every shard checkpointed at its last record; exitTimeout the wait for
// a SIGINTed or SIGKILLed instance to exit. The settle is a precondition,
// not what is measured: on a machine loaded past its cores (CI25: two
// simulations beside -p 4) a fleet took 18 s to hold its first shard, so it
// waits up to a minute (a fleet that never settles still fails).
func (c *config) settleTimeout() time.Duration  { return 60*time.Second + 2*c.Timeout }
func (c *config) catchUpTimeout() time.Duration { return 30*time.Second + 4*c.Timeout }
func (c *config) exitTimeout() time.Duration    { return c.ShutdownTimeout + 10*time.Second }

// published is one order the producer put on the stream: its partition key,
// its counter among that key's orders (1, 2, ...), and where it landed.
type published struct {
	id, key    string
	counter    int
	shard, seq string
	at         time.Time
}

// episode is one SIGSTOP of a process: stopped after Stop (the signal
// sent), continued at Cont (just before SIGCONT was sent).
type episode struct{ Stop, Cont time.Time }

// proc is one process of examples/fulfilment: a slot's incarnation, with its
// own owner id, report and log.
type proc struct {
	*harness.Instance
	slot int

	// Written under runner.mu.
	started                 time.Time
	killedAt, interruptAt   time.Time
	stops                   []episode
	stopped, draining, dead bool
}

// actionRecord is what became of a planned action.
type actionRecord struct {
	action
	Owner, NewOwner string    // the process disrupted; the one started in its place
	Start, End      time.Time // signal sent; SIGCONT sent or new process started
	Skipped         string    // why it was not carried out
}

// runner is one chaos run in progress.
type runner struct {
	cfg    config
	env    harness.Env
	out    *harness.Progress
	begin  time.Time
	store  leases.Store
	shards []string
	plan   []action
	fleet  *harness.Fleet

	mu       sync.Mutex
	slots    []*proc // the current process of each slot
	gens     []int   // processes started per slot
	procs    []*proc // every process started
	reports  harness.Reports
	pub      []published
	lastSeq  map[string]string       // shard -> newest sequence number published
	rows     map[string]leases.Lease // shard -> row, as last polled
	seen     map[string][]rowRun     // shard -> its owners as polled, in order
	regress  []string                // checkpoints seen going backwards
	actions  []actionRecord
	problems []string // violations found while running (not in the reports)
	fatal    error    // the run cannot go on
}

// run runs the chaos and returns what it observed, tallied. The error
// reports a run that could not complete (setup failed, an instance died by
// itself, ctx cancelled); the tally says whether what completed was right.
// Every process it started is gone when it returns.
func run(ctx context.Context, cfg config, e harness.Env) (*tally, error) {
	cfg.defaults()
	if cfg.FanOut != nil {
		e = cfg.FanOut.On(e)
	}
	if !harness.SignalsSupported {
		return nil, errUnsupportedPlatform
	}
	if cfg.Instances < 2 || cfg.MaxDown < 1 || cfg.MaxDown >= cfg.Instances || cfg.Dir == "" || cfg.Duration <= 0 || cfg.Rate <= 0 {
		return nil, fmt.Errorf("chaos: bad config: %d instances, max %d down, rate %d, duration %v, dir %q",
			cfg.Instances, cfg.MaxDown, cfg.Rate, cfg.Duration, cfg.Dir)
	}
	begin := time.Now()
	r := &runner{
		cfg: cfg, env: e, out: harness.NewProgress(cfg.Out, begin), begin: begin,
		store:   dynamo.New(e.AWS, cfg.Table, dynamo.WithDynamoDBClient(e.Dynamo)),
		plan:    plan(cfg.Seed, cfg.planConfig()),
		slots:   make([]*proc, cfg.Instances),
		gens:    make([]int, cfg.Instances),
		lastSeq: map[string]string{},
		rows:    map[string]leases.Lease{},
		seen:    map[string][]rowRun{},
	}
	r.fleet = &harness.Fleet{
		Name: "chaos", Binary: cfg.Binary, Dir: cfg.Dir, Env: e, Stream: cfg.Stream, Table: cfg.Table,
		Heartbeat: cfg.Heartbeat, Timeout: cfg.Timeout, CheckpointInterval: cfg.CheckpointInterval,
		ShutdownTimeout: cfg.ShutdownTimeout, Race: cfg.Race,
	}
	if cfg.FanOut != nil {
		r.fleet.FanOut = fanOutConsumer
	}
	var err error
	if r.shards, err = r.fleet.Prepare(ctx); err != nil {
		return nil, err
	}
	replay := ""
	if cfg.FanOut != nil {
		replay = "--fan-out "
	}
	r.printf("seed %d: %d actions over %v (replay with %s--seed %d --duration %v)\n%s",
		cfg.Seed, len(r.plan), cfg.Duration, replay, cfg.Seed, cfg.Duration, describePlan(r.plan))

	defer r.fleet.Cleanup()
	for s := range cfg.Instances {
		if err := r.start(s); err != nil {
			return nil, err
		}
	}
	r.printf("started %d instances (heartbeat %v, timeout %v, checkpoint every %v, reading by %s); logs and reports in %s\n",
		cfg.Instances, cfg.Heartbeat, cfg.Timeout, cfg.CheckpointInterval, cfg.reading(), cfg.Dir)

	stopWatch := harness.Watch(ctx, r.out, 200*time.Millisecond, r.poll, r.row)
	defer stopWatch()

	if err := r.waitSettled(ctx); err != nil {
		return nil, err
	}

	// Publish for the whole chaos. The producer stops between two calls, so
	// that it knows where every order it put landed.
	stopPub := make(chan struct{})
	pubErr := make(chan error, 1)
	go func() { pubErr <- r.produce(ctx, stopPub) }()
	chaosErr := r.chaos(ctx)
	close(stopPub)
	if err := errors.Join(chaosErr, <-pubErr); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r.mu.Lock()
	n := len(r.pub)
	r.mu.Unlock()
	r.printf("chaos over; published %d orders; waiting for every order handled and every shard checkpointed at its last record\n", n)
	if err := r.catchUp(ctx); err != nil {
		return nil, err
	}
	r.stopAll()
	stopWatch()
	if err := r.readReports(); err != nil {
		return nil, err
	}
	if err := r.checkFinalRows(ctx); err != nil {
		return nil, err
	}
	return compute(r.observations()), nil
}

var errUnsupportedPlatform = errors.New("chaos: needs SIGSTOP and SIGCONT: run it on Linux or another Unix")

func (r *runner) printf(format string, args ...any) { r.out.Printf(format, args...) }

// fail records the first fatal error; the chaos and waits notice it.
func (r *runner) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fatal == nil {
		r.fatal = err
	}
}

func (r *runner) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

// start starts a new process in slot s, with a new owner id.
func (r *runner) start(s int) error {
	r.mu.Lock()
	gen := r.gens[s]
	r.gens[s]++
	r.mu.Unlock()
	in, err := r.fleet.Start(fmt.Sprintf("i%dr%d", s+1, gen))
	if err != nil {
		return err
	}
	p := &proc{Instance: in, slot: s}
	r.mu.Lock()
	p.started = time.Now()
	r.slots[s] = p
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return nil
}

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

// since formats t as seconds since the run began.
func (r *runner) since(t time.Time) string { return fmt.Sprintf("%.3fs", t.Sub(r.begin).Seconds()) }

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

// waitSettled waits until every shard is held by a live instance (bounded).
func (r *runner) waitSettled(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.settleTimeout())
	return harness.Poll(ctx, 100*time.Millisecond, r.failed, func() (bool, error) {
		r.mu.Lock()
		live := map[string]bool{}
		for _, p := range r.slots {
			live[p.Owner] = true
		}
		held := 0
		var owners []string
		for _, s := range r.shards {
			o := r.rows[s].Owner
			if live[o] {
				held++
			}
			owners = append(owners, harness.ShortShard(s)+":"+o)
		}
		r.mu.Unlock()
		if held == len(r.shards) {
			r.printf("every shard held: %s\n", strings.Join(owners, " "))
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("chaos: %v after starting, not every shard is held: %s", r.cfg.settleTimeout(), strings.Join(owners, " "))
		}
		return false, nil
	})
}

// produce publishes Rate orders a second until ctx is done, round-robin
// over Keys partition keys, each with its key's next counter. A PutRecords
// call carries at most one order per key, and an order that failed is put
// again before any later order: per key, counters land in order (PutRecords
// does not order the records of one call). It returns nil once stop is
// closed.
func (r *runner) produce(ctx context.Context, stop <-chan struct{}) error {
	c := r.cfg
	counters := make([]int, c.Keys)
	next := 0
	start := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return nil
		case <-tick.C:
		}
		due := int(float64(c.Rate) * time.Since(start).Seconds())
		for next < due {
			n := min(due-next, c.Keys, 500)
			batch := make([]published, n)
			entries := make([]ktypes.PutRecordsRequestEntry, n)
			for i := range n {
				k := (next + i) % c.Keys
				counters[k]++
				key := fmt.Sprintf("cust-%03d", k)
				o := harness.Order{
					ID:        fmt.Sprintf("k%03d-%07d", k, counters[k]),
					Customer:  key,
					Items:     []harness.Item{{SKU: fmt.Sprintf("sku-%04d", (next+i)%1000), Quantity: 1, Price: 100}},
					Total:     100,
					CreatedAt: time.Now().UTC(),
				}
				data, err := codec.Msgpack.Marshal(&o)
				if err != nil {
					return err
				}
				batch[i] = published{id: o.ID, key: key, counter: counters[k]}
				entries[i] = ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(key)}
			}
			if err := r.put(ctx, batch, entries); err != nil {
				return err
			}
			next += n
		}
	}
}

// put puts one batch, retrying failed entries (alone, in order) until every
// one landed, and records where each landed.
func (r *runner) put(ctx context.Context, batch []published, entries []ktypes.PutRecordsRequestEntry) error {
	for attempt := 0; len(entries) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(min(attempt, 10)) * 50 * time.Millisecond):
			}
		}
		out, err := r.env.Kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(r.cfg.Stream), Records: entries})
		if err != nil {
			if ctx.Err() != nil || attempt >= 20 {
				return fmt.Errorf("chaos: PutRecords: %w", err)
			}
			continue
		}
		now := time.Now()
		var retryB []published
		var retryE []ktypes.PutRecordsRequestEntry
		r.mu.Lock()
		for i, res := range out.Records {
			if res.ErrorCode != nil {
				retryB, retryE = append(retryB, batch[i]), append(retryE, entries[i])
				continue
			}
			p := batch[i]
			p.shard, p.seq, p.at = aws.ToString(res.ShardId), aws.ToString(res.SequenceNumber), now
			r.pub = append(r.pub, p)
			if harness.CmpSeq(p.seq, r.lastSeq[p.shard]) > 0 {
				r.lastSeq[p.shard] = p.seq
			}
		}
		r.mu.Unlock()
		batch, entries = retryB, retryE
	}
	return nil
}

// chaos carries out the plan: each action at its time, in a goroutine of
// its own, skipped if its slot is not up or too many are down (a graceful
// stop that took longer than planned). It returns once the chaos duration
// passed and every action ended.
func (r *runner) chaos(ctx context.Context) error {
	t0 := time.Now()
	r.printf("chaos starts: %d actions over %v, at most %d of %d instances down at once\n",
		len(r.plan), r.cfg.Duration, r.cfg.MaxDown, r.cfg.Instances)
	var wg sync.WaitGroup
	defer wg.Wait()
	actCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	check := time.NewTicker(100 * time.Millisecond)
	defer check.Stop()
	wait := func(until time.Time) error {
		for time.Now().Before(until) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-check.C:
			case <-time.After(time.Until(until)):
			}
			if err := r.failed(); err != nil {
				return err
			}
		}
		return nil
	}
	for _, a := range r.plan {
		if err := wait(t0.Add(a.At)); err != nil {
			cancel()
			return err
		}
		wg.Go(func() { r.execute(actCtx, a) })
	}
	if err := wait(t0.Add(r.cfg.Duration)); err != nil {
		cancel()
		return err
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return r.failed()
		case <-ctx.Done():
			cancel()
			return ctx.Err()
		case <-check.C:
			if err := r.failed(); err != nil {
				cancel()
				return err
			}
		}
	}
}

// execute carries out one action.
func (r *runner) execute(ctx context.Context, a action) {
	rec := actionRecord{action: a}
	r.mu.Lock()
	p := r.slots[a.Slot]
	down := 0
	for _, q := range r.slots {
		if q.dead || q.stopped || q.draining {
			down++
		}
	}
	switch {
	case p.dead || p.stopped || p.draining:
		rec.Skipped = fmt.Sprintf("slot %d not up yet", a.Slot+1)
	case down >= r.cfg.MaxDown:
		rec.Skipped = fmt.Sprintf("%d instances down already", down)
	}
	rec.Owner = p.Owner
	if rec.Skipped != "" {
		r.actions = append(r.actions, rec)
		r.mu.Unlock()
		r.printf("skip %s on %s: %s\n", a.Kind, p.Owner, rec.Skipped)
		return
	}
	defer func() {
		r.mu.Lock()
		r.actions = append(r.actions, rec)
		r.mu.Unlock()
	}()
	switch a.Kind {
	case kill:
		p.dead = true
		p.Expect()
	case stop:
		p.stopped = true
	case interrupt:
		p.draining = true
		p.Expect()
	}
	r.mu.Unlock()

	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	waitExit := func() error {
		select {
		case <-p.Done():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.cfg.exitTimeout()):
			return fmt.Errorf("%s still running %v after %s", p.Owner, r.cfg.exitTimeout(), a.Kind)
		}
	}
	restart := func() {
		if err := r.start(a.Slot); err != nil {
			r.fail(err)
			return
		}
		r.mu.Lock()
		rec.NewOwner = r.slots[a.Slot].Owner
		rec.End = r.slots[a.Slot].started
		r.mu.Unlock()
	}

	switch a.Kind {
	case kill:
		p.Kill()
		rec.Start = time.Now()
		r.mu.Lock()
		p.killedAt = rec.Start
		r.mu.Unlock()
		r.printf("SIGKILL %s (restart in %v)\n", p.Owner, a.Hold.Round(time.Millisecond))
		if err := waitExit(); err != nil {
			r.fail(fmt.Errorf("chaos: %w", err))
			return
		}
		if !sleep(a.Hold) {
			return
		}
		restart()
	case stop:
		if err := p.Stop(); err != nil {
			r.fail(fmt.Errorf("chaos: SIGSTOP %s: %w", p.Owner, err))
			return
		}
		rec.Start = time.Now()
		r.printf("SIGSTOP %s for %v (timeout %v)\n", p.Owner, a.Hold.Round(time.Millisecond), r.cfg.Timeout)
		sleep(a.Hold) // on cancellation, continue it anyway: cleanup kills it
		rec.End = time.Now()
		if err := p.Continue(); err != nil && !p.Exited() {
			r.fail(fmt.Errorf("chaos: SIGCONT %s: %w", p.Owner, err))
		}
		r.mu.Lock()
		p.stops = append(p.stops, episode{Stop: rec.Start, Cont: rec.End})
		p.stopped = false
		r.mu.Unlock()
		r.printf("SIGCONT %s after %v\n", p.Owner, rec.End.Sub(rec.Start).Round(time.Millisecond))
	case interrupt:
		rec.Start = time.Now()
		r.mu.Lock()
		p.interruptAt = rec.Start
		r.mu.Unlock()
		if err := p.Interrupt(); err != nil {
			r.fail(fmt.Errorf("chaos: SIGINT %s: %w", p.Owner, err))
			return
		}
		r.printf("SIGINT %s (restart %v after it exits)\n", p.Owner, a.Hold.Round(time.Millisecond))
		if err := waitExit(); err != nil {
			r.problem(fmt.Sprintf("graceful stop: %v; killed", err))
			p.Kill()
			<-p.Done()
		} else if p.Err() != nil {
			r.problem(fmt.Sprintf("graceful stop: %s exited with %v after SIGINT; the end of its log:\n%s", p.Owner, p.Err(), p.LogTail()))
		} else {
			r.printf("%s exited after %v\n", p.Owner, time.Since(rec.Start).Round(time.Millisecond))
		}
		if !sleep(a.Hold) {
			return
		}
		restart()
	}
}

// problem records a violation seen while running.
func (r *runner) problem(msg string) {
	r.mu.Lock()
	r.problems = append(r.problems, msg)
	r.mu.Unlock()
	r.printf("PROBLEM: %s\n", msg)
}

// catchUp waits until every published order was handled and every shard's
// checkpoint reached its last record (bounded; a timeout is a violation the
// tally reports, not an error).
func (r *runner) catchUp(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.catchUpTimeout())
	return harness.Poll(ctx, 100*time.Millisecond, r.failed, func() (bool, error) {
		r.mu.Lock()
		missing := 0
		for _, p := range r.pub {
			if !r.reports.Handled[p.id] {
				missing++
			}
		}
		var behind []string
		for s, seq := range r.lastSeq {
			if r.rows[s].Checkpoint.Sequence != seq {
				behind = append(behind, harness.ShortShard(s))
			}
		}
		r.mu.Unlock()
		slices.Sort(behind)
		if missing == 0 && len(behind) == 0 {
			r.printf("every order handled, every shard checkpointed at its last record\n")
			return true, nil
		}
		if time.Now().After(deadline) {
			r.problem(fmt.Sprintf("catch-up: %v after the chaos, %d orders not handled, shards %v not checkpointed at their last record",
				r.cfg.catchUpTimeout(), missing, behind))
			return true, nil
		}
		return false, nil
	})
}

// stopAll SIGINTs every live process and waits for its graceful exit
// (drain, checkpoint, release), SIGKILLing one that takes too long.
func (r *runner) stopAll() {
	r.mu.Lock()
	live := slices.Clone(r.slots)
	r.mu.Unlock()
	var names []string
	for _, p := range live {
		p.Expect()
		r.mu.Lock()
		p.interruptAt = time.Now()
		p.draining = true
		r.mu.Unlock()
		if err := p.Interrupt(); err != nil && !p.Exited() {
			r.problem(fmt.Sprintf("SIGINT %s: %v", p.Owner, err))
		}
		names = append(names, p.Owner)
	}
	r.printf("SIGINT to %s: draining, checkpointing, releasing\n", strings.Join(names, ", "))
	timeout := time.After(r.cfg.exitTimeout())
	for _, p := range live {
		select {
		case <-p.Done():
			if err := p.Err(); err != nil {
				r.problem(fmt.Sprintf("final stop: %s exited with %v after SIGINT; the end of its log:\n%s", p.Owner, err, p.LogTail()))
			}
		case <-timeout:
			r.problem(fmt.Sprintf("final stop: %s still running %v after SIGINT; killed", p.Owner, r.cfg.exitTimeout()))
			r.mu.Lock()
			p.killedAt = time.Now()
			r.mu.Unlock()
			p.Kill()
			<-p.Done()
		}
	}
	r.printf("every instance stopped\n")
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
