package kinesisleasetest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
)

var policy3 = kltype.RetryPolicy{Attempts: 3, InitialDelay: 100 * time.Millisecond, MaxDelay: 400 * time.Millisecond}

var errBoom = errors.New("boom")

func failing(context.Context, Order) error { return errBoom }

func ok(context.Context, Order) error { return nil }

// checkBackoff checks that the waits are the policy's jittered backoffs.
func checkBackoff(t *testing.T, delays []time.Duration, p kltype.RetryPolicy) {
	t.Helper()
	for i, d := range delays {
		want := min(p.InitialDelay<<i, p.MaxDelay)
		if d < want/2 || d > want {
			t.Errorf("wait %d = %v, want between %v and %v", i+1, d, want/2, want)
		}
	}
}

func TestAckedWithMetadata(t *testing.T) {
	var got []kltype.Record
	var vals []Order
	h := kinesisleasetest.New(t, func(ctx context.Context, o Order) error {
		rec, ok := kinesislease.RecordFrom(ctx)
		if !ok {
			t.Error("RecordFrom: no record in the handler's context")
			return nil
		}
		got, vals = append(got, *rec), append(vals, o)
		return nil
	}, kinesisleasetest.WithStream("orders"), kinesisleasetest.WithShard("shardId-000000000007"))

	arrival := time.Date(2025, 1, 2, 3, 4, 5, 6e6, time.UTC)
	res := h.Handle(t.Context(), Order{ID: "a", Total: 2.5},
		kinesisleasetest.WithPartitionKey("pk-a"), kinesisleasetest.WithSequenceNumber("42"), kinesisleasetest.WithArrivalTime(arrival))
	res.RequireAcked(t)
	res.RequireAttempts(t, 1)
	if len(res.Delays) != 0 || res.DeadLetter != nil || len(res.Errors) != 1 || res.Errors[0] != nil {
		t.Errorf("result %v: want no waits, no dead letter, errors [<nil>]", res)
	}
	if len(got) != 1 {
		t.Fatalf("handler called %d times, want 1", len(got))
	}
	r := got[0]
	if r.Stream != "orders" || r.ShardID != "shardId-000000000007" || r.PartitionKey != "pk-a" ||
		r.SequenceNumber != "42" || !r.ArrivalTime.Equal(arrival) || r.Attempt != 1 {
		t.Errorf("record %+v: metadata not as set", r)
	}
	if vals[0] != (Order{ID: "a", Total: 2.5}) || string(r.Data) != `{"id":"a","total":2.5}` {
		t.Errorf("value %+v, data %s", vals[0], r.Data)
	}
	if res.Record == nil || res.Record.SequenceNumber != "42" {
		t.Errorf("Result.Record = %+v", res.Record)
	}
}

func TestDefaultMetadata(t *testing.T) {
	var recs []*kltype.Record
	h := kinesisleasetest.New(t, func(ctx context.Context, _ Order) error {
		rec, _ := kinesislease.RecordFrom(ctx)
		recs = append(recs, rec)
		return nil
	})
	before := time.Now().Add(-time.Millisecond)
	h.Handle(t.Context(), Order{}).RequireAcked(t)
	h.Handle(t.Context(), Order{}).RequireAcked(t)
	a, b := recs[0], recs[1]
	if a.Stream != kinesisleasetest.DefaultStream || a.ShardID != kinesisleasetest.DefaultShard || a.PartitionKey != kinesisleasetest.DefaultPartitionKey {
		t.Errorf("record %+v: want the default stream, shard and partition key", a)
	}
	if len(a.SequenceNumber) != 56 || len(b.SequenceNumber) != 56 || a.SequenceNumber >= b.SequenceNumber {
		t.Errorf("sequence numbers %q, %q: want increasing 56-digit numbers", a.SequenceNumber, b.SequenceNumber)
	}
	if a.ArrivalTime.Before(before) || a.ArrivalTime.After(time.Now()) || a.ArrivalTime.Location() != time.UTC {
		t.Errorf("arrival time %v: want now, UTC", a.ArrivalTime)
	}
}

// TestRetriedThenAcked runs in a testing/synctest bubble: the harness must
// not sleep the retry delays (it records them in Result.Delays), so no
// time passes on the bubble's clock, whatever the load on the machine.
func TestRetriedThenAcked(t *testing.T) {
	synctest.Test(t, testRetriedThenAcked)
}

