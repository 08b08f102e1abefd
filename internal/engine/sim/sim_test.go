package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
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
	"github.com/kinesislease/kinesislease/internal/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/kpl"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

var (
	flagSeed       = flag.Uint64("seed", 0, "simulate only this seed (replays a failure)")
	flagSeeds      = flag.Int("seeds", 0, "how many seeds TestSimulation runs (default $KINESISLEASE_SIM_SEEDS, else 300)")
	flagBase       = flag.Uint64("seedbase", 0, "first seed of TestSimulation (default $KINESISLEASE_SIM_SEED_BASE, else 1)")
	flagTrace      = flag.Bool("simtrace", false, "print the trace of every seed, not only of failing ones")
	flagStrictFair = flag.Bool("simstrictfair", false, "fail a seed whose shares become fair only after the bound")
	ciSeeds        = 300
	streamName     = "sim"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// seeds returns the seeds TestSimulation runs.
func seeds(t *testing.T) []uint64 {
	if *flagSeed != 0 {
		return []uint64{*flagSeed}
	}
	n, base := ciSeeds, uint64(1)
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

// summary gathers what the seeds measured.
type summary struct {
	mu                                  sync.Mutex
	seeds, failed                       int
	virtual                             time.Duration
	worstSettle                         float64 // scan cycles from the end of faults to fair shares
	worstSettleSeed                     uint64
	overBound                           []uint64
	entries, takes, handoffs, cps, lost int
	takeovers, closeTakeovers           int
	closest                             time.Duration
	crashes, pauses, partitions, stops  int
	rewinds                             int
}

// TestSimulation runs the lease protocol under a seeded schedule of faults
// in a testing/synctest bubble (virtual time): several coordinators on one
// stream and one lease table, with store delays, errors and lost answers,
// Kinesis throttling and errors, process pauses longer than the lease,
// partitions, wall-clock jumps, crashes, graceful stops, restarts and
// operator rewinds, checking the invariants of checker at every handler
// call and every write, then liveness and fair shares once faults stop.
//
// go test ./internal/engine/sim/ -run TestSimulation -seed=N -v replays seed N;
// KINESISLEASE_SIM_SEEDS=5000 (or -seeds) runs more seeds.
func TestSimulation(t *testing.T) {
	sum := &summary{}
	list := seeds(t)
	t.Run("seeds", func(t *testing.T) {
		for _, seed := range list {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				if len(list) > 1 {
					t.Parallel()
				}
				runSeed(t, seed, sum)
			})
		}
	})
	t.Logf("%d seeds (%d failed), %v of virtual time; worst settling %.1f scan cycles after faults stopped (seed %d); "+
		"%d handler calls, %d takes, %d handoff requests, %d checkpoints, %d lost answers; %d crashes, %d stops, %d pauses, %d partitions, %d rewinds",
		sum.seeds, sum.failed, sum.virtual.Round(time.Second), sum.worstSettle, sum.worstSettleSeed,
		sum.entries, sum.takes, sum.handoffs, sum.cps, sum.lost, sum.crashes, sum.stops, sum.pauses, sum.partitions, sum.rewinds)
	t.Logf("%d takeovers, %d of them within %v of the previous holder's last delivery on the shard (closest %v)",
		sum.takeovers, sum.closeTakeovers, closeTakeover, sum.closest)
	if len(sum.overBound) > 0 {
		slices.Sort(sum.overBound)
		t.Logf("fair shares came after the bound in %d seeds: %v (a released lease taken by another than the process that asked for it; -simstrictfair fails them)",
			len(sum.overBound), sum.overBound)
	}
}

