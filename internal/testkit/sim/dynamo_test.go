package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/observe"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

var flagDynamoSeed = flag.Uint64("dynamoseed", 0, "run only this seed of TestDynamoMembership (default $KINESISLEASE_DYNAMO_SEED)")

// dynamoCISeeds is how many seeds TestDynamoMembership runs by default:
// one of each profile (see dynProfiles).
const dynamoCISeeds = 3

// Real time, so a short timeout; the fence margin leaves room for a
// goroutine descheduled between the fence check and the handler (-race on
// two busy cores).
const (
	dynHeartbeat = 250 * time.Millisecond
	dynTimeout   = 1500 * time.Millisecond
	dynMargin    = 500 * time.Millisecond

	dynCheckpointInterval = 200 * time.Millisecond
	dynShards             = 6
	dynProcs              = 3
	dynFaults             = 12 * time.Second // faults until then
	dynPutEvery           = 20 * time.Millisecond
	// dynReadBound: once faults stop, every shard is read again within it:
	// the reader's longest backoff (5s), a call in flight (a slow ListShards
	// takes up to 2s), two timeouts and a few rounds.
	dynReadBound = 5*time.Second + 2*time.Second + 2*dynTimeout + 4*dynHeartbeat
	dynSettleMax = 30 * time.Second // fair shares and every record delivered, after faults stop
)

// dynProfiles are the faults of a seed besides those every seed has, by
// seed % 3.
var dynProfiles = [...]string{
	// One membership row throttled for everyone for 1.5 timeouts; every
	// store call taking 5-50ms for 3s; every ListShards call taking 1-2s
	// for 3s (a restart and the periodic listings fall in it).
	"calls",
	// A held row deleted, then another right before a process joins.
	"rows",
	// The table deleted and created again, empty, under the running fleet.
	"table",
}

// dynamoSeeds returns the seeds TestDynamoMembership runs: -dynamoseed
// alone, else $KINESISLEASE_DYNAMO_SEEDS seeds (default dynamoCISeeds)
// from $KINESISLEASE_DYNAMO_SEED (default 1).
func dynamoSeeds(t *testing.T) []uint64 {
	if *flagDynamoSeed != 0 {
		return []uint64{*flagDynamoSeed}
	}
	base, n := uint64(1), dynamoCISeeds
	if v := os.Getenv("KINESISLEASE_DYNAMO_SEED"); v != "" {
		var err error
		if base, err = strconv.ParseUint(v, 10, 64); err != nil || base == 0 {
			t.Fatalf("KINESISLEASE_DYNAMO_SEED=%q: want a positive number", v)
		}
		n = 1
	}
	if v := os.Getenv("KINESISLEASE_DYNAMO_SEEDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("KINESISLEASE_DYNAMO_SEEDS=%q: want a positive number", v)
		}
	}
	var out []uint64
	for i := range n {
		out = append(out, base+uint64(i))
	}
	return out
}

// TestDynamoMembership checks the invariants of checker against the
// membership protocol (engine.Group) on the DynamoDB store and DynamoDB
// Local, in real time: 3 Groups on a 6-shard simulated stream (heartbeat
// 250ms, timeout 1.5s), under SDK-level faults drawn from a seed (delays,
// throttling, answers lost after the write landed, with and without the
// SDK retrying), a pause longer than the timeout, a partition from the
// table, a crash and a restart, and the faults of the seed's profile
// (dynProfiles: a membership row throttled, slow store calls and slow
// ListShards; held rows deleted; the table recreated). Writes are recorded
// as they land: from their answers, or, for an answer lost, by reading the
// row back and finding the write's token; a poller reads every row every
// 50ms too, so that (c) sees versions whose writer never learned they
// landed. A deletion waits for the writes in flight to be recorded, so
// that the checker tells the row's versions before and after it apart.
//
// Once faults stop, every shard must be read again within dynReadBound,
// and every record be acknowledged and covered by its checkpoint, with fair
// shares, within dynSettleMax; a graceful shutdown releases every row.
//
// go test ./internal/testkit/sim/ -run TestDynamoMembership -dynamoseed=N -v
// replays seed N (its faults; real time decides the interleaving);
// KINESISLEASE_DYNAMO_SEEDS=12 runs seeds 1 to 12;
// KINESISLEASE_DYNAMO_PROFILE=none (or calls, rows, table) gives every seed
// that profile.
func TestDynamoMembership(t *testing.T) {
	t.Parallel() // mostly waiting in real time: beside the simulations
	testutil.Slow(t)
	plain := testutil.DynamoClient(t, fastDynamo)
	for _, seed := range dynamoSeeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			runDynamoSeed(t, plain, seed)
		})
	}
}

