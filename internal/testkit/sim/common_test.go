package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/kpl"
	"github.com/kinesislease/kinesislease/leases"
)

// The infrastructure of the simulations: the choice of seeds, the bubble a
// seed runs in, the plan's common parts, the world's stream, table and
// checker, and each process's faults.

var (
	flagSeed  = flag.Uint64("seed", 0, "simulate only this seed (replays a failure)")
	flagSeeds = flag.Int("seeds", 0, "how many seeds TestMembership runs (default $KINESISLEASE_SIM_SEEDS, else 300, 150 with -race)")
	flagBase  = flag.Uint64("seedbase", 0, "first seed of TestMembership (default $KINESISLEASE_SIM_SEED_BASE, else 1)")
	flagTrace = flag.Bool("simtrace", false, "print the trace of every seed, not only of failing ones")
)

const streamName = "sim"

func TestMain(m *testing.M) { testutil.Main(m) }

// errHandler is the error of a handler call that fails by the plan.
var errHandler = errors.New("sim: handler failed (injected)")

// ---------------------------------------------------------------------------
// Seeds.

// seedList returns the seeds a simulation test runs: -seed alone, else
// -seeds (or $KINESISLEASE_SIM_SEEDS, else ci) seeds from -seedbase (or
// $KINESISLEASE_SIM_SEED_BASE, else 1).
func seedList(t *testing.T, ci int) []uint64 {
	if *flagSeed != 0 {
		return []uint64{*flagSeed}
	}
	n, base := ci, uint64(1)
	if v := os.Getenv("KINESISLEASE_SIM_SEEDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("KINESISLEASE_SIM_SEEDS=%q: want a positive number", v)
		}
	}
	if v := os.Getenv("KINESISLEASE_SIM_SEED_BASE"); v != "" {
		var err error
		if base, err = strconv.ParseUint(v, 10, 64); err != nil || base == 0 {
			t.Fatalf("KINESISLEASE_SIM_SEED_BASE=%q: want a positive number", v)
		}
	}
	if *flagSeeds > 0 {
		n = *flagSeeds
	}
	if *flagBase > 0 {
		base = *flagBase
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}

// runSeeds runs run for every seed of list, each in a subtest seeds/seed=N,
// in parallel when there are several. With batch > 0 the seeds run in
// batches of that many (subtests seeds/from=F/seed=N), one batch after the
// other.
func runSeeds(t *testing.T, list []uint64, batch int, run func(t *testing.T, seed uint64)) {
	each := func(t *testing.T, seeds []uint64) {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				if len(list) > 1 {
					t.Parallel()
				}
				run(t, seed)
			})
		}
	}
	t.Run("seeds", func(t *testing.T) {
		if batch <= 0 {
			each(t, list)
			return
		}
		for b := range slices.Chunk(list, batch) {
			t.Run(fmt.Sprintf("from=%d", b[0]), func(t *testing.T) { each(t, b) })
		}
	})
}

const seedLabel = "kinesislease-sim-seed"

// simulate runs one seed in a testing/synctest bubble: build makes its
// world, whose run is called with every goroutine it starts labelled label
// (see labelled), and simulate returns the world once the bubble ended.
func simulate[W interface{ run() }](t *testing.T, label string, build func(t *testing.T) W) W {
	var w W
	synctest.Test(t, func(t *testing.T) {
		w = build(t)
		pprof.Do(context.Background(), pprof.Labels(seedLabel, label), func(context.Context) {
			w.run()
		})
	})
	return w
}

// labelled returns the stacks of the goroutines labelled value, other than
// the caller's.
func labelled(value string) string {
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		return ""
	}
	want := fmt.Sprintf("%q:%q", seedLabel, value)
	var out []string
	for _, entry := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(entry, want) && !strings.Contains(entry, "sim.labelled") {
			out = append(out, entry)
		}
	}
	return strings.Join(out, "\n\n")
}

// ---------------------------------------------------------------------------
// The plan.