func runSeed(t *testing.T, seed uint64, sum *summary) {
	p := newPlan(seed)
	var w *world
	synctest.Test(t, func(t *testing.T) {
		w = newWorld(t, p)
		// The label marks every goroutine of this bubble, so that those
		// left behind can be found (see leftovers).
		pprof.Do(context.Background(), pprof.Labels(seedLabel, strconv.FormatUint(seed, 10)), func(context.Context) {
			w.run()
		})
	})
	sum.mu.Lock()
	defer sum.mu.Unlock()
	sum.seeds++
	sum.virtual += w.elapsed
	if w.overBound {
		sum.overBound = append(sum.overBound, seed)
	}
	if w.settleCycles > sum.worstSettle {
		sum.worstSettle, sum.worstSettleSeed = w.settleCycles, seed
	}
	st := w.chk.stats
	sum.entries += st.entries
	sum.takes += st.takes
	sum.handoffs += st.handoffs
	sum.cps += st.checkpoints
	sum.lost += w.lost
	if st.closest > 0 && (sum.closest == 0 || st.closest < sum.closest) {
		sum.closest = st.closest
	}
	sum.takeovers += st.takeovers
	sum.closeTakeovers += st.closeTakeovers
	for _, e := range p.events {
		switch e.kind {
		case evCrash:
			sum.crashes++
		case evStop:
			sum.stops++
		case evPause:
			sum.pauses++
		case evPartition:
			sum.partitions++
		case evRewind:
			sum.rewinds++
		}
	}
	if len(w.chk.violations) > 0 {
		sum.failed++
		t.Errorf("seed %d broke the protocol's invariants:\n  %s\n\nplan:\n%s\ntrace (last %d lines):\n%s\n\nreplay: %s",
			seed, strings.Join(w.chk.violations, "\n  "), p, traceLines, w.chk.trace.String(), replay(seed))
	} else if *flagTrace {
		t.Logf("plan:\n%s\ntrace:\n%s", p, w.chk.trace.String())
	}
}

// replay returns the command that replays seed. The seed fixes the plan
// and every injected fault; the interleaving of goroutines, Go's map order
// and the library's own math/rand jitter are not seeded, so a failure may
// need a few runs of its seed to show again (-count).
func replay(seed uint64) string {
	return fmt.Sprintf("go test ./internal/engine/sim/ -run TestSimulation -seed=%d -v   (if it passes, add -count=50: interleavings are not seeded)", seed)
}

// world is one seed's simulation: the stream, the table, the processes.
type world struct {
	t       *testing.T
	p       *plan
	start   time.Time
	stream  *Stream
	mem     *memory.Store
	chk     *checker
	now     func() time.Time // the wall clock of the process whose write is being applied (under chk.mu)
	produce *rand.Rand

	mu    sync.Mutex
	slots [][]*proc // every generation of each slot
	lost  int       // answers lost after the write landed

	bg           sync.WaitGroup
	elapsed      time.Duration
	settleCycles float64
	overBound    bool
}

// proc is one process: a coordinator with its own owner id and its own
// view of the table and of Kinesis.
type proc struct {
	w         *world
	slot, gen int
	owner     string
	cfg       procPlan

	pausedUntil atomic.Int64 // unix nanoseconds
	partUntil   atomic.Int64
	skew        atomic.Int64 // its wall clock's offset
	frozenUntil atomic.Int64 // unix nanoseconds: its wall clock stands still until then
	frozenAt    atomic.Int64 // at this reading (unix nanoseconds)
	dead        atomic.Bool
	stopping    atomic.Bool

	coord  *engine.Coordinator
	cancel context.CancelFunc
	done   chan struct{}
	err    error

	rngMu sync.Mutex
	calls map[string]uint64
}

func newWorld(t *testing.T, p *plan) *world {
	w := &world{t: t, p: p, start: time.Now(), stream: NewStream(streamName, p.shards)}
	w.now = time.Now
	w.mem = memory.New(memory.WithClock(func() time.Time { return w.now() }))
	w.chk = newChecker(w.stream)
	w.chk.owner = func(id string) string {
		l, err := w.mem.Get(context.Background(), leases.Key{Stream: streamName, Shard: id})
		if err != nil {
			return ""
		}
		return l.Owner
	}
	w.produce = rand.New(rand.NewPCG(p.seed, 0xda7a))
	w.slots = make([][]*proc, len(p.procs))
	for i, n := range p.initial {
		for range n {
			w.put(i)
		}
	}
	return w
}

