package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// latencyMsg is what the load process puts: when it called PutRecord.
type latencyMsg struct {
	PutNanos int64 `json:"put"`
	Seq      int   `json:"seq"`
}

// runLatency measures put-to-handler latency and consumer CPU per record,
// polling at the library's defaults against enhanced fan-out, alternating
// in one run. A second process (this binary, -mode latency-load) serves an
// in-memory Kinesis (kinesisfake.Kinesis.ServeHTTP) holding the stream and
// puts the records, so that this process' CPU is the consumer's alone; both
// sides read it over HTTP with the SDK.
func runLatency(f flags) error {
	ctx := context.Background()
	load, err := startLoad(f.verbose)
	if err != nil {
		return err
	}
	defer load.close()

	stream := fmt.Sprintf("latency-%d", time.Now().UnixNano())
	admin, _, closeIdle := newClient(load.url)
	defer closeIdle()
	if _, err := admin.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(stream), ShardCount: aws.Int32(int32(f.shards))}); err != nil {
		return fmt.Errorf("CreateStream: %w", err)
	}
	fmt.Printf("latency: %d shards on the in-memory Kinesis at %s, %d records per side and round at %d/s, %d rounds\n",
		f.shards, load.url, f.records, f.rate, f.rounds)
	type side struct {
		name       string
		p50s, p99s []float64
		cpus       []float64
		all        []time.Duration
	}
	sides := []*side{{name: "polling (defaults)"}, {name: "enhanced fan-out"}, {name: "plain SDK fan-out"}}
	for round := 1; round <= f.rounds; round++ {
		order := []int{0, 1, 2}
		if round%2 == 0 {
			order = []int{2, 1, 0}
		}
		for _, i := range order {
			s := sides[i]
			r, err := latencyRound(f, load, stream, latencySide(i), round)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, s.name, err)
			}
			p50, p99 := percentile(r.lat, 0.50), percentile(r.lat, 0.99)
			s.p50s = append(s.p50s, ms(p50))
			s.p99s = append(s.p99s, ms(p99))
			s.cpus = append(s.cpus, r.cpuPerRec)
			s.all = append(s.all, r.lat...)
			fmt.Printf("round %d %-20s p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms  CPU %6.1f µs/record (%d records)\n",
				round, s.name, ms(p50), ms(p99), ms(slices.Max(r.lat)), r.cpuPerRec/1e3, len(r.lat))
		}
	}
	fmt.Println()
	for _, s := range sides {
		fmt.Printf("%-20s p50 %s ms  p99 %s ms  CPU %s µs/record  (all rounds pooled: p50 %.1f ms, p99 %.1f ms)\n", s.name,
			summary(s.p50s, "%.1f"), summary(s.p99s, "%.1f"), summary(scale(s.cpus, 1e-3), "%.1f"),
			ms(percentile(s.all, 0.5)), ms(percentile(s.all, 0.99)))
	}
	fmt.Printf("fan-out/polling: p50 %.2f×, p99 %.2f×, CPU per record %.2f× (medians of rounds)\n",
		median(sides[1].p50s)/median(sides[0].p50s), median(sides[1].p99s)/median(sides[0].p99s), median(sides[1].cpus)/median(sides[0].cpus))
	fmt.Printf("plain SDK fan-out/polling: CPU per record %.2f×; fan-out/plain SDK fan-out: %.2f× (medians of rounds)\n",
		median(sides[2].cpus)/median(sides[0].cpus), median(sides[1].cpus)/median(sides[2].cpus))
	return nil
}

// latencySide is what a latency round runs.
type latencySide int

const (
	sidePolling     latencySide = iota // the library, polling at its defaults
	sideFanOut                         // the library, WithEnhancedFanOut
	sidePlainFanOut                    // a plain SDK loop per shard: SubscribeToShard, encoding/json
)

type latencyResult struct {
	lat       []time.Duration
	cpuPerRec float64 // ns
}

