package read_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/eventstream"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
)

// subscriberBench returns a one-shard stream on an in-memory Kinesis with
// rules, its SDK client, and a registered consumer. The tests run in
// synctest bubbles: the rules' waits take no real time.
func subscriberBench(t *testing.T, rules kinesisfake.FanOutRules) (*kinesisfake.Kinesis, *kinesis.Client, string, *read.Consumer) {
	t.Helper()
	k := kinesisfake.New(kinesisfake.WithFanOutRules(rules))
	kc := k.Client()
	const stream = "engine-test"
	if err := k.CreateStream(stream, 1); err != nil {
		t.Fatal(err)
	}
	c := &read.Consumer{Client: kc, Stream: stream, Name: "engine-test", Poll: 50 * time.Millisecond}
	if err := c.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	return k, kc, stream, c
}

func putN(t *testing.T, kc *kinesis.Client, stream string, from, n int) {
	t.Helper()
	var entries []ktypes.PutRecordsRequestEntry
	for i := from; i < from+n; i++ {
		entries = append(entries, ktypes.PutRecordsRequestEntry{Data: fmt.Appendf(nil, "%d", i), PartitionKey: aws.String("k")})
	}
	if _, err := kc.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries}); err != nil {
		t.Fatal(err)
	}
}

// feedOf calls Next in a goroutine until ctx ends, sending each record's
// data on the channel.
func feedOf(ctx context.Context, t *testing.T, s *read.Subscriber) <-chan string {
	ch := make(chan string, 100)
	go func() {
		defer close(ch)
		for {
			b, err := s.Next(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("Next: %v", err)
				}
				return
			}
			for _, r := range b.Records {
				ch <- string(r.Data)
			}
		}
	}()
	return ch
}

// stopFeed stops a feed and waits until its goroutine returned.
func stopFeed(cancel context.CancelFunc, ch <-chan string) {
	cancel()
	for range ch {
	}
}

// expect receives n records from ch, checking they are from, from+1, ...
func expect(t *testing.T, ch <-chan string, from, n int) {
	t.Helper()
	for want := from; want < from+n; want++ {
		select {
		case got := <-ch:
			if got != fmt.Sprint(want) {
				t.Fatalf("record %s, want %d", got, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("record %d not received in 20s", want)
		}
	}
}

// TestSubscriberRenews: a subscription older than Renew is replaced by one
// from the last record received, and one without an event for Idle (the
// Kinesis sends no event without records here) is taken as dead and replaced; no
// record is skipped or repeated.
func TestSubscriberRenews(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		bench kinesisfake.FanOutRules
		fo    read.FanOutConfig
	}{
		{"renew", kinesisfake.FanOutRules{TakeoverAfter: 100 * time.Millisecond}, read.FanOutConfig{Renew: 1200 * time.Millisecond}},
		{"idle", kinesisfake.FanOutRules{TakeoverAfter: 100 * time.Millisecond, EventInterval: time.Hour}, read.FanOutConfig{Idle: 1200 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fo, kc, stream, c := subscriberBench(t, tc.bench)
				tc.fo.Consumer = c
				var idle atomic.Int64
				s := read.NewSubscriber(read.SubscriberConfig{FanOut: &tc.fo, Stream: stream, ShardID: "shardId-000000000000", Start: kltype.TrimHorizon,
					ValidFor: func() time.Duration { return time.Hour },
					OnRetry: func(err error, _ time.Duration) {
						if errors.Is(err, read.ErrIdle) {
							idle.Add(1)
						}
					}})
				ctx, cancel := context.WithCancel(context.Background())
				ch := feedOf(ctx, t, s)
				defer stopFeed(cancel, ch)
				putN(t, kc, stream, 0, 10)
				expect(t, ch, 0, 10)
				for i := range 3 {
					subs := fo.SubscribeStats().Subscribed
					deadline := time.Now().Add(10 * time.Second)
					for fo.SubscribeStats().Subscribed == subs {
						if time.Now().After(deadline) {
							t.Fatalf("no new subscription 10s after subscription %d", subs)
						}
						time.Sleep(20 * time.Millisecond)
					}
					putN(t, kc, stream, 10+10*i, 10)
					expect(t, ch, 10+10*i, 10)
				}
				if tc.name == "idle" && idle.Load() == 0 {
					t.Error("no subscription was taken as dead for want of events")
				}
				if st := fo.SubscribeStats(); st.ResourceInUse+st.LimitExceeded != 0 {
					t.Errorf("subscribe rules broken: %+v", st)
				}
			})
		})
	}
}