func testRetriedThenAcked(t *testing.T) {
	var attempts []int
	h := kinesisleasetest.New(t, func(ctx context.Context, _ Order) error {
		rec, _ := kinesislease.RecordFrom(ctx)
		attempts = append(attempts, rec.Attempt)
		if rec.Attempt < 3 {
			return fmt.Errorf("attempt %d: %w", rec.Attempt, errBoom)
		}
		return nil
	}, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)))

	start := time.Now()
	res := h.Handle(t.Context(), Order{ID: "r"})
	if el := time.Since(start); el != 0 {
		t.Errorf("Handle took %v of the bubble's clock, want none: the harness must not sleep (delays %v)", el, res.Delays)
	}
	res.RequireAcked(t)
	res.RequireAttempts(t, 3)
	if fmt.Sprint(attempts) != "[1 2 3]" {
		t.Errorf("RecordFrom(ctx).Attempt over the deliveries = %v, want [1 2 3]", attempts)
	}
	if len(res.Errors) != 3 || !errors.Is(res.Errors[0], errBoom) || !errors.Is(res.Errors[1], errBoom) || res.Errors[2] != nil {
		t.Errorf("errors %v: want [boom boom <nil>]", res.Errors)
	}
	if len(res.Delays) != 2 {
		t.Fatalf("waits %v: want 2", res.Delays)
	}
	checkBackoff(t, res.Delays, policy3)
	if res.Record.Attempt != 3 {
		t.Errorf("Result.Record.Attempt = %d, want 3", res.Record.Attempt)
	}
}

func TestRetriesExhausted(t *testing.T) {
	h := kinesisleasetest.New(t, failing, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)))
	res := h.Handle(t.Context(), Order{ID: "x"})
	res.RequireDeadLettered(t, "retries-exhausted")
	res.RequireAttempts(t, 3)
	checkBackoff(t, res.Delays, policy3)
	if len(res.Delays) != 2 {
		t.Errorf("waits %v: want 2", res.Delays)
	}
	dl := res.DeadLetter
	if dl.Attempts != 3 || !errors.Is(dl.Err, errBoom) || dl.Record != res.Record || string(dl.Record.Data) != `{"id":"x","total":0}` {
		t.Errorf("dead letter %+v", dl)
	}
	if all := h.DeadLetters(); len(all) != 1 || all[0] != dl {
		t.Errorf("DeadLetters() = %v, want [the result's]", all)
	}
}

func TestDefaultRetryPolicy(t *testing.T) {
	res := kinesisleasetest.New(t, failing).Handle(t.Context(), Order{})
	res.RequireDeadLettered(t, "retries-exhausted")
	res.RequireAttempts(t, kltype.DefaultRetryPolicy.Attempts)
	checkBackoff(t, res.Delays, kltype.DefaultRetryPolicy)
}

func TestDeadLetterOutcome(t *testing.T) {
	h := kinesisleasetest.New(t, func(context.Context, Order) error {
		return kinesislease.DeadLetter(errBoom)
	}, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)))
	res := h.Handle(t.Context(), Order{})
	res.RequireDeadLettered(t, "dead-letter")
	res.RequireAttempts(t, 1)
	if len(res.Delays) != 0 || res.DeadLetter.Attempts != 1 || !errors.Is(res.DeadLetter.Err, errBoom) {
		t.Errorf("result %v, dead letter %+v", res, res.DeadLetter)
	}
}

func TestDecodeFailure(t *testing.T) {
	for _, c := range []codec.Codec{codec.JSON, codec.Msgpack} {
		t.Run(c.Name(), func(t *testing.T) {
			called := false
			h := kinesisleasetest.New(t, func(context.Context, Order) error { called = true; return nil },
				kinesisleasetest.WithSubscribeOptions(kinesislease.WithCodec(c)))
			data := []byte{0xc1, 0xff, '{'}
			res := h.HandleRaw(t.Context(), data)
			data[0] = 0 // the harness keeps its own copy
			res.RequireDeadLettered(t, "decode")
			res.RequireAttempts(t, 0)
			if called {
				t.Error("the handler was called with undecodable data")
			}
			var de, cde *codec.DecodeError
			if len(res.Errors) != 1 || !errors.As(res.Errors[0], &de) || !errors.As(res.DeadLetter.Err, &cde) || cde.Codec != c.Name() || de.Type != "kinesisleasetest_test.Order" {
				t.Errorf("errors %v, dead letter error %v: want a decode error of codec %s", res.Errors, res.DeadLetter.Err, c.Name())
			}
			if !bytes.Equal(res.DeadLetter.Record.Data, []byte{0xc1, 0xff, '{'}) || res.DeadLetter.Attempts != 0 {
				t.Errorf("dead letter %+v: want the bytes intact and 0 attempts", res.DeadLetter)
			}
		})
	}
}

