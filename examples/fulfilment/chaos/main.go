// Command chaos runs the fulfilment example under random process chaos on
// local emulators and checks the lease protocol's guarantees:
//
//	go run ./examples/fulfilment/chaos                  # 60s, random seed
//	go run ./examples/fulfilment/chaos --seed 7 --duration 5m
//
// It starts DynamoDB Local and kinesalite (internal/testkit/testutil; `npm ci` at the
// repository root installs them), creates a lease table and an 8-shard
// stream, builds examples/fulfilment and runs 4 instances of it as separate
// processes with short lease settings (a heartbeat every 500ms, a 2s
// timeout; --heartbeat and --heartbeat-timeout set others; checkpoints
// every 1s). A producer publishes orders at a steady rate, round
// robin over 64 partition keys, each order carrying its key's next counter
// (order id kKKK-CCCCCCC). Meanwhile a chaos schedule drawn from --seed
// disrupts random instances, at most two at a time: SIGKILL and a new
// process (a new owner id) after a random delay; SIGSTOP for up to three
// timeouts (long enough for its leases to be taken over), then SIGCONT;
// SIGINT (drain, checkpoint, release) and a new process. When the chaos is
// over the producer stops, the instances catch up until every order is
// handled and every shard checkpointed at its last record, and are stopped
// with SIGINT. Then the tally, from the instances' report files (one line
// per delivery and per lease move, see examples/fulfilment):
//
//   - lost: published orders never handled (must be 0).
//   - overlaps (must be 0). Per shard, the lease tenures (an "acquired"
//     line to the same process's "released"/"lost"/"ended" line or its
//     SIGKILL) in acquisition order: every delivery of a tenure must come
//     before the next tenure's acquisition. The taker acquires only once
//     the holder's fence is closed, a sixth of the timeout before anyone
//     may take over, so a delivery stamped after the acquisition was handed to
//     the handler after it. The stamp is taken in the handler: a process
//     SIGSTOPped between handing a record over and the stamp stamps it
//     after its SIGCONT. That one record per stop (its previous delivery
//     before the stop, stamped within 1s of the SIGCONT, the takeover not
//     before the stop) is excused and listed as "in flight across
//     SIGSTOP": its handler really did run while another process held the
//     shard, which no lease can prevent without a fencing token passed to
//     the handler's side effects.
//   - duplicates: each redelivery, in tenure order, must follow a takeover
//     from a holder that lost its lease or was killed before checkpointing
//     past the record (a planned handover, SIGINT or balancing, must not
//     redeliver); others are unexplained (must be 0). Explained ones are
//     counted by cause (SIGKILL, SIGSTOP, in flight, lease lost without
//     chaos).
//   - tenures: each tenure handles a contiguous run of its shard's records
//     and resumes only past records handled before it acquired the lease.
//   - per-key order: the first delivery of counter c+1 of a key never
//     precedes the first delivery of counter c. It holds despite
//     redelivery: a key lives on one shard; a tenure handles its shard in
//     order from its checkpoint, and a checkpoint past c was written after c
//     was first handled, before the next tenure took the lease. What does
//     not hold is order over all deliveries: a takeover replays the
//     checkpoint window (c+1, c+2, then c+1, c+2 again), and a record in
//     flight across a SIGSTOP is stamped after its redelivery.
//   - the lease table, polled every 200ms: no checkpoint ever goes back (a
//     late checkpoint of a fenced holder would), and after the final
//     graceful stop every row is free with its checkpoint at the shard's
//     last record.
//   - takeovers: per SIGKILL/SIGSTOP/SIGINT, the time from the signal to
//     another process acquiring each shard the disrupted process held; none
//     sooner than half the timeout after a SIGKILL or SIGSTOP.
//
// With --fan-out the instances read with enhanced fan-out (--fan-out
// chaos) instead of polling: no emulator serves SubscribeToShard, so the
// stream lives in an in-memory Kinesis (kinesisfake.Kinesis) that the
// chaos run serves on a local endpoint, with Kinesis' rules for
// SubscribeToShard (a subscription to a shard less than 5s after its last
// successful one is refused with ResourceInUseException, a later one takes
// it over and ends the old one; one call a second per shard, else
// LimitExceededException); the instances use its URL as their Kinesis
// endpoint and the producer publishes to it. Every check above holds
// unchanged: the lease, not the subscription, decides who may deliver, and a
// takeover is the taker's acquisition, not its first record (which the
// 5-second rule may delay by up to 5s). The tally also says what the
// endpoint counted, and fails the run if fewer subscriptions succeeded than
// there were tenures that handled records (each tenure subscribes anew:
// fewer means records came some other way).
//
// A tenure that handled nothing and whose "acquired" line came right after
// a SIGCONT of its process may have taken the lease before the SIGSTOP (the
// answer read only after the SIGCONT): the tally dates it back to the
// SIGSTOP, but no further back than the lease table allows, polled every
// 200ms: a read after the SIGSTOP that showed the row held by another
// process (or free), no one having taken it from the stopped one, proves
// the take came after it. With fan-out such tenures are common (the first
// subscription after a takeover waits out the 5-second rule, and the next
// chaos action often ends the tenure first); dated back to the SIGSTOP
// regardless, they made the deliveries of the process that held the shard
// across the stop look like overlaps.
//
// It prints the figures and exits 1 on any violation (2 on bad flags). It
// stops by itself (--timeout) and kills every process it started, also on
// Ctrl-C and on error; everything listens on 127.0.0.1.
//
// The build, the process handling and the report parsing are shared with
// ../demo in ../internal/harness; see the package's test for the CI
// configuration.
package main