func (w *world) at(d time.Duration) time.Time { return w.start.Add(d) }

// put appends a record (sometimes a KPL aggregate) to shard i.
func (w *world) put(i int) {
	r := w.produce
	id := fmt.Sprintf("shardId-%012d", i)
	data := []byte(fmt.Sprintf("record %d of %s", w.stream.UserRecords(id), id))
	if r.Float64() < w.p.aggP {
		users := make([]kpl.UserRecord, 1+r.IntN(4))
		for j := range users {
			users[j] = kpl.UserRecord{PartitionKey: fmt.Sprintf("pk-%d", r.IntN(100)), Data: []byte(fmt.Sprintf("user %d", j))}
		}
		data = kpl.Aggregate(users)
	}
	if _, err := w.stream.Put(id, fmt.Sprintf("pk-%d", r.IntN(100)), data); err != nil {
		w.t.Fatalf("put: %v", err)
	}
}

func (w *world) run() {
	p := w.p
	faultEnd := w.at(p.faultEnd)

	// A watchdog: a simulation whose goroutines do not end would run its
	// virtual clock forever.
	finished := make(chan struct{})
	stopWatchdog := sync.OnceFunc(func() { close(finished) })
	defer stopWatchdog()
	go func() {
		t := time.NewTimer(p.faultEnd + time.Hour)
		defer t.Stop()
		select {
		case <-finished:
		case <-t.C:
			w.chk.mu.Lock()
			w.chk.violate("the simulation did not end within an hour of virtual time")
			w.chk.mu.Unlock()
			w.hang()
		}
	}()

	// The producer.
	w.bg.Go(func() {
		for {
			d := time.Duration(w.produce.Int64N(int64(2*p.putEvery) + 1))
			if time.Now().Add(d).After(w.at(p.produce)) {
				return
			}
			time.Sleep(d)
			w.put(w.produce.IntN(p.shards))
		}
	})

	// The schedule: process starts, then the plan's events.
	type step struct {
		at time.Duration
		fn func()
	}
	var steps []step
	for slot, pp := range p.procs {
		steps = append(steps, step{pp.start, func() { w.startProc(slot) }})
	}
	for _, e := range p.events {
		steps = append(steps, step{e.at, func() { w.apply(e) }})
	}
	slices.SortStableFunc(steps, func(a, b step) int { return int(a.at - b.at) })
	for _, s := range steps {
		time.Sleep(time.Until(w.at(s.at)))
		s.fn()
	}
	time.Sleep(time.Until(faultEnd))
	w.chk.tracef("faults stop")

	// Liveness and fair shares, once faults stop. The bound, in scan cycles
	// of the slowest scanner (its interval plus its 10% jitter): the leases
	// of dead owners expire (a lease duration, plus a scan to start
	// counting and one to see it); a process that found the assignment
	// stable reads only the rows it watches and may not see a change until
	// its next full scan (fullScanEvery = 6 scans); then each process below
	// its share gains one lease per scan by a handoff, at most ceil(S/L) of
	// them, each taking up to two renewals (the holder learns of it, the
	// requester takes it); plus a scan of slack.
	maxScan, maxRenew := time.Duration(0), time.Duration(0)
	for _, pp := range p.procs {
		maxScan, maxRenew = max(maxScan, pp.scan), max(maxRenew, pp.renew)
	}
	cycle := maxScan + maxScan/10
	live := w.live()
	share := (p.shards + len(live) - 1) / len(live)
	bound := p.lease + time.Duration(2+fullScanEvery+share+1)*cycle + 2*maxRenew
	// Fair shares must come; past the bound they are reported (a handoff
	// can be taken by a third process that scans sooner than the
	// requester; see the summary), and fail the seed with -simstrictfair.
	deadline := faultEnd.Add(bound + 10*time.Minute)
	var settled time.Time // start of the current fair streak
	var fair, done bool
	for time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		fair = w.fair()
		done = w.delivered()
		if !fair {
			settled = time.Time{}
		} else if settled.IsZero() {
			settled = time.Now()
		}
		if fair && done && time.Since(settled) >= 3*cycle {
			break
		}
	}
	w.chk.mu.Lock()
	if !done {
		w.chk.violate("(d) %v after faults stopped, records are still unacknowledged or checkpoints behind: %s", time.Since(faultEnd), w.progress())
	}
	if !fair || time.Since(settled) < 3*cycle {
		w.chk.violate("(e) %v after faults stopped, shares are not fair (or not stable for 3 scan cycles): %s", time.Since(faultEnd), w.assignment())
	} else if settled.Sub(faultEnd) > bound {
		w.overBound = true
		w.chk.tracef("(e) fair shares reached %v after faults stopped; bound %v (%s)", settled.Sub(faultEnd), bound, w.assignment())
		if *flagStrictFair {
			w.chk.violate("(e) fair shares reached %v after faults stopped; bound %v (%s)", settled.Sub(faultEnd), bound, w.assignment())
		}
	}
	w.chk.mu.Unlock()
	if !settled.IsZero() {
		w.settleCycles = float64(max(0, settled.Sub(faultEnd))) / float64(maxScan)
	}
	if !settled.IsZero() {
		w.chk.tracef("settled %v after faults stopped: %s", settled.Sub(faultEnd), w.assignment())
	}

	// Graceful shutdown of every live process: each releases its leases
	// with its final checkpoint.
	for _, pr := range live {
		w.stop(pr, false)
	}
	w.bg.Wait()
	rows := map[string]leases.Lease{}
	for _, id := range w.stream.ShardIDs() {
		l, err := w.mem.Get(context.Background(), leases.Key{Stream: streamName, Shard: id})
		if err != nil {
			w.chk.mu.Lock()
			w.chk.violate("shard %s: %v", id, err)
			w.chk.mu.Unlock()
			continue
		}
		rows[id] = l
		if l.Held() {
			w.chk.mu.Lock()
			w.chk.violate("shard %s still held by %q after every process shut down gracefully", id, l.Owner)
			w.chk.mu.Unlock()
		}
	}
	w.chk.final(rows)
	w.elapsed = time.Since(w.start)

	// Every Run returned: no goroutine of any coordinator may be left (a
	// bubble with goroutines left cannot end).
	stopWatchdog()
	time.Sleep(time.Minute)
	if left := leftovers(w.p.seed); left != "" {
		w.chk.mu.Lock()
		w.chk.violate("goroutines left running after every Run returned:\n%s", left)
		w.chk.mu.Unlock()
		w.hang()
	}
}