// planBase is what the plans of both simulations decide alike.
type planBase struct {
	seed    uint64
	shards  int
	initial []int   // records per shard at the start
	aggP    float64 // share of records that are KPL aggregates

	faultEnd time.Duration // per-call faults stop; every event ends before
	produce  time.Duration // records are put until then
	putEvery time.Duration // mean time between puts

	storeDelayP, storeErrP, storeLostP, storeRespDelayP float64
	storeMaxDelay                                       time.Duration
	kinDelayP, kinErrP                                  float64
	handlerErrP, handlerSlowP                           float64
	handlerMaxWork                                      time.Duration

	fenceStress bool // see the plans' stress
}

// slotPlan is what both simulations' plans decide for a slot.
type slotPlan struct {
	start              time.Duration
	checkpointEvery    int
	checkpointInterval time.Duration
	limit              int32
	ignoresCancel      bool // the handler does not watch its context
}

// drawShape draws the stream: its shards, their initial records and the
// share of aggregates.
func (p *planBase) drawShape(r *rand.Rand) {
	p.shards = 1 + r.IntN(8)
	p.initial = make([]int, p.shards)
	for i := range p.initial {
		p.initial[i] = r.IntN(40)
	}
	p.aggP = []float64{0, 0, 0.2, 0.5}[r.IntN(4)]
}

// drawSlot draws slot i's worker settings and, for a slot other than the
// first, sometimes a start (a join) within maxStart.
func drawSlot(r *rand.Rand, i int, maxStart time.Duration) slotPlan {
	sp := slotPlan{
		checkpointEvery:    1 + r.IntN(20),
		checkpointInterval: time.Duration(1+r.IntN(5)) * time.Second,
		limit:              int32(1 + r.IntN(25)),
		ignoresCancel:      r.IntN(3) == 0,
	}
	if i > 0 && r.IntN(3) == 0 {
		sp.start = time.Duration(r.Int64N(int64(maxStart)))
	}
	return sp
}

// drawPace draws when faults stop (records are put until then) and how
// often records are put.
func (p *planBase) drawPace(r *rand.Rand) {
	p.faultEnd = 30*time.Second + time.Duration(r.Int64N(int64(60*time.Second)))
	p.produce = p.faultEnd
	p.putEvery = time.Duration(20*math.Pow(50, r.Float64())) * time.Millisecond // 20ms to 1s
}

// keepUp returns limit raised so that a reader (limit records per
// GetRecords, 5 calls a second) keeps up with three times a shard's put
// rate, or the backlog outlasts the run.
func (p *planBase) keepUp(limit int32) int32 {
	perShard := float64(time.Second) / float64(p.putEvery) / float64(p.shards)
	return max(limit, int32(math.Ceil(3*perShard/5)))
}

// rater returns the draw of a fault rate: 0 on a quarter of the draws, else
// up to max.
func rater(r *rand.Rand) func(max float64) float64 {
	return func(max float64) float64 {
		if r.IntN(4) == 0 {
			return 0
		}
		return r.Float64() * max
	}
}

// drawStoreRates draws the store's per-call fault rates.
func (p *planBase) drawStoreRates(rate func(float64) float64) {
	p.storeDelayP = rate(0.3)
	p.storeErrP = rate(0.08)
	p.storeLostP = rate(0.08)
	p.storeRespDelayP = rate(0.2)
}

// drawCallRates draws the rates of Kinesis and handler faults.
func (p *planBase) drawCallRates(rate func(float64) float64) {
	p.kinDelayP = rate(0.2)
	p.kinErrP = rate(0.15)
	p.handlerErrP = rate(0.05)
	p.handlerSlowP = rate(0.1)
}

// restartAt draws when a slot whose process crashed or stopped at at (its
// events so far ending at t) starts a new process, scaled by T: false if it
// stays down (never the last slot, so one always runs).
func (p *planBase) restartAt(r *rand.Rand, t, at, T time.Duration, slot, slots int) (time.Duration, bool) {
	gap := time.Duration(r.Int64N(int64(3 * T)))
	if slot != slots-1 && r.IntN(4) == 0 {
		return 0, false
	}
	return max(min(t+gap, p.faultEnd-time.Second), at+100*time.Millisecond), true
}