func runDynamoSeed(t *testing.T, plain *dynamodb.Client, seed uint64) {
	profile := dynProfiles[seed%uint64(len(dynProfiles))]
	if v := os.Getenv("KINESISLEASE_DYNAMO_PROFILE"); v != "" {
		if v != "none" && !slices.Contains(dynProfiles[:], v) {
			t.Fatalf("KINESISLEASE_DYNAMO_PROFILE=%q: want none or one of %v", v, dynProfiles)
		}
		profile = v
	}
	t.Logf("seed %d, profile %s (go test ./internal/testkit/sim/ -run TestDynamoMembership -dynamoseed=%d -v)", seed, profile, seed)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, plain, table)
	d := &dynWorld{
		t:       t,
		seed:    seed,
		profile: profile,
		rng:     rand.New(rand.NewPCG(seed, 0xd1a)),
		table:   table,
		plain:   plain,
		kinesis: NewKinesis(),
		reader:  dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(plain)),
		byOwner: map[string]*dynProc{},
	}
	d.throttleRow.Store(-1)
	var err error
	if d.stream, err = NewStream(d.kinesis, "dyn", dynShards); err != nil {
		t.Fatal(err)
	}
	d.chk = newChecker(d.stream)
	d.chk.mayDeliver, d.chk.alive, d.chk.couldAct = d.mayDeliver, d.alive, d.couldAct
	for i := range dynShards {
		for range 20 {
			d.put(i)
		}
	}
	d.run()

	d.chk.mu.Lock()
	defer d.chk.mu.Unlock()
	st := d.chk.stats
	t.Logf("%d handler calls, %d writes seen landing (%d checkpoints, %d takes, %d of a row recreated after a deletion), %d answers lost after the write landed (%d found by reading the row back, %d overwritten before)",
		st.entries, st.writes, st.checkpoints, st.takes, st.restarts, d.lostSeen.Load()+d.lostHidden.Load(), d.lostSeen.Load(), d.lostHidden.Load())
	t.Logf("%d SDK faults injected; every shard read again %v after faults stopped (bound %v), fair shares %v after", d.injected.Load(), d.readAll, dynReadBound, d.settled)
	if len(d.chk.violations) > 0 {
		more := ""
		if d.chk.dropped > 0 {
			more = fmt.Sprintf("\n  (and %d more)", d.chk.dropped)
		}
		t.Errorf("seed %d (profile %s) broke the membership protocol's invariants:\n  %s%s\n\nevents:\n  %s\n\ntrace (last %d lines):\n%s\n\nreplay: go test ./internal/testkit/sim/ -run TestDynamoMembership -dynamoseed=%d -v",
			seed, profile, strings.Join(d.chk.violations, "\n  "), more, strings.Join(d.events, "\n  "), traceLines, d.chk.trace.String(), seed)
	} else if *flagTrace {
		t.Logf("events:\n  %s\ntrace:\n%s", strings.Join(d.events, "\n  "), d.chk.trace.String())
	}
}

func fastDynamo(o *dynamodb.Options) {
	o.Retryer = retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 3
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 10 * time.Millisecond, nil })
		o.RateLimiter = ratelimit.None
	})
}

type dynWorld struct {
	t       *testing.T
	seed    uint64
	profile string
	table   string
	plain   *dynamodb.Client
	kinesis *kinesisfake.Kinesis
	stream  *Ledger
	reader  *dynamo.Store // fault-free reads
	chk     *checker
	start   time.Time

	// epoch is held for reading by every lease-row call while it runs and
	// is recorded, and for writing by a deletion: the checker sees every
	// version of a row before or after its deletion, never across.
	epoch sync.RWMutex

	mu      sync.Mutex
	rng     *rand.Rand
	procs   []*dynProc // the current process of each slot
	all     []*dynProc // every process started
	byOwner map[string]*dynProc
	gen     []int
	events  []string

	faultsOn             atomic.Bool
	injected             atomic.Int64
	lostSeen, lostHidden atomic.Int64
	// The profile's faults, as unix nanoseconds they last until.
	throttleRow                             atomic.Int64 // the membership row throttled, -1 none
	throttleUntil, latencyUntil, slowListTo atomic.Int64

	// Under chk.mu.
	faultsOver bool
	readAgain  map[string]time.Time

	readAll, settled time.Duration
}

type dynProc struct {
	d        *dynWorld
	owner    string
	faults   *testutil.Faults
	group    *engine.Group
	cancel   context.CancelFunc
	done     chan struct{}
	err      error
	returned atomic.Bool

	procState

	tokMu  sync.Mutex
	tokens map[string]map[string]bool // key -> tokens of UpdateItems sent

	knows map[string]int // under chk.mu: see mproc.knows

	startedAt time.Time
}

func (d *dynWorld) put(i int) {
	if _, err := d.stream.Put(shardID(i), "pk", []byte("record")); err != nil {
		d.t.Errorf("put: %v", err) // on the producer's goroutine: no Fatal
	}
}

func (d *dynWorld) intN(n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rng.IntN(n)
}

// event traces an event of the schedule and keeps it for the report.
func (d *dynWorld) event(format string, args ...any) {
	msg := fmt.Sprintf("T+%v ", time.Since(d.start).Round(time.Millisecond)) + fmt.Sprintf(format, args...)
	d.mu.Lock()
	d.events = append(d.events, msg)
	d.mu.Unlock()
	d.chk.tracef("event: %s", msg)
}