const seedLabel = "kinesislease-sim-seed"

// leftovers returns the stacks of the goroutines labelled with seed, other
// than the caller's.
func leftovers(seed uint64) string {
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		return ""
	}
	want := fmt.Sprintf("%q:%q", seedLabel, strconv.FormatUint(seed, 10))
	var out []string
	for _, entry := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(entry, want) && !strings.Contains(entry, "sim.leftovers") {
			out = append(out, entry)
		}
	}
	return strings.Join(out, "\n\n")
}

// hang ends a simulation that cannot end: a goroutine of the bubble never
// returns, so the bubble's clock would run forever. It prints what it knows
// and panics, which ends the test binary.
func (w *world) hang() {
	w.chk.mu.Lock()
	v := strings.Join(w.chk.violations, "\n  ")
	w.chk.mu.Unlock()
	fmt.Fprintf(os.Stderr, "seed %d hangs:\n  %s\n\nplan:\n%s\ntrace (last %d lines):\n%s\n\nreplay: %s\n",
		w.p.seed, v, w.p, traceLines, w.chk.trace.String(), replay(w.p.seed))
	panic(fmt.Sprintf("sim: seed %d hangs (see above)", w.p.seed))
}

// live returns the processes running now (not dead, not stopping).
func (w *world) live() []*proc {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*proc
	for _, gens := range w.slots {
		for _, pr := range gens {
			if !pr.dead.Load() && !pr.stopping.Load() {
				out = append(out, pr)
			}
		}
	}
	return out
}

