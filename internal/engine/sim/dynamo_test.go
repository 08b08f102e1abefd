package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
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
	"github.com/kinesislease/kinesislease/internal/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

var flagDynamoSeed = flag.Uint64("dynamoseed", 0, "seed of TestDynamoProtocol's faults (default $KINESISLEASE_DYNAMO_SEED, else 1)")

// Real time, so short leases; the fence margin leaves room for a
// goroutine descheduled between the fence check and the handler (-race on
// two cores).
const (
	dynLease     = time.Second
	dynRenew     = 250 * time.Millisecond
	dynScan      = 250 * time.Millisecond
	dynMargin    = 300 * time.Millisecond
	dynShards    = 6
	dynProcs     = 3
	dynFaults    = 12 * time.Second // SDK faults, pauses, crashes until then
	dynPutEvery  = 20 * time.Millisecond
	dynSettleMax = 25 * time.Second // after faults stop
)

// TestDynamoProtocol checks the invariants of checker against the DynamoDB
// store on DynamoDB Local, in real time: 3 coordinators on a 6-shard fake
// stream with 1s leases, under SDK-level faults drawn from a seed (delays,
// throttling, lost responses after the write landed, with and without the
// SDK retrying), a pause longer than the lease, a crash and restart, a
// partition and a wall-clock jump. Writes are recorded as they land: from
// their answers, or, for an answer lost, by reading the row back and
// finding the write's token; a poller reads every row every 20ms too, so
// that (c) sees versions whose writer never learned they landed.
func TestDynamoProtocol(t *testing.T) {
	seed := uint64(1)
	if v := os.Getenv("KINESISLEASE_DYNAMO_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("KINESISLEASE_DYNAMO_SEED=%q: %v", v, err)
		}
		seed = n
	}
	if *flagDynamoSeed != 0 {
		seed = *flagDynamoSeed
	}
	t.Logf("seed %d (go test ./internal/engine/sim/ -run TestDynamoProtocol -dynamoseed=%d -v)", seed, seed)

	plain := testutil.DynamoClient(t, fastDynamo)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, plain, table)
	d := &dynWorld{
		t:      t,
		seed:   seed,
		rng:    rand.New(rand.NewPCG(seed, 0xd1a)),
		table:  table,
		stream: NewStream("dyn", dynShards),
		reader: dynamo.New(testutil.Config(t), table, dynamo.WithClient(plain)),
	}
	d.chk = newChecker(d.stream)
	for i := range dynShards {
		for range 20 {
			d.put(i)
		}
	}
	d.run()

	d.chk.mu.Lock()
	defer d.chk.mu.Unlock()
	t.Logf("%d handler calls, %d writes seen landing (%d checkpoints, %d takes, %d handoff requests), %d answers lost after the write landed (%d of them found by reading the row back, %d overwritten before)",
		d.chk.stats.entries, d.chk.stats.writes, d.chk.stats.checkpoints, d.chk.stats.takes, d.chk.stats.handoffs,
		d.lostSeen.Load()+d.lostHidden.Load(), d.lostSeen.Load(), d.lostHidden.Load())
	t.Logf("%d SDK faults injected; fair shares %v after faults stopped", d.injected.Load(), d.settled)
	if len(d.chk.violations) > 0 {
		t.Errorf("seed %d broke the protocol's invariants:\n  %s\n\ntrace (last %d lines):\n%s\n\nreplay: go test ./internal/engine/sim/ -run TestDynamoProtocol -dynamoseed=%d -v",
			seed, strings.Join(d.chk.violations, "\n  "), traceLines, d.chk.trace.String(), seed)
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
	t      *testing.T
	seed   uint64
	table  string
	stream *Stream
	reader *dynamo.Store // fault-free reads
	chk    *checker

	mu    sync.Mutex
	rng   *rand.Rand
	procs []*dynProc // the current process of each slot
	all   []*dynProc // every process started
	gen   []int

	faultsOn             atomic.Bool
	injected             atomic.Int64
	lostSeen, lostHidden atomic.Int64
	settled              time.Duration
}

type dynProc struct {
	d      *dynWorld
	owner  string
	faults *testutil.Faults
	coord  *engine.Coordinator
	cancel context.CancelFunc
	done   chan struct{}
	err    error

	procState // its wall clock only jumps

	tokMu  sync.Mutex
	tokens map[string]map[string]bool // key -> tokens of UpdateItems sent
}

func (d *dynWorld) put(i int) {
	id := fmt.Sprintf("shardId-%012d", i)
	if _, err := d.stream.Put(id, "pk", []byte("record")); err != nil {
		d.t.Fatalf("put: %v", err)
	}
}

func (d *dynWorld) intN(n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rng.IntN(n)
}

