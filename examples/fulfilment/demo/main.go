// Command demo runs the fulfilment example on local endpoints:
//
//	go run ./examples/fulfilment/demo      # or: make demo
//
// It needs nothing but Go: it serves, in its own process on free ports of
// 127.0.0.1, an in-memory Kinesis (kinesisfake.Kinesis, on Kinesis' wire
// protocol) and an in-memory DynamoDB (internal/testkit/ddbmeter's
// Endpoint: CreateTable, DescribeTable, and GetItem and UpdateItem
// evaluated as DynamoDB does them). With --emulators it runs on DynamoDB
// Local and kinesalite instead (internal/testkit/testutil), as the test
// suite does: it first runs scripts/install-testbench, which installs them
// (`npm ci`) and Java if need be. Either way it creates the lease table
// fulfilment-leases and a 4-shard stream fulfilment, builds
// examples/fulfilment and runs 3 instances of it as separate processes
// (owners instance-1..3), which reach the endpoints by their flags
// (--dynamodb-endpoint-url, --kinesis-endpoint-url) as they would AWS, at
// the library's lease settings (a heartbeat every 1.25s, a 5s timeout; it
// prints them, with the fence they make), unless --heartbeat or
// --heartbeat-timeout say otherwise. It publishes 3000 orders over 10
// seconds, printing every second who holds which shard and how many orders
// each handled; half-way it SIGKILLs the instance holding the most shards
// and shows the survivors take its shards over. Once every order is
// handled it stops the survivors with SIGINT (drain, checkpoint, release)
// and prints the tally: published, handled, lost (must be 0) and
// duplicates (the orders the killed instance handled after its last
// checkpoint, handled again by its taker). The exit status is 1 if an
// order was lost, a shard was handled by two instances at once, a
// customer's orders were handled out of stream order, or the run failed.
//
// With --fan-out the instances read with enhanced fan-out (--fan-out
// fulfilment-demo) instead of polling: the stream lives in an in-memory
// Kinesis (kinesisfake.Kinesis) of its own (kinesalite has no
// SubscribeToShard) that the demo serves on a local endpoint, with Kinesis' rules for
// SubscribeToShard and the consumer calls (among them the 5-second rule);
// the instances use its URL as their Kinesis endpoint and the demo
// publishes to it. The tally then also says what it counted, and the run fails if fewer subscriptions succeeded than there
// were tenures (an instance's handling of a shard under one lease) that
// handled records.
//
// With --measure-failover it instead measures failover, with the library's
// default settings ("defaults": a heartbeat every 1.25s, a 5s timeout), with
// short ones ("short": 500ms, 2s), and with the defaults read with enhanced
// fan-out from the in-memory Kinesis ("fanout"; its bounds allow for the
// 5-second rule); --settings picks, --trials runs each,
// alternating. A trial publishes one record per shard about every 100ms
// (PutRecords, ExplicitHashKey = the shard's first hash key), and once every
// shard is held and records flow for 2s signals the instance holding the
// most shards: SIGKILL, or with --signal stop SIGSTOP. Failover is, per
// shard the victim held, the time from the signal until a survivor handles
// the first record put on the shard after it; the trial's is the longest.
// Then publishing stops, everything drains and the tally is made (lost
// records, overlaps, unexplained duplicates fail the trial). After a
// SIGSTOP the victim is SIGCONTed once every one of its shards was handled
// by a survivor (records flow on meanwhile), and the trial also fails if it
// handled any record of those shards after the SIGSTOP (but one in its
// handler at the SIGSTOP, per shard) before acquiring the shard again, or
// if the lease table does not show it holding its share again. It prints
// every trial's failover, per shard too, and per setting the median, min
// and max; the exit status is 1 if a trial failed.
//
// The demo stops by itself (--timeout) and kills every process it started,
// also on Ctrl-C and on error.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
)

func main() { os.Exit(demoMain()) }