// fair reports whether every shard is held by exactly one live process,
// as the table says too, with at most ceil(S/L) each and within one of
// each other.
func (w *world) fair() bool {
	live := w.live()
	if len(live) == 0 {
		return false
	}
	share := (w.p.shards + len(live) - 1) / len(live)
	held := map[string]string{}
	lo, hi := w.p.shards, 0
	for _, pr := range live {
		ids := pr.coord.Held()
		lo, hi = min(lo, len(ids)), max(hi, len(ids))
		for _, id := range ids {
			if _, dup := held[id]; dup {
				return false
			}
			held[id] = pr.owner
		}
	}
	if len(held) != w.p.shards || hi > share || hi-lo > 1 {
		return false
	}
	for id, owner := range held {
		if l, err := w.mem.Get(context.Background(), leases.Key{Stream: streamName, Shard: id}); err != nil || l.Owner != owner {
			return false
		}
	}
	return true
}

func (w *world) assignment() string {
	var parts []string
	for _, pr := range w.live() {
		parts = append(parts, fmt.Sprintf("%s holds %v", pr.owner, pr.coord.Held()))
	}
	return strings.Join(parts, "; ")
}

// delivered reports whether every record was acknowledged and every row's
// checkpoint covers its shard.
func (w *world) delivered() bool {
	w.chk.mu.Lock()
	defer w.chk.mu.Unlock()
	for _, id := range w.stream.ShardIDs() {
		n := w.stream.UserRecords(id)
		if w.chk.shard(id).prefix < n {
			return false
		}
		l, err := w.mem.Get(context.Background(), leases.Key{Stream: streamName, Shard: id})
		if err != nil {
			return false
		}
		if cov, err := w.chk.covered(id, l.Checkpoint); err != nil || cov != n {
			return false
		}
	}
	return true
}

// progress describes delivery; the caller holds chk.mu.
func (w *world) progress() string {
	var parts []string
	for _, id := range w.stream.ShardIDs() {
		l, _ := w.mem.Get(context.Background(), leases.Key{Stream: streamName, Shard: id})
		cov, _ := w.chk.covered(id, l.Checkpoint)
		parts = append(parts, fmt.Sprintf("%s: %d/%d acknowledged, checkpoint %s covers %d, owner %q", id, w.chk.shard(id).prefix, w.stream.UserRecords(id), l.Checkpoint, cov, l.Owner))
	}
	return strings.Join(parts, "; ")
}