func TestMsgpackRoundTrip(t *testing.T) {
	var got Order
	h := kinesisleasetest.New(t, func(_ context.Context, o Order) error { got = o; return nil },
		kinesisleasetest.WithSubscribeOptions(kinesislease.WithCodec(codec.Msgpack)))
	res := h.Handle(t.Context(), Order{ID: "m", Total: 3})
	res.RequireAcked(t)
	want, _ := codec.Msgpack.Marshal(Order{ID: "m", Total: 3})
	if got != (Order{ID: "m", Total: 3}) || !bytes.Equal(res.Record.Data, want) {
		t.Errorf("got %+v, data %x", got, res.Record.Data)
	}
}

func TestPanic(t *testing.T) {
	h := kinesisleasetest.New(t, func(context.Context, Order) error { panic("kaboom") },
		kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)))
	res := h.Handle(t.Context(), Order{})
	res.RequireDeadLettered(t, "panic")
	res.RequireAttempts(t, 3)
	var pe *kltype.PanicError
	if !errors.As(res.DeadLetter.Err, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
		t.Errorf("dead letter error %#v: want a PanicError with its stack", res.DeadLetter.Err)
	}
}

func TestPanicThenFailure(t *testing.T) {
	// The reason is the last attempt's: a panic earlier is a plain failure.
	h := kinesisleasetest.New(t, func(ctx context.Context, _ Order) error {
		if rec, _ := kinesislease.RecordFrom(ctx); rec.Attempt == 1 {
			panic("kaboom")
		}
		return errBoom
	}, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)))
	h.Handle(t.Context(), Order{}).RequireDeadLettered(t, "retries-exhausted")
}

func TestDrop(t *testing.T) {
	h := kinesisleasetest.New(t, func(context.Context, Order) error { return kinesislease.Drop(errBoom) })
	res := h.Handle(t.Context(), Order{})
	res.RequireDropped(t)
	res.RequireAttempts(t, 1)
	if res.DeadLetter != nil || len(h.DeadLetters()) != 0 {
		t.Errorf("a dropped record was dead-lettered: %v", res)
	}
}

func TestRetryAfter(t *testing.T) {
	// RetryAfter does not count against the policy: with Attempts 1, four
	// RetryAfters then success is acknowledged.
	h := kinesisleasetest.New(t, func(ctx context.Context, _ Order) error {
		if rec, _ := kinesislease.RecordFrom(ctx); rec.Attempt <= 4 {
			return kinesislease.RetryAfter(time.Duration(rec.Attempt)*time.Minute, errBoom)
		}
		return nil
	}, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(kltype.RetryPolicy{Attempts: 1, InitialDelay: time.Second, MaxDelay: time.Second})))
	res := h.Handle(t.Context(), Order{})
	res.RequireAcked(t)
	res.RequireAttempts(t, 5)
	if fmt.Sprint(res.Delays) != "[1m0s 2m0s 3m0s 4m0s]" {
		t.Errorf("waits %v: want the RetryAfter delays exactly", res.Delays)
	}
}

func TestRetryAfterForeverIsHeld(t *testing.T) {
	h := kinesisleasetest.New(t, func(context.Context, Order) error {
		return kinesislease.RetryAfter(time.Second, errBoom)
	})
	res := h.Handle(t.Context(), Order{})
	res.RequireHeld(t)
	if len(res.Delays) != kinesisleasetest.MaxWaits || res.Attempts != kinesisleasetest.MaxWaits+1 {
		t.Errorf("%d waits, %d attempts: want %d and %d", len(res.Delays), res.Attempts, kinesisleasetest.MaxWaits, kinesisleasetest.MaxWaits+1)
	}
	if !strings.Contains(res.String(), "still unresolved") {
		t.Errorf("String() = %q: want the reason it is held", res.String())
	}
}

