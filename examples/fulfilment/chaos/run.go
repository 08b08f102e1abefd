package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

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

// since formats t as seconds since the run began.
func (r *runner) since(t time.Time) string { return fmt.Sprintf("%.3fs", t.Sub(r.begin).Seconds()) }

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