// latencyRound runs one service (polling or fan-out) on stream, waits
// until it reads every shard, has the load process put f.records records
// at f.rate a second, and returns their latencies and this process' CPU per
// record over the window.
func latencyRound(f flags, load *loadProc, stream string, which latencySide, round int) (latencyResult, error) {
	kc, cfg, closeIdle := newClient(load.url)
	defer closeIdle()
	var mu sync.Mutex
	var lat []time.Duration
	var warm atomic.Int64
	want := int64(f.records)
	var got atomic.Int64
	done := make(chan struct{})
	handler := func(ctx context.Context, m latencyMsg) error {
		d := time.Duration(time.Now().UnixNano() - m.PutNanos)
		if m.Seq < 0 {
			warm.Add(1)
			return nil
		}
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
		if got.Add(1) == want {
			close(done)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	if which == sidePlainFanOut {
		go func() { ran <- plainFanOut(ctx, kc, stream, f.shards, handler) }()
	} else {
		svc, err := kinesislease.New(cfg, kinesislease.WithKinesisClient(kc), kinesislease.WithLeaseStore(memory.New()), kinesislease.WithLogger(logger(f)))
		if err != nil {
			return latencyResult{}, err
		}
		opts := []kinesislease.SubscribeOption{kinesislease.WithStartPosition(kltype.Latest)}
		if which == sideFanOut {
			opts = append(opts, kinesislease.WithEnhancedFanOut("latency-bench"))
		}
		if err := kinesislease.Subscribe(svc, stream, handler, opts...); err != nil {
			return latencyResult{}, err
		}
		go func() { ran <- svc.Run(ctx) }()
	}
	// Warm up: records put until as many arrived as four per shard (every
	// shard is read, every subscription open).
	deadline := time.Now().Add(60 * time.Second)
	for warm.Load() < int64(f.shards)*4 {
		if time.Now().After(deadline) {
			return latencyResult{}, fmt.Errorf("warm-up: %d records of %d arrived in 60s", warm.Load(), f.shards*4)
		}
		if err := load.put(stream, f.shards*4, 1000, true); err != nil {
			return latencyResult{}, err
		}
		select {
		case err := <-ran:
			return latencyResult{}, fmt.Errorf("library: Run returned during warm-up: %v", err)
		case <-time.After(2 * time.Second):
		}
	}
	side := [...]string{"polling", "fanout", "plainfanout"}[which]
	stopProfile, err := startProfile(profileName(f, side, round))
	if err != nil {
		return latencyResult{}, err
	}
	defer stopProfile()
	cpu0 := processCPU()
	if err := load.put(stream, f.records, f.rate, false); err != nil {
		return latencyResult{}, err
	}
	select {
	case <-done:
	case err := <-ran:
		return latencyResult{}, fmt.Errorf("library: Run returned: %v", err)
	case <-time.After(60 * time.Second):
		return latencyResult{}, fmt.Errorf("%d of %d records handled 60s after the last put", got.Load(), want)
	}
	cpu := processCPU() - cpu0
	stopProfile()
	cancel()
	if err := <-ran; err != nil {
		return latencyResult{}, fmt.Errorf("library: Run: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return latencyResult{lat: slices.Clone(lat), cpuPerRec: float64(cpu.Nanoseconds()) / float64(len(lat))}, nil
}

// plainFanOut reads every shard of stream with the SDK alone: a consumer
// registered (waited ACTIVE), a goroutine per shard subscribed at LATEST,
// each record decoded with encoding/json and handed to handle, a new
// subscription after the last record when one ends. It returns when ctx
// ends (nil) or on an error.
func plainFanOut(ctx context.Context, kc *kinesis.Client, stream string, shards int, handle func(context.Context, latencyMsg) error) error {
	sum, err := kc.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
	if err != nil {
		return fmt.Errorf("DescribeStreamSummary: %w", err)
	}
	name := fmt.Sprintf("plain-%d", time.Now().UnixNano())
	reg, err := kc.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: sum.StreamDescriptionSummary.StreamARN, ConsumerName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("RegisterStreamConsumer: %w", err)
	}
	arn := reg.Consumer.ConsumerARN
	for {
		d, err := kc.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: arn})
		if err != nil {
			return fmt.Errorf("DescribeStreamConsumer: %w", err)
		}
		if d.ConsumerDescription.ConsumerStatus == ktypes.ConsumerStatusActive {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	errs := make(chan error, shards)
	for s := range shards {
		go func() {
			pos := &ktypes.StartingPosition{Type: ktypes.ShardIteratorTypeLatest}
			for ctx.Err() == nil {
				out, err := kc.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{ConsumerARN: arn, ShardId: aws.String(ShardID(s)), StartingPosition: pos}, kinesisx.OwnEventStreamCodec)
				if err != nil {
					if ctx.Err() == nil {
						time.Sleep(time.Second) // the 5-second rule, the one-call-a-second limit
					}
					continue
				}
				st := out.GetStream()
				for ev := range st.Events() {
					e, ok := ev.(*ktypes.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
					if !ok {
						continue
					}
					for _, r := range e.Value.Records {
						var m latencyMsg
						if err := json.Unmarshal(r.Data, &m); err != nil {
							errs <- err
							return
						}
						_ = handle(ctx, m)
						pos = &ktypes.StartingPosition{Type: ktypes.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: r.SequenceNumber}
					}
				}
				_ = st.Close()
			}
			errs <- nil
		}()
	}
	for range shards {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

func percentile(xs []time.Duration, p float64) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func scale(xs []float64, k float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * k
	}
	return out
}

// loadProc is the load process: the in-memory Kinesis and the producer.
type loadProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	url string
}

func startLoad(verbose bool) (*loadProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-mode", "latency-load"}
	if verbose {
		args = append(args, "-v")
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &loadProc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	line, err := p.line()
	if err != nil {
		p.close()
		return nil, fmt.Errorf("load process: %w", err)
	}
	p.url = strings.TrimPrefix(line, "url ")
	return p, nil
}

func (p *loadProc) line() (string, error) {
	if !p.out.Scan() {
		if err := p.out.Err(); err != nil {
			return "", err
		}
		return "", io.ErrUnexpectedEOF
	}
	return p.out.Text(), nil
}

// put has the load process put n records at rate a second (warm-up ones
// carry Seq -1) and waits until it did.
func (p *loadProc) put(stream string, n, rate int, warm bool) error {
	if _, err := fmt.Fprintf(p.in, "put %s %d %d %t\n", stream, n, rate, warm); err != nil {
		return err
	}
	line, err := p.line()
	if err != nil {
		return fmt.Errorf("load process: %w", err)
	}
	if line != "ok" {
		return fmt.Errorf("load process: %s", line)
	}
	return nil
}

func (p *loadProc) close() {
	_ = p.in.Close()
	_ = p.cmd.Wait()
}

// runLoad is -mode latency-load: it serves an in-memory Kinesis on a local
// endpoint, prints "url URL", then runs "put STREAM N RATE WARM" commands
// from stdin, answering "ok" (or the error) after each; it exits when stdin
// closes.
func runLoad(f flags) error {
	// Records put one by one reach a subscriber in events of several, as
	// on Kinesis: at most one event with records every 20ms.
	k := kinesisfake.New(kinesisfake.WithFanOutRules(kinesisfake.FanOutRules{EventGap: 20 * time.Millisecond}))
	srv := httptest.NewServer(k)
	defer srv.Close()
	fmt.Printf("url %s\n", srv.URL)
	kc := k.Client()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 5 || fields[0] != "put" {
			fmt.Printf("bad command %q\n", sc.Text())
			continue
		}
		n, _ := strconv.Atoi(fields[2])
		rate, _ := strconv.Atoi(fields[3])
		warm := fields[4] == "true"
		if err := putPaced(kc, fields[1], n, rate, warm); err != nil {
			fmt.Printf("error %v\n", err)
			continue
		}
		fmt.Println("ok")
	}
	return sc.Err()
}

// putPaced puts n records, one PutRecord each, rate a second, spread over
// partition keys (so over every shard).
func putPaced(kc *kinesis.Client, stream string, n, rate int, warm bool) error {
	interval := time.Second / time.Duration(max(rate, 1))
	next := time.Now()
	for i := range n {
		time.Sleep(time.Until(next))
		next = next.Add(interval)
		seq := i
		if warm {
			seq = -1
		}
		data, _ := json.Marshal(latencyMsg{PutNanos: time.Now().UnixNano(), Seq: seq})
		if _, err := kc.PutRecord(context.Background(), &kinesis.PutRecordInput{
			StreamName: aws.String(stream), PartitionKey: aws.String(strconv.Itoa(i)), Data: data,
		}); err != nil {
			return fmt.Errorf("PutRecord: %w", err)
		}
	}
	return nil
}
