package testutil

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/eventstream"
)

const shard0 = "shardId-000000000000"

// fanOutFixture is a fan-out bench with a stream and an ACTIVE consumer.
type fanOutFixture struct {
	f           *FanOut
	c           *kinesis.Client // on the bench
	stream      string
	streamARN   string
	consumerARN string
}

// fastFanOut is a FanOutConfig whose consumers activate and go at once.
func fastFanOut(cfg FanOutConfig) FanOutConfig {
	if cfg.ActivateAfter == 0 {
		cfg.ActivateAfter = time.Millisecond
	}
	if cfg.DeleteAfter == 0 {
		cfg.DeleteAfter = time.Millisecond
	}
	return cfg
}

func newFanOutFixture(t *testing.T, e Emulator, cfg FanOutConfig, shards int32) *fanOutFixture {
	t.Helper()
	fx := &fanOutFixture{f: FanOutEndpoint(t, e, cfg)}
	fx.c = fx.f.Client()
	fx.stream = StreamName(t)
	CreateStream(t, fx.c, fx.stream, shards)
	fx.streamARN = streamARN(t, fx.c, fx.stream)
	fx.consumerARN = fx.register(t, "consumer")
	return fx
}

func streamARN(t *testing.T, c *kinesis.Client, stream string) string {
	t.Helper()
	out, err := c.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.StreamDescriptionSummary.StreamARN)
}

// register registers a consumer and waits until it is ACTIVE.
func (fx *fanOutFixture) register(t *testing.T, name string) string {
	t.Helper()
	out, err := fx.c.RegisterStreamConsumer(t.Context(), &kinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String(fx.streamARN), ConsumerName: aws.String(name),
	})
	if err != nil {
		t.Fatalf("RegisterStreamConsumer: %v", err)
	}
	arn := aws.ToString(out.Consumer.ConsumerARN)
	waitFor(t, "consumer "+name+" ACTIVE", 5*time.Second, func() bool {
		d, err := fx.c.DescribeStreamConsumer(t.Context(), &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
		if err != nil {
			t.Fatalf("DescribeStreamConsumer: %v", err)
		}
		return d.ConsumerDescription.ConsumerStatus == ktypes.ConsumerStatusActive
	})
	return arn
}

func (fx *fanOutFixture) put(t *testing.T, n int, prefix string) {
	t.Helper()
	entries := make([]ktypes.PutRecordsRequestEntry, n)
	for i := range entries {
		entries[i] = ktypes.PutRecordsRequestEntry{
			Data:         fmt.Appendf(nil, "%s-%03d", prefix, i),
			PartitionKey: aws.String(fmt.Sprintf("pk-%d", i)),
		}
	}
	out, err := fx.c.PutRecords(t.Context(), &kinesis.PutRecordsInput{StreamName: aws.String(fx.stream), Records: entries})
	if err != nil {
		t.Fatalf("PutRecords: %v", err)
	}
	if aws.ToInt32(out.FailedRecordCount) != 0 {
		t.Fatalf("PutRecords: %d records failed", aws.ToInt32(out.FailedRecordCount))
	}
}

// subscribe calls SubscribeToShard once (no SDK retries).
func subscribe(t *testing.T, c *kinesis.Client, consumerARN, shardID string, pos ktypes.StartingPosition) (*kinesis.SubscribeToShardEventStream, error) {
	t.Helper()
	out, err := c.SubscribeToShard(t.Context(), &kinesis.SubscribeToShardInput{
		ConsumerARN:      aws.String(consumerARN),
		ShardId:          aws.String(shardID),
		StartingPosition: &pos,
	}, FreshProtocol, func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		return nil, err
	}
	es := out.GetStream()
	t.Cleanup(func() { _ = es.Close() })
	return es, nil
}

func mustSubscribe(t *testing.T, c *kinesis.Client, consumerARN, shardID string, pos ktypes.StartingPosition) *kinesis.SubscribeToShardEventStream {
	t.Helper()
	es, err := subscribe(t, c, consumerARN, shardID, pos)
	if err != nil {
		t.Fatalf("SubscribeToShard %s: %v", shardID, err)
	}
	return es
}

var trimHorizon = ktypes.StartingPosition{Type: ktypes.ShardIteratorTypeTrimHorizon}

// nextEvent returns the stream's next event, or nil when it ended.
func nextEvent(t *testing.T, es *kinesis.SubscribeToShardEventStream, timeout time.Duration) *ktypes.SubscribeToShardEvent {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case ev, ok := <-es.Events():
		if !ok {
			return nil
		}
		m, isEvent := ev.(*ktypes.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
		if !isEvent {
			t.Fatalf("unexpected event %T", ev)
		}
		return &m.Value
	case <-timer.C:
		t.Fatalf("no event within %v", timeout)
	}
	return nil
}

// drain reads events until the stream ends.
func drain(t *testing.T, es *kinesis.SubscribeToShardEventStream, timeout time.Duration) []*ktypes.SubscribeToShardEvent {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var evs []*ktypes.SubscribeToShardEvent
	for {
		ev := nextEvent(t, es, time.Until(deadline))
		if ev == nil {
			return evs
		}
		evs = append(evs, ev)
	}
}