func TestWithoutDeadLetter(t *testing.T) {
	for _, extra := range []int{0, 1, kinesisleasetest.DefaultHoldAttempts, 5} {
		t.Run(fmt.Sprint(extra), func(t *testing.T) {
			var logs bytes.Buffer
			h := kinesisleasetest.New(t, failing,
				kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)), kinesisleasetest.WithoutDeadLetter(),
				kinesisleasetest.WithHoldAttempts(extra), kinesisleasetest.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			res := h.Handle(t.Context(), Order{})
			res.RequireHeld(t)
			res.RequireAttempts(t, policy3.Attempts+extra)
			if res.DeadLetter != nil || len(h.DeadLetters()) != 0 {
				t.Errorf("dead-lettered without a sink: %v", res)
			}
			// The policy's 2 backoffs, then a wait of about MaxDelay per
			// extra round.
			if len(res.Delays) != policy3.Attempts-1+extra {
				t.Fatalf("waits %v", res.Delays)
			}
			checkBackoff(t, res.Delays[:2], policy3)
			for _, d := range res.Delays[2:] {
				if d < policy3.MaxDelay/2 || d > policy3.MaxDelay {
					t.Errorf("hold wait %v: want about MaxDelay", d)
				}
			}
			if !strings.Contains(res.String(), "no dead-letter sink") {
				t.Errorf("String() = %q: want why it is held", res.String())
			}
			if !strings.Contains(logs.String(), "holding the shard") {
				t.Errorf("log %q: want the pipeline's ERROR about holding the shard", logs.String())
			}
		})
	}
}

func TestWithoutDeadLetterRecovers(t *testing.T) {
	// A record holding its shard is redelivered: a handler that recovers
	// acknowledges it, as in production.
	h := kinesisleasetest.New(t, func(ctx context.Context, _ Order) error {
		if rec, _ := kinesislease.RecordFrom(ctx); rec.Attempt <= policy3.Attempts {
			return errBoom
		}
		return nil
	}, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)), kinesisleasetest.WithoutDeadLetter())
	res := h.Handle(t.Context(), Order{})
	res.RequireAcked(t)
	res.RequireAttempts(t, policy3.Attempts+1)
}

func TestWithoutDeadLetterImmediate(t *testing.T) {
	// Decode failures and DeadLetter outcomes wait for a sink, holding the
	// shard without redelivery.
	t.Run("decode", func(t *testing.T) {
		h := kinesisleasetest.New(t, ok, kinesisleasetest.WithoutDeadLetter())
		res := h.HandleRaw(t.Context(), []byte("nope"))
		res.RequireHeld(t)
		res.RequireAttempts(t, 0)
		if len(res.Delays) != kinesisleasetest.DefaultHoldAttempts || len(res.Errors) != 1 || !strings.Contains(res.String(), `"decode"`) {
			t.Errorf("result %v", res)
		}
	})
	t.Run("dead-letter", func(t *testing.T) {
		h := kinesisleasetest.New(t, func(context.Context, Order) error { return kinesislease.DeadLetter(errBoom) },
			kinesisleasetest.WithoutDeadLetter(), kinesisleasetest.WithHoldAttempts(0))
		res := h.Handle(t.Context(), Order{})
		res.RequireHeld(t)
		res.RequireAttempts(t, 1)
		if len(res.Delays) != 0 {
			t.Errorf("result %v", res)
		}
	})
}

func TestCustomSink(t *testing.T) {
	var got []*kltype.DeadLetterRecord
	fails := 2
	h := kinesisleasetest.New(t, failing,
		kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)),
		kinesisleasetest.WithSubscribeOptions(kinesislease.WithDeadLetter(func(ctx context.Context, dl *kltype.DeadLetterRecord) error {
			if fails > 0 {
				fails--
				return errors.New("sink unavailable")
			}
			got = append(got, dl)
			return nil
		})))
	res := h.Handle(t.Context(), Order{})
	res.RequireDeadLettered(t, "retries-exhausted")
	if len(got) != 1 || got[0] != res.DeadLetter || len(h.DeadLetters()) != 1 {
		t.Errorf("sink got %v, result %v", got, res)
	}
	// 2 backoffs of the policy, then 2 retries of the sink.
	if len(res.Delays) != 4 {
		t.Errorf("waits %v: want 4", res.Delays)
	}
}

func TestFailingSinkIsHeld(t *testing.T) {
	h := kinesisleasetest.New(t, failing,
		kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)),
		kinesisleasetest.WithSubscribeOptions(kinesislease.WithDeadLetter(func(context.Context, *kltype.DeadLetterRecord) error { return errors.New("sink down") })))
	res := h.Handle(t.Context(), Order{})
	res.RequireHeld(t)
	res.RequireAttempts(t, 3)
	if !strings.Contains(res.String(), "sink down") || res.DeadLetter != nil || len(h.DeadLetters()) != 0 {
		t.Errorf("result %v", res)
	}
	if len(res.Delays) != 2+kinesisleasetest.DefaultHoldAttempts {
		t.Errorf("waits %v", res.Delays)
	}
}