func (d *dynWorld) run() {
	t := d.t
	start := time.Now()
	d.chk.start = start
	d.chk.trace.start = start
	d.faultsOn.Store(true)
	ctx, stop := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	defer bg.Wait()
	defer stop()

	for i := range dynProcs {
		d.start(i)
	}
	// The producer, the poller and the fault injector.
	bg.Go(func() {
		for ctx.Err() == nil && time.Since(start) < dynFaults {
			time.Sleep(dynPutEvery)
			d.put(d.intN(dynShards))
		}
	})
	bg.Go(func() {
		for ctx.Err() == nil {
			for i := range dynShards {
				key := leases.Key{Stream: d.stream.Name(), Shard: fmt.Sprintf("shardId-%012d", i)}
				if l, err := d.reader.Get(testutil.WithoutFaults(ctx), key); err == nil {
					d.chk.mu.Lock()
					d.chk.observed(l)
					d.chk.mu.Unlock()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	bg.Go(func() {
		for ctx.Err() == nil && time.Since(start) < dynFaults {
			time.Sleep(time.Duration(100+d.intN(200)) * time.Millisecond)
			d.inject()
		}
	})

	// Process-level events, one of each, at seeded times.
	type step struct {
		at time.Duration
		fn func()
	}
	at := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(d.intN(int(hi-lo)/1e6))*time.Millisecond
	}
	steps := []step{
		{at(1*time.Second, 3*time.Second), func() { d.pause(0, dynLease*2) }},
		{at(3*time.Second, 5*time.Second), func() { d.clockJump(1, -time.Duration(1+d.intN(48))*time.Hour) }},
		{at(5*time.Second, 6*time.Second), func() { d.partition(2, dynLease*3/2) }},
		{at(7*time.Second, 8*time.Second), func() { d.crash(1) }},
		{at(9*time.Second, 10*time.Second), func() { d.start(1) }},
		{at(10*time.Second, 11*time.Second), func() { d.pause(2, dynLease*3/2) }},
	}
	slices.SortFunc(steps, func(a, b step) int { return int(a.at - b.at) })
	for _, s := range steps {
		time.Sleep(time.Until(start.Add(s.at)))
		s.fn()
	}
	time.Sleep(time.Until(start.Add(dynFaults)))
	d.faultsOn.Store(false)
	d.mu.Lock()
	for _, p := range d.procs {
		p.faults.Clear()
	}
	d.mu.Unlock()
	faultEnd := time.Now()
	d.chk.tracef("faults stop")

	// Every record delivered, checkpoints caught up, fair shares.
	var settled time.Time
	for time.Since(faultEnd) < dynSettleMax {
		time.Sleep(100 * time.Millisecond)
		fair, done := d.fair(), d.delivered()
		if !fair {
			settled = time.Time{}
		} else if settled.IsZero() {
			settled = time.Now()
		}
		if fair && done && time.Since(settled) > 4*dynScan {
			break
		}
	}
	done := d.delivered()
	d.chk.mu.Lock()
	if !done {
		d.chk.violate("(d) %v after faults stopped, records are still unacknowledged or checkpoints behind", time.Since(faultEnd))
	}
	if settled.IsZero() {
		d.chk.violate("(e) %v after faults stopped, shares are not fair: %s", time.Since(faultEnd), d.assignment())
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
		l, err := d.reader.Get(context.Background(), leases.Key{Stream: d.stream.Name(), Shard: id})
		if err != nil {
			t.Fatalf("reading %s: %v", id, err)
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

// start starts a process (a new owner id) in slot i.
func (d *dynWorld) start(i int) {
	d.mu.Lock()
	for len(d.gen) <= i {
		d.gen = append(d.gen, 0)
	}
	p := &dynProc{d: d, owner: fmt.Sprintf("d%d.g%d", i, d.gen[i]), faults: &testutil.Faults{}, done: make(chan struct{}), tokens: map[string]map[string]bool{}}
	d.gen[i]++
	d.all = append(d.all, p)
	if i < len(d.procs) {
		d.procs[i] = p
	} else {
		d.procs = append(d.procs, p)
	}
	d.mu.Unlock()

	client := testutil.DynamoClient(d.t, p.faults.DynamoOptions, fastDynamo)
	store := dynamo.New(testutil.Config(d.t), d.table, dynamo.WithClient(&tokenClient{Client: client, p: p}), dynamo.WithClock(p.wallClock))
	c, err := engine.NewCoordinator(engine.Config{
		Stream:          d.stream.Name(),
		Owner:           p.owner,
		Store:           NewFaultStore(store, p.storeHooks(p.decide, p.apply)),
		Client:          d.stream.Client(p.kinesisHooks(p.decideKinesis)),
		Logger:          slog.New(&traceHandler{tr: &d.chk.trace, name: func() string { return p.owner }}),
		Start:           kltype.TrimHorizon,
		LeaseDuration:   dynLease,
		RenewInterval:   dynRenew,
		FenceMargin:     dynMargin,
		ScanInterval:    dynScan,
		ShutdownTimeout: 5 * time.Second,
		Worker: engine.WorkerConfig{
			Handler:            p.handle,
			Policy:             kltype.RetryPolicy{Attempts: 3, InitialDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond},
			CheckpointEvery:    5,
			CheckpointInterval: 200 * time.Millisecond,
			Limit:              50,
			MinInterval:        50 * time.Millisecond,
			IdleInterval:       100 * time.Millisecond,
		},
	})
	if err != nil {
		d.t.Fatalf("NewCoordinator: %v", err)
	}
	p.coord = c
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	d.chk.tracef("%s starts", p.owner)
	go func() {
		defer close(p.done)
		p.err = c.Run(ctx)
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
	d.chk.tracef("event: pause %s for %v", p.owner, dur)
	p.pause(d.chk, p.owner, dur)
}

func (d *dynWorld) partition(i int, dur time.Duration) {
	p := d.proc(i)
	d.chk.tracef("event: partition %s for %v", p.owner, dur)
	p.partition(dur)
}

func (d *dynWorld) clockJump(i int, by time.Duration) {
	p := d.proc(i)
	d.chk.tracef("event: %s's wall clock jumps by %v", p.owner, by)
	p.clockEvent(0, by)
}

func (d *dynWorld) crash(i int) {
	p := d.proc(i)
	d.chk.tracef("event: crash %s", p.owner)
	p.stopping.Store(true)
	p.dead.Store(true)
	d.chk.crashed(p.owner)
	p.cancel()
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

// fair reports whether the live processes hold every shard, within one of
// each other, as the table says.
func (d *dynWorld) fair() bool {
	d.mu.Lock()
	var live []*dynProc
	for _, p := range d.procs {
		if !p.dead.Load() && !p.stopping.Load() {
			live = append(live, p)
		}
	}
	d.mu.Unlock()
	share := (dynShards + len(live) - 1) / len(live)
	lo, hi := dynShards, 0
	held := map[string]string{}
	for _, p := range live {
		ids := p.coord.Held()
		lo, hi = min(lo, len(ids)), max(hi, len(ids))
		for _, id := range ids {
			held[id] = p.owner
		}
	}
	if len(held) != dynShards || hi > share || hi-lo > 1 {
		return false
	}
	for id, owner := range held {
		l, err := d.reader.Get(context.Background(), leases.Key{Stream: d.stream.Name(), Shard: id})
		if err != nil || l.Owner != owner {
			return false
		}
	}
	return true
}

func (d *dynWorld) assignment() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var parts []string
	for _, p := range d.procs {
		if !p.dead.Load() {
			parts = append(parts, fmt.Sprintf("%s holds %v", p.owner, p.coord.Held()))
		}
	}
	return strings.Join(parts, "; ")
}

// delivered reports whether every record was acknowledged and every
// checkpoint covers its shard.
func (d *dynWorld) delivered() bool {
	rows := map[string]leases.Lease{}
	for _, id := range d.stream.ShardIDs() {
		l, err := d.reader.Get(context.Background(), leases.Key{Stream: d.stream.Name(), Shard: id})
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

func (p *dynProc) decide(op string, key leases.Key) Decision {
	if p.partitioned() {
		return Decision{Delay: 100 * time.Millisecond, Err: &InjectedError{Op: op, Key: key, Msg: "dial tcp: connect: connection refused"}}
	}
	return Decision{}
}

func (p *dynProc) decideKinesis(op, _ string) (time.Duration, error) {
	if !p.d.faultsOn.Load() || p.d.intN(20) != 0 {
		return 0, nil
	}
	return 0, &ktypes.ProvisionedThroughputExceededException{Message: aws.String("injected")}
}

// apply records every write that lands: from its answer, or, when the
// answer was lost, by reading the row back and finding one of the tokens
// this process's client sent for it.
func (p *dynProc) apply(op string, l leases.Lease, do func() (leases.Lease, error)) (leases.Lease, error) {
	key := l.Key.String()
	p.tokMu.Lock()
	p.tokens[key] = map[string]bool{}
	p.tokMu.Unlock()
	got, err := do()
	if !isWrite(op) {
		return got, err
	}
	c := p.d.chk
	if err == nil {
		c.mu.Lock()
		c.applied(op, p.owner, l, got)
		c.mu.Unlock()
		return got, err
	}
	if errors.Is(err, leases.ErrConflict) || errors.Is(err, leases.ErrNotFound) {
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
	case ours && (op == "Create" || row.Counter == l.Counter+1):
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
	for name, v := range in.ExpressionAttributeValues {
		if s, ok := v.(*dtypes.AttributeValueMemberS); ok && strings.Contains(name, "token") {
			c.p.tokMu.Lock()
			if c.p.tokens[key] == nil {
				c.p.tokens[key] = map[string]bool{}
			}
			c.p.tokens[key][s.Value] = true
			c.p.tokMu.Unlock()
		}
	}
	return c.Client.UpdateItem(ctx, in, optFns...)
}