func demoMain() int {
	f := harness.Flags{Instances: 3, Shards: 4, CheckpointInterval: time.Second}
	f.Register(flag.CommandLine)
	var (
		orders  = flag.Int("orders", 3000, "orders to publish")
		over    = flag.Duration("publish-over", 10*time.Second, "publish the orders over this long")
		noKill  = flag.Bool("no-kill", false, "do not SIGKILL an instance")
		fanOut  = flag.Bool("fan-out", false, "the instances read with enhanced fan-out (--fan-out "+fanOutConsumer+") from an in-memory Kinesis of its own on a local endpoint, instead of polling")
		emu     = flag.Bool("emulators", false, "run on DynamoDB Local and kinesalite (installed first by scripts/install-testbench: Node, and Java if need be) instead of the in-memory endpoints served in this process")
		measure = flag.Bool("measure-failover", false, "measure the failover (signal to a survivor handling the first record put after it, per shard of the victim) with the library's defaults and short settings, alternating, then exit")
		trials  = flag.Int("trials", 1, "with --measure-failover: runs per setting")
		only    = flag.String("settings", "defaults,short,fanout", "with --measure-failover: the settings to measure, comma-separated (fanout: the defaults, read with enhanced fan-out)")
		sig     = flag.String("signal", "kill", "with --measure-failover: how to disrupt the victim: kill (SIGKILL) or stop (SIGSTOP, SIGCONT once failed over)")
		keyConc = flag.Int("key-concurrency", 0, "the instances' --key-concurrency (0: their default, 1)")
		timeout = flag.Duration("timeout", 0, "stop everything after this long (default 85s; with --measure-failover 30s + 90s per trial, 120s with --signal stop)")
	)
	flag.Parse()
	if *sig != "kill" && *sig != "stop" {
		fmt.Fprintf(os.Stderr, "demo: --signal %q: want kill or stop\n", *sig)
		return 2
	}
	if *sig == "stop" && !harness.SignalsSupported {
		fmt.Fprintln(os.Stderr, "demo: --signal stop needs SIGSTOP and SIGCONT: run it on Linux or another Unix")
		return 2
	}
	if *timeout == 0 {
		*timeout = 85 * time.Second
		if *measure {
			per := 90 * time.Second
			if *sig == "stop" {
				per = 120 * time.Second
			}
			*timeout = 30*time.Second + time.Duration(len(strings.Split(*only, ","))**trials)*per
		}
	}

	open := harness.OpenEmbeddedFrame
	if *emu {
		if err := installTestbench(); err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			return 1
		}
		open = harness.OpenFrame
	}
	fr, err := open("demo", *timeout, f.Keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	defer fr.Close()

	bin, err := harness.Build(fr.Ctx, fr.Dir, false)
	if err != nil {
		return fr.Fail(err)
	}

	if *measure {
		if *fanOut {
			fmt.Fprintln(os.Stderr, "demo: --fan-out is for the plain run; with --measure-failover, pick the fanout setting (--settings)")
			return 2
		}
		return measureFailover(fr, bin, f.Instances, int32(f.Shards), *trials, strings.Split(*only, ","), *sig)
	}

	var fo *harness.FanOutKinesis
	if *fanOut {
		if fo, err = startFanOut("fulfilment", int32(f.Shards), 0); err != nil {
			return fr.Fail(err)
		}
		defer fo.Close()
		fmt.Printf("in-memory Kinesis for fan-out at %s: the instances read with enhanced fan-out as consumer %s\n", fo.URL(), fanOutConsumer)
	}
	cfg := config{
		Stream: "fulfilment", Table: "fulfilment-leases",
		Orders: *orders, PublishOver: *over, Instances: f.Instances,
		Heartbeat: f.Heartbeat, Timeout: f.Timeout, CheckpointInterval: f.CheckpointInterval,
		Kill: !*noKill, KillAt: 0.5, KeyConcurrency: *keyConc, FanOut: fo,
		Dir: fr.Dir, Binary: bin, Out: os.Stdout,
	}
	if err := fr.Setup(cfg.Table, cfg.Stream, int32(f.Shards)); err != nil {
		return fr.Fail(err)
	}
	t, err := run(fr.Ctx, cfg, fr.Env)
	if err != nil {
		return fr.Stopped(err)
	}
	fmt.Println()
	t.print(os.Stdout)
	fmt.Printf("demo finished in %.1fs\n", time.Since(fr.Begin).Seconds())
	if t.Lost > 0 || len(t.Overlaps) > 0 || len(t.KeyOrder) > 0 || (cfg.Kill && !t.Complete) || t.fanOutProblem() != "" {
		return 1
	}
	return 0
}