// TestSubscriberFenced: a subscription whose lease lapses is closed (at
// most watchMax after it lapses; the wait below, 30s, only bounds a hang:
// with Renew and Idle an hour nothing but the lease ends it sooner), and no
// new one is made until the lease is valid again.
func TestSubscriberFenced(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fo, kc, stream, c := subscriberBench(t, kinesisfake.FanOutRules{TakeoverAfter: 100 * time.Millisecond})
		validUntil := time.Now().Add(time.Hour)
		var mu = make(chan struct{}, 1)
		mu <- struct{}{}
		valid := func() time.Duration { <-mu; defer func() { mu <- struct{}{} }(); return time.Until(validUntil) }
		setValid := func(d time.Duration) { <-mu; validUntil = time.Now().Add(d); mu <- struct{}{} }
		s := read.NewSubscriber(read.SubscriberConfig{FanOut: &read.FanOutConfig{Consumer: c, Renew: time.Hour, Idle: time.Hour},
			Stream: stream, ShardID: "shardId-000000000000", Start: kltype.TrimHorizon, ValidFor: valid})
		ctx, cancel := context.WithCancel(context.Background())
		ch := feedOf(ctx, t, s)
		defer stopFeed(cancel, ch)
		putN(t, kc, stream, 0, 5)
		expect(t, ch, 0, 5)
		setValid(300 * time.Millisecond)
		deadline := time.Now().Add(30 * time.Second)
		for fo.Subscriptions("shardId-000000000000") != 0 {
			if time.Now().After(deadline) {
				t.Fatal("subscription still open 30s after its lease lapsed")
			}
			time.Sleep(10 * time.Millisecond)
		}
		subs := fo.SubscribeStats().Subscribed
		time.Sleep(time.Second) // fenced a while: no new subscription
		if got := fo.SubscribeStats().Subscribed; got != subs {
			t.Fatalf("%d subscriptions made while the lease was not valid", got-subs)
		}
		setValid(time.Hour)
		putN(t, kc, stream, 5, 5)
		expect(t, ch, 5, 5)
	})
}

// TestSubscriberCheckpointNotInShard: a checkpoint Kinesis refuses is a
// *kltype.CheckpointError, not retried.
func TestSubscriberCheckpointNotInShard(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		_, _, stream, c := subscriberBench(t, kinesisfake.FanOutRules{})
		s := read.NewSubscriber(read.SubscriberConfig{FanOut: &read.FanOutConfig{Consumer: c}, Stream: stream, ShardID: "shardId-000000000000",
			Start: kltype.AfterSequenceNumber("49590338271490256608559692538361571095921575989136588898")})
		defer s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := s.Next(ctx)
		var cpErr *kltype.CheckpointError
		if !errors.As(err, &cpErr) || !errors.Is(err, kltype.ErrCheckpointNotInShard) {
			t.Fatalf("got %v, want a CheckpointError", err)
		}
	})
}

// TestSubscriberLatestResumes: a subscription from LATEST that broke before
// any record came resumes after the last event's continuation, not at
// LATEST again, so the records put while it was down are not skipped.
func TestSubscriberLatestResumes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fo, kc, stream, c := subscriberBench(t, kinesisfake.FanOutRules{TakeoverAfter: 100 * time.Millisecond, EventInterval: 100 * time.Millisecond})
		putN(t, kc, stream, -5, 5) // before LATEST: never delivered
		var events atomic.Int64
		s := read.NewSubscriber(read.SubscriberConfig{FanOut: &read.FanOutConfig{Consumer: c}, Stream: stream, ShardID: "shardId-000000000000", Start: kltype.Latest,
			ValidFor: func() time.Duration { return time.Hour }, OnEvent: func(int64) { events.Add(1) }})
		ctx, cancel := context.WithCancel(context.Background())
		ch := feedOf(ctx, t, s)
		defer stopFeed(cancel, ch)
		deadline := time.Now().Add(10 * time.Second)
		for events.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no event in 10s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		subs := fo.SubscribeStats().Subscribed
		if fo.DropSubscriptions("shardId-000000000000") != 1 {
			t.Fatal("no subscription to drop")
		}
		putN(t, kc, stream, 0, 5) // while the subscriber waits a second to subscribe again
		expect(t, ch, 0, 5)
		if got := fo.SubscribeStats().Subscribed; got != subs+1 {
			t.Errorf("%d new subscriptions, want 1 (the records came on the new one)", got-subs)
		}
	})
}

// TestSubscriberSlowConsumer: time spent handling the previous event does
// not count as the subscription's silence: a consumer slower than Idle
// with events waiting never has its subscription taken as dead.
func TestSubscriberSlowConsumer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		_, kc, stream, c := subscriberBench(t, kinesisfake.FanOutRules{TakeoverAfter: 100 * time.Millisecond, MaxEventRecords: 1})
		var idle atomic.Int64
		s := read.NewSubscriber(read.SubscriberConfig{FanOut: &read.FanOutConfig{Consumer: c, Idle: 300 * time.Millisecond}, Stream: stream, ShardID: "shardId-000000000000",
			Start: kltype.TrimHorizon, ValidFor: func() time.Duration { return time.Hour },
			OnRetry: func(err error, _ time.Duration) {
				if errors.Is(err, read.ErrIdle) {
					idle.Add(1)
				}
			}})
		defer s.Close()
		putN(t, kc, stream, 0, 6)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for want := 0; want < 6; {
			b, err := s.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range b.Records {
				if got := string(r.Data); got != fmt.Sprint(want) {
					t.Fatalf("record %s, want %d", got, want)
				}
				want++
			}
			time.Sleep(500 * time.Millisecond) // handling, longer than Idle
		}
		if n := idle.Load(); n != 0 {
			t.Errorf("%d subscriptions taken as dead while events waited", n)
		}
	})
}