// streamRecords reads events until n records came.
func streamRecords(t *testing.T, es *kinesis.SubscribeToShardEventStream, n int, timeout time.Duration) ([]ktypes.Record, []*ktypes.SubscribeToShardEvent) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var recs []ktypes.Record
	var evs []*ktypes.SubscribeToShardEvent
	for len(recs) < n {
		ev := nextEvent(t, es, time.Until(deadline))
		if ev == nil {
			t.Fatalf("stream ended after %d of %d records: %v", len(recs), n, es.Err())
		}
		evs = append(evs, ev)
		recs = append(recs, ev.Records...)
	}
	return recs, evs
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sleepUntil sleeps until t, for tests of the bench's time rules.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// wantAPIError fails unless err is the SDK's typed error T.
func wantAPIError[T error](t *testing.T, what string, err error) T {
	t.Helper()
	var target T
	if !errors.As(err, &target) {
		t.Fatalf("%s: got error %v (%T), want %T", what, err, err, target)
	}
	return target
}

// backendRecords reads a shard from the emulator directly.
func backendRecords(t *testing.T, e Emulator, stream, shardID string) []ktypes.Record {
	t.Helper()
	c := KinesisClient(t, e)
	it, err := c.GetShardIterator(t.Context(), &kinesis.GetShardIteratorInput{
		StreamName: aws.String(stream), ShardId: aws.String(shardID), ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	var recs []ktypes.Record
	iter := it.ShardIterator
	for iter != nil {
		out, err := c.GetRecords(t.Context(), &kinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, out.Records...)
		if len(out.Records) == 0 {
			break
		}
		iter = out.NextShardIterator
	}
	return recs
}

func sameRecords(t *testing.T, got, want []ktypes.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Data, w.Data) || aws.ToString(g.PartitionKey) != aws.ToString(w.PartitionKey) ||
			aws.ToString(g.SequenceNumber) != aws.ToString(w.SequenceNumber) {
			t.Fatalf("record %d: got %q/%s/%s, want %q/%s/%s", i, g.Data, aws.ToString(g.PartitionKey), aws.ToString(g.SequenceNumber),
				w.Data, aws.ToString(w.PartitionKey), aws.ToString(w.SequenceNumber))
		}
		if g.ApproximateArrivalTimestamp == nil || w.ApproximateArrivalTimestamp == nil ||
			!g.ApproximateArrivalTimestamp.Truncate(time.Millisecond).Equal(w.ApproximateArrivalTimestamp.Truncate(time.Millisecond)) {
			t.Fatalf("record %d: arrival %v, want %v", i, g.ApproximateArrivalTimestamp, w.ApproximateArrivalTimestamp)
		}
		if g.EncryptionType != ktypes.EncryptionTypeNone {
			t.Fatalf("record %d: EncryptionType %q", i, g.EncryptionType)
		}
	}
}

func TestFanOutDelivers(t *testing.T) {
	t.Parallel()
	for _, e := range KinesisEmulators() {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			fx := newFanOutFixture(t, e, fastFanOut(FanOutConfig{Limit: 7}), 1)
			fx.put(t, 20, "before")

			es := mustSubscribe(t, fx.c, fx.consumerARN, shard0, trimHorizon)
			got, evs := streamRecords(t, es, 20, 10*time.Second)
			for i, ev := range evs {
				if len(ev.Records) > 7 {
					t.Errorf("event %d has %d records, Limit is 7", i, len(ev.Records))
				}
				if ev.MillisBehindLatest == nil {
					t.Errorf("event %d: no MillisBehindLatest", i)
				}
				last := ev.Records[len(ev.Records)-1].SequenceNumber
				if aws.ToString(ev.ContinuationSequenceNumber) != aws.ToString(last) {
					t.Errorf("event %d: continuation %s, want the last record's %s", i, aws.ToString(ev.ContinuationSequenceNumber), aws.ToString(last))
				}
			}
			// Records put while subscribed follow, in order.
			fx.put(t, 5, "during")
			more, _ := streamRecords(t, es, 5, 10*time.Second)
			got = append(got, more...)
			want := backendRecords(t, e, fx.stream, shard0)
			sameRecords(t, got, want)

			// Another consumer starting after the 10th record.
			other := fx.register(t, "other")
			es2 := mustSubscribe(t, fx.c, other, shard0, ktypes.StartingPosition{
				Type: ktypes.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: want[9].SequenceNumber,
			})
			got2, _ := streamRecords(t, es2, 15, 10*time.Second)
			sameRecords(t, got2, want[10:])
			if st := fx.f.Stats(); st.Subscribes != 2 || st.Active[shard0] != 2 {
				t.Errorf("stats %+v, want 2 subscribes, 2 active", st)
			}
		})
	}
}

