// Command demo runs the fulfilment example on local emulators:
//
//	go run ./examples/fulfilment/demo      # or: make demo
//
// It starts DynamoDB Local and kinesalite (internal/testutil; `npm ci` at the
// repository root installs them), creates the lease table fulfilment-leases
// and a 4-shard stream fulfilment, builds examples/fulfilment and runs 3
// instances of it as separate processes (owners instance-1..3, short leases
// so that the demo is quick). It publishes 3000 orders over 10 seconds,
// printing every second who holds which shard and how many orders each
// handled; half-way it SIGKILLs the instance holding the most shards and
// shows the survivors take its shards over. Once every order is handled it
// stops the survivors with SIGINT (drain, checkpoint, release) and prints the
// tally: published, handled, lost (must be 0) and duplicates (the orders the
// killed instance handled after its last checkpoint, handled again by its
// taker). The exit status is 1 if an order was lost, a shard was handled by
// two instances at once, or the run failed.
//
// With --measure-failover it instead measures the time from a SIGKILL until
// every shard of the killed instance is held again, with the library's
// default lease settings (10s lease, 3.3s renewals) and with the demo's short
// ones.
//
// The demo stops by itself (--timeout) and kills every process it started,
// also on Ctrl-C and on error.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
)

func main() { os.Exit(demoMain()) }

func demoMain() int {
	f := harness.Flags{
		Instances: 3, Shards: 4,
		Lease: 3 * time.Second, Renew: time.Second, Scan: time.Second, CheckpointInterval: time.Second,
	}
	f.Register(flag.CommandLine)
	var (
		orders  = flag.Int("orders", 3000, "orders to publish")
		over    = flag.Duration("publish-over", 10*time.Second, "publish the orders over this long")
		noKill  = flag.Bool("no-kill", false, "do not SIGKILL an instance")
		measure = flag.Bool("measure-failover", false, "measure the failover time after a SIGKILL with each protocol's defaults and short leases, alternating, then exit")
		trials  = flag.Int("trials", 1, "with --measure-failover: runs per setting")
		only    = flag.String("settings", "membership,per-row,short", "with --measure-failover: the settings to measure, comma-separated")
		timeout = flag.Duration("timeout", 0, "stop everything after this long (default 85s; with --measure-failover 30s + 75s per run)")
	)
	flag.Parse()
	if *timeout == 0 {
		*timeout = 85 * time.Second
		if *measure {
			*timeout = 30*time.Second + time.Duration(3**trials)*75*time.Second
		}
	}

	fr, err := harness.OpenFrame("demo", *timeout, f.Keep)
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
		return measureFailover(fr, bin, f.Instances, int32(f.Shards), *trials, strings.Split(*only, ","))
	}

	cfg := config{
		Stream: "fulfilment", Table: "fulfilment-leases",
		Orders: *orders, PublishOver: *over, Instances: f.Instances,
		Lease: f.Lease, Renew: f.Renew, Scan: f.Scan, CheckpointInterval: f.CheckpointInterval,
		Kill: !*noKill, KillAt: 0.5,
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
	if t.Lost > 0 || len(t.Overlaps) > 0 || (cfg.Kill && !t.Complete) {
		return 1
	}
	return 0
}

// measureFailover runs, for the default and the short lease settings, trials
// with no orders: every shard held, the instance holding the most SIGKILLed,
// the time until every one of its shards is held again.
func measureFailover(fr *harness.Frame, bin string, instances int, shards int32, trials int, only []string) int {
	settings := []struct {
		name               string
		lease, renew, scan time.Duration
		protocol           string
	}{
		// The defaults of each protocol, side by side, then short leases.
		{"membership", 0, 0, 0, ""},
		{"per-row", kinesislease.DefaultLeaseDuration, kinesislease.DefaultRenewInterval, kinesislease.DefaultLeaseDuration, "per-row"},
		{"short", 3 * time.Second, time.Second, time.Second, ""},
	}
	settings = slices.DeleteFunc(settings, func(s struct {
		name               string
		lease, renew, scan time.Duration
		protocol           string
	}) bool {
		return !slices.Contains(only, s.name)
	})
	type result struct {
		name     string
		cfg      config
		measured []time.Duration
	}
	results := make([]result, len(settings))
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
				Lease: s.lease, Renew: s.renew, Scan: s.scan, Protocol: s.protocol, CheckpointInterval: time.Second,
				Kill: true, Dir: runDir, Binary: bin, Out: os.Stdout,
			}
			r.cfg = cfg
			if err := harness.Setup(fr.Ctx, fr.Env, name, name, shards); err != nil {
				return fr.Fail(err)
			}
			fmt.Printf("\n== failover with the %s settings: lease %v, renew %v, scan %v\n", s.name, s.lease, s.renew, s.scan)
			t, err := run(fr.Ctx, cfg, fr.Env)
			if err != nil {
				fr.Stopped(err)
				return 1
			}
			if !t.Complete {
				fmt.Fprintln(os.Stderr, "demo: the failover did not complete")
				return 1
			}
			r.measured = append(r.measured, t.Failover)
		}
	}
	fmt.Printf("\nfailover: SIGKILL to every shard of the killed instance held again (%d instances, %d shards)\n", instances, shards)
	fmt.Printf("  %-8s %-20s %9s %15s  %s\n", "settings", "lease/renew/scan", "lease+scan", "bounds", "measured")
	for _, r := range results {
		var ms string
		for _, m := range r.measured {
			ms += fmt.Sprintf("%.2fs ", m.Seconds())
		}
		fmt.Printf("  %-8s %-20s %9.1fs %15s  %s\n", r.name,
			fmt.Sprintf("%v/%v/%v", r.cfg.Lease, r.cfg.Renew.Round(10*time.Millisecond), r.cfg.Scan),
			r.cfg.expectedFailover().Seconds(),
			fmt.Sprintf("%.1fs..%.1fs", r.cfg.bestFailover().Seconds(), r.cfg.worstFailover().Seconds()), ms)
	}
	return 0
}