func TestStoppedByContext(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		res := kinesisleasetest.New(t, ok).Handle(ctx, Order{})
		if res.Outcome != 0 || res.Held || res.Attempts != 0 || !strings.Contains(res.String(), "context canceled") {
			t.Errorf("result %v: want stopped before any attempt", res)
		}
	})
	t.Run("during", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		h := kinesisleasetest.New(t, func(context.Context, Order) error {
			cancel(errors.New("lease lost"))
			return errBoom
		}, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)))
		res := h.Handle(ctx, Order{})
		if res.Outcome != 0 || res.Held || res.Attempts != 1 || !strings.Contains(res.String(), "lease lost") {
			t.Errorf("result %v: want stopped after 1 attempt", res)
		}
		if msg, ok := fatal(t, res.RequireAcked); !ok || !strings.Contains(msg, "stopped") {
			t.Errorf("RequireAcked on a stopped record: %q", msg)
		}
	})
}

func TestConcurrentHandle(t *testing.T) {
	h := kinesisleasetest.New(t, func(ctx context.Context, o Order) error {
		if rec, _ := kinesislease.RecordFrom(ctx); rec.Attempt == 1 && o.Total == 1 {
			return errBoom
		}
		return nil
	}, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)))
	var wg sync.WaitGroup
	results := make([]kinesisleasetest.Result, 64)
	for i := range results {
		wg.Go(func() { results[i] = h.HandleRaw(t.Context(), fmt.Appendf(nil, `{"id":"%d","total":%d}`, i, i%2)) })
	}
	wg.Wait()
	seqs := map[string]bool{}
	for i, res := range results {
		res.RequireAcked(t)
		res.RequireAttempts(t, 1+i%2)
		seqs[res.Record.SequenceNumber] = true
	}
	if len(seqs) != len(results) {
		t.Errorf("%d distinct sequence numbers for %d records", len(seqs), len(results))
	}
}

func TestRequireFailsTheTest(t *testing.T) {
	acked := kinesisleasetest.New(t, ok).Handle(t.Context(), Order{})
	dropped := kinesisleasetest.New(t, func(context.Context, Order) error { return kinesislease.Drop(errBoom) }).Handle(t.Context(), Order{})
	decode := kinesisleasetest.New(t, ok).HandleRaw(t.Context(), []byte("nope"))
	held := kinesisleasetest.New(t, failing, kinesisleasetest.WithoutDeadLetter(),
		kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3))).Handle(t.Context(), Order{})

	for _, tc := range []struct {
		name   string
		assert func(tb testing.TB)
		want   []string // in the message
	}{
		{"RequireAcked/dropped", dropped.RequireAcked, []string{"want the record acknowledged", "got dropped", "after 1 handler attempt", "drop: boom"}},
		{"RequireAcked/decode", decode.RequireAcked, []string{"want the record acknowledged", `dead-lettered (reason "decode")`, "after 0 handler attempt"}},
		{"RequireDropped", acked.RequireDropped, []string{"want the record dropped", "got acknowledged"}},
		{"RequireDeadLettered/acked", func(tb testing.TB) { acked.RequireDeadLettered(tb, "decode") }, []string{`want the record dead-lettered with reason "decode"`, "got acknowledged"}},
		{"RequireDeadLettered/reason", func(tb testing.TB) { decode.RequireDeadLettered(tb, "panic") }, []string{`with reason "panic"`, `got dead-lettered (reason "decode")`}},
		{"RequireHeld", acked.RequireHeld, []string{"want the record holding its shard", "got acknowledged"}},
		{"RequireAttempts", func(tb testing.TB) { acked.RequireAttempts(tb, 2) }, []string{"want 2 handler attempt(s)", "got acknowledged after 1 handler attempt"}},
		{"RequireAcked/held", held.RequireAcked, []string{"got held", "no dead-letter sink", "after 5 handler attempt", "waits: ["}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, stopped := fatal(t, tc.assert)
			if !stopped {
				t.Fatal("the assertion held; want it to fail the test")
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q: want %q in it", msg, w)
				}
			}
		})
	}

	// And the assertions that hold do not fail it.
	for name, assert := range map[string]func(testing.TB){
		"acked":    acked.RequireAcked,
		"dropped":  dropped.RequireDropped,
		"decode":   func(tb testing.TB) { decode.RequireDeadLettered(tb, "decode") },
		"held":     held.RequireHeld,
		"attempts": func(tb testing.TB) { held.RequireAttempts(tb, 5) },
	} {
		if msg, stopped := fatal(t, assert); stopped {
			t.Errorf("%s: failed the test: %s", name, msg)
		}
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler kinesislease.HandlerFunc[Order]
		opts    []kinesisleasetest.Option
		want    string
	}{
		{"nil handler", nil, nil, "nil handler"},
		{"nil option", ok, []kinesisleasetest.Option{nil}, "nil option"},
		{"nil codec", ok, []kinesisleasetest.Option{kinesisleasetest.WithSubscribeOptions(kinesislease.WithCodec(nil))}, "WithCodec(nil)"},
		{"policy", ok, []kinesisleasetest.Option{kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(kltype.RetryPolicy{Attempts: 0, InitialDelay: 1, MaxDelay: 1}))}, "WithRetryPolicy"},
		{"nil sink", ok, []kinesisleasetest.Option{kinesisleasetest.WithSubscribeOptions(kinesislease.WithDeadLetter(nil))}, "WithDeadLetter(nil)"},
		{"hold attempts", ok, []kinesisleasetest.Option{kinesisleasetest.WithHoldAttempts(-1)}, "WithHoldAttempts(-1)"},
		{"stream", ok, []kinesisleasetest.Option{kinesisleasetest.WithStream("")}, "WithStream"},
		{"shard", ok, []kinesisleasetest.Option{kinesisleasetest.WithShard("")}, "WithShard"},
		{"logger", ok, []kinesisleasetest.Option{kinesisleasetest.WithLogger(nil)}, "WithLogger(nil)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, stopped := fatal(t, func(tb testing.TB) { kinesisleasetest.New(tb, tc.handler, tc.opts...) })
			if !stopped || !strings.Contains(msg, "kinesisleasetest.New") || !strings.Contains(msg, tc.want) {
				t.Errorf("New: stopped %t, message %q: want a Fatalf naming %q", stopped, msg, tc.want)
			}
		})
	}
}