// TestFanOutWireFormat reads a subscription's raw response with smithy-go's
// decoder: the headers of each message and the JSON of an event.
func TestFanOutWireFormat(t *testing.T) {
	t.Parallel()
	fx := newFanOutFixture(t, Kinesalite, fastFanOut(FanOutConfig{}), 1)
	fx.put(t, 2, "wire")
	post := func(op, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, fx.f.URL(), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Amz-Target", "Kinesis_20131202."+op)
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	t.Cleanup(http.DefaultClient.CloseIdleConnections)

	// An error before the stream.
	resp := post("SubscribeToShard", `{"ConsumerARN":"`+fx.consumerARN+`x","ShardId":"`+shard0+`","StartingPosition":{"Type":"TRIM_HORIZON"}}`)
	body, _ := io.ReadAll(resp.Body)
	var errBody map[string]string
	if err := json.Unmarshal(body, &errBody); err != nil || resp.StatusCode != 400 || errBody["__type"] != "ResourceNotFoundException" || errBody["message"] == "" {
		t.Fatalf("error response %d %s (%v)", resp.StatusCode, body, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
		t.Errorf("error Content-Type %q", ct)
	}

	resp = post("SubscribeToShard", `{"ConsumerARN":"`+fx.consumerARN+`","ShardId":"`+shard0+`","StartingPosition":{"Type":"TRIM_HORIZON"}}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.amazon.eventstream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	dec := eventstream.NewDecoder()
	header := func(m eventstream.Message, name string) string {
		if v := m.Headers.Get(name); v != nil {
			return v.String()
		}
		return "<none>"
	}
	msg, err := dec.Decode(resp.Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if header(msg, ":message-type") != "event" || header(msg, ":event-type") != "initial-response" ||
		header(msg, ":content-type") != "application/json" || string(msg.Payload) != "{}" {
		t.Fatalf("first message: headers %v, payload %s", msg.Headers, msg.Payload)
	}
	msg, err = dec.Decode(resp.Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if header(msg, ":message-type") != "event" || header(msg, ":event-type") != "SubscribeToShardEvent" ||
		header(msg, ":content-type") != "application/json" {
		t.Fatalf("second message: headers %v", msg.Headers)
	}
	var ev struct {
		Records []struct {
			Data                        []byte
			PartitionKey                string
			SequenceNumber              string
			ApproximateArrivalTimestamp float64
			EncryptionType              string
		}
		ContinuationSequenceNumber *string
		MillisBehindLatest         *int64
	}
	if err := json.Unmarshal(msg.Payload, &ev); err != nil {
		t.Fatalf("event payload %s: %v", msg.Payload, err)
	}
	if len(ev.Records) != 2 || string(ev.Records[0].Data) != "wire-000" || ev.Records[1].PartitionKey != "pk-1" ||
		ev.Records[0].EncryptionType != "NONE" || ev.MillisBehindLatest == nil ||
		aws.ToString(ev.ContinuationSequenceNumber) != ev.Records[1].SequenceNumber ||
		time.Since(time.UnixMilli(int64(ev.Records[0].ApproximateArrivalTimestamp*1000))) > time.Minute {
		t.Fatalf("event payload %s", msg.Payload)
	}

	// An exception mid-stream.
	fx.f.FailNext(shard0, "InternalFailureException")
	msg, err = dec.Decode(resp.Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if header(msg, ":message-type") != "exception" || header(msg, ":exception-type") != "InternalFailureException" ||
		header(msg, ":content-type") != "application/json" || !bytes.Contains(msg.Payload, []byte(`"message":`)) {
		t.Fatalf("exception message: headers %v, payload %s", msg.Headers, msg.Payload)
	}
	if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) != 0 {
		t.Fatalf("after the exception: %q, %v; want a clean end", rest, err)
	}
}

// TestFanOutDefaultRules checks the default one-call-per-second and
// 5-second rules.
func TestFanOutDefaultRules(t *testing.T) {
	t.Parallel()
	fx := newFanOutFixture(t, Kinesalite, FanOutConfig{}, 1)
	mustSubscribe(t, fx.c, fx.consumerARN, shard0, trimHorizon)
	_, err := subscribe(t, fx.c, fx.consumerARN, shard0, trimHorizon)
	wantAPIError[*ktypes.LimitExceededException](t, "a second call at once", err)
	second := time.Now()
	sleepUntil(second.Add(time.Second + 20*time.Millisecond))
	_, err = subscribe(t, fx.c, fx.consumerARN, shard0, trimHorizon)
	wantAPIError[*ktypes.ResourceInUseException](t, "a call 1s after the last, within 5s of the last success", err)
	if st := fx.f.Stats(); st.Subscribes != 1 || st.LimitExceeded != 1 || st.ResourceInUse != 1 || st.Takeovers != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestFanOutCreatingConsumer: a consumer that is not ACTIVE yet cannot
// subscribe.
func TestFanOutCreatingConsumer(t *testing.T) {
	t.Parallel()
	f := FanOutEndpoint(t, Kinesalite, FanOutConfig{ActivateAfter: time.Hour})
	fx := &fanOutFixture{f: f, c: f.Client(), stream: StreamName(t)}
	CreateStream(t, fx.c, fx.stream, 1)
	fx.streamARN = streamARN(t, fx.c, fx.stream)
	out, err := fx.c.RegisterStreamConsumer(t.Context(), &kinesis.RegisterStreamConsumerInput{
		StreamARN: aws.String(fx.streamARN), ConsumerName: aws.String("c"),
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := fx.c.DescribeStreamConsumer(t.Context(), &kinesis.DescribeStreamConsumerInput{ConsumerARN: out.Consumer.ConsumerARN})
	if err != nil || d.ConsumerDescription.ConsumerStatus != ktypes.ConsumerStatusCreating {
		t.Fatalf("described %+v, %v; want CREATING", d, err)
	}
	_, err = subscribe(t, fx.c, aws.ToString(out.Consumer.ConsumerARN), shard0, trimHorizon)
	if e := wantAPIError[*ktypes.ResourceInUseException](t, "subscribing a CREATING consumer", err); !strings.Contains(e.ErrorMessage(), "CREATING") {
		t.Errorf("message %q does not say CREATING", e.ErrorMessage())
	}
	if st := f.Stats(); st.ResourceInUse != 1 || st.Subscribes != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestFanOutSubscribeErrors(t *testing.T) {
	t.Parallel()
	const interval, takeover = 300 * time.Millisecond, 900 * time.Millisecond
	fx := newFanOutFixture(t, Kinesalite, fastFanOut(FanOutConfig{MinCallInterval: interval, TakeoverAfter: takeover, Heartbeat: 50 * time.Millisecond}), 2)
	c := fx.c

	_, err := subscribe(t, c, fx.consumerARN+"-nope", shard0, trimHorizon)
	wantAPIError[*ktypes.ResourceNotFoundException](t, "unknown consumer", err)
	_, err = subscribe(t, c, fx.consumerARN, "shardId-000000000009", trimHorizon)
	wantAPIError[*ktypes.ResourceNotFoundException](t, "unknown shard", err)

	// A bad starting position is the backend's InvalidArgumentException.
	_, err = subscribe(t, c, fx.consumerARN, "shardId-000000000001", ktypes.StartingPosition{
		Type: ktypes.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String("12345"),
	})
	wantAPIError[*ktypes.InvalidArgumentException](t, "bad sequence number", err)
	// Checked before the rate rule.
	_, err = subscribe(t, c, fx.consumerARN, "shardId-000000000001", ktypes.StartingPosition{Type: "SOMEWHERE"})
	wantAPIError[*ktypes.InvalidArgumentException](t, "bad type", err)
	// The failed call counted.
	_, err = subscribe(t, c, fx.consumerARN, "shardId-000000000001", trimHorizon)
	wantAPIError[*ktypes.LimitExceededException](t, "a call right after a failed one", err)

	old := mustSubscribe(t, c, fx.consumerARN, shard0, trimHorizon)
	success := time.Now()
	_, err = subscribe(t, c, fx.consumerARN, shard0, trimHorizon)
	wantAPIError[*ktypes.LimitExceededException](t, "a call within MinCallInterval", err)
	last := time.Now()
	if ev := nextEvent(t, old, 5*time.Second); ev == nil {
		t.Fatalf("no event: %v", old.Err())
	}
	sleepUntil(last.Add(interval + 10*time.Millisecond))
	_, err = subscribe(t, c, fx.consumerARN, shard0, trimHorizon)
	wantAPIError[*ktypes.ResourceInUseException](t, "a call within TakeoverAfter", err)
	if old.Err() != nil {
		t.Fatalf("the refused calls broke the subscription: %v", old.Err())
	}

	// The other shard has its own clock.
	mustSubscribe(t, c, fx.consumerARN, "shardId-000000000001", trimHorizon)

	sleepUntil(success.Add(takeover))
	newer := mustSubscribe(t, c, fx.consumerARN, shard0, trimHorizon)
	drain(t, old, 5*time.Second)
	wantAPIError[*ktypes.ResourceInUseException](t, "the taken-over stream", old.Err())
	if ev := nextEvent(t, newer, 5*time.Second); ev == nil {
		t.Fatalf("the new subscription ended: %v", newer.Err())
	}
	waitFor(t, "one active subscription of shard 0", 5*time.Second, func() bool { return fx.f.Active(shard0) == 1 })
	st := fx.f.Stats()
	if st.Subscribes != 3 || st.Takeovers != 1 || st.LimitExceeded != 2 || st.ResourceInUse != 1 ||
		st.Active[shard0] != 1 || st.Active["shardId-000000000001"] != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestFanOutLifetime: a subscription ends cleanly after Lifetime, and every
// event, with records or not, has a ContinuationSequenceNumber.
func TestFanOutLifetime(t *testing.T) {
	t.Parallel()
	const lifetime = time.Second
	fx := newFanOutFixture(t, Kinesalite, fastFanOut(FanOutConfig{Lifetime: lifetime, Heartbeat: 100 * time.Millisecond}), 1)
	fx.put(t, 3, "life")
	want := backendRecords(t, Kinesalite, fx.stream, shard0)
	start := time.Now()
	es := mustSubscribe(t, fx.c, fx.consumerARN, shard0, trimHorizon)
	evs := drain(t, es, 5*time.Second)
	if took := time.Since(start); took < lifetime {
		t.Errorf("ended after %v, before Lifetime", took)
	}
	if err := es.Err(); err != nil {
		t.Fatalf("Lifetime end: Err %v, want nil", err)
	}
	var got []ktypes.Record
	heartbeats := 0
	for i, ev := range evs {
		if ev.ContinuationSequenceNumber == nil {
			t.Fatalf("event %d has no ContinuationSequenceNumber", i)
		}
		got = append(got, ev.Records...)
		if len(ev.Records) == 0 {
			heartbeats++
			if c := aws.ToString(ev.ContinuationSequenceNumber); c != aws.ToString(want[len(want)-1].SequenceNumber) {
				t.Errorf("empty event %d: continuation %s, want the last record's", i, c)
			}
		}
	}
	sameRecords(t, got, want)
	if heartbeats < 3 {
		t.Errorf("%d empty events in %v with Heartbeat 100ms", heartbeats, lifetime)
	}
}

// TestFanOutHeartbeatContinuation: before any record, empty events continue
// from the starting sequence number, or the shard's first one.
func TestFanOutHeartbeatContinuation(t *testing.T) {
	t.Parallel()
	fx := newFanOutFixture(t, Kinesalite, fastFanOut(FanOutConfig{Heartbeat: 50 * time.Millisecond}), 1)
	shards, err := fx.c.ListShards(t.Context(), &kinesis.ListShardsInput{StreamName: aws.String(fx.stream)})
	if err != nil {
		t.Fatal(err)
	}
	first := aws.ToString(shards.Shards[0].SequenceNumberRange.StartingSequenceNumber)
	es := mustSubscribe(t, fx.c, fx.consumerARN, shard0, ktypes.StartingPosition{Type: ktypes.ShardIteratorTypeLatest})
	ev := nextEvent(t, es, 5*time.Second)
	if ev == nil || len(ev.Records) != 0 || aws.ToString(ev.ContinuationSequenceNumber) != first {
		t.Fatalf("first event %+v, want no records and continuation %s", ev, first)
	}

	fx.put(t, 2, "hb")
	recs := backendRecords(t, Kinesalite, fx.stream, shard0)
	other := fx.register(t, "other")
	es2 := mustSubscribe(t, fx.c, other, shard0, ktypes.StartingPosition{
		Type: ktypes.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: recs[1].SequenceNumber,
	})
	ev = nextEvent(t, es2, 5*time.Second)
	if ev == nil || len(ev.Records) != 0 || aws.ToString(ev.ContinuationSequenceNumber) != aws.ToString(recs[1].SequenceNumber) {
		t.Fatalf("first event %+v, want no records and continuation %s", ev, aws.ToString(recs[1].SequenceNumber))
	}
	// LATEST saw the records put after it started.
	got, _ := streamRecords(t, es, 2, 5*time.Second)
	sameRecords(t, got, recs)
}

// TestFanOutShardEnd: a resharded shard's subscription delivers its records,
// then an event without records or ContinuationSequenceNumber that names the
// child shards, then ends cleanly.
func TestFanOutShardEnd(t *testing.T) {
	t.Parallel()
	for _, e := range KinesisEmulators() {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			fx := newFanOutFixture(t, e, fastFanOut(FanOutConfig{Heartbeat: 100 * time.Millisecond}), 1)
			fx.put(t, 4, "end")
			es := mustSubscribe(t, fx.c, fx.consumerARN, shard0, trimHorizon)
			got, _ := streamRecords(t, es, 4, 10*time.Second)
			ctx := t.Context()
			if e == KinesisLocal {
				_, err := fx.c.UpdateShardCount(ctx, &kinesis.UpdateShardCountInput{
					StreamName: aws.String(fx.stream), TargetShardCount: aws.Int32(2), ScalingType: ktypes.ScalingTypeUniformScaling,
				})
				if err != nil {
					t.Fatal(err)
				}
			} else {
				_, err := fx.c.SplitShard(ctx, &kinesis.SplitShardInput{
					StreamName: aws.String(fx.stream), ShardToSplit: aws.String(shard0),
					NewStartingHashKey: aws.String("170141183460469231731687303715884105728"),
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			evs := drain(t, es, 20*time.Second)
			if err := es.Err(); err != nil {
				t.Fatalf("Err %v after the shard end, want nil", err)
			}
			if len(evs) == 0 {
				t.Fatal("no events after the reshard")
			}
			for _, ev := range evs {
				got = append(got, ev.Records...)
			}
			sameRecords(t, got, backendRecords(t, e, fx.stream, shard0))
			end := evs[len(evs)-1]
			if len(end.Records) != 0 || end.ContinuationSequenceNumber != nil || len(end.ChildShards) == 0 {
				t.Fatalf("last event: %d records, continuation %v, child shards %v", len(end.Records), aws.ToString(end.ContinuationSequenceNumber), end.ChildShards)
			}
			for _, ev := range evs[:len(evs)-1] {
				if ev.ContinuationSequenceNumber == nil || len(ev.ChildShards) != 0 {
					t.Fatalf("an event before the last: continuation %v, child shards %v", ev.ContinuationSequenceNumber, ev.ChildShards)
				}
			}
			shards, err := fx.c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(fx.stream)})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, sh := range shards.Shards {
				if aws.ToString(sh.ParentShardId) == shard0 || aws.ToString(sh.AdjacentParentShardId) == shard0 {
					want = append(want, aws.ToString(sh.ShardId))
				}
			}
			var children []string
			for _, c := range end.ChildShards {
				children = append(children, aws.ToString(c.ShardId))
				if !slices.Contains(c.ParentShards, shard0) || c.HashKeyRange == nil || aws.ToString(c.HashKeyRange.StartingHashKey) == "" {
					t.Errorf("child shard %s: parents %v, hash key range %+v", aws.ToString(c.ShardId), c.ParentShards, c.HashKeyRange)
				}
			}
			slices.Sort(want)
			slices.Sort(children)
			if len(want) != 2 || !slices.Equal(children, want) {
				t.Fatalf("child shards %v, ListShards says %v", children, want)
			}
		})
	}
}

func TestFanOutDrop(t *testing.T) {
	t.Parallel()
	fx := newFanOutFixture(t, Kinesalite, fastFanOut(FanOutConfig{Heartbeat: 50 * time.Millisecond}), 1)
	es := mustSubscribe(t, fx.c, fx.consumerARN, shard0, trimHorizon)
	if ev := nextEvent(t, es, 5*time.Second); ev == nil {
		t.Fatalf("no event: %v", es.Err())
	}
	if n := fx.f.Active(shard0); n != 1 {
		t.Fatalf("Active %d", n)
	}
	if n := fx.f.Drop(shard0); n != 1 {
		t.Fatalf("Drop ended %d subscriptions, want 1", n)
	}
	drain(t, es, 5*time.Second)
	if es.Err() == nil {
		t.Fatal("a dropped stream ended with Err nil")
	}
	t.Logf("a dropped stream's Err: %v (%T)", es.Err(), es.Err())
	waitFor(t, "no active subscription", 5*time.Second, func() bool { return fx.f.Active(shard0) == 0 })
	if n := fx.f.Drop(shard0); n != 0 {
		t.Fatalf("a second Drop ended %d", n)
	}
}

// TestFanOutFailNext: an injected exception reaches the client as the SDK's
// typed error from Err, after the events before it.
func TestFanOutFailNext(t *testing.T) {
	t.Parallel()
	fx := newFanOutFixture(t, Kinesalite, fastFanOut(FanOutConfig{Heartbeat: 50 * time.Millisecond}), 4)
	check := map[string]func(error) bool{
		"InternalFailureException": func(err error) bool { var e *ktypes.InternalFailureException; return errors.As(err, &e) },
		"ResourceInUseException":   func(err error) bool { var e *ktypes.ResourceInUseException; return errors.As(err, &e) },
		"KMSThrottlingException":   func(err error) bool { var e *ktypes.KMSThrottlingException; return errors.As(err, &e) },
		// Not a member of the event stream union: still typed.
		"LimitExceededException": func(err error) bool { var e *ktypes.LimitExceededException; return errors.As(err, &e) },
	}
	i := 0
	for typ, ok := range check {
		shard := fmt.Sprintf("shardId-%012d", i)
		i++
		es := mustSubscribe(t, fx.c, fx.consumerARN, shard, trimHorizon)
		if ev := nextEvent(t, es, 5*time.Second); ev == nil {
			t.Fatalf("%s: no event: %v", shard, es.Err())
		}
		fx.f.FailNext(shard, typ)
		drain(t, es, 5*time.Second)
		err := es.Err()
		if !ok(err) {
			t.Errorf("FailNext %s: Err %v (%T)", typ, err, err)
			continue
		}
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != typ || !strings.Contains(ae.ErrorMessage(), "injected") {
			t.Errorf("FailNext %s: code %q message %q", typ, ae.ErrorCode(), ae.ErrorMessage())
		}
	}
}

// TestFanOutClientClose: a client closing its stream ends the
// subscription, at once: not when its loop, caught up, next polls the
// backend or sends a heartbeat, both an hour away.
func TestFanOutClientClose(t *testing.T) {
	t.Parallel()
	fx := newFanOutFixture(t, Kinesalite, fastFanOut(FanOutConfig{Poll: time.Hour, Heartbeat: time.Hour}), 1)
	fx.put(t, 1, "r")
	es := mustSubscribe(t, fx.c, fx.consumerARN, shard0, trimHorizon)
	waitFor(t, "an active subscription", 5*time.Second, func() bool { return fx.f.Active(shard0) == 1 })
	streamRecords(t, es, 1, 10*time.Second) // sent: the loop, caught up, goes to its hour's wait
	_ = es.Close()
	// 30s only bounds a hang: a loop that waited for its poll or heartbeat
	// would take an hour.
	waitFor(t, "the subscription to end", 30*time.Second, func() bool { return fx.f.Active(shard0) == 0 })
}

// TestFanOutClose: Close ends subscriptions cleanly (the client reads the
// end of the stream, no error) and at once: their loops, an hour from
// their next poll and heartbeat, stop when Close tells them, so it never
// waits out its shutdown grace (a minute here, far above the milliseconds
// it takes) to cut the connections.
func TestFanOutClose(t *testing.T) {
	t.Parallel()
	f, err := StartFanOut(FanOutConfig{Backend: Endpoint(t, Kinesalite), ActivateAfter: time.Millisecond,
		Poll: time.Hour, Heartbeat: time.Hour, ShutdownGrace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fx := &fanOutFixture{f: f, c: f.Client(), stream: StreamName(t)}
	CreateStream(t, KinesisClient(t, Kinesalite), fx.stream, 1)
	fx.streamARN = streamARN(t, fx.c, fx.stream)
	fx.consumerARN = fx.register(t, "c")
	fx.put(t, 1, "r")
	es := mustSubscribe(t, fx.c, fx.consumerARN, shard0, trimHorizon)
	waitFor(t, "an active subscription", 5*time.Second, func() bool { return f.Active(shard0) == 1 })
	streamRecords(t, es, 1, 10*time.Second) // sent: the loop, caught up, goes to its hour's wait
	start := time.Now()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(start))
	if st := f.Stats(); st.ClosedForcibly || st.Active[shard0] != 0 {
		t.Errorf("after Close: %+v, want no subscription, none cut at the shutdown grace", st)
	}
	drain(t, es, 30*time.Second) // the stream has ended; 30s bounds a hang
	if err := es.Err(); err != nil {
		t.Fatalf("Err %v after Close, want nil", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestFanOutConsumers(t *testing.T) {
	t.Parallel()
	const activate, del = 100 * time.Millisecond, 500 * time.Millisecond
	fx := newFanOutFixture(t, Kinesalite, FanOutConfig{ActivateAfter: activate, DeleteAfter: del, Heartbeat: 50 * time.Millisecond}, 2)
	c, ctx := fx.c, t.Context()

	before := time.Now().Truncate(time.Second)
	reg, err := c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(fx.streamARN), ConsumerName: aws.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	cons := reg.Consumer
	if cons.ConsumerStatus != ktypes.ConsumerStatusCreating || aws.ToString(cons.ConsumerName) != "app" ||
		!strings.HasPrefix(aws.ToString(cons.ConsumerARN), fx.streamARN+"/consumer/app:") ||
		cons.ConsumerCreationTimestamp == nil || cons.ConsumerCreationTimestamp.Before(before) {
		t.Fatalf("registered %+v", cons)
	}
	arn := aws.ToString(cons.ConsumerARN)
	if want := fmt.Sprintf("%s/consumer/app:%d", fx.streamARN, cons.ConsumerCreationTimestamp.Unix()); arn != want {
		t.Errorf("ARN %s, want %s", arn, want)
	}
	_, err = c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(fx.streamARN), ConsumerName: aws.String("app")})
	wantAPIError[*ktypes.ResourceInUseException](t, "registering app again", err)

	// Describe, by ARN and by stream and name, until ACTIVE.
	var statuses []ktypes.ConsumerStatus
	waitFor(t, "ACTIVE", 5*time.Second, func() bool {
		d1, err := c.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
		if err != nil {
			t.Fatal(err)
		}
		d2, err := c.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{StreamARN: aws.String(fx.streamARN), ConsumerName: aws.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []*ktypes.ConsumerDescription{d1.ConsumerDescription, d2.ConsumerDescription} {
			if aws.ToString(d.ConsumerARN) != arn || aws.ToString(d.StreamARN) != fx.streamARN || aws.ToString(d.ConsumerName) != "app" ||
				!d.ConsumerCreationTimestamp.Equal(*cons.ConsumerCreationTimestamp) {
				t.Fatalf("described %+v", d)
			}
		}
		statuses = append(statuses, d1.ConsumerDescription.ConsumerStatus)
		return d1.ConsumerDescription.ConsumerStatus == ktypes.ConsumerStatusActive && d2.ConsumerDescription.ConsumerStatus == ktypes.ConsumerStatusActive
	})
	if len(statuses) < 2 {
		t.Logf("ACTIVE at the first DescribeStreamConsumer: the test was slow")
	}
	_, err = c.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn + "0")})
	wantAPIError[*ktypes.ResourceNotFoundException](t, "describing an unknown consumer", err)

	// The limit: 20 per stream ("consumer" and "app" make 2).
	for i := range 18 {
		if _, err := c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{
			StreamARN: aws.String(fx.streamARN), ConsumerName: aws.String(fmt.Sprintf("c%02d", i)),
		}); err != nil {
			t.Fatalf("consumer %d: %v", i+3, err)
		}
	}
	_, err = c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(fx.streamARN), ConsumerName: aws.String("c21")})
	if e := wantAPIError[*ktypes.LimitExceededException](t, "the 21st consumer", err); !strings.Contains(e.ErrorMessage(), "consumer limit") {
		t.Errorf("message %q", e.ErrorMessage())
	}
	var names []string
	pages := kinesis.NewListStreamConsumersPaginator(c, &kinesis.ListStreamConsumersInput{StreamARN: aws.String(fx.streamARN), MaxResults: aws.Int32(7)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Consumers {
			names = append(names, aws.ToString(c.ConsumerName))
		}
	}
	if len(names) != 20 || !slices.Contains(names, "app") || !slices.Contains(names, "c17") {
		t.Fatalf("listed %v", names)
	}

	// Unknown and malformed streams.
	_, err = c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(fx.streamARN + "-nope"), ConsumerName: aws.String("x")})
	wantAPIError[*ktypes.ResourceNotFoundException](t, "registering on an unknown stream", err)
	_, err = c.ListStreamConsumers(ctx, &kinesis.ListStreamConsumersInput{StreamARN: aws.String(fx.streamARN + "-nope")})
	wantAPIError[*ktypes.ResourceNotFoundException](t, "listing an unknown stream", err)
	_, err = c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String("not-an-arn"), ConsumerName: aws.String("x")})
	wantAPIError[*ktypes.InvalidArgumentException](t, "registering on a malformed ARN", err)

	// DeleteStream refuses while consumers exist.
	_, err = c.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(fx.stream)})
	wantAPIError[*ktypes.ResourceInUseException](t, "DeleteStream with consumers", err)

	// Deregister: DELETING, then gone, ending its subscriptions.
	es := mustSubscribe(t, c, arn, shard0, trimHorizon)
	if ev := nextEvent(t, es, 5*time.Second); ev == nil {
		t.Fatalf("no event: %v", es.Err())
	}
	deregistered := time.Now()
	if _, err := c.DeregisterStreamConsumer(ctx, &kinesis.DeregisterStreamConsumerInput{ConsumerARN: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	d, err := c.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
	_, subErr := subscribe(t, c, arn, "shardId-000000000001", trimHorizon)
	if time.Since(deregistered) < del { // else it may be gone already
		if err != nil || d.ConsumerDescription.ConsumerStatus != ktypes.ConsumerStatusDeleting {
			t.Fatalf("after deregistering: %+v, %v; want DELETING", d, err)
		}
		if e := wantAPIError[*ktypes.ResourceInUseException](t, "subscribing a DELETING consumer", subErr); !strings.Contains(e.ErrorMessage(), "DELETING") {
			t.Errorf("message %q does not say DELETING", e.ErrorMessage())
		}
	}
	drain(t, es, 5*time.Second)
	wantAPIError[*ktypes.ResourceNotFoundException](t, "the deleted consumer's stream", es.Err())
	if took := time.Since(deregistered); took < del {
		t.Errorf("the subscription ended %v after deregistering, before DeleteAfter", took)
	}
	_, err = c.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
	wantAPIError[*ktypes.ResourceNotFoundException](t, "describing a deleted consumer", err)
	_, err = c.DeregisterStreamConsumer(ctx, &kinesis.DeregisterStreamConsumerInput{StreamARN: aws.String(fx.streamARN), ConsumerName: aws.String("app")})
	wantAPIError[*ktypes.ResourceNotFoundException](t, "deregistering a deleted consumer", err)
	// A gone name can be registered again.
	if _, err := c.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(fx.streamARN), ConsumerName: aws.String("app")}); err != nil {
		t.Fatalf("registering app after it was deleted: %v", err)
	}
	// With EnforceConsumerDeletion the stream goes, and its consumers with it.
	if _, err := c.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(fx.stream), EnforceConsumerDeletion: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(fx.consumerARN)})
	wantAPIError[*ktypes.ResourceNotFoundException](t, "a consumer of a deleted stream", err)
}

// TestFanOutSDKTruncatedStream pins down the SDK behaviour that makes Drop
// reset the connection: a response that merely stops (the server closes the
// connection without the closing chunk, as panic(http.ErrAbortHandler)
// does) ends the SDK's event stream with Err nil, like a clean end.
func TestFanOutSDKTruncatedStream(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ew := newEventWriter(w)
		if ew.initialResponse() != nil {
			return
		}
		_ = ew.event(nil, aws.String("1"), 0, nil)
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	c := kinesis.NewFromConfig(shared.Config(), func(o *kinesis.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	es := mustSubscribe(t, c, "arn:aws:kinesis:us-east-1:000000000000:stream/s/consumer/c:1", shard0, trimHorizon)
	evs := drain(t, es, 5*time.Second)
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	if err := es.Err(); err != nil {
		t.Fatalf("the SDK now reports a truncated stream (%v): Drop could close the connection normally; update this test", err)
	}
}

// TestFanOutProxy: operations the bench does not implement reach the
// backend unchanged, errors included.
func TestFanOutProxy(t *testing.T) {
	t.Parallel()
	f := FanOutEndpoint(t, Kinesalite, FanOutConfig{})
	c := f.Client()
	_, err := c.DescribeStreamSummary(t.Context(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(StreamName(t))})
	wantAPIError[*ktypes.ResourceNotFoundException](t, "DescribeStreamSummary of no stream", err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.ListStreams(ctx, &kinesis.ListStreamsInput{}); err != nil {
		t.Fatal(err)
	}
}
