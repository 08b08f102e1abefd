package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// result is one side of one round.
type result struct {
	records   int
	wall      time.Duration // from Run (or the first call) until every record counted was handled
	first     time.Duration // until the first record was handled
	all       time.Duration // until every shard had a record handled
	before    int           // records handled until then
	cpu       time.Duration // process user+sys over wall
	serverCPU time.Duration // the server's handler thread CPU over wall
	calls     int64         // GetRecords calls served
	empty     int64         // of which returned no record
	limits    string        // the Limits asked for
	shutdown  time.Duration // library: from cancel until Run returned
}

func (r result) perSec() float64 { return float64(r.records) / r.wall.Seconds() }

// steadyPerSec is records/s from the first record handled on: the
// library's start (a new stream on a new table waits two heartbeats before
// it creates the rows) left out, as for a service restarted on its table.
func (r result) steadyPerSec() float64 { return float64(r.records) / (r.wall - r.first).Seconds() }
func (r result) cpuPerRec() float64    { return float64(r.cpu.Nanoseconds()) / float64(r.records) }

// allPerSec is records/s once every shard is read: the start (the
// library takes a new stream's leases over two rounds) left out.
func (r result) allPerSec() float64 {
	return float64(r.records-r.before) / (r.wall - r.all).Seconds()
}
func (r result) clientPerRec() float64 {
	return float64((r.cpu - r.serverCPU).Nanoseconds()) / float64(r.records)
}
func (r result) serverPerRec() float64 {
	return float64(r.serverCPU.Nanoseconds()) / float64(r.records)
}

func (r result) String() string {
	return fmt.Sprintf("%7d rec in %7.3fs = %9s rec/s  CPU %6.3fs = %6s ns/rec (server %5s, client %6s)  first rec %6.1fms  %4d GetRecords (%d empty; %s)",
		r.records, r.wall.Seconds(), commas(r.perSec()), r.cpu.Seconds(), commas(r.cpuPerRec()),
		commas(r.serverPerRec()), commas(r.clientPerRec()), float64(r.first.Microseconds())/1000, r.calls, r.empty, r.limits)
}

// firstTimer records the first call's time since start, and (markShard)
// when every shard had a record handled and how many records were by then.
type firstTimer struct {
	start time.Time
	ns    atomic.Int64

	shards int
	all    atomic.Bool
	mu     sync.Mutex
	seen   map[string]bool
	before int
	allNs  int64
}

// markShard counts a record of shard until every shard had one: cheap
// (one atomic load) after.
func (t *firstTimer) markShard(shard string) {
	if t.all.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.all.Load() {
		return
	}
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	t.seen[shard] = true
	t.before++
	if len(t.seen) == t.shards {
		t.allNs = int64(time.Since(t.start))
		t.all.Store(true)
	}
}

func (t *firstTimer) allResult() (time.Duration, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Duration(t.allNs), t.before
}

func (t *firstTimer) mark() {
	if t.ns.Load() == 0 {
		t.ns.CompareAndSwap(0, int64(time.Since(t.start)))
	}
}

