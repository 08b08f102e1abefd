package kinesisfake_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kinesisfake"
)

// TestClientWire: every call through Client goes through the SDK's own
// serialisation and back, and gives what the in-memory methods give:
// records' data, keys, sequence numbers and arrival times to the
// millisecond, paging, and the SDK's error types.
func TestClientWire(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	k := kinesisfake.New()
	if err := k.CreateStream("s", 2); err != nil {
		t.Fatal(err)
	}
	c := k.Client()
	var want []string
	for i := range 20 {
		out, err := c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String(fmt.Sprint("k", i)), Data: []byte{byte(i), 0, 255}})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(out.ShardId) == "shardId-000000000000" {
			want = append(want, aws.ToString(out.SequenceNumber))
		}
	}
	ls, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("s")})
	if err != nil || len(ls.Shards) != 2 || aws.ToString(ls.Shards[1].HashKeyRange.EndingHashKey) != "340282366920938463463374607431768211455" {
		t.Fatalf("ListShards: %+v, %v; want 2 shards, the last ending at 2^128-1", ls, err)
	}
	at := time.Now().Add(-time.Hour)
	it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"),
		ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: &at})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(100)})
	if err != nil {
		t.Fatal(err)
	}
	direct, err := k.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(100)})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []string
	for i, r := range got.Records {
		d := direct.Records[i]
		seqs = append(seqs, aws.ToString(r.SequenceNumber))
		if !slices.Equal(r.Data, d.Data) || aws.ToString(r.PartitionKey) != aws.ToString(d.PartitionKey) ||
			!aws.ToTime(r.ApproximateArrivalTimestamp).Equal(aws.ToTime(d.ApproximateArrivalTimestamp).Truncate(time.Millisecond)) ||
			r.EncryptionType != types.EncryptionTypeNone {
			t.Errorf("record %d through the wire: %+v, want %+v", i, r, d)
		}
	}
	if !slices.Equal(seqs, want) || got.NextShardIterator == nil || aws.ToInt64(got.MillisBehindLatest) != 0 {
		t.Errorf("GetRecords through the wire: %v (next %v, behind %v), want %v", seqs, got.NextShardIterator, got.MillisBehindLatest, want)
	}

	_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: aws.String("nonsense")})
	var invalid *types.InvalidArgumentException
	if !errors.As(err, &invalid) {
		t.Errorf("GetRecords with a bad iterator: %v, want InvalidArgumentException", err)
	}
	_, err = c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String("missing")})
	var notFound *types.ResourceNotFoundException
	if !errors.As(err, &notFound) {
		t.Errorf("ListShards of a missing stream: %v, want ResourceNotFoundException", err)
	}
	k.Throttle(kinesisfake.OpGetShardIterator, 1)
	_, err = c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("s"), ShardId: aws.String("shardId-000000000000"),
		ShardIteratorType: types.ShardIteratorTypeLatest}, func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	var pte *types.ProvisionedThroughputExceededException
	if !errors.As(err, &pte) {
		t.Errorf("a throttled GetShardIterator: %v, want ProvisionedThroughputExceededException", err)
	}
}

// TestServeHTTP: the same wire on a real HTTP server, SubscribeToShard's
// event stream included.
func TestServeHTTP(t *testing.T) {
	t.Parallel()
	k := kinesisfake.New(kinesisfake.WithFanOutRules(kinesisfake.FanOutRules{EventInterval: 20 * time.Millisecond}))
	srv := httptest.NewServer(k)
	defer srv.Close()
	c := k.Client(func(o *kinesis.Options) { o.BaseEndpoint = aws.String(srv.URL); o.HTTPClient = srv.Client() })
	ctx := t.Context()
	if err := k.CreateStream("s", 1); err != nil {
		t.Fatal(err)
	}
	arn := register(t, c, "s", "app")
	put(t, c, "s", 3)
	recs := subscribeRead(t, c, arn, types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}, 3)
	if len(recs) != 3 || string(recs[2].Data) != "r2" {
		t.Errorf("through HTTP: %d records, want r0..r2", len(recs))
	}
	_, err := c.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String("nope")})
	var notFound *types.ResourceNotFoundException
	if !errors.As(err, &notFound) {
		t.Errorf("DescribeStreamSummary of a missing stream over HTTP: %v, want ResourceNotFoundException", err)
	}
}