func (d *dynWorld) key(id string) leases.Key { return leases.Key{Stream: d.stream.Name(), Shard: id} }

func (d *dynWorld) run() {
	t := d.t
	d.start = time.Now()
	d.chk.start = d.start
	d.chk.trace.start = d.start
	d.faultsOn.Store(true)
	ctx, stop := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	defer bg.Wait()
	defer stop()

	for i := range dynProcs {
		d.startProc(i)
	}
	// The producer, the poller and the fault injector.
	bg.Go(func() {
		for ctx.Err() == nil && time.Since(d.start) < dynFaults {
			time.Sleep(dynPutEvery)
			d.put(d.intN(dynShards))
		}
	})
	bg.Go(func() {
		for ctx.Err() == nil {
			d.poll(ctx)
			time.Sleep(50 * time.Millisecond)
		}
	})
	bg.Go(func() {
		for ctx.Err() == nil && time.Since(d.start) < dynFaults {
			time.Sleep(time.Duration(100+d.intN(200)) * time.Millisecond)
			d.inject()
		}
	})

	// Process-level events, one of each, at seeded times, and the
	// profile's.
	at := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(d.intN(int(hi-lo)/1e6))*time.Millisecond
	}
	restart := at(9*time.Second, 10*time.Second)
	steps := []step{
		{at(1*time.Second, 3*time.Second), func() { d.pause(0, 2*dynTimeout) }},
		{at(5*time.Second, 6*time.Second), func() { d.partition(2, dynTimeout*3/2) }},
		{at(7*time.Second, 8*time.Second), func() { d.crash(1) }},
		{restart, func() { d.startProc(1) }},
	}
	switch d.profile {
	case "calls":
		steps = append(steps,
			step{at(3*time.Second, 4*time.Second), func() { d.throttle(d.memberRow(d.proc(0).owner), dynTimeout*3/2) }},
			step{at(6*time.Second, 7*time.Second), func() { d.slowCalls(3 * time.Second) }},
			step{8 * time.Second, func() { d.slowListing(3 * time.Second) }})
	case "rows":
		steps = append(steps,
			step{at(3*time.Second, 4*time.Second), func() { d.deleteHeld(d.intN(dynShards)) }},
			step{restart - 100*time.Millisecond, func() { d.deleteHeld(d.intN(dynShards)) }})
	case "table":
		steps = append(steps, step{at(4*time.Second, 6*time.Second), d.recreateTable})
	}
	runSchedule(d.start, steps)
	time.Sleep(time.Until(d.start.Add(dynFaults)))
	d.faultsOn.Store(false)
	d.mu.Lock()
	for _, p := range d.all {
		p.faults.Clear()
	}
	d.mu.Unlock()
	faultEnd := time.Now()
	d.chk.mu.Lock()
	d.faultsOver = true
	d.readAgain = map[string]time.Time{}
	d.chk.mu.Unlock()
	for i := range dynShards {
		d.put(i) // a probe: something to read on every shard
	}
	d.chk.tracef("faults stop; a probe record put on every shard")

	// Every shard read again, every record delivered, checkpoints caught
	// up, fair shares.
	var settled, readAll time.Time
	for time.Since(faultEnd) < dynSettleMax {
		time.Sleep(100 * time.Millisecond)
		d.chk.mu.Lock()
		if readAll.IsZero() && len(d.readAgain) == dynShards {
			for _, at := range d.readAgain {
				readAll = later(readAll, at)
			}
		}
		d.chk.mu.Unlock()
		fair, done := d.fair(), d.delivered()
		if !fair {
			settled = time.Time{}
		} else if settled.IsZero() {
			settled = time.Now()
		}
		if !readAll.IsZero() && fair && done && time.Since(settled) > 4*dynHeartbeat {
			break
		}
	}
	done := d.delivered()
	d.chk.mu.Lock()
	switch {
	case readAll.IsZero():
		var unread []string
		for _, id := range d.stream.ShardIDs() {
			if _, ok := d.readAgain[id]; !ok {
				unread = append(unread, id)
			}
		}
		d.chk.violate("(g) %v after faults stopped, shards %v were not read again: %s", time.Since(faultEnd).Round(time.Millisecond), unread, d.assignment())
	case readAll.Sub(faultEnd) > dynReadBound:
		d.chk.violate("(g) every shard was read again only %v after faults stopped; bound %v", readAll.Sub(faultEnd).Round(time.Millisecond), dynReadBound)
	default:
		d.readAll = readAll.Sub(faultEnd).Round(time.Millisecond)
	}
	if !done {
		d.chk.violate("(d) %v after faults stopped, records are still unacknowledged or checkpoints behind", time.Since(faultEnd).Round(time.Millisecond))
	}
	if settled.IsZero() {
		d.chk.violate("(g) %v after faults stopped, shares are not fair: %s", time.Since(faultEnd).Round(time.Millisecond), d.assignment())
	} else {
		d.settled = settled.Sub(faultEnd).Round(time.Millisecond)
	}
	d.chk.mu.Unlock()

	// Graceful shutdown: every lease released.
	d.mu.Lock()
	live := slices.Clone(d.all)
	d.mu.Unlock()
	for _, p := range live {
		if !p.dead.Load() && !p.stopping.Load() {
			p.stopping.Store(true)
			p.cancel()
		}
	}
	for _, p := range live {
		select {
		case <-p.done:
		case <-time.After(time.Minute):
			t.Fatalf("%s: Run did not return", p.owner)
		}
		if !p.dead.Load() && p.err != nil {
			d.chk.mu.Lock()
			d.chk.violate("%s: Run returned %v", p.owner, p.err)
			d.chk.mu.Unlock()
		}
	}
	stop()
	bg.Wait()
	rows := map[string]leases.Lease{}
	for _, id := range d.stream.ShardIDs() {
		l, err := d.reader.Get(context.Background(), d.key(id))
		if err != nil {
			d.chk.mu.Lock()
			d.chk.violate("reading %s at the end: %v", id, err)
			d.chk.mu.Unlock()
			continue
		}
		rows[id] = l
		d.chk.mu.Lock()
		d.chk.observed(l)
		if l.Held() {
			d.chk.violate("shard %s still held by %q after every process shut down gracefully", id, l.Owner)
		}
		d.chk.mu.Unlock()
	}
	d.chk.mu.Lock()
	d.chk.settle()
	d.chk.mu.Unlock()
	d.chk.final(rows)
}