// libraryRound runs the library over ds until every record of the shards
// not in slow was handled. Records of slow shards sleep delay each.
func libraryRound(f flags, ds *Dataset, slow map[string]bool, delay time.Duration, polling bool, profile string, extra ...kinesislease.Option) (result, error) {
	srv, err := StartServer(ds, f.serverCPU)
	if err != nil {
		return result{}, err
	}
	defer srv.Close()
	kc, cfg, closeIdle := newClient(srv.URL)
	defer closeIdle()

	want := ds.Records * (ds.Shards - len(slow))
	var n atomic.Int64
	done := make(chan struct{})
	ft := &firstTimer{shards: ds.Shards - len(slow)}
	svc, err := kinesislease.New(cfg, append([]kinesislease.Option{kinesislease.WithKinesisClient(kc),
		kinesislease.WithLeaseStore(memory.New()), kinesislease.WithLogger(logger(f))}, extra...)...)
	if err != nil {
		return result{}, err
	}
	handler := func(ctx context.Context, o Order) error {
		if slow != nil {
			if rec, _ := kinesislease.RecordFrom(ctx); rec != nil && slow[rec.ShardID] {
				time.Sleep(delay)
				return nil
			}
		}
		ft.mark()
		if !ft.all.Load() {
			if rec, _ := kinesislease.RecordFrom(ctx); rec != nil {
				ft.markShard(rec.ShardID)
			}
		}
		if n.Add(1) == int64(want) {
			close(done)
		}
		return nil
	}
	opts := []kinesislease.SubscribeOption{kinesislease.WithStartPosition(kltype.TrimHorizon)}
	if ds.msgpack {
		opts = append(opts, kinesislease.WithCodec(codec.Msgpack))
	}
	if polling {
		opts = append(opts, kinesislease.WithPolling(time.Millisecond, time.Millisecond, int32(f.limit)))
	}
	if err := kinesislease.Subscribe(svc, ds.Stream, handler, opts...); err != nil {
		return result{}, err
	}

	runtime.GC()
	stop, err := startProfile(profile)
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	cpu0, scpu0 := processCPU(), srv.CPUNanos.Load()
	ft.start = time.Now()
	go func() { ran <- svc.Run(ctx) }()
	select {
	case <-done:
	case err := <-ran:
		stop()
		return result{}, fmt.Errorf("library: Run returned before every record was handled (%d of %d): %v", n.Load(), want, err)
	}
	r := result{records: want, wall: time.Since(ft.start), cpu: processCPU() - cpu0,
		serverCPU: time.Duration(srv.CPUNanos.Load() - scpu0), first: time.Duration(ft.ns.Load()), calls: srv.GetRecordsCalls.Load(), empty: srv.EmptyCalls.Load(), limits: srv.LimitSummary()}
	r.all, r.before = ft.allResult()
	stop()
	t := time.Now()
	cancel()
	if err := <-ran; err != nil {
		return r, fmt.Errorf("library: Run: %w", err)
	}
	r.shutdown = time.Since(t)
	return r, nil
}

// plainRound reads ds with a plain SDK loop: a goroutine per shard,
// GetShardIterator TRIM_HORIZON, GetRecords Limit 10,000 until the shard's
// records are read, each decoded with encoding/json.
func plainRound(f flags, ds *Dataset, profile string) (result, error) {
	srv, err := StartServer(ds, f.serverCPU)
	if err != nil {
		return result{}, err
	}
	defer srv.Close()
	kc, _, closeIdle := newClient(srv.URL)
	defer closeIdle()

	runtime.GC()
	stop, err := startProfile(profile)
	if err != nil {
		return result{}, err
	}
	defer stop()
	ctx := context.Background()
	ft := &firstTimer{shards: ds.Shards}
	var total atomic.Int64
	errs := make([]error, ds.Shards)
	cpu0, scpu0 := processCPU(), srv.CPUNanos.Load()
	ft.start = time.Now()
	unmarshal := json.Unmarshal
	if ds.msgpack {
		unmarshal = codec.Msgpack.Unmarshal
	}
	var wg sync.WaitGroup
	for s := range ds.Shards {
		wg.Go(func() {
			it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
				StreamName: aws.String(ds.Stream), ShardId: aws.String(ShardID(s)),
				ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				errs[s] = err
				return
			}
			iter := it.ShardIterator
			for read := 0; read < ds.Records; {
				out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
				if err != nil {
					errs[s] = err
					return
				}
				for _, rec := range out.Records {
					var o Order
					if err := unmarshal(rec.Data, &o); err != nil {
						errs[s] = err
						return
					}
					ft.mark()
					ft.markShard(ShardID(s))
				}
				read += len(out.Records)
				iter = out.NextShardIterator
			}
			total.Add(int64(ds.Records))
		})
	}
	wg.Wait()
	r := result{records: int(total.Load()), wall: time.Since(ft.start), cpu: processCPU() - cpu0,
		serverCPU: time.Duration(srv.CPUNanos.Load() - scpu0), first: time.Duration(ft.ns.Load()), calls: srv.GetRecordsCalls.Load(), empty: srv.EmptyCalls.Load(), limits: srv.LimitSummary()}
	r.all, r.before = ft.allResult()
	for _, err := range errs {
		if err != nil {
			return r, fmt.Errorf("plain: %w", err)
		}
	}
	return r, nil
}

func profileName(f flags, side string, round int) string {
	if f.cpuprofile == "" {
		return ""
	}
	return fmt.Sprintf("%s.%s.%d", f.cpuprofile, side, round)
}

