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
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testutil"
)

func main() { os.Exit(demoMain()) }

func demoMain() int {
	var (
		orders    = flag.Int("orders", 3000, "orders to publish")
		instances = flag.Int("instances", 3, "instances of the fulfilment service")
		shards    = flag.Int("shards", 4, "shards of the stream")
		over      = flag.Duration("publish-over", 10*time.Second, "publish the orders over this long")
		lease     = flag.Duration("lease", 3*time.Second, "lease duration of the instances")
		renew     = flag.Duration("renew", time.Second, "lease renewal interval")
		scan      = flag.Duration("scan", time.Second, "lease scan interval")
		cpEvery   = flag.Duration("checkpoint-interval", time.Second, "checkpoint interval of the instances")
		noKill    = flag.Bool("no-kill", false, "do not SIGKILL an instance")
		measure   = flag.Bool("measure-failover", false, "measure the failover time after a SIGKILL with the default and the short lease settings, then exit")
		trials    = flag.Int("trials", 1, "with --measure-failover: runs per setting")
		timeout   = flag.Duration("timeout", 0, "stop everything after this long (default 85s; with --measure-failover 30s + 75s per run)")
		keep      = flag.Bool("keep", false, "keep the directory with the instances' logs and reports")
	)
	flag.Parse()
	if *timeout == 0 {
		*timeout = 85 * time.Second
		if *measure {
			*timeout = 30*time.Second + time.Duration(2**trials)*75*time.Second
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }() // a second Ctrl-C exits at once
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	removeStaleDirs()
	pattern := fmt.Sprintf("fulfilment-demo-p%d-", os.Getpid())
	if *keep {
		pattern = "fulfilment-demo-kept-"
	}
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	if *keep {
		defer fmt.Printf("logs and reports kept in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	begin := time.Now()
	fmt.Printf("starting DynamoDB Local and kinesalite...\n")
	bench, err := testutil.Start(ctx, "", testutil.DynamoDBLocal, testutil.Kinesalite)
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	defer bench.Close()
	e := env{
		DynamoEndpoint:  bench.Endpoint(testutil.DynamoDBLocal),
		KinesisEndpoint: bench.Endpoint(testutil.Kinesalite),
		AWS:             bench.Config(),
		Dynamo:          bench.DynamoClient(),
		Kinesis:         bench.KinesisClient(testutil.Kinesalite),
	}
	fmt.Printf("DynamoDB Local at %s, kinesalite at %s (%.1fs)\n", e.DynamoEndpoint, e.KinesisEndpoint, time.Since(begin).Seconds())

	bin, err := build(ctx, dir, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	if *measure {
		return measureFailover(ctx, e, dir, bin, *instances, int32(*shards), *trials)
	}

	cfg := config{
		Stream: "fulfilment", Table: "fulfilment-leases",
		Orders: *orders, PublishOver: *over, Instances: *instances,
		Lease: *lease, Renew: *renew, Scan: *scan, CheckpointInterval: *cpEvery,
		Kill: !*noKill, KillAt: 0.5,
		Dir: dir, Binary: bin, Out: os.Stdout,
	}
	if err := setup(ctx, e, cfg.Table, cfg.Stream, int32(*shards)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("lease table %s, stream %s with %d shards\n", cfg.Table, cfg.Stream, *shards)
	t, err := run(ctx, cfg, e)
	if err != nil {
		stopped(ctx, begin, *timeout, err)
		return 1
	}
	fmt.Println()
	t.print(os.Stdout)
	fmt.Printf("demo finished in %.1fs\n", time.Since(begin).Seconds())
	if t.Lost > 0 || len(t.Overlaps) > 0 || (cfg.Kill && !t.Complete) {
		return 1
	}
	return 0
}

// removeStaleDirs removes the directories of earlier demos that were killed
// before they could (their process is gone).
func removeStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "fulfilment-demo-p*-*"))
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(d), "fulfilment-demo-p%d-", &pid); err == nil && pid > 0 && processGone(pid) {
			_ = os.RemoveAll(d)
		}
	}
}

// stopped reports why the run stopped: an interrupt, the timeout, or err.
func stopped(ctx context.Context, begin time.Time, timeout time.Duration, err error) {
	switch {
	case errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		fmt.Fprintf(os.Stderr, "demo: timeout (--timeout %v); every process it started is stopped\n", timeout)
	case ctx.Err() != nil:
		fmt.Fprintf(os.Stderr, "demo: %v; every process it started is stopped\n", context.Cause(ctx))
	default:
		fmt.Fprintln(os.Stderr, err)
	}
}

// measureFailover runs, for the default and the short lease settings, trials
// with no orders: every shard held, the instance holding the most SIGKILLed,
// the time until every one of its shards is held again.
func measureFailover(ctx context.Context, e env, dir, bin string, instances int, shards int32, trials int) int {
	settings := []struct {
		name               string
		lease, renew, scan time.Duration
	}{
		{"default", kinesislease.DefaultLeaseDuration, kinesislease.DefaultRenewInterval, kinesislease.DefaultLeaseDuration},
		{"short", 3 * time.Second, time.Second, time.Second},
	}
	type result struct {
		name     string
		cfg      config
		measured []time.Duration
	}
	var results []result
	for _, s := range settings {
		r := result{name: s.name}
		for i := range trials {
			name := fmt.Sprintf("fulfilment-failover-%s-%d", s.name, i)
			runDir := filepath.Join(dir, name)
			if err := os.Mkdir(runDir, 0o755); err != nil {
				fmt.Fprintln(os.Stderr, "demo:", err)
				return 1
			}
			cfg := config{
				Stream: name, Table: name, Instances: instances,
				Lease: s.lease, Renew: s.renew, Scan: s.scan, CheckpointInterval: time.Second,
				Kill: true, Dir: runDir, Binary: bin, Out: os.Stdout,
			}
			r.cfg = cfg
			if err := setup(ctx, e, name, name, shards); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Printf("\n== failover with the %s settings: lease %v, renew %v, scan %v\n", s.name, s.lease, s.renew, s.scan)
			t, err := run(ctx, cfg, e)
			if err != nil {
				stopped(ctx, time.Now(), 0, err)
				return 1
			}
			if !t.Complete {
				fmt.Fprintln(os.Stderr, "demo: the failover did not complete")
				return 1
			}
			r.measured = append(r.measured, t.Failover)
		}
		results = append(results, r)
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

// setup creates the lease table and the stream, and waits until both are
// active.
func setup(ctx context.Context, e env, table, stream string, shards int32) error {
	_, err := e.Dynamo.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("lease_key"), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("lease_key"), KeyType: dtypes.KeyTypeHash}},
		BillingMode:          dtypes.BillingModePayPerRequest,
	})
	if err != nil {
		return fmt.Errorf("demo: creating table %s: %w", table, err)
	}
	if err := dynamodb.NewTableExistsWaiter(e.Dynamo, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 50 * time.Millisecond
	}).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 30*time.Second); err != nil {
		return fmt.Errorf("demo: waiting for table %s: %w", table, err)
	}
	if _, err := e.Kinesis.CreateStream(ctx, &kinesis.CreateStreamInput{
		StreamName: aws.String(stream), ShardCount: aws.Int32(shards),
	}); err != nil {
		return fmt.Errorf("demo: creating stream %s: %w", stream, err)
	}
	for {
		out, err := e.Kinesis.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			return fmt.Errorf("demo: waiting for stream %s: %w", stream, err)
		}
		if out.StreamDescriptionSummary.StreamStatus == ktypes.StreamStatusActive {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("demo: waiting for stream %s", stream), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
