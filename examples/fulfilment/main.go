// Command fulfilment is the fulfilment service of the product page: every
// instance runs this same program against one lease table, and each shard of
// the stream "fulfilment" is read by the one instance holding its lease.
//
// On AWS (credentials and region from the usual places):
//
//	fulfilment --stream fulfilment --table fulfilment-leases
//
// On local emulators (static credentials test/test and region us-east-1
// unless the AWS_* environment says otherwise):
//
//	fulfilment --dynamodb-endpoint-url http://127.0.0.1:8000 \
//	    --kinesis-endpoint-url http://127.0.0.1:4567 --start TRIM_HORIZON
//
// (--endpoint-url sets both, for an emulator that serves both on one port.)
//
// With --fan-out NAME it reads each shard with enhanced fan-out
// (SubscribeToShard: records pushed as they arrive) as the stream consumer
// NAME, which it registers if it does not exist; every instance gives the
// same NAME. Without it (the default) it polls with GetRecords. Kinesis
// refuses a new subscription to a shard within 5 seconds of the previous
// one, so a failover can take up to 5 seconds longer than polled:
//
//	fulfilment --stream fulfilment --table fulfilment-leases --fan-out fulfilment
//
// No emulator serves SubscribeToShard: `go run ./examples/fulfilment/demo
// --fan-out` serves an in-memory Kinesis (kinesisfake.Kinesis) on a
// local endpoint and gives the instances its URL as --kinesis-endpoint-url.
//
// It runs until SIGINT or SIGTERM, then drains, checkpoints and releases its
// leases (a second signal exits at once). Every second it prints one line: the
// shards it holds and how many orders it handled. `go run
// ./examples/fulfilment/demo` runs several instances on the emulators.
//
// With --report FILE it appends, per handled order, the line
//
//	owner shard sequence-number order-id unix-nanoseconds
//
// and, per lease move of this instance, a line starting with "#":
//
//	# owner shard acquired|released|lost|ended unix-nanoseconds
//
// Each line is written with one write(2) as it happens (no fsync), so that a
// process killed with SIGKILL leaves every line it wrote. The demo and its
// test tally deliveries, duplicates and lease tenures from these files.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// Cents is an amount of money in cents.
type Cents int64

// Item is one line of an order.
type Item struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
	Price    Cents  `json:"price"` // per unit
}

// Order is what the shop puts on the stream, one record per order,
// partitioned by customer so that one customer's orders stay in order.
type Order struct {
	ID        string    `json:"id"`
	Customer  string    `json:"customer"`
	Items     []Item    `json:"items"`
	Total     Cents     `json:"total"`
	CreatedAt time.Time `json:"created_at"`
}

// flags are the command line.
type flags struct {
	stream, table, owner string
	endpoint             string // both services
	dynamoEndpoint       string // overrides endpoint for DynamoDB
	kinesisEndpoint      string // overrides endpoint for Kinesis
	start                string
	codec                string
	heartbeat, timeout   time.Duration
	checkpointEvery      int
	checkpointInterval   time.Duration
	shutdownTimeout      time.Duration
	report               string
	status               time.Duration
	logLevel             string
	healthAddr           string
	keyConcurrency       int
	fanOut               string // stream consumer name; empty: polling
}

func parseFlags(args []string) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("fulfilment", flag.ContinueOnError)
	fs.StringVar(&f.stream, "stream", "fulfilment", "Kinesis stream to consume (name or ARN)")
	fs.StringVar(&f.table, "table", "fulfilment-leases", "DynamoDB lease table (string hash key lease_key)")
	fs.StringVar(&f.owner, "owner", "", "this instance's owner id, unique among the instances (default: app-hostname-pid-random)")
	fs.StringVar(&f.endpoint, "endpoint-url", "", "base URL of an emulator serving both DynamoDB and Kinesis (e.g. LocalStack's http://127.0.0.1:4566); empty: AWS")
	fs.StringVar(&f.dynamoEndpoint, "dynamodb-endpoint-url", "", "base URL of a DynamoDB emulator (e.g. DynamoDB Local); overrides --endpoint-url for DynamoDB")
	fs.StringVar(&f.kinesisEndpoint, "kinesis-endpoint-url", "", "base URL of a Kinesis emulator (e.g. kinesalite); overrides --endpoint-url for Kinesis")
	fs.StringVar(&f.start, "start", "LATEST", "where a shard without a checkpoint starts: LATEST or TRIM_HORIZON")
	fs.StringVar(&f.codec, "codec", "msgpack", "record encoding: msgpack or json")
	fs.DurationVar(&f.heartbeat, "heartbeat", 0, "heartbeat interval (default 1.25s, or a fifth of --timeout)")
	fs.DurationVar(&f.timeout, "timeout", 0, "a dead instance's shards move after its heartbeat stood still about this long (default 5s, or 5× --heartbeat)")
	fs.IntVar(&f.checkpointEvery, "checkpoint-every", 1000, "checkpoint after this many acknowledged records...")
	fs.DurationVar(&f.checkpointInterval, "checkpoint-interval", 5*time.Second, "...or this long, whichever comes first")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", kinesislease.DefaultShutdownTimeout, "bound on the drain after SIGINT/SIGTERM")
	fs.StringVar(&f.report, "report", "", "append one line per handled order (\"owner shard seq orderID unixnano\") and per lease move to this file")
	fs.DurationVar(&f.status, "status", time.Second, "how often to print the status line (0: never)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
	fs.IntVar(&f.keyConcurrency, "key-concurrency", 1, "handle this many partition keys of a shard at once (records of one key stay in order)")
	fs.StringVar(&f.fanOut, "fan-out", "", "read with enhanced fan-out (SubscribeToShard) as this stream consumer, registered if need be, the same on every instance; empty: GetRecords polling")
	fs.StringVar(&f.healthAddr, "health-addr", "", "serve /livez, /readyz and /healthz on this address (e.g. 127.0.0.1:8081); empty: none")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case f.heartbeat == 0 && f.timeout == 0:
		f.heartbeat, f.timeout = kinesislease.DefaultHeartbeat, kinesislease.DefaultTimeout
	case f.heartbeat == 0:
		f.heartbeat = f.timeout / 5
	case f.timeout == 0:
		f.timeout = 5 * f.heartbeat
	}
	if f.dynamoEndpoint == "" {
		f.dynamoEndpoint = f.endpoint
	}
	if f.kinesisEndpoint == "" {
		f.kinesisEndpoint = f.endpoint
	}
	return f, nil
}