// bufferedEvents is a FanOut client whose SubscribeToShard answers (through
// the SDK) with events already in the connection, as an HTTP/2 stream's
// receive window holds them: each Read returns the next one at once, then
// blocks until the body is closed. Every other call goes to next.
type bufferedEvents struct {
	kinesisx.FanOut
	kc *kinesis.Client
}

func newBufferedEvents(next kinesisx.FanOut, events int) *bufferedEvents {
	enc := eventstream.NewEncoder()
	msg := func(typ string, payload []byte) []byte {
		var m eventstream.Message
		m.Headers.Set(eventstream.MessageTypeHeader, eventstream.StringValue("event"))
		m.Headers.Set(eventstream.EventTypeHeader, eventstream.StringValue(typ))
		m.Headers.Set(eventstream.ContentTypeHeader, eventstream.StringValue("application/json"))
		m.Payload = payload
		var b bytes.Buffer
		_ = enc.Encode(&b, m)
		return b.Bytes()
	}
	rt := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		chunks := [][]byte{msg("initial-response", []byte("{}"))}
		for i := range events {
			chunks = append(chunks, msg("SubscribeToShardEvent", fmt.Appendf(nil,
				`{"Records":[{"Data":"%s","PartitionKey":"k","SequenceNumber":"%d"}],"ContinuationSequenceNumber":"%d","MillisBehindLatest":0}`,
				base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%d", i)), 1000+i, 1000+i)))
		}
		return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/2.0", ProtoMajor: 2,
			Header: http.Header{"Content-Type": {"application/vnd.amazon.eventstream"}}, ContentLength: -1,
			Body: &windowBody{chunks: chunks, closed: make(chan struct{})}, Request: req}, nil
	})
	kc := kinesis.New(kinesis.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://buffered.invalid"),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""), HTTPClient: &http.Client{Transport: rt}, RetryMaxAttempts: 1})
	return &bufferedEvents{FanOut: next, kc: kc}
}

func (b *bufferedEvents) SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error) {
	return b.kc.SubscribeToShard(ctx, in, optFns...)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// windowBody hands out its chunks at once, then blocks until closed;
// reads after Close fail.
type windowBody struct {
	mu     sync.Mutex
	chunks [][]byte
	closed chan struct{}
	once   sync.Once
}

func (w *windowBody) Read(p []byte) (int, error) {
	w.mu.Lock()
	select {
	case <-w.closed:
		w.mu.Unlock()
		return 0, errors.New("body closed")
	default:
	}
	if len(w.chunks) > 0 {
		n := copy(p, w.chunks[0])
		w.chunks[0] = w.chunks[0][n:]
		if len(w.chunks[0]) == 0 {
			w.chunks = w.chunks[1:]
		}
		w.mu.Unlock()
		return n, nil
	}
	w.mu.Unlock()
	<-w.closed
	return 0, errors.New("body closed")
}

func (w *windowBody) Close() error {
	w.once.Do(func() { close(w.closed) })
	return nil
}

// TestSubscriberFencedReadsNothingHeld: once the lease is found not valid,
// the subscriber hands over none of the events its connection already
// holds (Kinesis pushes up to the HTTP/2 window ahead of the reader): the
// watch closes the subscription's body as well as cancelling its request.
func TestSubscriberFencedReadsNothingHeld(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		_, _, stream, c := subscriberBench(t, kinesisfake.FanOutRules{})
		c.Client = newBufferedEvents(c.Client, 1000)
		var valid atomic.Bool
		valid.Store(true)
		s := read.NewSubscriber(read.SubscriberConfig{FanOut: &read.FanOutConfig{Consumer: c, Renew: time.Hour, Idle: time.Hour},
			Stream: stream, ShardID: "shardId-000000000000", Start: kltype.TrimHorizon,
			ValidFor: func() time.Duration {
				if valid.Load() {
					return time.Hour
				}
				return 0
			}})
		defer s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b, err := s.Next(ctx)
		if err != nil || len(b.Records) != 1 || string(b.Records[0].Data) != "0" {
			t.Fatalf("first event: %+v, %v", b, err)
		}
		valid.Store(false)
		time.Sleep(2 * time.Second) // the watch looks at least once a second
		next, stop := context.WithTimeout(ctx, 10*time.Second)
		defer stop()
		if b, err := s.Next(next); err == nil {
			t.Fatalf("an event held by the connection handed over after the lease lapsed: %d records, the first %q", len(b.Records), b.Records[0].Data)
		}
	})
}
