package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisfake"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// fixedSeed's 20s schedule has every kind of chaos: SIGKILLs, SIGSTOPs
// shorter than the timeout, around the fence and twice the timeout, and a
// SIGINT.
const fixedSeed = 4

// TestChaos runs the chaos small, three times in parallel on the same
// emulators: 4 instances of examples/fulfilment as separate processes (built
// with -race when this test is), 8 shards, 100 orders a second, 20s of
// chaos; one run with the fixed seed and one with a random seed (logged,
// with the command that replays it), both polling, and one with the fixed
// seed read with enhanced fan-out from an in-memory Kinesis on a local
// endpoint (Kinesis' 5-second rule and per-second limit; see the package
// comment's --fan-out); then asserts every invariant the tally checks (see
// the package comment). Each run takes about 25s; the whole test about 55s
// on two CPUs, where go test runs two at a time (-parallel defaults to
// GOMAXPROCS), about 30s with room for all three.
//
// Environment:
//
//	KINESISLEASE_CHAOS_SEED=N         one run, with seed N (a failure names its seed)
//	KINESISLEASE_CHAOS_DURATION=10m   long mode: one run of this much chaos, 200
//	                                  orders a second, a random seed unless one is
//	                                  set (raise go test's -timeout to duration + 5m)
//	KINESISLEASE_CHAOS_FANOUT=1       with either of those: the one run reads with
//	                                  enhanced fan-out
//	KINESISLEASE_CHAOS_KEEP=DIR       keep the instances' logs and reports in DIR
func TestChaos(t *testing.T) {
	testutil.Slow(t)
	if !harness.SignalsSupported {
		t.Skip(errUnsupportedPlatform)
	}
	duration, rate := 20*time.Second, 100
	runs := []chaosCase{{fixedSeed, false}, {randomSeed(), false}, {fixedSeed, true}}
	fanOut := os.Getenv("KINESISLEASE_CHAOS_FANOUT") != ""
	if s := os.Getenv("KINESISLEASE_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("KINESISLEASE_CHAOS_DURATION=%q: want a positive duration like 10m", s)
		}
		duration, rate, runs = d, 200, []chaosCase{{runs[1].seed, fanOut}}
	}
	if s := os.Getenv("KINESISLEASE_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			t.Fatalf("KINESISLEASE_CHAOS_SEED=%q: want a positive integer", s)
		}
		runs = []chaosCase{{n, fanOut}}
	}
	if dl, ok := t.Deadline(); ok && time.Until(dl) < duration+2*time.Minute {
		t.Fatalf("%v of chaos needs a longer -timeout (%v left)", duration, time.Until(dl).Round(time.Second))
	}
	dir := t.TempDir()
	bin, err := harness.Build(t.Context(), dir, harness.RaceEnabled)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	for _, c := range runs {
		name := fmt.Sprintf("seed=%d", c.seed)
		if c.fanOut {
			name = "fan-out/" + name
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			chaosRun(t, bin, c, duration, rate)
		})
	}
}

// chaosCase is one run of TestChaos: its seed, and whether it reads with
// enhanced fan-out.
type chaosCase struct {
	seed   uint64
	fanOut bool
}

// chaosRun runs the chaos once and checks the tally.
func chaosRun(t *testing.T, bin string, c chaosCase, duration time.Duration, rate int) {
	seed := c.seed
	replay := ""
	if c.fanOut {
		replay = "KINESISLEASE_CHAOS_FANOUT=1 "
	}
	t.Logf("chaos seed %d, %v; replay: %sKINESISLEASE_CHAOS_SEED=%d KINESISLEASE_CHAOS_DURATION=%v go test -run TestChaos ./examples/fulfilment/chaos",
		seed, duration, replay, seed, duration)
	e, table, stream := harness.TestEnv(t, 8)
	var fo *harness.FanOutKinesis
	if c.fanOut {
		// Kinesis' rules, as the package comment's --fan-out: closed when
		// the test ends, once run has stopped every instance.
		fo = harness.StartFanOutKinesis(kinesisfake.FanOutRules{})
		t.Cleanup(func() { fo.Close() })
		if err := fo.CreateStream(t.Context(), stream, 8); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config{
		Stream: stream, Table: table,
		Instances: 4, MaxDown: 2, Rate: rate, Keys: 64,
		Duration: duration, Seed: seed,
		Heartbeat: 500 * time.Millisecond, Timeout: 2 * time.Second,
		CheckpointInterval: time.Second,
		Dir:                t.TempDir(), Binary: bin, Race: harness.RaceEnabled, FanOut: fo, Out: harness.TestLog(t),
	}
	ctx, cancel := context.WithTimeout(t.Context(), duration+2*time.Minute)
	defer cancel()
	ta, err := run(ctx, cfg, e)
	if err != nil {
		keepLogs(t, cfg.Dir)
		t.Fatalf("seed %d: %v", seed, err)
	}
	var report strings.Builder
	ta.print(&report)
	t.Log("\n" + report.String())
	v := ta.Violations()
	if len(v) > 0 || os.Getenv("KINESISLEASE_CHAOS_KEEP") != "" {
		keepLogs(t, cfg.Dir)
	}
	for _, s := range v {
		t.Errorf("seed %d: %s", seed, s)
	}
	// The run did what it should: orders flowed, the chaos happened.
	if want := int(duration.Seconds()) * rate / 2; ta.Published < want {
		t.Errorf("seed %d: published %d orders, want at least %d", seed, ta.Published, want)
	}
	if n := ta.Done[kill] + ta.Done[stop] + ta.Done[interrupt]; n == 0 {
		t.Errorf("seed %d: no chaos action was carried out (%d skipped)", seed, ta.Skipped)
	}
	// With fan-out the records came by SubscribeToShard: every tenure that
	// handled records subscribed (a violation otherwise, see
	// fanOutProblem), and some did.
	if c.fanOut && (ta.FanOut == nil || ta.FanOut.Subscribed == 0) {
		t.Errorf("seed %d: fan-out mode, but no SubscribeToShard call succeeded (%+v)", seed, ta.FanOut)
	}
	// Takeover: a taker must see the holder's heartbeat unchanged for the
	// timeout, and it reads the membership rows every heartbeat (jittered
	// up to +10%): timeout + 2×1.1 heartbeats after the signal at worst
	// (3.1s here). Four processes built with -race beside other tests on
	// two cores can take longer than any bound on the wall clock, so the
	// time is only logged, as TestDemo does: that takeovers come within
	// their bound is checked on virtual clocks, where load cannot stretch
	// it (the membership simulation's failover bound, internal/testkit/sim).
	// Here every shard of a stopped holder must be taken over: an order on
	// a shard no one took would be lost, a violation above.
	t.Logf("seed %d: longest takeover %v (analytic worst %v, without load)", seed, ta.longestTakeover(), cfg.Timeout+2*cfg.Heartbeat*11/10)
}

// keepLogs copies the instances' logs and reports out of the test's
// temporary directory when KINESISLEASE_CHAOS_KEEP names a directory (on
// failure, or always when it is set).
func keepLogs(t *testing.T, dir string) {
	dst := os.Getenv("KINESISLEASE_CHAOS_KEEP")
	if dst == "" {
		t.Logf("set KINESISLEASE_CHAOS_KEEP=DIR to keep the instances' logs and reports")
		return
	}
	if err := os.CopyFS(filepath.Join(dst, filepath.Base(dir)), os.DirFS(dir)); err != nil {
		t.Logf("keeping the logs: %v", err)
		return
	}
	t.Logf("logs and reports kept in %s", filepath.Join(dst, filepath.Base(dir)))
}
