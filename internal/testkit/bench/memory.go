package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

type memSample struct {
	at             time.Duration
	rss, heapInuse int64
	handled        int64
	served         int64 // records GetRecords returned
}

func readMem() (rss, heapInuse int64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return rssBytes(), int64(ms.HeapInuse)
}

func runMemory(f flags) error {
	backlog := f.backlog
	if backlog == 0 {
		backlog = max(20000, int(1.5*float64(f.duration)/float64(f.slowDelay)))
	}
	ds := NewDataset("bench", f.shards, backlog, f.size, true)
	srv, err := StartServer(ds, false)
	if err != nil {
		return err
	}
	defer srv.Close()
	kc, cfg, closeIdle := newClient(srv.URL)
	defer closeIdle()

	budget := "library default (32 MiB, 100,000 records)"
	opts := []kinesislease.Option{kinesislease.WithKinesisClient(kc),
		kinesislease.WithLeaseStore(memory.New()), kinesislease.WithLogger(logger(f))}
	if f.budgetBytes > 0 {
		opts = append(opts, kinesislease.WithMemoryBudget(f.budgetBytes, 1<<40))
		budget = fmt.Sprintf("WithMemoryBudget(%d, 1<<40)", f.budgetBytes)
	}
	fmt.Printf("memory: %d shards × %d records of %d bytes (%.2f GB if held, generated per request), handler sleeps %v per record, library defaults (pacing, Limit), budget %s, %v; GOGC %s, GOMAXPROCS %d\n",
		f.shards, backlog, ds.DataLen, float64(f.shards*backlog*ds.DataLen)/1e9, f.slowDelay, budget, f.duration,
		gogc(), runtime.GOMAXPROCS(0))

	var handled atomic.Int64
	perShard := make([]atomic.Int64, f.shards)
	svc, err := kinesislease.New(cfg, opts...)
	if err != nil {
		return err
	}
	err = kinesislease.Subscribe(svc, ds.Stream, func(ctx context.Context, o Order) error {
		time.Sleep(f.slowDelay)
		handled.Add(1)
		if rec, ok := kinesislease.RecordFrom(ctx); ok {
			if s, ok := parseShardID(rec.ShardID); ok && s < len(perShard) {
				perShard[s].Add(1)
			}
		}
		return nil
	}, kinesislease.WithStartPosition(kltype.TrimHorizon))
	if err != nil {
		return err
	}

	// The baseline: the process with the server up and the library built,
	// before it reads anything.
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(200 * time.Millisecond)
	baseRSS, baseHeap := readMem()
	fmt.Printf("baseline before Run (server up, nothing read): RSS %s, HeapInuse %s; both are subtracted below (\"lib\")\n\n", mib(baseRSS), mib(baseHeap))

	stop, err := startProfile(f.cpuprofile)
	if err != nil {
		return err
	}
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	start := time.Now()
	cpu0 := processCPU()
	go func() { ran <- svc.Run(ctx) }()

	fmt.Printf("%6s %11s %11s %11s %11s %10s %10s %10s %9s\n", "t", "RSS", "lib RSS", "HeapInuse", "lib heap", "handled", "fetched", "held", "held MiB")
	var samples []memSample
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.After(f.duration)
loop:
	for {
		select {
		case err := <-ran:
			return fmt.Errorf("library: Run returned early: %v", err)
		case <-deadline:
			break loop
		case <-tick.C:
			rss, heap := readMem()
			s := memSample{at: time.Since(start), rss: rss, heapInuse: heap, handled: handled.Load(), served: srv.Records.Load()}
			samples = append(samples, s)
			if len(samples)%5 == 0 {
				held := s.served - s.handled
				fmt.Printf("%5.0fs %11s %11s %11s %11s %10d %10d %10d %9.1f\n", s.at.Seconds(), mib(s.rss), mib(s.rss-baseRSS),
					mib(s.heapInuse), mib(s.heapInuse-baseHeap), s.handled, s.served, held, float64(held*int64(ds.DataLen))/(1<<20))
			}
		}
	}
	cpu := processCPU() - cpu0
	wall := time.Since(start)
	t := time.Now()
	cancel()
	runErr := <-ran
	shutdown := time.Since(t)

	if len(samples) == 0 {
		return fmt.Errorf("no samples")
	}
	peak, low := samples[0], samples[0]
	peakHeap, lowHeap := samples[0], samples[0]
	var peakHeld int64
	for _, s := range samples {
		if s.rss > peak.rss {
			peak = s
		}
		if s.rss < low.rss {
			low = s
		}
		if s.heapInuse > peakHeap.heapInuse {
			peakHeap = s
		}
		if s.heapInuse < lowHeap.heapInuse {
			lowHeap = s
		}
		peakHeld = max(peakHeld, s.served-s.handled)
	}
	last := samples[len(samples)-1]
	// After the first 10s, when the initial fill is over.
	var steady []float64
	for _, s := range samples {
		if s.at >= 10*time.Second {
			steady = append(steady, float64(s.rss-baseRSS)/(1<<20))
		}
	}
	fmt.Printf("\nsummary (%s, %v, %d samples; lib = minus the baseline RSS %s / heap %s)\n", budget, wall.Round(time.Second), len(samples), mib(baseRSS), mib(baseHeap))
	fmt.Printf("  RSS        peak %s (lib %s) at %.0fs   min %s (lib %s) at %.0fs   final %s (lib %s)\n",
		mib(peak.rss), mib(peak.rss-baseRSS), peak.at.Seconds(), mib(low.rss), mib(low.rss-baseRSS), low.at.Seconds(), mib(last.rss), mib(last.rss-baseRSS))
	fmt.Printf("  HeapInuse  peak %s (lib %s) at %.0fs   min %s (lib %s) at %.0fs   final %s (lib %s)\n",
		mib(peakHeap.heapInuse), mib(peakHeap.heapInuse-baseHeap), peakHeap.at.Seconds(), mib(lowHeap.heapInuse), mib(lowHeap.heapInuse-baseHeap), lowHeap.at.Seconds(), mib(last.heapInuse), mib(last.heapInuse-baseHeap))
	if len(steady) > 0 {
		fmt.Printf("  lib RSS from 10s on: median %.1f MiB\n", median(steady))
	}
	fmt.Printf("  records fetched but not handled: peak %d (%.1f MiB of data), final %d\n", peakHeld, float64(peakHeld*int64(ds.DataLen))/(1<<20), last.served-last.handled)
	fmt.Printf("  handled %d (%.0f/s; at most %.0f/s with %d shards × 1/%v), fetched %d in %d GetRecords calls, CPU %.1fs (%.0f%% of one core), shutdown %v\n",
		last.handled, float64(last.handled)/last.at.Seconds(), float64(f.shards)/f.slowDelay.Seconds(), f.shards, f.slowDelay,
		srv.Records.Load(), srv.GetRecordsCalls.Load(), cpu.Seconds(), 100*cpu.Seconds()/wall.Seconds(), shutdown.Round(time.Millisecond))
	dist := func(name string, get func(s int) int64) {
		xs := make([]float64, f.shards)
		for s := range xs {
			xs[s] = float64(get(s))
		}
		fmt.Printf("  per shard %-16s median %s\n", name, summary(xs, "%.0f"))
	}
	fmt.Printf("  GetRecords: %s\n", srv.LimitSummary())
	dist("handled", func(s int) int64 { return perShard[s].Load() })
	dist("fetched", func(s int) int64 { return srv.ShardRecords[s].Load() })
	dist("GetRecords calls", func(s int) int64 { return srv.ShardCalls[s].Load() })
	if runErr != nil {
		return fmt.Errorf("library: Run: %w", runErr)
	}
	return nil
}

func gogc() string {
	if v := debug.SetGCPercent(100); v != 100 {
		debug.SetGCPercent(v)
		return fmt.Sprint(v)
	}
	return "100"
}