// poll reads every row and shows it to the checker.
func (d *dynWorld) poll(ctx context.Context) {
	d.epoch.RLock()
	defer d.epoch.RUnlock()
	for i := range dynShards {
		if l, err := d.reader.Get(testutil.WithoutFaults(ctx), d.key(shardID(i))); err == nil {
			d.chk.mu.Lock()
			d.chk.observed(l)
			d.chk.mu.Unlock()
		}
	}
}

// startProc starts a process (a new owner id) in slot i.
func (d *dynWorld) startProc(i int) {
	d.mu.Lock()
	for len(d.gen) <= i {
		d.gen = append(d.gen, 0)
	}
	p := &dynProc{d: d, owner: fmt.Sprintf("d%d.g%d", i, d.gen[i]), faults: &testutil.Faults{}, done: make(chan struct{}),
		tokens: map[string]map[string]bool{}, knows: map[string]int{}, startedAt: time.Now()}
	d.gen[i]++
	d.all = append(d.all, p)
	d.byOwner[p.owner] = p
	if i < len(d.procs) {
		d.procs[i] = p
	} else {
		d.procs = append(d.procs, p)
	}
	d.mu.Unlock()

	client := testutil.DynamoClient(d.t, p.faults.DynamoOptions, fastDynamo)
	store := dynamo.New(testutil.Config(d.t), d.table, dynamo.WithDynamoDBClient(&tokenClient{Client: client, p: p}))
	g, err := engine.NewGroup(engine.GroupConfig{
		Owner:  p.owner,
		Store:  NewFaultStore(store, p.storeHooks(p.decide, p.apply)),
		Client: Client(d.kinesis, p.kinesisHooks(p.decideKinesis)),
		Logger: slog.New(&traceHandler{tr: &d.chk.trace, name: func() string { return p.owner }}),
		Streams: []engine.StreamConfig{{
			Stream: d.stream.Name(),
			Start:  kltype.TrimHorizon,
			Worker: engine.WorkerConfig{
				Handler:            p.handle,
				Policy:             kltype.RetryPolicy{Attempts: 3, InitialDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond},
				CheckpointEvery:    5,
				CheckpointInterval: dynCheckpointInterval,
				Limit:              50,
				MinInterval:        50 * time.Millisecond,
				IdleInterval:       100 * time.Millisecond,
			},
		}},
		Heartbeat:         dynHeartbeat,
		Timeout:           dynTimeout,
		FenceMargin:       dynMargin,
		ShardSyncInterval: 2 * time.Second,
		ShutdownTimeout:   5 * time.Second,
		Events:            func(e observe.LeaseEvent) { d.chk.tracef("%s: event %s %s", p.owner, e.Type, e.ShardID) },
	})
	if err != nil {
		d.t.Fatalf("NewGroup: %v", err)
	}
	p.group = g
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	d.event("%s starts (slot %d)", p.owner, i)
	go func() {
		defer close(p.done)
		p.err = g.Run(ctx)
		p.returned.Store(true)
		d.chk.runReturned(p.owner, p.err, p.stopping.Load())
	}()
}

func (d *dynWorld) proc(i int) *dynProc {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.procs[i]
}

func (d *dynWorld) pause(i int, dur time.Duration) {
	p := d.proc(i)
	d.event("pause %s for %v", p.owner, dur)
	p.pause(d.chk, p.owner, dur)
}

func (d *dynWorld) partition(i int, dur time.Duration) {
	p := d.proc(i)
	d.event("partition %s from the table for %v", p.owner, dur)
	now := time.Now()
	p.partition(dur)
	d.chk.partitioned(p.owner, now, now.Add(dur))
}