// startProc starts a new generation in slot.
func (w *world) startProc(slot int) {
	w.mu.Lock()
	gen := len(w.slots[slot])
	pr := &proc{w: w, slot: slot, gen: gen, owner: fmt.Sprintf("i%d.g%d", slot, gen), cfg: w.p.procs[slot],
		done: make(chan struct{}), calls: map[string]uint64{}}
	w.slots[slot] = append(w.slots[slot], pr)
	w.mu.Unlock()

	cfg := engine.Config{
		Stream: streamName,
		Owner:  pr.owner,
		Store: NewFaultStore(w.mem, StoreHooks{
			Decide: pr.decideStore,
			Stall:  pr.stall,
			Dead:   pr.dead.Load,
			Apply:  pr.apply,
		}),
		Client: w.stream.Client(KinesisHooks{
			Decide: pr.decideKinesis,
			Stall:  pr.stall,
			Dead:   pr.dead.Load,
		}),
		Logger:          slog.New(&traceHandler{tr: &w.chk.trace, prefix: pr.owner + ": "}),
		Start:           kltype.TrimHorizon,
		LeaseDuration:   w.p.lease,
		RenewInterval:   pr.cfg.renew,
		FenceMargin:     pr.cfg.margin,
		ScanInterval:    pr.cfg.scan,
		ShutdownTimeout: 5 * time.Second,
		Worker: engine.WorkerConfig{
			Handler:            pr.handle,
			Policy:             kltype.RetryPolicy{Attempts: 3, InitialDelay: 50 * time.Millisecond, MaxDelay: time.Second},
			CheckpointEvery:    pr.cfg.checkpointEvery,
			CheckpointInterval: pr.cfg.checkpointInterval,
			Limit:              pr.cfg.limit,
		},
		Events: func(e kltype.LeaseEvent) { w.chk.tracef("%s: event %s %s", pr.owner, e.Type, e.ShardID) },
	}
	c, err := engine.NewCoordinator(cfg)
	if err != nil {
		w.t.Fatalf("NewCoordinator: %v", err)
	}
	pr.coord = c
	ctx, cancel := context.WithCancel(context.Background())
	pr.cancel = cancel
	w.chk.tracef("%s starts", pr.owner)
	w.bg.Go(func() {
		defer close(pr.done)
		pr.err = c.Run(ctx)
		w.chk.runReturned(pr.owner, pr.err, pr.stopping.Load())
	})
}

func (w *world) current(slot int) *proc {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gens := w.slots[slot]; len(gens) > 0 {
		return gens[len(gens)-1]
	}
	return nil
}

// apply runs a planned event.
func (w *world) apply(e event) {
	w.chk.tracef("event: %v", e)
	if e.kind == evRestart {
		w.startProc(e.slot)
		return
	}
	if e.kind == evRewind {
		w.rewind(e)
		return
	}
	pr := w.current(e.slot)
	if pr == nil || pr.dead.Load() || pr.stopping.Load() {
		return
	}
	now := time.Now()
	switch e.kind {
	case evPause:
		pr.pausedUntil.Store(now.Add(e.dur).UnixNano())
		w.chk.paused(pr.owner, now, now.Add(e.dur))
	case evPartition:
		pr.partUntil.Store(now.Add(e.dur).UnixNano())
	case evClock:
		if e.dur > 0 {
			// The wall clock stands still (a stuck clock source).
			pr.frozenAt.Store(pr.wallClock().UnixNano())
			pr.frozenUntil.Store(now.Add(e.dur).UnixNano())
		} else {
			pr.skew.Store(int64(e.delta))
		}
	case evCrash:
		w.stop(pr, true)
	case evStop:
		w.stop(pr, false)
	}
}

// stop stops pr: a crash (nothing it does reaches anything any more; Run's
// context is cancelled so that its goroutines end, but its releases fail)
// or a graceful shutdown, after which Run must return nil with every lease
// released.
func (w *world) stop(pr *proc, crash bool) {
	pr.stopping.Store(true)
	if crash {
		pr.dead.Store(true)
		w.chk.crashed(pr.owner)
	}
	pr.cancel()
	duringFaults := pr.faulty()
	w.bg.Go(func() {
		limit := 5*time.Second + 2*w.p.lease + time.Minute
		select {
		case <-pr.done:
		case <-time.After(limit):
			w.chk.mu.Lock()
			w.chk.violate("%s: Run did not return %v after its context was cancelled", pr.owner, limit)
			w.chk.mu.Unlock()
			w.hang()
		}
		if !crash && pr.err != nil {
			w.chk.mu.Lock()
			w.chk.violate("%s: Run returned %v after a graceful stop", pr.owner, pr.err)
			w.chk.mu.Unlock()
		}
		if !crash && !duringFaults {
			// With store faults a release can fail (and the lease expires);
			// once they stop, every lease must be released.
			w.chk.mu.Lock()
			defer w.chk.mu.Unlock()
			for _, id := range w.stream.ShardIDs() {
				l, err := w.mem.Get(context.Background(), leases.Key{Stream: streamName, Shard: id})
				if err == nil && l.Owner == pr.owner {
					w.chk.violate("%s: still holds %s after Run returned from a graceful stop", pr.owner, id)
				}
			}
		}
	})
}

