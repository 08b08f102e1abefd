package otelkl_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
	"github.com/kinesislease/kinesislease/otelkl"
)

type order struct {
	ID int `json:"id"`
}

// putOrders writes orders 0..n-1 and returns the data bytes put.
func putOrders(t *testing.T, kc *kinesis.Client, stream string, n int) (sizes map[int]int) {
	t.Helper()
	sizes = map[int]int{}
	var entries []ktypes.PutRecordsRequestEntry
	for id := range n {
		data, _ := json.Marshal(order{ID: id})
		sizes[id] = len(data)
		entries = append(entries, ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(fmt.Sprint("key-", id))})
	}
	out, err := kc.PutRecords(testutil.WithoutFaults(context.Background()), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt32(out.FailedRecordCount) != 0 {
		t.Fatalf("PutRecords: %d failed", aws.ToInt32(out.FailedRecordCount))
	}
	return sizes
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestScenario: a service with the otel hooks consumes a 2-shard kinesalite
// stream (memory lease store) of n records: one dropped, one dead-lettered,
// the rest acknowledged, while GetRecords is throttled 3 times. The collected
// metrics match.
func TestScenario(t *testing.T) {
	const (
		n        = 200
		dropID   = 7
		deadID   = 13
		throttle = 3
	)
	faults := &testutil.Faults{}
	kc := testutil.KinesisClient(t, testutil.Kinesalite, faults.KinesisOptions)
	name := testutil.StreamName(t)
	testutil.CreateStream(t, kc, name, 2)
	sizes := putOrders(t, kc, name, n)
	faults.Inject(testutil.Fault{Op: "GetRecords", Skip: 2, Times: throttle,
		Err: &ktypes.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard (injected)")}})

	h, collect := newHooks(t)
	svc, err := kinesislease.New(testutil.Config(t),
		kinesislease.WithGetRecordsEncoding(kinesislease.GetRecordsEncoding(testutil.GetRecordsEncoding(t))),
		kinesislease.WithKinesisClient(kc),
		kinesislease.WithLeaseStore(memory.New()),
		kinesislease.WithOwner("otel-a"),
		kinesislease.WithLogger(slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		kinesislease.WithHeartbeat(150*time.Millisecond, 600*time.Millisecond),
		kinesislease.WithShutdownTimeout(5*time.Second),
		kinesislease.WithHooks(h),
	)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var dead []*kltype.DeadLetterRecord
	err = kinesislease.Subscribe(svc, name, func(ctx context.Context, o order) error {
		switch o.ID {
		case dropID:
			return kinesislease.Drop(errors.New("not for us"))
		case deadID:
			return kinesislease.DeadLetter(errors.New("poison"))
		}
		return nil
	},
		kinesislease.WithStartPosition(kltype.TrimHorizon),
		kinesislease.WithCheckpoint(10, 100*time.Millisecond),
		kinesislease.WithPolling(20*time.Millisecond, 50*time.Millisecond, 25),
		kinesislease.WithDeadLetter(func(ctx context.Context, dl *kltype.DeadLetterRecord) error {
			mu.Lock()
			dead = append(dead, dl)
			mu.Unlock()
			return nil
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- svc.Run(ctx) }()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-ran
		}
	}()

	st := otelkl.AttrStream.String(name)
	// Running: wait until every record reached its outcome and a heartbeat
	// (the sign of life that keeps the leases) and a checkpoint were
	// recorded.
	var ms metrics
	deadline := time.Now().Add(30 * time.Second)
	for {
		ms = collect(t)
		records, _ := ms.sum(t, "kinesislease.records", st)
		beats := ms.calls(t, storeDuration, storeOp("Heartbeat"), ok)
		cps, _ := ms.sum(t, "kinesislease.checkpoint.writes", st, ok)
		if records == n && beats > 0 && cps > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %d of %d records, %d heartbeats, %d checkpoints", records, n, beats, cps)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ms.want(t, "kinesislease.leases.held", 2, st, otelkl.AttrOwner.String("otel-a"))
	if _, points := ms.gaugeSum(t, "kinesislease.behind_latest", st); points != 2 {
		t.Errorf("lag reported for %d shards while running, want 2", points)
	}

	cancel()
	stopped = true
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}

	ms = collect(t)
	ms.want(t, "kinesislease.records", n-2, st, outcome("acked"))
	ms.want(t, "kinesislease.records", 1, st, outcome("dropped"))
	ms.want(t, "kinesislease.records", 1, st, outcome("dead_lettered"))
	total := 0
	for id, size := range sizes {
		if id != dropID && id != deadID {
			total += size
		}
	}
	ms.want(t, "kinesislease.record.bytes", int64(total), st, outcome("acked"))
	ms.want(t, "kinesislease.record.bytes", int64(sizes[dropID]), st, outcome("dropped"))
	ms.want(t, "kinesislease.record.bytes", int64(sizes[deadID]), st, outcome("dead_lettered"))
	if count, _ := ms.hist(t, "messaging.process.duration", st); count != n {
		t.Errorf("process.duration: %d records, want %d", count, n)
	}
	ms.want(t, "messaging.client.consumed.messages", n, st)
	ms.want(t, "kinesislease.fetch.bytes", int64(total+sizes[dropID]+sizes[deadID]), st)
	ms.want(t, "kinesislease.dead_letters", 1, st, otelkl.AttrReason.String("dead-letter"))
	mu.Lock()
	if len(dead) != 1 {
		t.Errorf("the sink got %d dead letters, want 1", len(dead))
	}
	mu.Unlock()

	// Leases: both acquired (no takeover), both released.
	owner := otelkl.AttrOwner.String("otel-a")
	ms.want(t, "kinesislease.leases.held", 0, st, owner)
	ms.want(t, "kinesislease.lease.takeovers", 0, st, owner)
	ms.want(t, "kinesislease.lease.losses", 0, st, owner)
	ms.want(t, "kinesislease.shards.started", 2, st)
	if _, points := ms.gaugeSum(t, "kinesislease.behind_latest", st); points != 0 {
		t.Errorf("lag still reported for %d shards after shutdown", points)
	}

	if ok, _ := ms.sum(t, "kinesislease.checkpoint.writes", st, ok); ok < 2 {
		t.Errorf("%d checkpoint writes, want at least the 2 of the releases", ok)
	}
	ms.want(t, "kinesislease.checkpoint.writes", 0, st, errType("*errors.errorString"))

	// Throttles: every injected one reported, by the worker and as a call result.
	if got, _ := ms.sum(t, "kinesislease.throttles", st, method("GetRecords")); got < throttle {
		t.Errorf("%d throttles, want at least the %d injected", got, throttle)
	}
	if got := ms.calls(t, opDuration, service("Kinesis"), method("GetRecords"), errType("ProvisionedThroughputExceededException")); got < throttle {
		t.Errorf("%d GetRecords calls throttled, want at least %d", got, throttle)
	}
	if got := faults.Calls("GetRecords"); got < throttle+1 {
		t.Errorf("faults saw %d GetRecords calls", got)
	}

	// Calls: GetRecords, and the lease store's TakeAs, Heartbeat, Members
	// and Release, counted and timed.
	for _, c := range []struct {
		svc, op string
		min     int64
	}{
		{opDuration, "ListShards", 1},
		{opDuration, "GetShardIterator", 2},
		{opDuration, "GetRecords", int64(n / 25)},
		{storeDuration, "TakeAs", 2},
		{storeDuration, "Heartbeat", 1},
		{storeDuration, "Header", 1},
		{storeDuration, "Checkpoint", 1},
		{storeDuration, "Release", 2},
	} {
		by := method(c.op)
		if c.svc == storeDuration {
			by = storeOp(c.op)
		}
		count, secs := ms.hist(t, c.svc, by, ok)
		if int64(count) < c.min || secs <= 0 {
			t.Errorf("%s %s: %d calls timed (%gs in all); want at least %d", c.svc, c.op, count, secs, c.min)
		}
	}
	if got := ms.calls(t, storeDuration, storeOp("Release"), method("UpdateItem")); got != 2 {
		t.Errorf("%d Release calls (UpdateItem), want 2", got)
	}
	checkSchema(t, ms, false)

	throttles, _ := ms.sum(t, "kinesislease.throttles", st)
	cps, _ := ms.sum(t, "kinesislease.checkpoint.writes", st)
	beats := ms.calls(t, storeDuration, storeOp("Heartbeat"))
	gets := ms.calls(t, opDuration, method("GetRecords"))
	t.Logf("%d records, %d throttles, %d checkpoint writes, %d heartbeats, %d GetRecords calls", n, throttles, cps, beats, gets)
}