func (d *dynWorld) crash(i int) {
	p := d.proc(i)
	d.event("crash %s", p.owner)
	p.stopping.Store(true)
	p.dead.Store(true)
	d.chk.crashed(p.owner)
	p.cancel()
}

// memberRow returns the membership row owner heartbeats in (0 if none is
// found).
func (d *dynWorld) memberRow(owner string) int {
	ctx := testutil.WithoutFaults(context.Background())
	h, err := d.reader.Header(ctx)
	if err != nil {
		return 0
	}
	for r := range h.Rows {
		ms, err := d.reader.Members(ctx, r)
		if err == nil && slices.ContainsFunc(ms, func(m leases.Member) bool { return m.Owner == owner }) {
			return r
		}
	}
	return 0
}

func (d *dynWorld) throttle(row int, dur time.Duration) {
	d.event("%s throttled for everyone for %v", driver.MemberKey(row), dur)
	d.throttleRow.Store(int64(row))
	d.throttleUntil.Store(time.Now().Add(dur).UnixNano())
}

func (d *dynWorld) slowCalls(dur time.Duration) {
	d.event("every store call takes 5-50ms for %v", dur)
	d.latencyUntil.Store(time.Now().Add(dur).UnixNano())
}

func (d *dynWorld) slowListing(dur time.Duration) {
	d.event("every ListShards call takes 1-2s for %v", dur)
	d.slowListTo.Store(time.Now().Add(dur).UnixNano())
}

// knowledge returns what the live processes know of shard id's checkpoint
// (see mworld.knowledge); the caller holds chk.mu.
func (d *dynWorld) knowledge(id string, l leases.Lease) map[string]int {
	row, _ := d.chk.covered(id, l.Checkpoint)
	known := map[string]int{}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.all {
		if p.dead.Load() || p.returned.Load() {
			continue
		}
		if n, ok := p.knows[id]; ok {
			known[p.owner] = min(n, row)
		}
	}
	return known
}

// alive reports whether the process of owner runs; the caller holds chk.mu.
func (d *dynWorld) alive(owner string) bool {
	d.mu.Lock()
	p := d.byOwner[owner]
	d.mu.Unlock()
	return p != nil && !p.dead.Load() && !p.returned.Load()
}

// couldAct reports whether the process named owner could act on what it
// knew between from and to (checker.couldAct): started, not paused and not
// partitioned for an unbroken stretch long enough to notice a row gone,
// see it missing for the lost-row wait and write it, as the simulation's
// membership world judges it (seed 2, profile table, under load: the knower
// reached the recreated table for 1.2 s between the drop and a 2.25 s
// partition, and the row was restarted while it was cut off and judged
// dead). Periods fenced are not counted against it here: stricter than the
// simulation, never looser. Called with chk.mu held.
func (d *dynWorld) couldAct(owner string, from, to time.Time) bool {
	d.mu.Lock()
	p := d.byOwner[owner]
	d.mu.Unlock()
	if p == nil {
		return false
	}
	const storeMaxDelay = 50 * time.Millisecond // the latency profile's
	need := dynCheckpointInterval + dynTimeout + dynMargin + 2*dynHeartbeat + 3*(dynHeartbeat+dynHeartbeat/10) + 2*storeMaxDelay
	bad := [][2]time.Time{{{}, p.startedAt}}
	bad = append(bad, d.chk.pauses[owner]...)
	bad = append(bad, d.chk.cutoffs[owner]...)
	return unbroken(bad, from, to, need)
}

// deleteHeld deletes the row of shard i, or of the next shard whose row is
// held, once every call in flight was recorded.
func (d *dynWorld) deleteHeld(i int) {
	d.epoch.Lock()
	defer d.epoch.Unlock()
	ctx := testutil.WithoutFaults(context.Background())
	for k := range dynShards {
		id := shardID((i + k) % dynShards)
		l, err := d.reader.Get(ctx, d.key(id))
		if err != nil || (!l.Held() && k < dynShards-1) {
			continue
		}
		_, err = d.plain.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                 aws.String(d.table),
			Key:                       map[string]dtypes.AttributeValue{"lease_key": &dtypes.AttributeValueMemberS{Value: l.Key.String()}},
			ConditionExpression:       aws.String("lease_counter = :c"),
			ExpressionAttributeValues: map[string]dtypes.AttributeValue{":c": &dtypes.AttributeValueMemberN{Value: strconv.FormatInt(l.Counter, 10)}},
		})
		if err != nil {
			d.t.Errorf("deleting the row of %s: %v", id, err)
			return
		}
		d.event("the row of %s deleted (held by %q)", id, l.Owner)
		d.chk.mu.Lock()
		d.chk.deleted(id, l.Owner, d.knowledge(id, l))
		d.chk.mu.Unlock()
		return
	}
}

