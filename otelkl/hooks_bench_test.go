package otelkl_test

// The cost of hooks to a consumer, with and without this package's: the
// benchmarks live here, not in the root package, so that the root module
// does not require this module and the OpenTelemetry SDK.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
	"github.com/kinesislease/kinesislease/otelkl"
)

// hookNoop implements every Hook interface and does nothing: the cost of
// the hook calls themselves.
type hookNoop struct{}

func (hookNoop) OnLeaseAcquired(context.Context, kltype.LeaseInfo) {}
func (hookNoop) OnLeaseReleased(context.Context, kltype.LeaseInfo) {}
func (hookNoop) OnLeaseLost(context.Context, kltype.LeaseInfo)     {}
func (hookNoop) OnShardStarted(kltype.ShardInfo)                   {}
func (hookNoop) OnShardEnded(kltype.ShardInfo)                     {}
func (hookNoop) OnBatchFetched(kltype.BatchInfo)                   {}
func (hookNoop) OnRecordHandled(kltype.RecordInfo)                 {}
func (hookNoop) OnCheckpointWritten(kltype.CheckpointInfo)         {}
func (hookNoop) OnThrottled(kltype.ThrottleInfo)                   {}
func (hookNoop) OnDeadLettered(*kltype.DeadLetterRecord)           {}
func (hookNoop) OnCall(kltype.CallInfo)                            {}

var _ interface {
	kltype.HookLeaseAcquired
	kltype.HookLeaseReleased
	kltype.HookLeaseLost
	kltype.HookShardStarted
	kltype.HookShardEnded
	kltype.HookBatchFetched
	kltype.HookRecordHandled
	kltype.HookCheckpointWritten
	kltype.HookThrottled
	kltype.HookDeadLettered
	kltype.HookCall
} = hookNoop{}

// The hook benchmarks read a stream of their own, made once per binary, so
// that their figures do not move with the other benchmarks' settings.
var (
	hookBenchOnce    sync.Once
	hookBenchStream  string
	hookBenchRecords = 20000
)

func hookBenchSetup(b *testing.B) (*kinesis.Client, string) {
	kc := testutil.KinesisClient(b, testutil.Kinesalite)
	hookBenchOnce.Do(func() {
		hookBenchStream = fmt.Sprintf("hookbench-%d", time.Now().UnixNano())
		if _, err := kc.CreateStream(context.Background(), &kinesis.CreateStreamInput{StreamName: aws.String(hookBenchStream), ShardCount: aws.Int32(2)}); err != nil {
			b.Fatal(err)
		}
		waiter := kinesis.NewStreamExistsWaiter(kc, func(o *kinesis.StreamExistsWaiterOptions) { o.MinDelay = 20 * time.Millisecond })
		if err := waiter.Wait(context.Background(), &kinesis.DescribeStreamInput{StreamName: aws.String(hookBenchStream)}, time.Minute); err != nil {
			b.Fatal(err)
		}
		hookBenchPut(b, kc, hookBenchStream, hookBenchRecords)
		// Warm kinesalite up: its first reads of a stream are much slower.
		hookBenchConsume(b, kc, hookBenchStream, nil)
	})
	return kc, hookBenchStream
}

// hookBenchOrder is a record of the hook benchmarks' stream.
type hookBenchOrder struct {
	ID  int    `json:"id"`
	Key string `json:"key"`
}

// hookBenchPut writes orders 0..n-1, spread over 17 partition keys.
func hookBenchPut(b *testing.B, kc *kinesis.Client, stream string, n int) {
	b.Helper()
	for start := 0; start < n; start += 500 {
		var entries []ktypes.PutRecordsRequestEntry
		for id := start; id < min(n, start+500); id++ {
			o := hookBenchOrder{ID: id, Key: fmt.Sprintf("customer-%d", id%17)}
			data, _ := json.Marshal(o)
			entries = append(entries, ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(o.Key)})
		}
		out, err := kc.PutRecords(testutil.WithoutFaults(context.Background()), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		if err != nil {
			b.Fatal(err)
		}
		if aws.ToInt32(out.FailedRecordCount) != 0 {
			b.Fatalf("PutRecords: %d failed", aws.ToInt32(out.FailedRecordCount))
		}
	}
}

// hookBenchLog writes the service's log lines to the benchmark's log.
type hookBenchLog struct{ b *testing.B }