// installTestbench runs scripts/install-testbench at the module's root:
// it installs the emulators (npm ci, and a JDK with apt-get if javac is
// missing) when they are not yet, as `make test` does.
func installTestbench() error {
	root, err := harness.ModuleRoot()
	if err != nil {
		return err
	}
	fmt.Println("--emulators: scripts/install-testbench (DynamoDB Local and kinesalite; Java if need be)")
	cmd := exec.Command(filepath.Join(root, "scripts", "install-testbench"))
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("scripts/install-testbench: %w", err)
	}
	return nil
}

// measureFailover runs, for each setting in only, trials failover trials
// (runFailover) with signal ("kill" or "stop"), alternating the settings,
// and prints every trial's failover, per shard too, and per setting the
// median, min and max. It returns 1 if a trial failed or could not
// complete.
func measureFailover(fr *harness.Frame, bin string, instances int, shards int32, trials int, only []string, signal string) int {
	type setting struct {
		name               string
		heartbeat, timeout time.Duration // 0: the library's defaults
		fanOut             bool          // read with enhanced fan-out from the in-memory Kinesis
	}
	settings := []setting{
		// The library's defaults, then short settings, then the defaults
		// read with enhanced fan-out.
		{"defaults", 0, 0, false},
		{"short", 500 * time.Millisecond, 2 * time.Second, false},
		{"fanout", 0, 0, true},
	}
	settings = slices.DeleteFunc(settings, func(s setting) bool { return !slices.Contains(only, s.name) })
	if len(settings) == 0 {
		fmt.Fprintf(os.Stderr, "demo: --settings %s: none of defaults, short, fanout\n", strings.Join(only, ","))
		return 2
	}
	sigName := map[string]string{"kill": "SIGKILL", "stop": "SIGSTOP"}[signal]
	type result struct {
		name   string
		cfg    config
		trials []*trial // nil: could not complete
		errs   []string
	}
	results := make([]result, len(settings))
	failed := false
	printSummary := func() {
		fmt.Printf("\nfailover: from the %s of the instance holding the most shards until a survivor handled, on each of its shards, the first record put after the %s; a trial's failover is the longest over those shards (records on every shard every 100ms; %d instances, %d shards)\n",
			sigName, sigName, instances, shards)
		fmt.Printf("  %-10s %-20s %13s %7s %7s %7s  %s\n", "settings", "heartbeat/timeout", "bounds", "median", "min", "max", "trials")
		for _, r := range results {
			var ms []time.Duration
			var list string
			for _, tr := range r.trials {
				if tr == nil {
					list += "FAILED "
					continue
				}
				ms = append(ms, tr.Failover)
				list += fmt.Sprintf("%.2fs ", tr.Failover.Seconds())
			}
			med, lo, hi := "-", "-", "-"
			if len(ms) > 0 {
				a, b, c := stats(ms)
				med, lo, hi = fmt.Sprintf("%.2fs", a.Seconds()), fmt.Sprintf("%.2fs", b.Seconds()), fmt.Sprintf("%.2fs", c.Seconds())
			}
			fmt.Printf("  %-10s %-20s %13s %7s %7s %7s  %s\n", r.name,
				fmt.Sprintf("%v/%v", r.cfg.heartbeat(), r.cfg.timeout()),
				fmt.Sprintf("%.1fs..%.1fs", r.cfg.bestFailover().Seconds(), r.cfg.worstFailover().Seconds()), med, lo, hi, list)
		}
		fmt.Printf("per trial: the victim, its failover, per shard (shard:seconds), the longest time until a survivor acquired a victim shard's lease")
		if signal == "stop" {
			fmt.Printf(", SIGCONT until the victim held its share again")
		}
		if slices.ContainsFunc(settings, func(s setting) bool { return s.fanOut }) {
			fmt.Printf(", with fan-out the endpoint's successful SubscribeToShard calls, those refused by the 5-second rule (ResourceInUse) and the subscriptions taken over")
		}
		fmt.Println(", and whether the trial passed")
		for _, r := range results {
			for i, tr := range r.trials {
				if tr == nil {
					fmt.Printf("  %-10s #%-2d FAILED: %s\n", r.name, i+1, r.errs[i])
					continue
				}
				status := "ok"
				if len(tr.Problems) > 0 {
					status = "FAILED: " + strings.Join(tr.Problems, "; ")
				}
				back := ""
				if signal == "stop" {
					back = fmt.Sprintf("  share back %.2fs", tr.ShareBack.Seconds())
				}
				if st := tr.Tally.FanOut; st != nil {
					back += fmt.Sprintf("  subscribes %d, in use %d, takeovers %d", st.Subscribed, st.ResourceInUse, st.TakenOver)
				}
				fmt.Printf("  %-10s #%-2d %s %s: %.2fs  (%s)  acquired %.2fs%s  %s\n", r.name, i+1, tr.Victim,
					harness.ShortList(tr.Shards), tr.Failover.Seconds(), perShard(tr), tr.Acquired.Seconds(), back, status)
			}
		}
	}
	for i := range trials { // alternating: the machine's noise hits every setting alike
		for k, s := range settings {
			r := &results[k]
			r.name = s.name
			name := fmt.Sprintf("fulfilment-failover-%s-%d", s.name, i)
			runDir := filepath.Join(fr.Dir, name)
			if err := os.Mkdir(runDir, 0o755); err != nil {
				return fr.Fail(err)
			}
			cfg := config{
				Stream: name, Table: name, Instances: instances,
				Heartbeat: s.heartbeat, Timeout: s.timeout, CheckpointInterval: time.Second,
				Kill: true, Dir: runDir, Binary: bin, Out: os.Stdout,
			}
			if err := harness.Setup(fr.Ctx, fr.Env, name, name, shards); err != nil {
				return fr.Fail(err)
			}
			reading := "polling"
			if s.fanOut {
				// Its own endpoint per trial: its counts are the trial's.
				fo, err := startFanOut(name, shards, 0)
				if err != nil {
					return fr.Fail(err)
				}
				cfg.FanOut = fo
				reading = "enhanced fan-out"
			}
			r.cfg = cfg
			fmt.Printf("\n== failover trial %d/%d with the %s settings (%s, %s), %s\n",
				i+1, trials, s.name, cfg.settings(), reading, sigName)
			tr, err := runFailover(fr.Ctx, cfg, fr.Env, signal)
			if cfg.FanOut != nil {
				if cerr := cfg.FanOut.Close(); cerr != nil {
					fmt.Fprintf(os.Stderr, "demo: closing the in-memory Kinesis: %v\n", cerr)
				}
			}
			if err != nil {
				failed = true
				if fr.Ctx.Err() != nil {
					fr.Stopped(err)
					printSummary()
					return 1
				}
				fmt.Fprintf(os.Stderr, "demo: trial %d of %s FAILED: %v\n", i+1, s.name, err)
				fmt.Printf("trial %d of %s FAILED: %v\n", i+1, s.name, err)
				r.trials, r.errs = append(r.trials, nil), append(r.errs, err.Error())
				continue
			}
			fmt.Println()
			tr.Tally.print(os.Stdout)
			fmt.Printf("failover %.2fs (per shard %s)\n", tr.Failover.Seconds(), perShard(tr))
			if len(tr.Problems) > 0 {
				failed = true
				for _, p := range tr.Problems {
					fmt.Printf("TRIAL FAILED: %s\n", p)
				}
			}
			r.trials, r.errs = append(r.trials, tr), append(r.errs, "")
		}
	}
	printSummary()
	if failed {
		return 1
	}
	return 0
}
