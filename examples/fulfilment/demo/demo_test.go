package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// TestDemo runs the demo small: 3 instances of examples/fulfilment as
// separate processes (built with -race when this test is), 1000 orders over
// 4s on 4 shards, the instance holding the most shards SIGKILLed half-way.
//
// It runs three times: with each shard's records handled in order, with key
// concurrency 8 (records of one customer in order, customers at once), and
// read with enhanced fan-out (the instances' --fan-out) from an in-memory
// Kinesis on a local endpoint; all keep every customer's orders in
// stream order across the SIGKILL.
//
// With fan-out, every tenure that handled records (an instance's handling
// of a shard under one lease) must have had a SubscribeToShard call of its
// own: polling instances would pass every other check. The endpoint's
// 5-second rule is stretched to testFanOutRule so that the takers' first
// subscriptions after the SIGKILL come within it of the killed instance's
// (which subscribed a few seconds before the kill): they are refused and
// retried until the rule lets them take over, and the test checks both
// that this happened wherever the lease times say it must have and that
// nothing was lost or read twice beyond the checkpoint windows.
//
// The three runs build examples/fulfilment once and run in parallel, each on
// a table and stream of its own, on the emulators (the demo's --emulators);
// TestDemoEmbedded runs it on the embedded endpoints, as `make demo` does.
func TestDemo(t *testing.T) {
	t.Parallel()
	testutil.Slow(t)
	bin, err := harness.Build(t.Context(), t.TempDir(), harness.RaceEnabled)
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	for _, keys := range []int{0, 8} {
		t.Run(fmt.Sprintf("key-concurrency=%d", max(keys, 1)), func(t *testing.T) {
			t.Parallel()
			e, table, stream := harness.TestEnv(t, 4)
			testDemo(t, e, table, stream, bin, keys, false)
		})
	}
	t.Run("fan-out", func(t *testing.T) {
		t.Parallel()
		e, table, stream := harness.TestEnv(t, 4)
		testDemo(t, e, table, stream, bin, 0, true)
	})
}