func main() {
	f, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "fulfilment:", err)
		os.Exit(2)
	}
	if err := run(f, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fulfilment:", err)
		os.Exit(1)
	}
}

// The values of --start (in any case) and --codec.
var (
	startPositions = map[string]kltype.StartPosition{"LATEST": kltype.Latest, "TRIM_HORIZON": kltype.TrimHorizon}
	codecs         = map[string]codec.Codec{"msgpack": codec.Msgpack, "json": codec.JSON}
)

func run(f *flags, stdout, stderr io.Writer) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	start, ok := startPositions[strings.ToUpper(f.start)]
	if !ok {
		return fmt.Errorf("--start %q: want LATEST or TRIM_HORIZON", f.start)
	}
	cdc, ok := codecs[f.codec]
	if !ok {
		return fmt.Errorf("--codec %q: want msgpack or json", f.codec)
	}

	// Signals: the first one starts the graceful shutdown, a second one
	// exits at once (the default action, restored once ctx is done).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }()

	// One aws.Config for the lease store and the Kinesis client: one
	// account, one region.
	cfg, err := loadConfig(ctx, f.dynamoEndpoint != "" || f.kinesisEndpoint != "")
	if err != nil {
		return err
	}
	var storeOpts []dynamo.Option
	var kinOpts []func(*kinesis.Options)
	if f.dynamoEndpoint != "" {
		storeOpts = append(storeOpts, dynamo.WithDynamoDBOptions(func(o *dynamodb.Options) {
			o.BaseEndpoint = aws.String(f.dynamoEndpoint)
			// DynamoDB Local omits the CRC32 header on errors.
			o.DisableValidateResponseChecksum = true
		}))
	}
	if f.kinesisEndpoint != "" {
		kinOpts = append(kinOpts, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(f.kinesisEndpoint) })
	}

	rep, err := openReport(f.report)
	if err != nil {
		return err
	}
	defer rep.Close()

	ful := &fulfiller{log: log, report: rep}
	opts := []kinesislease.Option{
		kinesislease.WithApp("fulfilment", "0.1.0"),
		kinesislease.WithHeartbeat(f.heartbeat, f.timeout),
		kinesislease.WithLeaseStore(dynamo.New(cfg, f.table, storeOpts...)),
		kinesislease.WithKinesisClient(kinesis.NewFromConfig(cfg, kinOpts...)),
		kinesislease.WithLogger(log),
		kinesislease.WithShutdownTimeout(f.shutdownTimeout),
		kinesislease.WithHooks(leaseReport{ful}),
	}
	if f.owner != "" {
		opts = append(opts, kinesislease.WithOwner(f.owner))
	}
	svc, err := kinesislease.New(cfg, opts...)
	if err != nil {
		return err
	}
	ful.owner = svc.Owner()
	ful.log = log.With("owner", ful.owner)
	subOpts := []kinesislease.SubscribeOption{
		kinesislease.WithCodec(cdc),
		kinesislease.WithStartPosition(start),
		kinesislease.WithCheckpoint(f.checkpointEvery, f.checkpointInterval),
		kinesislease.WithKeyConcurrency(f.keyConcurrency),
	}
	reading := "polling"
	if f.fanOut != "" {
		subOpts = append(subOpts, kinesislease.WithEnhancedFanOut(f.fanOut))
		reading = "enhanced fan-out as consumer " + f.fanOut
	}
	if err := kinesislease.Subscribe(svc, f.stream, ful.fulfil, subOpts...); err != nil {
		return err
	}

	// An instance delivers while its last heartbeat was sent less than 5/6
	// of the timeout ago (kinesislease.WithHeartbeat): its fence.
	fmt.Fprintf(stdout, "fulfilment %s: stream %s (%s), lease table %s, heartbeat %v, timeout %v, fence %v\n",
		svc.Owner(), f.stream, reading, f.table, f.heartbeat, f.timeout, fence(f.timeout))
	statusDone := make(chan struct{})
	var wg sync.WaitGroup
	if f.status > 0 {
		wg.Go(func() {
			t := time.NewTicker(f.status)
			defer t.Stop()
			for {
				select {
				case <-statusDone:
					return
				case <-t.C:
					fmt.Fprintln(stdout, ful.status(svc.Held(f.stream)))
				}
			}
		})
	}
	if f.healthAddr != "" {
		srv := &http.Server{Addr: f.healthAddr, Handler: healthHandler(svc.Health), ReadHeaderTimeout: 5 * time.Second}
		ln, err := net.Listen("tcp", f.healthAddr)
		if err != nil {
			return fmt.Errorf("--health-addr: %w", err)
		}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		fmt.Fprintf(stdout, "health on http://%s/livez, /readyz, /healthz\n", ln.Addr())
	}
	err = svc.Run(ctx)
	close(statusDone)
	wg.Wait()
	fmt.Fprintln(stdout, ful.status(nil), "(stopped)")
	return err
}