func register(t *testing.T, c *kinesis.Client, stream, name string) string {
	t.Helper()
	ss, err := c.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.RegisterStreamConsumer(t.Context(), &kinesis.RegisterStreamConsumerInput{StreamARN: ss.StreamDescriptionSummary.StreamARN, ConsumerName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.Consumer.ConsumerARN)
}

// put puts n records r0, r1, ... with one PutRecords call.
func put(t *testing.T, c *kinesis.Client, stream string, n int) {
	t.Helper()
	in := &kinesis.PutRecordsInput{StreamName: aws.String(stream)}
	for i := range n {
		in.Records = append(in.Records, types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: fmt.Appendf(nil, "r%d", i)})
	}
	if _, err := c.PutRecords(t.Context(), in); err != nil {
		t.Fatal(err)
	}
}

// subscribeRead subscribes and reads events until n records came, then
// closes the subscription.
func subscribeRead(t *testing.T, c *kinesis.Client, arn string, pos types.StartingPosition, n int) []types.Record {
	t.Helper()
	out, err := c.SubscribeToShard(t.Context(), &kinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String("shardId-000000000000"), StartingPosition: &pos}, kinesisx.OwnEventStreamCodec)
	if err != nil {
		t.Fatal(err)
	}
	es := out.GetStream()
	defer es.Close()
	var recs []types.Record
	for ev := range es.Events() {
		recs = append(recs, ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent).Value.Records...)
		if len(recs) >= n {
			return recs
		}
	}
	t.Fatalf("the stream ended after %d of %d records: %v", len(recs), n, es.Err())
	return nil
}

// TestSubscribeToShardRules: pushed events in order, events without
// records while nothing comes, the one-call-a-second limit, the 5-second
// rule and the takeover, the end of a closed shard, injected exceptions
// and resets, a deregistered consumer, and the 5-minute end: all in a
// synctest bubble, on the SDK's own client and event-stream decoder.
func TestSubscribeToShardRules(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		k := kinesisfake.New(kinesisfake.WithFanOutRules(kinesisfake.FanOutRules{ActivateAfter: 2 * time.Second}))
		if err := k.CreateStream("s", 1); err != nil {
			t.Fatal(err)
		}
		c := k.Client()
		arn := register(t, c, "s", "app")
		shard := aws.String("shardId-000000000000")
		trim := &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}
		sub := func() (*kinesis.SubscribeToShardEventStream, error) {
			out, err := c.SubscribeToShard(ctx, &kinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: shard, StartingPosition: trim},
				func(o *kinesis.Options) { o.RetryMaxAttempts = 1 }, kinesisx.OwnEventStreamCodec)
			if err != nil {
				return nil, err
			}
			return out.GetStream(), nil
		}
		var inUse *types.ResourceInUseException
		var limit *types.LimitExceededException
		if _, err := sub(); !errors.As(err, &inUse) {
			t.Fatalf("subscribing while the consumer is CREATING: %v, want ResourceInUseException", err)
		}
		time.Sleep(2 * time.Second)
		es, err := sub()
		if err != nil {
			t.Fatal(err)
		}
		event := func(es *kinesis.SubscribeToShardEventStream) types.SubscribeToShardEvent {
			t.Helper()
			ev, ok := <-es.Events()
			if !ok {
				t.Fatalf("the stream ended: %v", es.Err())
			}
			return ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent).Value
		}
		start := time.Now()
		if ev := event(es); len(ev.Records) != 0 || time.Since(start) != time.Second || ev.ContinuationSequenceNumber == nil {
			t.Errorf("nothing put: %d records after %v (continuation %v), want an empty event after 1s", len(ev.Records), time.Since(start), ev.ContinuationSequenceNumber)
		}
		put(t, c, "s", 3)
		ev := event(es)
		if len(ev.Records) != 3 || string(ev.Records[0].Data) != "r0" || aws.ToString(ev.ContinuationSequenceNumber) != aws.ToString(ev.Records[2].SequenceNumber) {
			t.Errorf("3 records put: an event of %d, continuation %v", len(ev.Records), aws.ToString(ev.ContinuationSequenceNumber))
		}

		if _, err := sub(); !errors.As(err, &inUse) {
			t.Errorf("a second subscription at once: %v, want ResourceInUseException (the 5-second rule)", err)
		}
		if _, err := sub(); !errors.As(err, &limit) {
			t.Errorf("a third call within a second: %v, want LimitExceededException", err)
		}
		time.Sleep(5 * time.Second)
		es2, err := sub()
		if err != nil {
			t.Fatalf("after 5s: %v, want the subscription taken over", err)
		}
		for range es.Events() {
		}
		if !errors.As(es.Err(), &inUse) {
			t.Errorf("the old subscription after a takeover: %v, want ResourceInUseException", es.Err())
		}
		if n := len(event(es2).Records); n != 3 {
			t.Errorf("the new subscription from TRIM_HORIZON: %d records, want 3", n)
		}

		k.FailSubscriptions("shardId-000000000000", &types.InternalFailureException{Message: aws.String("injected")})
		for range es2.Events() {
		}
		var internal *types.InternalFailureException
		if !errors.As(es2.Err(), &internal) {
			t.Errorf("an injected exception: %v, want InternalFailureException", es2.Err())
		}
		time.Sleep(5 * time.Second)
		es3, err := sub()
		if err != nil {
			t.Fatal(err)
		}
		event(es3)
		if n := k.DropSubscriptions("shardId-000000000000"); n != 1 {
			t.Errorf("DropSubscriptions ended %d, want 1", n)
		}
		for range es3.Events() {
		}
		var api smithy.APIError
		if err := es3.Err(); err == nil || errors.As(err, &api) {
			t.Errorf("a dropped subscription: %v, want a broken stream, not an exception", err)
		}

		// A closed shard: the final event lists the children, with no
		// continuation.
		time.Sleep(5 * time.Second)
		es4, err := sub()
		if err != nil {
			t.Fatal(err)
		}
		event(es4)
		children, err := k.SplitShard("s", "shardId-000000000000")
		if err != nil {
			t.Fatal(err)
		}
		last := event(es4)
		if len(last.ChildShards) != 2 || aws.ToString(last.ChildShards[0].ShardId) != children[0] || last.ContinuationSequenceNumber != nil {
			t.Errorf("the end of a closed shard: %+v, want its 2 children and no continuation", last)
		}
		if _, ok := <-es4.Events(); ok || es4.Err() != nil {
			t.Errorf("after the final event: the stream goes on, or ended with %v", es4.Err())
		}

		// The 5-minute end, then a deregistered consumer.
		time.Sleep(5 * time.Second)
		shard = aws.String(children[0])
		es5, err := sub()
		if err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		for range es5.Events() {
		}
		if d := time.Since(start); d != 5*time.Minute || es5.Err() != nil {
			t.Errorf("a subscription ended after %v with %v, want a clean end at 5m", d, es5.Err())
		}
		es6, err := sub()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.DeregisterStreamConsumer(ctx, &kinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(arn)}); err != nil {
			t.Fatal(err)
		}
		for range es6.Events() {
		}
		var notFound *types.ResourceNotFoundException
		if !errors.As(es6.Err(), &notFound) {
			t.Errorf("the consumer deregistered: %v, want ResourceNotFoundException", es6.Err())
		}
		es.Close()
		es2.Close()
		es3.Close()
		es4.Close()
		es5.Close()
		es6.Close()
	})
}

