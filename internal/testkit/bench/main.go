// Command bench measures the kinesislease consumer against an in-process
// Kinesis endpoint: a net/http server on 127.0.0.1 speaking the AWS JSON
// 1.1 protocol of the SDK's Kinesis client (ListShards, GetShardIterator,
// GetRecords, DescribeStreamSummary) and serving a fixed, pre-generated data
// set of open shards. The clients are real SDK v2 Kinesis clients pointed
// at it with BaseEndpoint.
//
// That server is the bench's own, not package kinesisfake: it generates
// records from their shard and index rather than holding records put (a
// small data set is encoded once into the fragments of GetRecords' answers,
// a large one per request, so that the server holds next to nothing), and
// answers only the four calls above, so that its own CPU stays small and is
// measured apart from the library's. kinesisfake holds every record put and
// serves Kinesis' whole API: the latency mode, which puts records as it
// runs and reads them with enhanced fan-out, runs on it.
//
//	go run ./internal/testkit/bench [flags]     (or: make bench-run BENCHFLAGS="[flags]")
//
// Modes:
//
//	-mode throughput (default)
//	    -records records (default 200,000) over -shards shards (default 4),
//	    about 100-byte JSON each (-size N: about N bytes; -codec msgpack:
//	    the same Order in MessagePack). For -rounds rounds (default 5) it
//	    alternates (a) the library: one Service, memory lease store,
//	    Subscribe[Order] with a no-op handler and the records' codec,
//	    TRIM_HORIZON, WithPolling(1ms, 1ms, 10000) so that pacing is off,
//	    until every record is handled, with GetRecords in CBOR (the
//	    default), in JSON (EncodingJSON) and on the SDK's path
//	    (EncodingSDK); and (b) a plain SDK loop: a goroutine per shard
//	    doing GetShardIterator TRIM_HORIZON and GetRecords (Limit 10,000),
//	    decoding each record with the same codec into the same struct. Each
//	    side of each round gets a fresh server (same data). It prints wall
//	    time, records/s and process CPU (getrusage user+sys) per record per
//	    round, then medians, ranges and the library/plain ratios. The
//	    server's own handler CPU is measured on its thread
//	    (RUSAGE_THREAD, -server-cpu) and reported apart, so "client"
//	    CPU is the process' minus the server's.
//
//	-mode throughput -shards 64 -slow 1
//	    -slow shards (the last ones) have a handler sleeping -slow-delay
//	    (default 4ms) per record; the others are no-ops. Each round runs
//	    the library on all shards ("beside") and on the fast shards alone
//	    ("solo", a stream without the slow shards) and reports the fast
//	    shards' records/s in both, and beside/solo. No plain loop.
//
//	-mode memory
//	    -shards shards (default 64), each with a backlog of -backlog
//	    records (default: more than the handler can drain in -duration) of
//	    -size bytes (default 1 KiB), generated per request (the server holds
//	    no data). The handler sleeps -slow-delay (4ms) per record; library
//	    defaults otherwise (pacing, Limit). Runs for -duration (default 2m),
//	    sampling VmRSS (/proc/self/status) and runtime HeapInuse every
//	    second, printing every 5s, then peak/min/final. The baseline (RSS
//	    and heap with the server running, before the library starts) is
//	    printed and subtracted. -budget-bytes N passes WithMemoryBudget(N,
//	    1<<40); 0 keeps the library's default (32 MiB, 100,000 records), and
//	    -budget-bytes 1099511627776 is a budget that never binds.
//
//	-mode latency
//	    Put-to-handler latency and consumer CPU per record, polling at the
//	    library's defaults against enhanced fan-out (WithEnhancedFanOut),
//	    alternating each round (-rounds, default 3). A second process
//	    (this binary, -mode latency-load) serves an in-memory Kinesis
//	    (kinesisfake.Kinesis.ServeHTTP) with the stream (-shards,
//	    default 2), which both sides read over HTTP with the SDK, and puts
//	    -records records (default 1,000) at -rate a second (default 100),
//	    one PutRecord each, stamped with the time of the put. The handler
//	    takes the latency as its own clock less the stamp; CPU per record
//	    is this process' (the consumer's alone) over the window. It prints
//	    p50, p99 and CPU per round and side, then medians and ranges over
//	    the rounds, and the ratios. A third side, a plain SDK fan-out loop
//	    (a goroutine per shard ranging over the SDK's Events(), encoding/json
//	    per record, no lease), alternates with the two. The fan-out side's latency is the
//	    in-memory push, not Kinesis' own (about 70ms).
//
// Other flags: -cpuprofile FILE writes CPU profiles per side and round
// (FILE.lib.N and FILE.plain.N; FILE in memory mode): `go tool pprof -top
// FILE.lib.*` merges them. -v logs the library at INFO.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

