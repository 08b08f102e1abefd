package kinesislease_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testutil"
	"github.com/kinesislease/kinesislease/kltype"
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
// 2 shards at the default lease settings while records flow, and reports them
// per held shard per hour. It runs for about 30s per iteration.
func BenchmarkLeaseWrites(b *testing.B) {
	kc, stream := benchSetup(b)
	const window = 30 * time.Second
	for range b.N {
		svc, err := kinesislease.New(testutil.Config(b), kinesislease.WithKinesisClient(kc),
			kinesislease.WithLeaseStore(memory.New()), kinesislease.WithLogger(testLogger(b)))
		if err != nil {
			b.Fatal(err)
		}
		if err := kinesislease.Subscribe(svc, stream, func(context.Context, order) error { return nil },
			kinesislease.WithStartPosition(kltype.Latest)); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- svc.Run(ctx) }()
		// A trickle of records, so checkpoints are due too.
		stop := time.After(window)
		tick := time.NewTicker(500 * time.Millisecond)
		id := benchRecords
	loop:
		for {
			select {
			case <-stop:
				break loop
			case <-tick.C:
				put(b, kc, stream, id, 10)
				id += 10
			}
		}
		tick.Stop()
		st := svc.Stats(stream)
		held := len(svc.Held(stream))
		cancel()
		if err := <-ran; err != nil {
			b.Fatal(err)
		}
		if held == 0 {
			b.Fatal("no shard held")
		}
		perHour := float64(st.Writes) / float64(held) * float64(time.Hour) / float64(window)
		b.ReportMetric(perHour, "writes/shard/hour")
		b.ReportMetric(float64(st.Reads)*float64(time.Hour)/float64(window), "reads/hour")
	}
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