// stressed reports whether the stream of seed numbered stream makes this
// plan a fence test (a third of the plans), and marks it so; the stream
// then draws the test's details.
func (p *planBase) stressed(seed, stream uint64) (*rand.Rand, bool) {
	r := rand.New(rand.NewPCG(seed, stream))
	if r.IntN(3) != 0 {
		return nil, false
	}
	p.fenceStress = true
	return r, true
}

// stressPace makes a fence test's puts come every few tens of milliseconds
// and its answers often slow.
func (p *planBase) stressPace(r *rand.Rand) {
	p.putEvery = 20*time.Millisecond + time.Duration(r.Int64N(int64(40*time.Millisecond)))
	p.storeRespDelayP = max(p.storeRespDelayP, 0.2)
}

// stressSlot makes a slot's reads keep up with a fence test's puts.
func (sp *slotPlan) stressSlot() {
	sp.checkpointEvery = 20
	sp.limit = 50 // reads keep up with the puts
}

// writeTail ends a plan's description with its puts and its events.
func writeTail[E fmt.Stringer](b *strings.Builder, p *planBase, events []E) {
	fmt.Fprintf(b, "  puts every ~%v until T+%v; fence stress %v\n", p.putEvery, p.produce, p.fenceStress)
	for _, e := range events {
		fmt.Fprintf(b, "  %v\n", e)
	}
}

// ---------------------------------------------------------------------------
// The world.

// simBase is what the worlds of both simulations share: the stream, the
// table, the checker, and how a seed reports a failure.
type simBase struct {
	t       *testing.T
	seed    uint64
	start   time.Time
	kinesis *kinesisfake.Kinesis
	stream  *Ledger
	mem     *Table
	chk     *checker
	produce *rand.Rand
	aggP    float64
	shards  int

	plan        fmt.Stringer             // printed when the seed hangs
	what        string                   // names the simulation in a hang's panic ("" or "membership ")
	replay      func(seed uint64) string // the command that replays a seed
	onViolation func()                   // called after every violation (under chk.mu), if set
	// hangTrace, if set, writes the whole trace of a seed that hangs to a
	// file and returns its name (a replayed seed keeps every line).
	hangTrace func() string
}

// init makes the stream with its initial records, the table and the
// checker, which names a row's holder by holder.
func (b *simBase) init(t *testing.T, p *planBase, holder func(leases.Lease) string) {
	b.t, b.seed, b.start, b.aggP, b.shards = t, p.seed, time.Now(), p.aggP, p.shards
	b.kinesis = NewKinesis()
	var err error
	if b.stream, err = NewStream(b.kinesis, streamName, p.shards); err != nil {
		t.Fatal(err)
	}
	b.mem = NewTable()
	b.chk = newChecker(b.stream)
	b.chk.owner = func(id string) string { // called with chk.mu held
		l, err := b.row(id)
		if err != nil {
			return ""
		}
		return holder(l)
	}
	b.produce = rand.New(rand.NewPCG(p.seed, 0xda7a))
	for i, n := range p.initial {
		for range n {
			b.put(i)
		}
	}
}

func (b *simBase) at(d time.Duration) time.Time { return b.start.Add(d) }

func (b *simBase) elapsedAt(t time.Time) time.Duration { return t.Sub(b.start).Round(time.Millisecond) }

// row reads shard id's row.
func (b *simBase) row(id string) (leases.Lease, error) {
	return b.mem.Get(context.Background(), leases.Key{Stream: streamName, Shard: id})
}

// put appends a record (sometimes a KPL aggregate) to shard i.
func (b *simBase) put(i int) {
	r := b.produce
	id := fmt.Sprintf("shardId-%012d", i)
	data := []byte(fmt.Sprintf("record %d of %s", b.stream.UserRecords(id), id))
	if r.Float64() < b.aggP {
		users := make([]kpl.UserRecord, 1+r.IntN(4))
		for j := range users {
			// As the KPL aggregates: only user records of the shard's hash
			// keys (the one the ledger puts its records at); others would
			// be filtered out.
			users[j] = kpl.UserRecord{PartitionKey: fmt.Sprintf("pk-%d", r.IntN(100)), ExplicitHashKey: b.stream.HashKey(id), Data: []byte(fmt.Sprintf("user %d", j))}
		}
		data = kpl.Aggregate(users)
	}
	if _, err := b.stream.Put(id, fmt.Sprintf("pk-%d", r.IntN(100)), data); err != nil {
		b.t.Errorf("put: %v", err) // on the producer's goroutine: no Fatal
	}
}