// recreateTable deletes the table and creates it again, empty, once every
// call in flight was recorded; the calls made meanwhile fail as on a
// missing table.
func (d *dynWorld) recreateTable() {
	d.epoch.Lock()
	ctx := testutil.WithoutFaults(context.Background())
	rows := map[string]leases.Lease{}
	for i := range dynShards {
		if l, err := d.reader.Get(ctx, d.key(shardID(i))); err == nil {
			rows[l.Key.Shard] = l
		}
	}
	if _, err := d.plain.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(d.table)}); err != nil {
		d.epoch.Unlock()
		d.t.Errorf("deleting table %s: %v", d.table, err)
		return
	}
	d.event("table deleted")
	d.chk.mu.Lock()
	for id, l := range rows {
		d.chk.deleted(id, l.Owner, d.knowledge(id, l))
	}
	d.chk.mu.Unlock()
	d.epoch.Unlock()
	for {
		_, err := d.plain.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(d.table)})
		var notFound *dtypes.ResourceNotFoundException
		if errors.As(err, &notFound) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	testutil.CreateLeaseTable(d.t, d.plain, d.table)
	d.event("table created again, empty")
}

// inject adds one SDK-level fault to a random process's DynamoDB client.
func (d *dynWorld) inject() {
	d.mu.Lock()
	p := d.procs[d.rng.IntN(len(d.procs))]
	k := d.rng.IntN(6)
	op := []string{"UpdateItem", "GetItem"}[d.rng.IntN(2)]
	times := 1 + d.rng.IntN(2)
	delay := time.Duration(50+d.rng.IntN(350)) * time.Millisecond
	d.mu.Unlock()
	var f testutil.Fault
	switch k {
	case 0: // a write lands, its answer is lost, the SDK retries (the store recognises its token)
		f = testutil.Fault{Op: "UpdateItem", Times: 1, PerAttempt: true, LoseResponse: true}
	case 1: // a write lands, its answer is lost, the caller sees a timeout
		f = testutil.Fault{Op: "UpdateItem", Times: 1, LoseResponse: true}
	case 2: // a write lands, the caller sees a 500
		f = testutil.Fault{Op: "UpdateItem", Times: 1, LoseResponse: true,
			Err: &smithy.GenericAPIError{Code: "InternalServerError", Message: "injected", Fault: smithy.FaultServer}}
	case 3: // throttled, retried by the SDK
		f = testutil.Fault{Op: op, Times: times, PerAttempt: true, Err: &dtypes.ProvisionedThroughputExceededException{Message: aws.String("injected")}}
	case 4: // throttled, seen by the caller
		f = testutil.Fault{Op: op, Times: times, Err: &dtypes.ProvisionedThroughputExceededException{Message: aws.String("injected")}}
	default: // slow
		f = testutil.Fault{Op: op, Times: times, Delay: delay}
	}
	p.faults.Inject(f)
	d.injected.Add(1)
}

// live returns the processes running now.
func (d *dynWorld) live() []*dynProc {
	d.mu.Lock()
	defer d.mu.Unlock()
	var live []*dynProc
	for _, p := range d.procs {
		if !p.dead.Load() && !p.stopping.Load() && !p.returned.Load() {
			live = append(live, p)
		}
	}
	return live
}

// fair reports whether the live processes hold every shard, within one of
// each other, as the table says.
func (d *dynWorld) fair() bool {
	live := d.live()
	holdings := make([][]string, len(live))
	for i, p := range live {
		holdings[i] = p.group.Held(d.stream.Name())
	}
	held, ok := fairSplit(dynShards, holdings)
	if !ok {
		return false
	}
	for id, i := range held {
		l, err := d.reader.Get(context.Background(), d.key(id))
		if err != nil || l.Owner != live[i].owner {
			return false
		}
	}
	return true
}

func (d *dynWorld) assignment() string {
	var parts []string
	for _, p := range d.live() {
		parts = append(parts, fmt.Sprintf("%s holds %v", p.owner, p.group.Held(d.stream.Name())))
	}
	return strings.Join(parts, "; ")
}

// delivered reports whether every record was acknowledged and every
// checkpoint covers its shard.
func (d *dynWorld) delivered() bool {
	rows := map[string]leases.Lease{}
	for _, id := range d.stream.ShardIDs() {
		l, err := d.reader.Get(context.Background(), d.key(id))
		if err != nil {
			return false
		}
		rows[id] = l
	}
	d.chk.mu.Lock()
	defer d.chk.mu.Unlock()
	for id, l := range rows {
		n := d.stream.UserRecords(id)
		if d.chk.shard(id).prefix < n {
			return false
		}
		if cov, err := d.chk.covered(id, l.Checkpoint); err != nil || cov != n {
			return false
		}
	}
	return true
}

// mayDeliver reports whether the process of owner says it holds shard id
// (Group.Held: it reads it under a lease it trusts); the caller holds
// chk.mu.
func (d *dynWorld) mayDeliver(owner, id string) bool {
	d.mu.Lock()
	p := d.byOwner[owner]
	d.mu.Unlock()
	if p == nil || p.dead.Load() || p.returned.Load() {
		return false
	}
	return slices.Contains(p.group.Held(d.stream.Name()), id)
}