func TestEncodeFailureFailsTheTest(t *testing.T) {
	msg, stopped := fatal(t, func(tb testing.TB) {
		h := kinesisleasetest.New(tb, func(context.Context, chan int) error { return nil })
		h.Handle(context.Background(), make(chan int))
	})
	if !stopped || !strings.Contains(msg, "encode chan int with codec json") {
		t.Errorf("stopped %t, message %q", stopped, msg)
	}
	msg, stopped = fatal(t, func(tb testing.TB) {
		kinesisleasetest.New(tb, ok).Handle(context.Background(), Order{}, nil)
	})
	if !stopped || !strings.Contains(msg, "nil RecordOption") {
		t.Errorf("stopped %t, message %q", stopped, msg)
	}
}

func TestLastOptionWins(t *testing.T) {
	h := kinesisleasetest.New(t, failing, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)),
		kinesisleasetest.WithoutDeadLetter(),
		kinesisleasetest.WithSubscribeOptions(kinesislease.WithDeadLetter(func(context.Context, *kltype.DeadLetterRecord) error { return nil })))
	h.Handle(t.Context(), Order{}).RequireDeadLettered(t, "retries-exhausted")

	h = kinesisleasetest.New(t, failing, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)),
		kinesisleasetest.WithSubscribeOptions(kinesislease.WithDeadLetter(func(context.Context, *kltype.DeadLetterRecord) error { return nil })),
		kinesisleasetest.WithoutDeadLetter())
	h.Handle(t.Context(), Order{}).RequireHeld(t)
}

// putRecorder is a kinesislease.Producer that keeps what it is sent.
type putRecorder struct {
	mu  sync.Mutex
	ins []*kinesis.PutRecordsInput
}

func (p *putRecorder) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ins = append(p.ins, in)
	out := &kinesis.PutRecordsOutput{FailedRecordCount: aws.Int32(0)}
	for range in.Records {
		out.Records = append(out.Records, ktypes.PutRecordsResultEntry{SequenceNumber: aws.String("1"), ShardId: aws.String("shardId-000000000000")})
	}
	return out, nil
}