// producer returns the producer's loop: a record on a random shard about
// every putEvery, until until.
func (b *simBase) producer(putEvery, until time.Duration) func() {
	return func() {
		for {
			d := time.Duration(b.produce.Int64N(int64(2*putEvery) + 1))
			if time.Now().Add(d).After(b.at(until)) {
				return
			}
			time.Sleep(d)
			b.put(b.produce.IntN(b.shards))
		}
	}
}

// violate records a violation; the caller holds chk.mu.
func (b *simBase) violate(format string, args ...any) {
	b.chk.violate(format, args...)
	if b.onViolation != nil {
		b.onViolation()
	}
}

// report records a violation, taking chk.mu.
func (b *simBase) report(format string, args ...any) {
	b.chk.mu.Lock()
	b.violate(format, args...)
	b.chk.mu.Unlock()
}

// hang ends a simulation that cannot end: a goroutine of the bubble never
// returns, so the bubble's clock would run forever. It prints what it knows
// and panics, which ends the test binary.
func (b *simBase) hang() {
	b.chk.mu.Lock()
	v := strings.Join(b.chk.violations, "\n  ")
	b.chk.mu.Unlock()
	tr := b.chk.trace.String()
	if b.hangTrace != nil {
		if name := b.hangTrace(); name != "" {
			tr = "(the whole trace is in " + name + ")"
		}
	}
	fmt.Fprintf(os.Stderr, "seed %d hangs:\n  %s\n\nplan:\n%s\ntrace (last %d lines):\n%s\n\nreplay: %s\n",
		b.seed, v, b.plan, traceLines, tr, b.replay(b.seed))
	panic(fmt.Sprintf("sim: %sseed %d hangs (see above)", b.what, b.seed))
}

// watchdog starts a watchdog: a simulation whose goroutines do not end
// would run its virtual clock forever, so unless stop is called within
// limit it reports so and hangs. finished is closed by stop.
func (b *simBase) watchdog(limit time.Duration) (finished <-chan struct{}, stop func()) {
	done := make(chan struct{})
	stop = sync.OnceFunc(func() { close(done) })
	go func() {
		t := time.NewTimer(limit)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			b.report("the simulation did not end within an hour of virtual time")
			b.hang()
		}
	}()
	return done, stop
}

// step is an entry of a simulation's schedule.
type step struct {
	at time.Duration
	fn func()
}

// runSchedule runs the steps in the order of their times (in the order
// given for equal times), each at its time from start.
func runSchedule(start time.Time, steps []step) {
	slices.SortStableFunc(steps, func(a, b step) int { return int(a.at - b.at) })
	for _, s := range steps {
		time.Sleep(time.Until(start.Add(s.at)))
		s.fn()
	}
}

// checkLeftovers, once every Run returned and the watchdog was stopped,
// fails the seed if a goroutine labelled label is left (a bubble with
// goroutines left cannot end).
func (b *simBase) checkLeftovers(label string) {
	time.Sleep(time.Minute)
	if left := labelled(label); left != "" {
		b.report("goroutines left running after every Run returned:\n%s", left)
		b.hang()
	}
}