func (p *dynProc) decide(op string, key leases.Key) Decision {
	now := time.Now().UnixNano()
	if p.partitioned() {
		return Decision{Delay: 100 * time.Millisecond, Err: &InjectedError{Op: op, Key: key, Msg: "dial tcp: connect: connection refused"}}
	}
	if isMemberOp(op) && now < p.d.throttleUntil.Load() && key == MemberRowKey(int(p.d.throttleRow.Load())) {
		return Decision{Delay: 10 * time.Millisecond, Err: &InjectedError{Op: op, Key: key, Msg: "ProvisionedThroughputExceededException (this membership row is throttled)"}}
	}
	if now < p.d.latencyUntil.Load() {
		return Decision{Delay: 5*time.Millisecond + time.Duration(p.d.intN(45))*time.Millisecond}
	}
	return Decision{}
}

func (p *dynProc) decideKinesis(op, _ string) (time.Duration, error) {
	var delay time.Duration
	if op == "ListShards" && time.Now().UnixNano() < p.d.slowListTo.Load() {
		delay = time.Second + time.Duration(p.d.intN(1000))*time.Millisecond
	}
	if !p.d.faultsOn.Load() || p.d.intN(20) != 0 {
		return delay, nil
	}
	return delay, &ktypes.ProvisionedThroughputExceededException{Message: aws.String("injected")}
}

// apply records every write that lands: from its answer, or, when the
// answer was lost, by reading the row back and finding one of the tokens
// this process's client sent for it. It holds the world's epoch for
// reading: a deletion waits for it.
func (p *dynProc) apply(op string, l leases.Lease, do func() (leases.Lease, error)) (leases.Lease, error) {
	p.d.epoch.RLock()
	defer p.d.epoch.RUnlock()
	key := l.Key.String()
	p.tokMu.Lock()
	p.tokens[key] = map[string]bool{}
	p.tokMu.Unlock()
	got, err := do()
	c := p.d.chk
	if err == nil {
		c.mu.Lock()
		if n, cerr := c.covered(got.Key.Shard, got.Checkpoint); cerr == nil {
			if k, ok := p.knows[got.Key.Shard]; !ok || n > k {
				p.knows[got.Key.Shard] = n
			}
		}
		c.mu.Unlock()
	}
	if op == "Get" {
		return got, err
	}
	if err == nil {
		c.mu.Lock()
		c.applied(op, p.owner, l, got)
		c.mu.Unlock()
		return got, err
	}
	if errors.Is(err, leases.ErrConflict) || errors.Is(err, leases.ErrNotFound) || errors.Is(err, ErrInjected) {
		return got, err
	}
	row, rerr := p.d.reader.Get(testutil.WithoutFaults(context.Background()), l.Key)
	if rerr != nil {
		return got, err
	}
	p.tokMu.Lock()
	ours := p.tokens[key][row.Token]
	p.tokMu.Unlock()
	switch {
	case ours && (op == "Create" || op == "CreateAs" || row.Counter == l.Counter+1):
		p.d.lostSeen.Add(1)
		c.mu.Lock()
		c.tracef("%s %s %s: answer lost (%v); the write landed", p.owner, op, l.Key.Shard, err)
		c.applied(op, p.owner, l, row)
		c.mu.Unlock()
	case row.Counter > l.Counter+1:
		// Landed and overwritten, or not landed: the poller may have seen
		// the version; (c) checks it, (b) cannot tell its writer.
		p.d.lostHidden.Add(1)
	}
	return got, err
}

// handle is the process's handler.
func (p *dynProc) handle(ctx context.Context, r *kltype.Record) error {
	if p.dead.Load() {
		return deadHandler(ctx)
	}
	c := p.d.chk
	h := c.enter(p.owner, r)
	c.mu.Lock()
	if p.d.faultsOver {
		if _, ok := p.d.readAgain[r.ShardID]; !ok {
			p.d.readAgain[r.ShardID] = time.Now()
		}
	}
	c.mu.Unlock()
	p.stall()
	t := time.NewTimer(time.Duration(p.d.intN(10)) * time.Millisecond)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		c.exit(h, false)
		return ctx.Err()
	}
	p.stall()
	if p.dead.Load() {
		return deadHandler(ctx)
	}
	c.exit(h, true)
	return nil
}

// tokenClient records the write token of every UpdateItem a process's
// store sends.
type tokenClient struct {
	dynamo.Client
	p *dynProc
}

func (c *tokenClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	var key string
	if v, ok := in.Key["lease_key"].(*dtypes.AttributeValueMemberS); ok {
		key = v.Value
	}
	if tok := setToken(in); tok != "" {
		c.p.tokMu.Lock()
		if c.p.tokens[key] == nil {
			c.p.tokens[key] = map[string]bool{}
		}
		c.p.tokens[key][tok] = true
		c.p.tokMu.Unlock()
	}
	return c.Client.UpdateItem(ctx, in, optFns...)
}