// TestSubscribeOptionsDeadLetterStream: the harness takes the real
// subscription options, a dead-letter stream included: with WithKinesisClient
// the envelope is written to that stream as a subscription writes it (the
// JSON DeadLetterEnvelope under the record's partition key); without it,
// the dead letter is recorded only. Invalid subscription options fail New,
// each named.
func TestSubscribeOptionsDeadLetterStream(t *testing.T) {
	poison := func(context.Context, Order) error { return kinesislease.DeadLetter(errBoom) }
	p := &putRecorder{}
	h := kinesisleasetest.New(t, poison, kinesisleasetest.WithSubscribeOptions(kinesislease.WithDeadLetterStream("orders-dlq")),
		kinesisleasetest.WithKinesisClient(p))
	h.Handle(t.Context(), Order{ID: "o-1"}, kinesisleasetest.WithPartitionKey("customer-7")).RequireDeadLettered(t, "dead-letter")
	if len(p.ins) != 1 || aws.ToString(p.ins[0].StreamName) != "orders-dlq" || len(p.ins[0].Records) != 1 {
		t.Fatalf("PutRecords calls %+v, want one to orders-dlq with one record", p.ins)
	}
	var env kinesislease.DeadLetterEnvelope
	if err := json.Unmarshal(p.ins[0].Records[0].Data, &env); err != nil || env.Reason != "dead-letter" ||
		aws.ToString(p.ins[0].Records[0].PartitionKey) != "customer-7" {
		t.Fatalf("envelope %s under %q (%v): want reason dead-letter under the record's partition key",
			p.ins[0].Records[0].Data, aws.ToString(p.ins[0].Records[0].PartitionKey), err)
	}

	h = kinesisleasetest.New(t, poison, kinesisleasetest.WithSubscribeOptions(kinesislease.WithDeadLetterStream("orders-dlq")))
	h.Handle(t.Context(), Order{}).RequireDeadLettered(t, "dead-letter")
	if n := len(h.DeadLetters()); n != 1 {
		t.Fatalf("%d dead letters recorded, want 1", n)
	}

	msg, stopped := fatal(t, func(tb testing.TB) {
		kinesisleasetest.New(tb, ok, kinesisleasetest.WithSubscribeOptions(kinesislease.WithCodec(nil), kinesislease.WithPolling(0, 0, 0)))
	})
	if !stopped || !strings.Contains(msg, "WithCodec") || !strings.Contains(msg, "WithPolling") {
		t.Errorf("invalid subscription options: stopped %t, message %q", stopped, msg)
	}
}

// fulfiller is a handler with its dependencies, the interface form.
type fulfiller struct {
	mu   sync.Mutex
	done []string
}