// rewind is an operator moving a shard's checkpoint back (e.back records,
// or to TRIM_HORIZON), through the store as the rewind tool would.
func (w *world) rewind(e event) {
	id := fmt.Sprintf("shardId-%012d", e.shard)
	key := leases.Key{Stream: streamName, Shard: id}
	w.chk.mu.Lock()
	defer w.chk.mu.Unlock()
	l, err := w.mem.Get(context.Background(), key)
	if err != nil {
		return // no row yet
	}
	cp := leases.Checkpoint{Sequence: leases.RewindTrimHorizon}
	if n, err := w.chk.covered(id, l.Checkpoint); err == nil && e.back > 0 && n-e.back > 0 {
		if seq, ok := w.stream.RecordAt(id, n-e.back); ok {
			cp = leases.RewindAtSequence(seq)
		}
	}
	got, err := w.mem.Rewind(context.Background(), l, cp)
	if err != nil {
		w.chk.tracef("operator: rewind %s to %s: %v", id, cp, err)
		return
	}
	w.chk.applied("Rewind", "operator", l, got)
}

// rng returns a generator for one decision of pr, drawn from the seed and
// the decision's name and ordinal, so that a decision does not depend on
// the interleaving of other processes' calls.
func (pr *proc) rng(parts ...string) *rand.Rand {
	k := strings.Join(parts, "|")
	pr.rngMu.Lock()
	n := pr.calls[k]
	pr.calls[k] = n + 1
	pr.rngMu.Unlock()
	h := fnv.New64a()
	h.Write([]byte(pr.owner))
	h.Write([]byte{0})
	h.Write([]byte(k))
	h.Write(binary.LittleEndian.AppendUint64(nil, n))
	return rand.New(rand.NewPCG(pr.w.p.seed, h.Sum64()))
}

func (pr *proc) faulty() bool { return time.Now().Before(pr.w.at(pr.w.p.faultEnd)) }

func upTo(r *rand.Rand, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(r.Int64N(int64(d)))
}

// wallClock is pr's wall clock: time.Now, offset by the clock jumps of the
// plan, standing still while frozen. Only the expires_at it writes read it
// (the simulation cannot skew the monotonic clock of one bubble's
// goroutines), which the protocol must not depend on.
func (pr *proc) wallClock() time.Time {
	if time.Now().UnixNano() < pr.frozenUntil.Load() {
		return time.Unix(0, pr.frozenAt.Load())
	}
	return time.Now().Add(time.Duration(pr.skew.Load()))
}

// stall blocks while pr is paused.
func (pr *proc) stall() {
	for {
		d := time.Until(time.Unix(0, pr.pausedUntil.Load()))
		if d <= 0 {
			return
		}
		time.Sleep(d)
	}
}