// TestSubscribeEventGap: with FanOutRules.EventGap, records put one by one
// within the gap after an event come together in the next, the gap after
// it.
func TestSubscribeEventGap(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := kinesisfake.New(kinesisfake.WithFanOutRules(kinesisfake.FanOutRules{EventGap: 20 * time.Millisecond}))
		if err := k.CreateStream("s", 1); err != nil {
			t.Fatal(err)
		}
		c := k.Client()
		arn := register(t, c, "s", "app")
		out, err := c.SubscribeToShard(t.Context(), &kinesis.SubscribeToShardInput{ConsumerARN: aws.String(arn), ShardId: aws.String("shardId-000000000000"),
			StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}}, kinesisx.OwnEventStreamCodec)
		if err != nil {
			t.Fatal(err)
		}
		es := out.GetStream()
		defer es.Close()
		next := func() (types.SubscribeToShardEvent, time.Time) {
			t.Helper()
			ev, ok := <-es.Events()
			if !ok {
				t.Fatalf("the stream ended: %v", es.Err())
			}
			return ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent).Value, time.Now()
		}
		put(t, c, "s", 1)
		first, at := next()
		for range 3 {
			put(t, c, "s", 1)
			time.Sleep(5 * time.Millisecond)
		}
		second, at2 := next()
		if len(first.Records) != 1 || len(second.Records) != 3 || at2.Sub(at) != 20*time.Millisecond {
			t.Errorf("events of %d and %d records %v apart, want 1 and 3, 20ms apart", len(first.Records), len(second.Records), at2.Sub(at))
		}
	})
}