// stopProc stops a process (its faults ps, named name): a crash (nothing it
// does reaches anything any more; Run's context is cancelled by cancel so
// that its goroutines end, but its releases fail) or a graceful shutdown,
// after which Run (done once it returned err()) must return nil, and, if
// the stop came after faults (see faulty), leave no row that holds says is
// the process's. Run must return within limit, or the simulation hangs.
func (b *simBase) stopProc(bg *sync.WaitGroup, ps *procState, name string, crash bool, cancel context.CancelFunc,
	done <-chan struct{}, err func() error, faulty func() bool, limit time.Duration, holds func(leases.Lease) bool,
) {
	ps.stopping.Store(true)
	if crash {
		ps.dead.Store(true)
		b.chk.crashed(name)
	}
	cancel()
	duringFaults := faulty()
	bg.Go(func() {
		select {
		case <-done:
		case <-time.After(limit):
			b.report("%s: Run did not return %v after its context was cancelled", name, limit)
			b.hang()
		}
		b.chk.mu.Lock()
		defer b.chk.mu.Unlock()
		if !crash && err() != nil {
			b.violate("%s: Run returned %v after a graceful stop", name, err())
		}
		if !crash && !duringFaults {
			// With store faults a release can fail (and the lease expires);
			// once they stop, every lease must be released.
			for _, id := range b.stream.ShardIDs() {
				if l, err := b.row(id); err == nil && holds(l) {
					b.violate("%s: still holds %s after Run returned from a graceful stop", name, id)
				}
			}
		}
	})
}

// delivered reports whether every record was acknowledged and every row's
// checkpoint covers its shard.
func (b *simBase) delivered() bool {
	b.chk.mu.Lock()
	defer b.chk.mu.Unlock()
	for _, id := range b.stream.ShardIDs() {
		n := b.stream.UserRecords(id)
		if b.chk.shard(id).prefix < n {
			return false
		}
		l, err := b.row(id)
		if err != nil {
			return false
		}
		if cov, err := b.chk.covered(id, l.Checkpoint); err != nil || cov != n {
			return false
		}
	}
	return true
}

// progress describes delivery, naming each row's holder (as holder says)
// after label; the caller holds chk.mu.
func (b *simBase) progress(label string, holder func(leases.Lease) string) string {
	var parts []string
	for _, id := range b.stream.ShardIDs() {
		l, _ := b.row(id)
		cov, _ := b.chk.covered(id, l.Checkpoint)
		parts = append(parts, fmt.Sprintf("%s: %d/%d acknowledged, checkpoint %s covers %d, %s %q", id, b.chk.shard(id).prefix,
			b.stream.UserRecords(id), l.Checkpoint, cov, label, holder(l)))
	}
	return strings.Join(parts, "; ")
}

// finalRows reads every row once every process shut down gracefully,
// reporting those it cannot read and those still held (holder names their
// holder), and returns them as checked turns them for the checker; the
// caller holds chk.mu.
func (b *simBase) finalRows(holder func(leases.Lease) string, checked func(leases.Lease) leases.Lease) map[string]leases.Lease {
	rows := map[string]leases.Lease{}
	for _, id := range b.stream.ShardIDs() {
		l, err := b.row(id)
		if err != nil {
			b.violate("shard %s: %v", id, err)
			continue
		}
		rows[id] = checked(l)
		if l.Held() {
			b.violate("shard %s still held by %q after every process shut down gracefully", id, holder(l))
		}
	}
	return rows
}

// fairSplit reports whether holdings (the shards each live process says it
// holds) cover the shards once each, with at most ceil(shards/processes)
// each and within one of each other; if so, it returns each shard's
// holder (an index into holdings).
func fairSplit(shards int, holdings [][]string) (map[string]int, bool) {
	if len(holdings) == 0 {
		return nil, false
	}
	share := (shards + len(holdings) - 1) / len(holdings)
	held := map[string]int{}
	lo, hi := shards, 0
	for i, ids := range holdings {
		lo, hi = min(lo, len(ids)), max(hi, len(ids))
		for _, id := range ids {
			if _, dup := held[id]; dup {
				return nil, false
			}
			held[id] = i
		}
	}
	if len(held) != shards || hi > share || hi-lo > 1 {
		return nil, false
	}
	return held, true
}

// current returns the last generation of slot, or nil.
func current[P any](mu *sync.Mutex, slots [][]*P, slot int) *P {
	mu.Lock()
	defer mu.Unlock()
	if gens := slots[slot]; len(gens) > 0 {
		return gens[len(gens)-1]
	}
	return nil
}