func (pr *proc) decideStore(op string, key leases.Key) Decision {
	if time.Now().UnixNano() < pr.partUntil.Load() {
		r := pr.rng("partition", op, key.Shard)
		if pr.w.p.fenceStress {
			// Refused at once: the holder's worker, whose checkpoints
			// fail too, is not slowed down by them.
			return Decision{
				Delay: upTo(r, 20*time.Millisecond),
				Err:   &InjectedError{Op: op, Key: key, Msg: "dial tcp: connect: connection refused"},
			}
		}
		return Decision{
			Delay: 500*time.Millisecond + upTo(r, 2*time.Second),
			Err:   &InjectedError{Op: op, Key: key, Msg: "dial tcp: connect: connection timed out"},
		}
	}
	if !pr.faulty() {
		return Decision{}
	}
	p := pr.w.p
	r := pr.rng("store", op, key.Shard)
	var d Decision
	if r.Float64() < p.storeDelayP {
		d.Delay = upTo(r, p.storeMaxDelay)
	}
	switch {
	case r.Float64() < p.storeErrP:
		msg := []string{"ProvisionedThroughputExceededException", "InternalServerError", "connection reset by peer"}[r.IntN(3)]
		d.Err = &InjectedError{Op: op, Key: key, Msg: msg}
	case isWrite(op) && r.Float64() < p.storeLostP:
		d.LoseResponse = true
		if r.IntN(2) == 0 {
			d.Lost = fmt.Errorf("sim: %s %s: operation error: %w", op, key, context.DeadlineExceeded)
		}
		d.ResponseDelay = upTo(r, p.storeMaxDelay)
		pr.w.mu.Lock()
		pr.w.lost++
		pr.w.mu.Unlock()
	}
	if r.Float64() < p.storeRespDelayP {
		d.ResponseDelay = upTo(r, p.storeMaxDelay)
	}
	return d
}

// apply runs a store call with the checker's lock held, so that the
// checker sees every write that lands, in order, whatever its caller sees.
func (pr *proc) apply(op string, l leases.Lease, do func() (leases.Lease, error)) (leases.Lease, error) {
	c := pr.w.chk
	c.mu.Lock()
	defer c.mu.Unlock()
	pr.w.now = pr.wallClock
	var before leases.Lease
	if isWrite(op) {
		before, _ = pr.w.mem.Get(context.Background(), l.Key)
	}
	got, err := do()
	if err == nil && isWrite(op) {
		c.applied(op, pr.owner, before, got)
	}
	return got, err
}

func (pr *proc) decideKinesis(op, shardID string) (time.Duration, error) {
	if !pr.faulty() {
		return 0, nil
	}
	p := pr.w.p
	r := pr.rng("kinesis", op, shardID)
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

// fullScanEvery mirrors shard.fullScanEvery: in a stable assignment a
// coordinator reads every row only every this many scans.
const fullScanEvery = 6

var errHandler = errors.New("sim: handler failed (injected)")

// handle is the process's handler: it reports entry and exit to the
// checker, works a little, sometimes fails, and stalls with its process.
func (pr *proc) handle(ctx context.Context, r *kltype.Record) error {
	if pr.dead.Load() {
		<-ctx.Done() // a dead process delivers nothing
		return ctx.Err()
	}
	c := pr.w.chk
	h := c.enter(pr.owner, r)
	pr.stall() // a pause that starts as the handler is entered
	p := pr.w.p
	rng := pr.rng("handler", r.ShardID, r.SequenceNumber, strconv.FormatInt(r.SubSequence, 10))
	work := upTo(rng, 20*time.Millisecond)
	if rng.Float64() < p.handlerSlowP {
		work = upTo(rng, p.handlerMaxWork)
	}
	fail := pr.faulty() && rng.Float64() < p.handlerErrP
	t := time.NewTimer(work)
	if pr.cfg.ignoresCancel {
		<-t.C
	} else {
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			pr.stall()
			c.exit(h, false)
			return ctx.Err()
		}
	}
	pr.stall() // a pause that catches the handler at work
	if pr.dead.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if fail {
		c.exit(h, false)
		return errHandler
	}
	c.exit(h, true)
	return nil
}

// traceHandler is a slog.Handler that writes into a trace.
type traceHandler struct {
	tr     *trace
	prefix string
	attrs  string
}

func (h *traceHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *traceHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(h.prefix)
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
	return &traceHandler{tr: h.tr, prefix: h.prefix, attrs: b.String()}
}

func (h *traceHandler) WithGroup(string) slog.Handler { return h }