type flags struct {
	mode        string
	rounds      int
	records     int
	shards      int
	slow        int
	slowDelay   time.Duration
	duration    time.Duration
	backlog     int
	size        int
	budgetBytes int64
	cpuprofile  string
	serverCPU   bool
	verbose     bool
	rate        int
	codec       string
	limit       int
}

func main() {
	var f flags
	flag.StringVar(&f.mode, "mode", "throughput", "throughput, memory or latency")
	flag.IntVar(&f.rounds, "rounds", 5, "throughput: rounds (each runs the library and the plain loop)")
	flag.IntVar(&f.records, "records", 200000, "throughput: records in all, split evenly over the shards")
	flag.IntVar(&f.shards, "shards", 0, "shards (0: 4 in throughput mode, 64 in memory mode)")
	flag.IntVar(&f.slow, "slow", 0, "throughput: shards whose handler sleeps -slow-delay per record (compared beside vs solo)")
	flag.DurationVar(&f.slowDelay, "slow-delay", 4*time.Millisecond, "handler sleep per record of a slow shard (memory mode: every shard)")
	flag.DurationVar(&f.duration, "duration", 2*time.Minute, "memory: how long to run")
	flag.IntVar(&f.backlog, "backlog", 0, "memory: records per shard (0: 1.5 × what the handler drains in -duration, at least 20,000)")
	flag.IntVar(&f.size, "size", 1024, "memory: bytes of each record's data (throughput: when set; else about 100)")
	flag.IntVar(&f.limit, "limit", 10000, "throughput: the library's GetRecords Limit (the plain loop's stays 10,000)")
	flag.StringVar(&f.codec, "codec", "json", "throughput: the records' encoding, json or msgpack (codec.Msgpack on both sides)")
	flag.Int64Var(&f.budgetBytes, "budget-bytes", 0, "memory: WithMemoryBudget(N, 1<<40); 0: the library default")
	flag.StringVar(&f.cpuprofile, "cpuprofile", "", "write CPU profiles to FILE.lib.N / FILE.plain.N (memory mode: FILE)")
	flag.BoolVar(&f.serverCPU, "server-cpu", true, "measure the in-process server's handler CPU (thread CPU time) apart")
	flag.BoolVar(&f.verbose, "v", false, "log the library at INFO (default WARN)")
	flag.IntVar(&f.rate, "rate", 100, "latency: records put a second")
	flag.Parse()

	var err error
	switch f.mode {
	case "throughput":
		if f.shards == 0 {
			f.shards = 4
		}
		if f.slow > 0 {
			err = runSlow(f)
		} else {
			err = runThroughput(f)
		}
	case "latency":
		if f.shards == 0 {
			f.shards = 2
		}
		if !flagSet("records") {
			f.records = 1000
		}
		if !flagSet("rounds") {
			f.rounds = 3
		}
		err = runLatency(f)
	case "latency-load":
		err = runLoad(f)
	case "memory":
		if f.shards == 0 {
			f.shards = 64
		}
		err = runMemory(f)
	default:
		err = fmt.Errorf("unknown -mode %q (throughput, memory or latency)", f.mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// flagSet reports whether the command line set flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

func logger(f flags) *slog.Logger {
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// awsConfig is what internal/testkit/testutil's Bench.Config gives the emulators'
// clients: static credentials, the SDK's standard retryer and an HTTP client
// on the SDK's default transport, reading no environment or shared config.
func awsConfig(tr *http.Transport) aws.Config {
	return aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Retryer:     func() aws.Retryer { return retry.NewStandard() },
		HTTPClient:  &http.Client{Transport: tr},
	}
}

// newClient returns a Kinesis client for the server at url, its aws.Config
// and a func closing its idle connections.
func newClient(url string) (*kinesis.Client, aws.Config, func()) {
	tr := awshttp.NewBuildableClient().GetTransport()
	cfg := awsConfig(tr)
	kc := kinesis.NewFromConfig(cfg, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(url) })
	return kc, cfg, tr.CloseIdleConnections
}