// loadConfig returns the aws.Config of the lease store and the Kinesis
// client. For emulators, the region and credentials default to us-east-1 and
// test/test unless the AWS_* environment names others.
func loadConfig(ctx context.Context, emulators bool) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if emulators {
		if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
			opts = append(opts, config.WithRegion("us-east-1"))
		}
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
			opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	return cfg, nil
}

// fulfiller fulfils orders.
type fulfiller struct {
	owner   string
	log     *slog.Logger
	report  *report
	handled atomic.Int64
}

// fulfil fulfils one order: here, it logs it and acknowledges it.
func (f *fulfiller) fulfil(ctx context.Context, o Order) error {
	rec, ok := kinesislease.RecordFrom(ctx)
	if !ok {
		rec = &kltype.Record{} // not called by the library
	}
	f.log.InfoContext(ctx, "order fulfilled", "order.id", o.ID, "customer", o.Customer,
		"shard", rec.ShardID, "seq", rec.SequenceNumber)
	if err := f.report.line(f.owner, rec.ShardID, rec.SequenceNumber, o.ID); err != nil {
		// Not acknowledging would hold the shard until the file is
		// writable; the report is a demo aid, so log and go on.
		f.log.ErrorContext(ctx, "writing the report", "err", err)
	}
	f.handled.Add(1)
	return nil
}

// leaseReport writes this instance's lease moves to the report, for the
// demo's tally: a lease hook (kltype.HookLeaseAcquired and the others).
type leaseReport struct{ f *fulfiller }

func (r leaseReport) OnLeaseAcquired(_ context.Context, l kltype.LeaseInfo) {
	r.line(l.ShardID, "acquired")
}
func (r leaseReport) OnLeaseReleased(_ context.Context, l kltype.LeaseInfo) {
	r.line(l.ShardID, "released")
}
func (r leaseReport) OnLeaseLost(_ context.Context, l kltype.LeaseInfo) { r.line(l.ShardID, "lost") }
func (r leaseReport) OnShardEnded(s kltype.ShardInfo)                   { r.line(s.ShardID, "ended") }

func (r leaseReport) line(shard, kind string) {
	if err := r.f.report.line("#", r.f.owner, shard, kind); err != nil {
		r.f.log.Error("writing the report", "err", err)
	}
}

// status is the one-line status: shards held (short ids) and orders handled.
func (f *fulfiller) status(held []string) string {
	short := make([]string, len(held))
	for i, id := range held {
		short[i] = shortShard(id)
	}
	return fmt.Sprintf("%s %s holds [%s] handled %d",
		time.Now().Format("15:04:05"), f.owner, strings.Join(short, " "), f.handled.Load())
}

// shortShard turns shardId-000000000003 into 3.
func shortShard(id string) string {
	s := strings.TrimLeft(strings.TrimPrefix(id, "shardId-"), "0")
	if s == "" {
		return "0"
	}
	return s
}

// report appends lines to a file, one write per line; a nil *report
// discards them.
type report struct {
	mu sync.Mutex
	f  *os.File
}

func openReport(path string) (*report, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--report: %w", err)
	}
	return &report{f: f}, nil
}

// line writes the fields and the time (unix ns), space-separated.
func (r *report) line(fields ...string) error {
	if r == nil {
		return nil
	}
	b := []byte(strings.Join(fields, " "))
	b = append(b, ' ')
	b = strconv.AppendInt(b, time.Now().UnixNano(), 10)
	b = append(b, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := r.f.Write(b)
	return err
}

func (r *report) Close() error {
	if r == nil {
		return nil
	}
	return r.f.Close()
}

// fence is how long after its last successful heartbeat was sent an
// instance may go on delivering: 5/6 of the timeout (see
// kinesislease.WithHeartbeat).
func fence(timeout time.Duration) time.Duration {
	return (timeout - timeout/6).Round(time.Millisecond)
}