// assignment is one "path = :value" of an UpdateExpression's SET.
var assignment = regexp.MustCompile(`(#?[A-Za-z0-9_]+)\s*=\s*(:[A-Za-z0-9_]+)`)

// setToken returns the write_token an UpdateItem sets, "" if none: the
// value its UpdateExpression assigns to write_token, named as it is or
// through ExpressionAttributeNames, whatever placeholders the store chose
// (the hand-written ":write_token" or the expression package's ":3"). The
// condition's expected token is not one: only the update is read.
func setToken(in *dynamodb.UpdateItemInput) string {
	for _, m := range assignment.FindAllStringSubmatch(aws.ToString(in.UpdateExpression), -1) {
		name := m[1]
		if n, ok := in.ExpressionAttributeNames[name]; ok {
			name = n
		}
		if name != "write_token" {
			continue
		}
		if s, ok := in.ExpressionAttributeValues[m[2]].(*dtypes.AttributeValueMemberS); ok {
			return s.Value
		}
	}
	return ""
}

// TestTokenClient: tokenClient records the token every lease-row write of
// the DynamoDB store sets, so that apply recognises a write whose answer was
// lost; a token it missed would leave such a write unrecorded, and the
// checker would judge the writer's next take against a stale tenure (a
// holder "delivering out of order" from the checkpoint it took). It reads
// the store's requests, so it must not depend on how the store names its
// placeholders.
func TestTokenClient(t *testing.T) {
	t.Parallel()
	plain := testutil.DynamoClient(t, fastDynamo)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, plain, table)
	p := &dynProc{owner: "o", tokens: map[string]map[string]bool{}}
	store := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(&tokenClient{Client: plain, p: p}))
	ctx := context.Background()
	key := leases.Key{Stream: "s", Shard: shardID(0)}
	cp := leases.Checkpoint{Sequence: "49000000000000000000000000000000000000000000000001000000"}
	steps := []struct {
		op    string
		write func(l leases.Lease) (leases.Lease, error)
	}{
		{"Create", func(leases.Lease) (leases.Lease, error) { return store.Create(ctx, key) }},
		{"TakeAs", func(l leases.Lease) (leases.Lease, error) { return store.TakeAs(ctx, l, "o", "inc") }},
		{"Checkpoint", func(l leases.Lease) (leases.Lease, error) { return store.Checkpoint(ctx, l, cp) }},
		{"Rewind", func(l leases.Lease) (leases.Lease, error) { return store.Rewind(ctx, l, cp) }},
		{"ApplyRewind", func(l leases.Lease) (leases.Lease, error) { return store.ApplyRewind(ctx, l) }},
		{"Release", func(l leases.Lease) (leases.Lease, error) { return store.Release(ctx, l, cp) }},
	}
	var l leases.Lease
	for _, s := range steps {
		p.tokens[key.String()] = map[string]bool{}
		var err error
		if l, err = s.write(l); err != nil {
			t.Fatalf("%s: %v", s.op, err)
		}
		if got := p.tokens[key.String()]; !got[l.Token] || len(got) != 1 {
			t.Errorf("%s wrote token %q; tokenClient recorded %v, want that token alone", s.op, l.Token, got)
		}
	}
	created := leases.Key{Stream: "s", Shard: shardID(1)}
	for _, owner := range []string{"", "o"} {
		p.tokens[created.String()] = map[string]bool{}
		inc := map[string]string{"": "", "o": "inc"}[owner]
		l, err := store.CreateAs(ctx, created, owner, inc, cp, "")
		if err != nil {
			t.Fatalf("CreateAs as %q: %v", owner, err)
		}
		if got := p.tokens[created.String()]; !got[l.Token] {
			t.Errorf("CreateAs as %q wrote token %q; tokenClient recorded %v", owner, l.Token, got)
		}
		if _, err := plain.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
			Key: map[string]dtypes.AttributeValue{"lease_key": &dtypes.AttributeValueMemberS{Value: created.String()}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnbroken: couldAct's stretch, with the figures of seed 2 (profile
// table) failing under load: the table dropped at T+4.216s, the knower
// partitioned from T+5.425s for 2.25s, the row restarted at T+6.804s: no
// stretch long enough, so the restart is not charged to the protocol; a
// knower reachable throughout is.
func TestUnbroken(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	need := dynCheckpointInterval + dynTimeout + dynMargin + 2*dynHeartbeat + 3*(dynHeartbeat+dynHeartbeat/10)
	cut := [][2]time.Time{{{}, at(0)}, {at(5.425), at(7.675)}}
	if unbroken(slices.Clone(cut), at(4.216), at(6.804), need) {
		t.Error("a knower reachable for 1.2 s after the drop, then cut off, counted as able to act")
	}
	if !unbroken([][2]time.Time{{{}, at(0)}}, at(4.216), at(6.804).Add(need), need) {
		t.Error("a knower reachable throughout not counted as able to act")
	}
	if !unbroken(slices.Clone(cut), at(4.216), at(7.675).Add(need), need) {
		t.Error("the stretch after the partition not counted")
	}
}
