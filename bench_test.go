package kinesislease_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// benchStream is a kinesalite stream holding benchRecords records, made once
// per benchmark binary.
var (
	benchOnce    sync.Once
	benchName    string
	benchRecords = 60000
	benchShards  = 2
)

func benchSetup(b *testing.B) (*kinesis.Client, string) {
	kc := testutil.KinesisClient(b, testutil.Kinesalite)
	benchOnce.Do(func() {
		benchName = fmt.Sprintf("bench-%d", time.Now().UnixNano())
		_, err := kc.CreateStream(context.Background(), &kinesis.CreateStreamInput{StreamName: aws.String(benchName), ShardCount: aws.Int32(int32(benchShards))})
		if err != nil {
			b.Fatal(err)
		}
		for {
			out, err := kc.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(benchName)})
			if err == nil && out.StreamDescriptionSummary.StreamStatus == ktypes.StreamStatusActive {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		put(b, kc, benchName, 0, benchRecords)
	})
	return kc, benchName
}

// BenchmarkConsume: records per second through one instance (memory store,
// no-op handler, JSON decoding) reading a kinesalite stream from
// TRIM_HORIZON to its end.
func BenchmarkConsume(b *testing.B) {
	kc, stream := benchSetup(b)
	b.ResetTimer()
	var total int64
	for range b.N {
		var n atomic.Int64
		done := make(chan struct{})
		svc, err := kinesislease.New(testutil.Config(b), kinesislease.WithKinesisClient(kc),
			kinesislease.WithLeaseStore(memory.New()), kinesislease.WithLogger(testLogger(b)))
		if err != nil {
			b.Fatal(err)
		}
		err = kinesislease.Subscribe(svc, stream, func(ctx context.Context, o order) error {
			if n.Add(1) == int64(benchRecords) {
				close(done)
			}
			return nil
		}, kinesislease.WithStartPosition(kltype.TrimHorizon))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- svc.Run(ctx) }()
		<-done
		cancel()
		if err := <-ran; err != nil {
			b.Fatal(err)
		}
		total += n.Load()
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkPlainGetRecords: the same stream read by a plain SDK loop
// (GetShardIterator TRIM_HORIZON, GetRecords until caught up, one goroutine
// per shard, JSON decoding), the baseline BenchmarkConsume is compared with.
func BenchmarkPlainGetRecords(b *testing.B) {
	kc, stream := benchSetup(b)
	ctx := context.Background()
	b.ResetTimer()
	var total atomic.Int64
	for range b.N {
		var wg sync.WaitGroup
		for i := range benchShards {
			wg.Go(func() {
				it, err := kc.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
					StreamName: aws.String(stream), ShardId: aws.String(fmt.Sprintf("shardId-%012d", i)),
					ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon,
				})
				if err != nil {
					b.Error(err)
					return
				}
				iter := it.ShardIterator
				for iter != nil {
					out, err := kc.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
					if err != nil {
						b.Error(err)
						return
					}
					for _, r := range out.Records {
						var o order
						if err := jsonUnmarshal(r.Data, &o); err != nil {
							b.Error(err)
							return
						}
						total.Add(1)
					}
					if len(out.Records) == 0 {
						return // caught up
					}
					iter = out.NextShardIterator
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(total.Load())/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkLeaseWrites counts the lease store writes of one instance holding
// every shard of a stream at the default settings, with records flowing at 0
// (idle), 100 and 1,000 records/s spread over the shards, and reports the
// checkpoint writes per held shard per hour beside the other writes. The
// window is 30s (KINESISLEASE_WRITES_WINDOW sets another).
func BenchmarkLeaseWrites(b *testing.B) {
	window := 30 * time.Second
	if d, err := time.ParseDuration(os.Getenv("KINESISLEASE_WRITES_WINDOW")); err == nil && d > 0 {
		window = d
	}
	for _, rate := range []int{0, 100, 1000} {
		b.Run(fmt.Sprintf("records-per-s=%d", rate), func(b *testing.B) {
			kc := testutil.KinesisClient(b, testutil.Kinesalite)
			stream := testutil.StreamName(b)
			testutil.CreateStream(b, kc, stream, int32(benchShards))
			for range b.N {
				store := &checkpointCounter{Store: memory.New()}
				svc, err := kinesislease.New(testutil.Config(b), kinesislease.WithKinesisClient(kc),
					kinesislease.WithLeaseStore(store), kinesislease.WithLogger(testLogger(b)))
				if err != nil {
					b.Fatal(err)
				}
				if err := kinesislease.Subscribe(svc, stream, func(context.Context, order) error { return nil },
					kinesislease.WithStartPosition(kltype.Latest)); err != nil {
					b.Fatal(err)
				}
				in := runInstance(b, svc)
				kinesisleasetest.WaitReady(b, svc) // every shard held
				st0, cp0 := svc.LeaseStoreCalls(), store.checkpoints.Load()
				stop := time.After(window)
				tick := time.NewTicker(100 * time.Millisecond)
				id := 0
			loop:
				for {
					select {
					case <-stop:
						break loop
					case <-tick.C:
						if n := rate / 10; n > 0 {
							put(b, kc, stream, id, n)
							id += n
						}
					}
				}
				tick.Stop()
				st, cps := svc.LeaseStoreCalls(), store.checkpoints.Load()-cp0
				in.stop(b)
				perHour := float64(time.Hour) / float64(window)
				b.ReportMetric(float64(cps)/float64(benchShards)*perHour, "checkpoints/shard/hour")
				b.ReportMetric(float64(st.Heartbeats-st0.Heartbeats)*perHour, "heartbeats/hour")
				b.ReportMetric(float64(st.Writes-st0.Writes-(st.Heartbeats-st0.Heartbeats)-cps)*perHour, "other-writes/hour")
				b.ReportMetric(float64(st.Reads-st0.Reads)*perHour, "reads/hour")
			}
		})
	}
}

// checkpointCounter is a memory store counting the checkpoint writes.
type checkpointCounter struct {
	*memory.Store
	checkpoints atomic.Int64
}

func (c *checkpointCounter) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	c.checkpoints.Add(1)
	return c.Store.Checkpoint(ctx, l, cp)
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