func (w hookBenchLog) Write(p []byte) (int, error) {
	w.b.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// hookBenchConsume runs one instance (memory store, no-op handler, JSON decoding)
// with hooks until it has handled every record of stream from TRIM_HORIZON,
// then stops it; it returns the wall time of the run.
func hookBenchConsume(b *testing.B, kc *kinesis.Client, stream string, hooks []kltype.Hook) time.Duration {
	b.Helper()
	opts := []kinesislease.Option{kinesislease.WithKinesisClient(kc),
		kinesislease.WithLeaseStore(memory.New()), kinesislease.WithLogger(slog.New(slog.NewTextHandler(hookBenchLog{b}, &slog.HandlerOptions{Level: slog.LevelWarn})))}
	if hooks != nil {
		opts = append(opts, kinesislease.WithHooks(hooks...))
	}
	svc, err := kinesislease.New(testutil.Config(b), opts...)
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	done := make(chan struct{})
	err = kinesislease.Subscribe(svc, stream, func(ctx context.Context, o hookBenchOrder) error {
		if n.Add(1) == int64(hookBenchRecords) {
			close(done)
		}
		return nil
	}, kinesislease.WithStartPosition(kltype.TrimHorizon))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	t0 := time.Now()
	go func() { ran <- svc.Run(ctx) }()
	<-done
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

// BenchmarkHooksConsume: records per second through one instance (memory
// store, no-op handler, JSON decoding) reading 20,000 records of a 2-shard
// kinesalite stream from TRIM_HORIZON, as the root package's BenchmarkConsume, with no hook,
// with a no-op hook implementing every Hook interface, and with the
// OpenTelemetry adapter (SDK MeterProvider, ManualReader).
//
// The wall time is mostly kinesalite's and the read pacing's, and varies by
// tens of percent from run to run; cpu-ns/record, this process's CPU time
// (user and system, where the OS tells it) per record, shows what hooks add
// to the consumer's own work. BenchmarkRecordHook isolates the hook calls.
func BenchmarkHooksConsume(b *testing.B) {
	kc, stream := hookBenchSetup(b)
	for _, bc := range []struct {
		name  string
		hooks func(b *testing.B) []kltype.Hook
	}{
		{"none", func(*testing.B) []kltype.Hook { return nil }},
		{"noop", func(*testing.B) []kltype.Hook { return []kltype.Hook{hookNoop{}} }},
		{"otel", func(b *testing.B) []kltype.Hook {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			h, err := otelkl.New(mp)
			if err != nil {
				b.Fatal(err)
			}
			return []kltype.Hook{h}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var wall time.Duration
			cpu0 := hookBenchCPU()
			for range b.N {
				wall += hookBenchConsume(b, kc, stream, bc.hooks(b))
			}
			cpu := hookBenchCPU() - cpu0
			records := float64(b.N * hookBenchRecords)
			b.ReportMetric(records/wall.Seconds(), "records/s")
			if cpu0 > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/records, "cpu-ns/record")
			}
		})
	}
}

// BenchmarkRecordHook: the per-record cost of the hooks themselves, called
// through the hooks API as a worker calls them (the worker's own side, a
// length check, a clock read and a RecordInfo, cannot be timed without its
// unexported code): one OnRecordHandled per record and one OnBatchFetched
// per 100 records, on one shard, and in parallel on 8 shards.
func BenchmarkRecordHook(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	oh, err := otelkl.New(mp)
	if err != nil {
		b.Fatal(err)
	}
	type recordHook interface {
		kltype.HookRecordHandled
		kltype.HookBatchFetched
	}
	for _, bc := range []struct {
		name string
		h    recordHook
	}{{"noop", hookNoop{}}, {"otel", oh}} {
		run := func(pb interface{ Next() bool }, shard string) {
			info := kltype.RecordInfo{Stream: "bench", ShardID: shard, SequenceNumber: "49680699815135250590417184751679121418940711877092573202",
				Bytes: 120, Attempts: 1, Outcome: kltype.Acked, Duration: 150 * time.Microsecond}
			batch := kltype.BatchInfo{Stream: "bench", ShardID: shard, Records: 100, Bytes: 12000, MillisBehindLatest: 1000}
			for i := 0; pb.Next(); i++ {
				if i%100 == 0 {
					bc.h.OnBatchFetched(batch)
				}
				bc.h.OnRecordHandled(info)
			}
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			run(hookBenchLoop{b: b}, "shardId-000000000000")
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(1)
			var id atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				run(pb, fmt.Sprintf("shardId-%012d", id.Add(1)%8))
			})
		})
	}
}

// hookBenchCPU returns the CPU time (user and system) this process has used,
// from /proc/self/stat (Linux), or 0 where that is not available. It counts
// every thread of the process and nothing of the emulators', unlike the Go
// runtime's estimates, which count a goroutine waiting for a CPU as running.
func hookBenchCPU() time.Duration {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name in parentheses; utime and stime are
	// the 14th and 15th fields, in clock ticks (USER_HZ, 100 on Linux).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const userHZ = 100
	return time.Duration(utime+stime) * time.Second / userHZ
}

// hookBenchLoop adapts b.Loop to the Next of testing.PB.
type hookBenchLoop struct{ b *testing.B }

func (c hookBenchLoop) Next() bool { return c.b.Loop() }