// TestDemoEmbedded is TestDemo's first run on the endpoints the demo serves
// by default (harness.StartEmbedded: an in-memory Kinesis and DynamoDB in
// this process, which nothing but Go needs), the table and the stream
// created on them as the demo does (harness.Setup): the same checks hold.
func TestDemoEmbedded(t *testing.T) {
	t.Parallel()
	testutil.Slow(t)
	e, closer, err := harness.StartEmbedded(harness.TestLog(t), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	const table, stream = "fulfilment-leases", "fulfilment"
	if err := harness.Setup(t.Context(), e, table, stream, 4); err != nil {
		t.Fatal(err)
	}
	bin, err := harness.Build(t.Context(), t.TempDir(), harness.RaceEnabled)
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	testDemo(t, e, table, stream, bin, 0, false)
}

// testDemo runs the demo small on e's table and stream (of 4 shards) and
// checks its tally.
func testDemo(t *testing.T, e harness.Env, table, stream, bin string, keyConcurrency int, fanOut bool) {
	const shards = 4
	var fo *harness.FanOutKinesis
	var rule time.Duration
	if fanOut {
		rule = testFanOutRule
		var err error
		if fo, err = startFanOut(stream, shards, rule); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fo.Close() })
	}
	cfg := config{
		FanOut: fo, FanOutRule: rule,
		KeyConcurrency: keyConcurrency,
		Stream:         stream, Table: table,
		Orders: 1000, PublishOver: 4 * time.Second, Instances: 3,
		Heartbeat: 500 * time.Millisecond, Timeout: 2 * time.Second,
		CheckpointInterval: 500 * time.Millisecond,
		Kill:               true, KillAt: 0.5,
		Dir: t.TempDir(), Binary: bin, Race: harness.RaceEnabled, Out: harness.TestLog(t),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ta, err := run(ctx, cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	var report strings.Builder
	ta.print(&report)
	t.Log("\n" + report.String())

	if ta.Published != cfg.Orders {
		t.Errorf("published %d of %d orders", ta.Published, cfg.Orders)
	}
	if ta.Lost != 0 {
		t.Errorf("%d orders lost, e.g. %v", ta.Lost, ta.LostSample)
	}
	if ta.Unknown != 0 {
		t.Errorf("%d handled orders were never published", ta.Unknown)
	}
	if len(ta.KeyOrder) > 0 {
		t.Errorf("%d customers' orders handled out of stream order, e.g. %s", len(ta.KeyOrder), ta.KeyOrder[0])
	}

	// Failover. A survivor takes a lease over once it has seen the killed
	// instance's heartbeat unchanged for the timeout, and it reads the
	// membership every heartbeat: expected timeout+heartbeat after the kill.
	// Five processes built with -race on a loaded machine can take longer
	// than any bound on the wall clock, so the time is only logged; that
	// takeovers come within their bound is checked on virtual clocks, where
	// load cannot stretch it (the membership simulation's failover bound).
	// Here every shard of the killed instance must be taken over (within the
	// run's 3 minutes) and none too early.
	if len(ta.KilledShards) == 0 {
		t.Fatalf("the killed instance %s held no shard", ta.Killed)
	}
	if !ta.Complete {
		t.Fatalf("shards %v of the killed %s were not all taken over: %v", ta.KilledShards, ta.Killed, ta.Takeover)
	}
	t.Logf("failover after SIGKILL: %v (expected about %v, analytic worst %v); per shard %v",
		ta.Failover.Round(time.Millisecond), cfg.expectedFailover(), cfg.worstFailover(), ta.Takeover)
	// Nobody may take a live lease over early: the killed instance's last
	// heartbeat was at most a heartbeat interval before the kill, so no
	// takeover can come sooner than timeout−heartbeat after it. Half the
	// timeout leaves room for a late heartbeat.
	for s, d := range ta.Takeover {
		if d < cfg.timeout()/2 {
			t.Errorf("shard %s taken over %v after the kill: sooner than half the timeout (%v)", s, d, cfg.timeout()/2)
		}
	}

	// Duplicates come only from the killed instance's checkpoint window
	// (first handled by it, then again by its taker, at the same record) and
	// from leases lost to a fence (a loaded machine's stalls), each counted.
	if len(ta.OtherDups) > 0 {
		t.Errorf("%d duplicated orders not explained by the kill, e.g. %v", len(ta.OtherDups), ta.OtherDups[:min(5, len(ta.OtherDups))])
	}
	window := 0
	for _, n := range ta.CheckpointWindow {
		window += n
	}
	if ta.Duplicates != window+ta.LostLeaseDups {
		t.Errorf("%d duplicate deliveries, want exactly the %d records of the killed instance's checkpoint windows and the %d delivered again after a lease lost to a fence",
			ta.Duplicates, window, ta.LostLeaseDups)
	}

	if fanOut {
		checkFanOut(t, ta, shards, rule)
	}

	// No shard was handled by two processes at once.
	for _, o := range ta.Overlaps {
		t.Errorf("overlap: %s", o)
	}
	for _, o := range ta.FenceOverlaps {
		t.Logf("overlap within the killed instance's fence window: %s", o)
	}
}

// testFanOutRule is TestDemo's 5-second rule with fan-out: twice Kinesis'.
const testFanOutRule = 10 * time.Second

// checkFanOut checks what the in-memory Kinesis (5-second rule rule) counted
// in a run of the demo on shards shards with one SIGKILL.
func checkFanOut(t *testing.T, ta *tally, shards int, rule time.Duration) {
	t.Helper()
	st := ta.FanOut
	if st == nil {
		t.Fatal("no fan-out counts in the tally")
	}
	t.Logf("fan-out: %d subscriptions for %d tenures, %d refused by the 5-second rule (%v here), %d by the per-second limit, %d taken over",
		st.Subscribed, ta.Tenures, st.ResourceInUse, rule, st.LimitExceeded, st.TakenOver)
	// Every shard read before the kill, each of the killed instance's
	// again by its taker, each tenure with a subscription of its own. A
	// killed instance's tenure that began less than the rule before the
	// kill (a hand-off while the fleet settled) may have been refused by
	// the rule throughout, and handled nothing: it is not counted.
	young := 0
	for _, s := range ta.KilledShards {
		if held, ok := ta.VictimHeld[s]; ok && held < rule {
			young++
		}
	}
	if want := shards + len(ta.KilledShards) - young; ta.Tenures < want {
		t.Errorf("%d tenures handled records, want at least %d (every shard, then the killed instance's %d again; %d of its tenures younger than the rule)",
			ta.Tenures, want, len(ta.KilledShards), young)
	}
	if p := ta.fanOutProblem(); p != "" {
		t.Error(p)
	}
	// The killed instance subscribed to a shard after it last acquired it
	// (it handled records of it since), a taker right after acquiring it:
	// a taker acquiring the shard less than the rule (less a second for the
	// calls' own delays) after the killed instance did was refused at least
	// once (ResourceInUse; the killed instance's last call was seconds
	// before, so not the per-second limit).
	must := 0
	for _, s := range ta.KilledShards {
		held, ok := ta.VictimHeld[s]
		took, taken := ta.Takeover[s]
		if ok && taken && held+took < rule-time.Second {
			must++
			t.Logf("shard %s: acquired by the killed instance %v before the kill, by its taker %v after: its first subscription must be refused",
				harness.ShortShard(s), held.Round(time.Millisecond), took.Round(time.Millisecond))
		}
	}
	if st.ResourceInUse < must {
		t.Errorf("%d SubscribeToShard calls refused by the 5-second rule, want at least %d (one per taker that subscribed within it)", st.ResourceInUse, must)
	}
	if must == 0 {
		t.Logf("no taker subscribed within the rule of the killed instance's subscription: the refusal was not exercised")
	}
}

// TestTallyFindsFaults feeds the tally made-up reports with the faults the
// demo must catch.
func TestTallyFindsFaults(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const s0, s1 = "shardId-000000000000", "shardId-000000000001"
	ev := func(owner, shard, kind string, at time.Time) harness.LeaseEvent {
		return harness.LeaseEvent{Owner: owner, Shard: shard, Kind: kind, At: at}
	}
	dl := func(owner, shard, seq, id string, at time.Time) harness.Delivery {
		return harness.Delivery{Owner: owner, Shard: shard, Seq: seq, ID: id, At: at}
	}
	es := []harness.LeaseEvent{
		ev("a", s0, "acquired", at(0)),
		ev("b", s1, "acquired", at(0)),
		ev("c", s0, "acquired", at(5000)), // takes s0 over after a is killed at 4000
		ev("c", s1, "acquired", at(100)),  // takes s1 while b still works it
	}
	ds := []harness.Delivery{
		dl("a", s0, "10", "o1", at(1000)),
		dl("a", s0, "11", "o2", at(3900)), // after a's last checkpoint (10)
		dl("c", s0, "11", "o2", at(5100)), // redelivered by its taker: explained
		dl("c", s0, "12", "o3", at(5200)),
		dl("b", s1, "20", "o4", at(1000)),
		dl("c", s1, "20", "o4", at(1100)), // concurrent handling: overlap, unexplained duplicate
		dl("b", s1, "21", "o5", at(2000)),
		dl("c", s1, "21", "o5", at(2100)),
	}
	k := &kill{owner: "a", at: at(4000), shards: []string{s0}}
	ta := compute([]string{"o1", "o2", "o3", "o4", "o5", "o6"}, ds, es, k, 1600*time.Millisecond)
	if ta.Lost != 1 || ta.LostSample[0] != "o6" {
		t.Errorf("lost %d %v, want o6", ta.Lost, ta.LostSample)
	}
	if ta.Failover != time.Second || !ta.Complete {
		t.Errorf("failover %v complete %v, want 1s", ta.Failover, ta.Complete)
	}
	if ta.KilledWindowDups != 1 || ta.CheckpointWindow[s0] != 1 {
		t.Errorf("killed window dups %d, window %v: want o2 only", ta.KilledWindowDups, ta.CheckpointWindow)
	}
	if len(ta.OtherDups) != 2 {
		t.Errorf("other dups %v, want o4 and o5", ta.OtherDups)
	}
	if len(ta.Overlaps) != 1 || !strings.Contains(ta.Overlaps[0], "shard 1") {
		t.Errorf("overlaps %v, want one on shard 1", ta.Overlaps)
	}
	// Handling without ever acquiring the lease.
	ta = compute([]string{"o1"}, []harness.Delivery{dl("z", s0, "1", "o1", at(0))}, nil, nil, time.Second)
	if len(ta.Overlaps) != 1 || !strings.Contains(ta.Overlaps[0], "before acquiring") {
		t.Errorf("overlaps %v, want a delivery before acquiring", ta.Overlaps)
	}
}