// ---------------------------------------------------------------------------
// A process's faults.

// procState is a simulated process's state of faults: pauses, partitions,
// death and stopping.
type procState struct {
	pausedUntil atomic.Int64 // unix nanoseconds
	partUntil   atomic.Int64
	dead        atomic.Bool
	stopping    atomic.Bool
}

// stall blocks while the process is paused.
func (ps *procState) stall() {
	for {
		d := time.Until(time.Unix(0, ps.pausedUntil.Load()))
		if d <= 0 {
			return
		}
		time.Sleep(d)
	}
}

// partitioned reports whether the process is cut off from the store now.
func (ps *procState) partitioned() bool { return time.Now().UnixNano() < ps.partUntil.Load() }

// pause stalls the process (named name to c) for dur from now.
func (ps *procState) pause(c *checker, name string, dur time.Duration) {
	now := time.Now()
	ps.pausedUntil.Store(now.Add(dur).UnixNano())
	c.paused(name, now, now.Add(dur))
}

// partition cuts the process off from the store for dur from now.
func (ps *procState) partition(dur time.Duration) { ps.partUntil.Store(time.Now().Add(dur).UnixNano()) }

// storeHooks are the hooks of the process's FaultStore.
func (ps *procState) storeHooks(decide func(op string, key leases.Key) Decision,
	apply func(op string, l leases.Lease, do func() (leases.Lease, error)) (leases.Lease, error),
) StoreHooks {
	return StoreHooks{Decide: decide, Stall: ps.stall, Dead: ps.dead.Load, Apply: apply}
}

// kinesisHooks are the hooks of the process's Kinesis client.
func (ps *procState) kinesisHooks(decide func(op, shardID string) (time.Duration, error)) KinesisHooks {
	return KinesisHooks{Decide: decide, Stall: ps.stall, Dead: ps.dead.Load}
}

// draws numbers a process's decisions so that each draws from a generator
// of its own (see next).
type draws struct {
	mu    sync.Mutex
	calls map[string]uint64
}

// next returns a generator for one decision of the process named id, drawn
// from seed and the decision's name and ordinal, so that a decision does
// not depend on the interleaving of other processes' calls.
func (d *draws) next(seed uint64, id string, parts ...string) *rand.Rand {
	k := strings.Join(parts, "|")
	d.mu.Lock()
	if d.calls == nil {
		d.calls = map[string]uint64{}
	}
	n := d.calls[k]
	d.calls[k] = n + 1
	d.mu.Unlock()
	h := fnv.New64a()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(k))
	h.Write(binary.LittleEndian.AppendUint64(nil, n))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

func upTo(r *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(r.Int64N(int64(d)))
}

// partitionFault is the answer of a store call of a partitioned process:
// refused at once in a fence test (the holder's worker, whose checkpoints
// fail too, is not slowed down by them), else timed out after base and up
// to spread more.
func partitionFault(r *rand.Rand, op string, key leases.Key, stress bool, base, spread time.Duration) Decision {
	if stress {
		return Decision{
			Delay: upTo(r, 20*time.Millisecond),
			Err:   &InjectedError{Op: op, Key: key, Msg: "dial tcp: connect: connection refused"},
		}
	}
	return Decision{
		Delay: base + upTo(r, spread),
		Err:   &InjectedError{Op: op, Key: key, Msg: "dial tcp: connect: connection timed out"},
	}
}

// storeRates are the rates of a store call's faults.
type storeRates struct {
	delayP, errP, lostP, respDelayP float64
	maxDelay                        time.Duration
}