func runThroughput(f flags) error {
	perShard := f.records / f.shards
	t := time.Now()
	size := 0
	if flagSet("size") {
		size = f.size
	}
	var ds *Dataset
	switch f.codec {
	case "json":
		ds = NewDataset("bench", f.shards, perShard, size, false)
	case "msgpack":
		ds = NewMsgpackDataset("bench", f.shards, perShard, size)
	default:
		return fmt.Errorf("-codec %q: want json or msgpack", f.codec)
	}
	fmt.Printf("throughput: %d shards × %d records of %d bytes (%s), built in %v; GOMAXPROCS %d; server CPU measured apart: %v\n",
		f.shards, perShard, ds.DataLen, f.codec, time.Since(t).Round(time.Millisecond), runtime.GOMAXPROCS(0), f.serverCPU)
	fmt.Printf("library: memory store, no-op handler, %s codec, TRIM_HORIZON, WithPolling(1ms, 1ms, 10000), GetRecords in CBOR (the default); lib-json: the same in JSON with its own decoder (EncodingJSON); lib-sdk: the SDK's path (EncodingSDK); plain: GetRecords Limit 10000 + the same decode (encoding/json or codec.Msgpack), goroutine per shard\n\n", f.codec)

	var libs, jsons, sdks, plains []result
	for round := 1; round <= f.rounds; round++ {
		lib, err := libraryRound(f, ds, nil, 0, true, profileName(f, "lib", round))
		if err != nil {
			return err
		}
		fmt.Printf("round %d library %s  (shutdown %v)\n", round, lib, lib.shutdown.Round(time.Millisecond))
		js, err := libraryRound(f, ds, nil, 0, true, profileName(f, "libjson", round), kinesislease.WithGetRecordsEncoding(kinesislease.EncodingJSON))
		if err != nil {
			return err
		}
		fmt.Printf("round %d lib-json %s  (shutdown %v)\n", round, js, js.shutdown.Round(time.Millisecond))
		jsons = append(jsons, js)
		sdk, err := libraryRound(f, ds, nil, 0, true, profileName(f, "libsdk", round), kinesislease.WithGetRecordsEncoding(kinesislease.EncodingSDK))
		if err != nil {
			return err
		}
		fmt.Printf("round %d lib-sdk %s  (shutdown %v)\n", round, sdk, sdk.shutdown.Round(time.Millisecond))
		sdks = append(sdks, sdk)
		plain, err := plainRound(f, ds, profileName(f, "plain", round))
		if err != nil {
			return err
		}
		fmt.Printf("round %d plain   %s\n", round, plain)
		libs, plains = append(libs, lib), append(plains, plain)
	}

	col := func(rs []result, fn func(result) float64) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = fn(r)
		}
		return out
	}
	ratioOf := func(a []result, fn func(result) float64) []float64 {
		out := make([]float64, len(a))
		for i := range a {
			out[i] = fn(a[i]) / fn(plains[i])
		}
		return out
	}
	ratio := func(fn func(result) float64) []float64 { return ratioOf(libs, fn) }
	perSec, cpu, client := result.perSec, result.cpuPerRec, result.clientPerRec
	fmt.Printf("\nmedians [ranges] over %d rounds\n", f.rounds)
	fmt.Printf("  library records/s          %s\n", summary(col(libs, perSec), "%.0f"))
	fmt.Printf("  plain   records/s          %s\n", summary(col(plains, perSec), "%.0f"))
	fmt.Printf("  lib-json records/s         %s\n", summary(col(jsons, perSec), "%.0f"))
	fmt.Printf("  lib-sdk records/s          %s\n", summary(col(sdks, perSec), "%.0f"))
	steady := result.steadyPerSec
	fmt.Printf("  library records/s from the first record  %s\n", summary(col(libs, steady), "%.0f"))
	fmt.Printf("  plain   records/s from the first record  %s\n", summary(col(plains, steady), "%.0f"))
	allRate := result.allPerSec
	fmt.Printf("  library records/s once every shard is read  %s\n", summary(col(libs, allRate), "%.0f"))
	fmt.Printf("  plain   records/s once every shard is read  %s\n", summary(col(plains, allRate), "%.0f"))
	fmt.Printf("  library CPU ns/record      %s\n", summary(col(libs, cpu), "%.0f"))
	fmt.Printf("  lib-json CPU ns/record     %s\n", summary(col(jsons, cpu), "%.0f"))
	fmt.Printf("  lib-sdk CPU ns/record      %s\n", summary(col(sdks, cpu), "%.0f"))
	fmt.Printf("  plain   CPU ns/record      %s\n", summary(col(plains, cpu), "%.0f"))
	if f.serverCPU {
		fmt.Printf("  library server ns/record   %s\n", summary(col(libs, result.serverPerRec), "%.0f"))
		fmt.Printf("  plain   server ns/record   %s\n", summary(col(plains, result.serverPerRec), "%.0f"))
		fmt.Printf("  library client ns/record   %s\n", summary(col(libs, client), "%.0f"))
		fmt.Printf("  plain   client ns/record   %s\n", summary(col(plains, client), "%.0f"))
	}
	fmt.Printf("  library first record ms    %s\n", summary(col(libs, func(r result) float64 { return float64(r.first.Microseconds()) / 1000 }), "%.1f"))
	fmt.Printf("ratios library/plain: median of ratios of medians [range of per-round ratios]\n")
	fmt.Printf("  throughput                 %.2f of medians; %s per round\n", median(col(libs, perSec))/median(col(plains, perSec)), summary(ratio(perSec), "%.2f"))
	fmt.Printf("  throughput from the first  %.2f of medians; %s per round\n", median(col(libs, steady))/median(col(plains, steady)), summary(ratio(steady), "%.2f"))
	fmt.Printf("  throughput, every shard read  %.2f of medians; %s per round\n", median(col(libs, allRate))/median(col(plains, allRate)), summary(ratio(allRate), "%.2f"))
	fmt.Printf("  CPU per record             %.2f of medians; %s per round\n", median(col(libs, cpu))/median(col(plains, cpu)), summary(ratio(cpu), "%.2f"))
	if f.serverCPU {
		fmt.Printf("  client CPU per record      %.2f of medians; %s per round\n", median(col(libs, client))/median(col(plains, client)), summary(ratio(client), "%.2f"))
	}
	for _, other := range []struct {
		name string
		rs   []result
	}{{"lib-json/plain (EncodingJSON)", jsons}, {"lib-sdk/plain (EncodingSDK)", sdks}} {
		fmt.Printf("ratios %s\n", other.name)
		fmt.Printf("  throughput                 %.2f of medians; %s per round\n", median(col(other.rs, perSec))/median(col(plains, perSec)), summary(ratioOf(other.rs, perSec), "%.2f"))
		fmt.Printf("  throughput, every shard read  %.2f of medians; %s per round\n", median(col(other.rs, allRate))/median(col(plains, allRate)), summary(ratioOf(other.rs, allRate), "%.2f"))
		fmt.Printf("  CPU per record             %.2f of medians; %s per round\n", median(col(other.rs, cpu))/median(col(plains, cpu)), summary(ratioOf(other.rs, cpu), "%.2f"))
		if f.serverCPU {
			fmt.Printf("  client CPU per record      %.2f of medians; %s per round\n", median(col(other.rs, client))/median(col(plains, client)), summary(ratioOf(other.rs, client), "%.2f"))
		}
	}
	return nil
}

