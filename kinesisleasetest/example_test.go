package kinesisleasetest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
)

type Order struct {
	ID    string  `json:"id" msgpack:"id"`
	Total float64 `json:"total" msgpack:"total"`
}

// A handler acknowledges a record; its metadata reaches it through
// kinesislease.RecordFrom as in production. In a test, pass t to New (the
// examples, having no t, use a testing.TB that panics).
func Example() {
	t := panicTB()
	fulfil := func(ctx context.Context, o Order) error {
		rec, _ := kinesislease.RecordFrom(ctx)
		fmt.Printf("order %s from %s/%s, key %s, attempt %d\n", o.ID, rec.Stream, rec.ShardID, rec.PartitionKey, rec.Attempt)
		return nil
	}
	h := kinesisleasetest.New(t, fulfil, kinesisleasetest.WithStream("orders"))

	res := h.Handle(context.Background(), Order{ID: "o-1", Total: 9.5}, kinesisleasetest.WithPartitionKey("customer-7"))
	res.RequireAcked(t)
	res.RequireAttempts(t, 1)
	fmt.Println(res.Outcome)
	// Output:
	// order o-1 from orders/shardId-000000000000, key customer-7, attempt 1
	// acknowledged
}

// A handler that fails twice is retried with backoff, then acknowledges the
// record. No time passes: the waits are recorded in Delays, jittered as in
// production (the n-th between d/2 and d, d = InitialDelay doubled n-1 times).
func ExampleHarness_Handle_retried() {
	t := panicTB()
	fails := 2
	flaky := func(ctx context.Context, o Order) error {
		rec, _ := kinesislease.RecordFrom(ctx)
		if rec.Attempt <= fails {
			return fmt.Errorf("attempt %d: warehouse unavailable", rec.Attempt)
		}
		return nil
	}
	h := kinesisleasetest.New(t, flaky, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(kltype.RetryPolicy{
		Attempts: 5, InitialDelay: 100 * time.Millisecond, MaxDelay: time.Second,
	})))

	res := h.Handle(context.Background(), Order{ID: "o-2"})
	res.RequireAcked(t)
	res.RequireAttempts(t, 3)
	fmt.Println(res.Errors)
	for i, d := range res.Delays {
		max := 100 * time.Millisecond << i
		fmt.Printf("wait %d between %v and %v: %t\n", i+1, max/2, max, d >= max/2 && d <= max)
	}
	// Output:
	// [attempt 1: warehouse unavailable attempt 2: warehouse unavailable <nil>]
	// wait 1 between 50ms and 100ms: true
	// wait 2 between 100ms and 200ms: true
}

// A record whose handler fails every attempt of the retry policy goes to
// the dead-letter sink; the harness's default sink records it.
func ExampleHarness_Handle_retriesExhausted() {
	t := panicTB()
	broken := func(context.Context, Order) error { return errors.New("warehouse unavailable") }
	h := kinesisleasetest.New(t, broken, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(kltype.RetryPolicy{
		Attempts: 3, InitialDelay: 100 * time.Millisecond, MaxDelay: time.Second,
	})))

	res := h.Handle(context.Background(), Order{ID: "o-3"})
	res.RequireDeadLettered(t, "retries-exhausted")
	res.RequireAttempts(t, 3)
	dl := res.DeadLetter
	fmt.Println(dl.Reason, dl.Attempts, dl.Err, len(res.Delays))
	fmt.Println(len(h.DeadLetters()))
	// Output:
	// retries-exhausted 3 warehouse unavailable 2
	// 1
}

// Bytes the codec cannot decode never reach the handler: the record is
// dead-lettered at once with reason "decode", its bytes intact.
func ExampleHarness_HandleRaw() {
	t := panicTB()
	h := kinesisleasetest.New(t, func(context.Context, Order) error {
		panic("not reached")
	}, kinesisleasetest.WithSubscribeOptions(kinesislease.WithCodec(codec.Msgpack)))

	res := h.HandleRaw(context.Background(), []byte("{\"id\": \"json, not msgpack\"}"))
	res.RequireDeadLettered(t, "decode")
	res.RequireAttempts(t, 0)
	var de *codec.DecodeError
	fmt.Println(errors.As(res.DeadLetter.Err, &de), de.Codec, de.Type)
	fmt.Printf("%s\n", res.DeadLetter.Record.Data)
	// Output:
	// true msgpack kinesisleasetest_test.Order
	// {"id": "json, not msgpack"}
}

// A panic is recovered and handled as an error: retried, then dead-lettered
// with reason "panic".
func ExampleHarness_Handle_panic() {
	t := panicTB()
	h := kinesisleasetest.New(t, func(_ context.Context, o Order) error {
		panic("order " + o.ID + ": no warehouse")
	}, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(kltype.RetryPolicy{
		Attempts: 2, InitialDelay: time.Second, MaxDelay: time.Minute,
	})))

	res := h.Handle(context.Background(), Order{ID: "o-4", Total: 1})
	res.RequireDeadLettered(t, "panic")
	res.RequireAttempts(t, 2)
	var pe *kltype.PanicError
	fmt.Println(errors.As(res.DeadLetter.Err, &pe), pe.Value)
	// Output:
	// true order o-4: no warehouse
}

// kinesislease.Drop acknowledges a record without processing it.
func ExampleHarness_Handle_drop() {
	t := panicTB()
	h := kinesisleasetest.New(t, func(_ context.Context, o Order) error {
		if o.Total < 0 {
			return kinesislease.Drop(fmt.Errorf("order %s: negative total", o.ID))
		}
		return nil
	})

	res := h.Handle(context.Background(), Order{ID: "o-5", Total: -1})
	res.RequireDropped(t)
	fmt.Println(res.Outcome, res.Attempts, res.Errors[0])
	// Output:
	// dropped 1 drop: order o-5: negative total
}

// kinesislease.RetryAfter redelivers the record after the delay asked for,
// recorded exactly; it does not count against the retry policy.
func ExampleHarness_Handle_retryAfter() {
	t := panicTB()
	h := kinesisleasetest.New(t, func(ctx context.Context, o Order) error {
		if rec, _ := kinesislease.RecordFrom(ctx); rec.Attempt == 1 {
			return kinesislease.RetryAfter(30*time.Second, errors.New("rate limited"))
		}
		return nil
	}, kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(kltype.RetryPolicy{
		Attempts: 1, InitialDelay: time.Second, MaxDelay: time.Second,
	})))

	res := h.Handle(context.Background(), Order{ID: "o-6"})
	res.RequireAcked(t)
	res.RequireAttempts(t, 2)
	fmt.Println(res.Delays)
	// Output:
	// [30s]
}

// With no dead-letter sink a failing record holds its shard, retried every
// MaxDelay. The harness gives it the policy's attempts and
// WithHoldAttempts more, then reports it Held.
func ExampleWithoutDeadLetter() {
	t := panicTB()
	h := kinesisleasetest.New(t, func(context.Context, Order) error {
		return errors.New("warehouse unavailable")
	},
		kinesisleasetest.WithoutDeadLetter(),
		kinesisleasetest.WithHoldAttempts(2),
		kinesisleasetest.WithSubscribeOptions(kinesislease.WithRetryPolicy(kltype.RetryPolicy{
			Attempts: 3, InitialDelay: time.Second, MaxDelay: time.Second,
		})),
	)

	res := h.Handle(context.Background(), Order{ID: "o-7"})
	res.RequireHeld(t)
	res.RequireAttempts(t, 5)
	fmt.Println(res.Held, res.Attempts, res.DeadLetter == nil)
	// Output:
	// true 5 true
}