// storeFault draws a store call's faults: a delay, an error or (for a
// write) an answer lost after the write landed, a delayed answer. It calls
// injected after an error, lost after a lost answer, if set.
func storeFault(r *rand.Rand, op string, key leases.Key, rates storeRates, write bool, injected, lost func()) Decision {
	var d Decision
	if r.Float64() < rates.delayP {
		d.Delay = upTo(r, rates.maxDelay)
	}
	switch {
	case r.Float64() < rates.errP:
		msg := []string{"ProvisionedThroughputExceededException", "InternalServerError", "connection reset by peer"}[r.IntN(3)]
		d.Err = &InjectedError{Op: op, Key: key, Msg: msg}
		if injected != nil {
			injected()
		}
	case write && r.Float64() < rates.lostP:
		d.LoseResponse = true
		if r.IntN(2) == 0 {
			d.Lost = fmt.Errorf("sim: %s %s: operation error: %w", op, key, context.DeadlineExceeded)
		}
		d.ResponseDelay = upTo(r, rates.maxDelay)
		if lost != nil {
			lost()
		}
	}
	if r.Float64() < rates.respDelayP {
		d.ResponseDelay = upTo(r, rates.maxDelay)
	}
	return d
}

// kinesisFault draws a Kinesis call's faults, at the rates of p: a delay,
// an error of the kinds op can fail with.
func kinesisFault(r *rand.Rand, p *planBase, op string) (time.Duration, error) {
	var delay time.Duration
	if r.Float64() < p.kinDelayP {
		delay = upTo(r, 1500*time.Millisecond)
	}
	if r.Float64() >= p.kinErrP {
		return delay, nil
	}
	msg := aws.String("injected by the simulation")
	var errs []error
	switch op {
	case "GetRecords":
		errs = []error{&types.ProvisionedThroughputExceededException{Message: msg}, &types.ExpiredIteratorException{Message: msg},
			&types.InternalFailureException{Message: msg}, &types.KMSThrottlingException{Message: msg}}
	case "GetShardIterator":
		errs = []error{&types.ProvisionedThroughputExceededException{Message: msg}, &types.InternalFailureException{Message: msg}}
	default:
		errs = []error{&types.LimitExceededException{Message: msg}, &types.InternalFailureException{Message: msg}}
	}
	return delay, errs[r.IntN(len(errs))]
}

// simWorker is the worker configuration of a process of slot sp.
func simWorker(handler pipeline.Handler, sp slotPlan) engine.WorkerConfig {
	return engine.WorkerConfig{
		Handler:            handler,
		Policy:             kltype.RetryPolicy{Attempts: 3, InitialDelay: 50 * time.Millisecond, MaxDelay: time.Second},
		CheckpointEvery:    sp.checkpointEvery,
		CheckpointInterval: sp.checkpointInterval,
		Limit:              sp.limit,
	}
}

// deadHandler is the handler of a dead process: it delivers nothing and
// returns once ctx is done.
func deadHandler(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// work is the rest of a handler call h after its entry, at the rates of p:
// it works a little (sometimes long), fails sometimes while faulty, watches
// ctx unless ignoresCancel, stalls with its process, and reports its exit
// to c.
func (ps *procState) work(ctx context.Context, c *checker, h *handlerCall, rng *rand.Rand, p *planBase, faulty func() bool, ignoresCancel bool) error {
	work := upTo(rng, 20*time.Millisecond)
	if rng.Float64() < p.handlerSlowP {
		work = upTo(rng, p.handlerMaxWork)
	}
	fail := faulty() && rng.Float64() < p.handlerErrP
	t := time.NewTimer(work)
	if ignoresCancel {
		<-t.C
	} else {
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			ps.stall()
			c.exit(h, false)
			return ctx.Err()
		}
	}
	ps.stall() // a pause that catches the handler at work
	if ps.dead.Load() {
		return deadHandler(ctx)
	}
	if fail {
		c.exit(h, false)
		return errHandler
	}
	c.exit(h, true)
	return nil
}

// traceHandler is a slog.Handler that writes into a trace, each line after
// the name of its process (name is called for every line: a process may be
// named only once it was made).
type traceHandler struct {
	tr    *trace
	name  func() string
	attrs string
}

func (h *traceHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *traceHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(h.name())
	b.WriteString(": ")
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.tr.add(b.String())
	return nil
}

func (h *traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range attrs {
		if a.Key == "stream" || a.Key == "owner" {
			continue
		}
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	return &traceHandler{tr: h.tr, name: h.name, attrs: b.String()}
}

func (h *traceHandler) WithGroup(string) slog.Handler { return h }