func runSlow(f flags) error {
	if f.slow >= f.shards {
		return fmt.Errorf("-slow %d must be below -shards %d", f.slow, f.shards)
	}
	perShard := f.records / f.shards
	fast := f.shards - f.slow
	beside := NewDataset("bench", f.shards, perShard, 0, false)
	solo := NewDataset("bench", fast, perShard, 0, false)
	slow := map[string]bool{}
	for s := fast; s < f.shards; s++ {
		slow[ShardID(s)] = true
	}
	fmt.Printf("slow shards: %d fast shards + %d slow (handler sleeps %v per record), %d records of %d bytes per shard; fast shards' records/s beside the slow vs solo (a stream of the fast shards only); WithPolling(1ms, 1ms, 10000)\n\n",
		fast, f.slow, f.slowDelay, perShard, beside.DataLen)
	var besides, solos []float64
	for round := 1; round <= f.rounds; round++ {
		b, err := libraryRound(f, beside, slow, f.slowDelay, true, profileName(f, "beside", round))
		if err != nil {
			return err
		}
		fmt.Printf("round %d beside  %s  (shutdown %v)\n", round, b, b.shutdown.Round(time.Millisecond))
		s, err := libraryRound(f, solo, nil, 0, true, profileName(f, "solo", round))
		if err != nil {
			return err
		}
		fmt.Printf("round %d solo    %s  (shutdown %v)\n", round, s, s.shutdown.Round(time.Millisecond))
		besides, solos = append(besides, b.perSec()), append(solos, s.perSec())
	}
	ratios := make([]float64, len(besides))
	for i := range besides {
		ratios[i] = besides[i] / solos[i]
	}
	fmt.Printf("\nmedians [ranges] over %d rounds: fast shards' records/s\n", f.rounds)
	fmt.Printf("  beside the slow shard   %s\n", summary(besides, "%.0f"))
	fmt.Printf("  solo                    %s\n", summary(solos, "%.0f"))
	fmt.Printf("  beside/solo             %.2f of medians; %s per round\n", median(besides)/median(solos), summary(ratios, "%.2f"))
	return nil
}