import (
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/kinesisfake"
)

func main() { os.Exit(chaosMain()) }

func chaosMain() int {
	f := harness.Flags{
		Instances: 4, Shards: 8,
		Heartbeat: 500 * time.Millisecond, Timeout: 2 * time.Second, CheckpointInterval: time.Second,
	}
	f.Register(flag.CommandLine)
	var (
		duration = flag.Duration("duration", 60*time.Second, "how long the chaos lasts")
		seed     = flag.Uint64("seed", 0, "seed of the chaos schedule (0: a random one, printed)")
		maxDown  = flag.Int("max-down", 2, "at most this many instances disrupted at once")
		rate     = flag.Int("rate", 200, "orders published per second")
		keys     = flag.Int("keys", 64, "partition keys (customers)")
		race     = flag.Bool("race", false, "build the instances with -race")
		timeout  = flag.Duration("timeout", 0, "stop everything after this long (default: --duration + 3m)")
		fanOut   = flag.Bool("fan-out", false, "the instances read with enhanced fan-out (--fan-out "+fanOutConsumer+") from an in-memory Kinesis on a local endpoint, instead of polling kinesalite")
	)
	flag.Parse()
	if flag.NArg() > 0 || *duration <= 0 || f.Instances < 2 || *maxDown < 1 || *maxDown >= f.Instances || f.Shards < 1 || *rate < 1 || *keys < 1 {
		fmt.Fprintln(os.Stderr, "chaos: want no arguments, --duration > 0, --instances >= 2, 1 <= --max-down < --instances, --shards, --rate and --keys >= 1")
		return 2
	}
	if *seed == 0 {
		*seed = randomSeed()
	}
	if *timeout == 0 {
		*timeout = *duration + 3*time.Minute
	}

	replay := ""
	if *fanOut {
		replay = " --fan-out"
	}
	fmt.Printf("chaos seed %d (replay: go run ./examples/fulfilment/chaos%s --seed %d --duration %v)\n", *seed, replay, *seed, *duration)
	fr, err := harness.OpenFrame("chaos", *timeout, f.Keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	defer fr.Close()

	var fo *harness.FanOutKinesis
	if *fanOut {
		fo = harness.StartFanOutKinesis(kinesisfake.FanOutRules{})
		defer fo.Close()
		if err := fo.CreateStream(fr.Ctx, "fulfilment-chaos", int32(f.Shards)); err != nil {
			return fr.Fail(fmt.Errorf("the fan-out stream: %w", err))
		}
		fmt.Printf("in-memory Kinesis at %s (kinesalite has no SubscribeToShard): the instances read with enhanced fan-out as consumer %s\n", fo.URL(), fanOutConsumer)
	}
	cfg := config{
		Stream: "fulfilment-chaos", Table: "fulfilment-chaos-leases",
		Instances: f.Instances, MaxDown: *maxDown, Rate: *rate, Keys: *keys,
		Duration: *duration, Seed: *seed,
		Heartbeat: f.Heartbeat, Timeout: f.Timeout, CheckpointInterval: f.CheckpointInterval,
		Dir: fr.Dir, Race: *race, FanOut: fo, Out: os.Stdout,
	}
	if err := fr.Setup(cfg.Table, cfg.Stream, int32(f.Shards)); err != nil {
		return fr.Fail(err)
	}
	t, err := run(fr.Ctx, cfg, fr.Env)
	if err != nil {
		fr.Stopped(err)
		fmt.Fprintf(os.Stderr, "chaos: seed %d\n", *seed)
		return 1
	}
	fmt.Println()
	t.print(os.Stdout)
	fmt.Printf("chaos run finished in %.1fs (seed %d)\n", time.Since(fr.Begin).Seconds(), *seed)
	if len(t.Violations()) > 0 {
		return 1
	}
	return 0
}

// randomSeed returns a non-zero random seed.
func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return max(1, binary.LittleEndian.Uint64(b[:])>>1)
}
