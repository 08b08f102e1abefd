package read

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/eventstream"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
)

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// eventServer streams n SubscribeToShardEvents of one 10-byte record
// each, every apart (0: back to back), after the initial response.
func eventServer(n int, every time.Duration) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		enc := eventstream.NewEncoder()
		rc := http.NewResponseController(w)
		write := func(typ string, payload []byte) {
			var m eventstream.Message
			m.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue("event"))
			m.Headers.Set(eventstream.EventTypeHeader, eventstream.StringValue(typ))
			m.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue("application/json"))
			m.Payload = payload
			_ = enc.Encode(w, m)
			_ = rc.Flush()
		}
		write("initial-response", []byte("{}"))
		next := time.Now()
		for i := range n {
			if every > 0 {
				next = next.Add(every)
				time.Sleep(time.Until(next))
			}
			write("SubscribeToShardEvent", fmt.Appendf(nil, `{"Records":[{"Data":"eyJpZCI6MX0=","PartitionKey":"k","SequenceNumber":"%d",`+
				`"ApproximateArrivalTimestamp":1.7e9}],"ContinuationSequenceNumber":"%d","MillisBehindLatest":0}`, 1000+i, 1000+i))
		}
	}))
}

// BenchmarkFanOutEvents compares the subscriber with a plain SDK loop
// reading the same SubscribeToShard stream (an in-process server: its CPU
// is in both), events of one record back to back and paced every 5ms
// (records arriving one by one, where the wake-ups cost most). It reports
// CPU per event.
//
//	go test -run '^$' -bench BenchmarkFanOutEvents -benchtime 2000x ./internal/read/
func BenchmarkFanOutEvents(b *testing.B) {
	for _, every := range []time.Duration{0, 5 * time.Millisecond} {
		for _, side := range []string{"sdk", "subscriber"} {
			b.Run(fmt.Sprintf("every=%v/%s", every, side), func(b *testing.B) {
				srv := eventServer(b.N, every)
				defer srv.Close()
				tr := &http.Transport{}
				defer tr.CloseIdleConnections()
				cfg := testutil.Config(b)
				cfg.HTTPClient = &http.Client{Transport: tr}
				kc := kinesis.NewFromConfig(cfg, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(srv.URL) })
				arn := "arn:aws:kinesis:us-east-1:000000000000:stream/s/consumer/c:1"
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				b.ResetTimer()
				cpu0 := processCPU()
				got := 0
				if side == "sdk" {
					out, err := kc.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String("shardId-000000000000"),
						StartingPosition: &ktypes.StartingPosition{Type: ktypes.ShardIteratorTypeLatest}}, kinesisx.OwnEventStreamCodec)
					if err != nil {
						b.Fatal(err)
					}
					for ev := range out.GetStream().Events() {
						got += len(ev.(*ktypes.SubscribeToShardEventStreamMemberSubscribeToShardEvent).Value.Records)
					}
					if err := out.GetStream().Err(); err != nil {
						b.Fatal(err)
					}
				} else {
					c := &Consumer{Client: kc, Stream: "s", Name: "c", arn: arn}
					s := NewSubscriber(SubscriberConfig{FanOut: &FanOutConfig{Consumer: c}, ShardID: "shardId-000000000000", Start: kltype.Latest,
						ValidFor: func() time.Duration { return time.Hour }})
					for got < b.N {
						batch, err := s.Next(ctx)
						if err != nil {
							b.Fatal(err)
						}
						got += len(batch.Records)
					}
					s.close()
				}
				b.StopTimer()
				if got != b.N {
					b.Fatalf("%d records of %d", got, b.N)
				}
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e3, "cpu-µs/event")
			})
		}
	}
}