func (f *fulfiller) Handle(ctx context.Context, o Order) error {
	if o.ID == "" {
		return kinesislease.Drop(errors.New("no id"))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = append(f.done, o.ID)
	return nil
}

// TestNewHandler: a Handler value runs through the same pipeline as a
// function: its outcomes, the record in its context.
func TestNewHandler(t *testing.T) {
	f := &fulfiller{}
	h := kinesisleasetest.NewHandler[Order](t, f)
	h.Handle(t.Context(), Order{ID: "o-1"}).RequireAcked(t)
	h.Handle(t.Context(), Order{}).RequireDropped(t)
	h.HandleRaw(t.Context(), []byte("nope")).RequireDeadLettered(t, "decode")
	if len(f.done) != 1 || f.done[0] != "o-1" {
		t.Fatalf("handled %v, want o-1", f.done)
	}
}

// TestHandlerTimeout: with WithHandlerTimeout a call that overruns has its
// context cancelled and counts as a failed attempt (matching
// context.DeadlineExceeded), even if the handler returned nil or asked for
// a Drop after the deadline; the retry that keeps within it acknowledges.
func TestHandlerTimeout(t *testing.T) {
	for _, late := range []error{nil, kinesislease.Drop(errors.New("too late to drop"))} {
		h := kinesisleasetest.New(t, func(ctx context.Context, _ Order) error {
			if r, _ := kinesislease.RecordFrom(ctx); r.Attempt == 1 {
				<-ctx.Done() // overruns; then returns as if all were well
				return late
			}
			return nil
		}, kinesisleasetest.WithSubscribeOptions(kinesislease.WithHandlerTimeout(20*time.Millisecond)))
		res := h.Handle(t.Context(), Order{ID: "o-1"})
		res.RequireAcked(t)
		res.RequireAttempts(t, 2)
		var te *kltype.HandlerTimeoutError
		if !errors.As(res.Errors[0], &te) || !errors.Is(res.Errors[0], context.DeadlineExceeded) || te.Timeout != 20*time.Millisecond {
			t.Fatalf("first attempt's error %v, want a *kltype.HandlerTimeoutError of 20ms", res.Errors[0])
		}
	}
	msg, stopped := fatal(t, func(tb testing.TB) {
		kinesisleasetest.New(tb, ok, kinesisleasetest.WithSubscribeOptions(kinesislease.WithHandlerTimeout(0)))
	})
	if !stopped || !strings.Contains(msg, "WithHandlerTimeout") {
		t.Errorf("WithHandlerTimeout(0): stopped %t, message %q", stopped, msg)
	}
}

// TestMaxRecordAge: with WithMaxRecordAge a record that arrived longer ago
// than the maximum age is dead-lettered as expired without reaching the
// handler; a younger one is handled; a negative age is refused.
func TestMaxRecordAge(t *testing.T) {
	h := kinesisleasetest.New(t, ok, kinesisleasetest.WithSubscribeOptions(kinesislease.WithMaxRecordAge(time.Hour)))
	old := h.Handle(t.Context(), Order{ID: "o-1"}, kinesisleasetest.WithArrivalTime(time.Now().Add(-2*time.Hour)))
	old.RequireDeadLettered(t, kltype.ReasonExpired)
	old.RequireAttempts(t, 0)
	var exp *kltype.ExpiredError
	if !errors.As(old.DeadLetter.Err, &exp) || exp.MaxAge != time.Hour {
		t.Errorf("dead letter error %v, want a *kltype.ExpiredError of 1h", old.DeadLetter.Err)
	}
	h.Handle(t.Context(), Order{ID: "o-2"}, kinesisleasetest.WithArrivalTime(time.Now().Add(-time.Minute))).RequireAcked(t)
	msg, stopped := fatal(t, func(tb testing.TB) {
		kinesisleasetest.New(tb, ok, kinesisleasetest.WithSubscribeOptions(kinesislease.WithMaxRecordAge(-time.Second)))
	})
	if !stopped || !strings.Contains(msg, "WithMaxRecordAge(-1s)") {
		t.Errorf("WithMaxRecordAge(-1s): stopped %t, message %q", stopped, msg)
	}
}

// TestNewBatch: the batch harness runs the batch pipeline: named failures
// retried as a batch of their own, outcome errors per item, an item
// failing every attempt dead-lettered with its reason, the others
// acknowledged; without a sink such an item holds its shard.
func TestNewBatch(t *testing.T) {
	var calls [][]string
	h := kinesisleasetest.NewBatch(t, func(ctx context.Context, items []kinesislease.BatchItem[Order]) error {
		var ids []string
		var fails []kltype.ItemFailure
		for i, it := range items {
			ids = append(ids, it.Value.ID)
			switch {
			case it.Value.ID == "drop":
				fails = append(fails, kltype.ItemFailure{Index: i, Err: kinesislease.Drop(errBoom)})
			case it.Value.ID == "bad":
				fails = append(fails, kltype.ItemFailure{Index: i, Err: errBoom})
			case it.Value.ID == "once" && it.Record.Attempt == 1:
				fails = append(fails, kltype.ItemFailure{Index: i, Err: errBoom})
			}
		}
		calls = append(calls, ids)
		if fails != nil {
			return kinesislease.FailItems(fails...)
		}
		return nil
	}, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)))
	res := h.HandleBatch(t.Context(), Order{ID: "a"}, Order{ID: "once"}, Order{ID: "drop"}, Order{ID: "bad"}, Order{ID: "b"})
	res.RequireOutcomes(t, kltype.Acked, kltype.Acked, kltype.Dropped, kltype.DeadLettered, kltype.Acked)
	if res.Calls != 3 || fmt.Sprint(calls) != "[[a once drop bad b] [once bad] [bad]]" {
		t.Fatalf("handler calls %v, want the whole batch, then once and bad, then bad", calls)
	}
	if dl := res.DeadLetters[3]; dl == nil || dl.Reason != "retries-exhausted" || dl.Attempts != 3 {
		t.Fatalf("dead letter of bad: %+v, want retries-exhausted after 3 attempts", dl)
	}
	if len(res.Delays) != 2 {
		t.Fatalf("delays %v, want the two backoffs", res.Delays)
	}

	held := kinesisleasetest.NewBatch(t, func(context.Context, []kinesislease.BatchItem[Order]) error { return errBoom },
		kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(policy3)), kinesisleasetest.WithoutDeadLetter())
	hres := held.HandleBatch(t.Context(), Order{ID: "x"}, Order{ID: "y"})
	hres.RequireOutcomes(t, 0, 0)
	hres.RequireHeld(t)
}
