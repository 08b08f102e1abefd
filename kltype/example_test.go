package kltype_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kltype"
)

// Handlers return outcomes built by the kinesislease constructors; the types
// here let a caller (a test, a middleware around a handler) tell them apart.
func ExampleRetryAfterError() {
	err := kinesislease.RetryAfter(2*time.Second, errors.New("inventory service busy"))

	var after *kltype.RetryAfterError
	if errors.As(err, &after) {
		fmt.Println("retry in", after.Delay, "because", after.Err)
	}
	// Output: retry in 2s because inventory service busy
}

func ExampleStartPosition() {
	for _, p := range []kltype.StartPosition{
		kltype.Latest,
		kltype.TrimHorizon,
		kltype.AtTimestamp(time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)),
		kltype.AfterSequenceNumber("49590338271490256608559692538361571095921575989136588898"),
	} {
		fmt.Println(p)
	}
	fmt.Println(kltype.AtSequenceNumber("").Validate())
	// Output:
	// LATEST
	// TRIM_HORIZON
	// AT_TIMESTAMP 2026-11-30T06:00:00Z
	// AFTER_SEQUENCE_NUMBER 49590338271490256608559692538361571095921575989136588898
	// AT_SEQUENCE_NUMBER  with an empty sequence number
}

// leaseLog is a hook: it implements only the Hook interfaces it needs.
type leaseLog struct{}

func (leaseLog) OnLeaseAcquired(_ context.Context, l kltype.LeaseInfo) {
	fmt.Println("acquired", l.Stream, l.ShardID)
}

func (leaseLog) OnLeaseLost(_ context.Context, l kltype.LeaseInfo) {
	fmt.Println("lost", l.Stream, l.ShardID)
}

func ExampleHook() {
	var h kltype.Hook = leaseLog{}
	_, acquired := h.(kltype.HookLeaseAcquired)
	_, handled := h.(kltype.HookRecordHandled)
	fmt.Println(kltype.IsHook(h), acquired, handled)
	fmt.Println(kltype.IsHook(struct{}{}))
	// Output:
	// true true false
	// false
}

func ExampleOutcome() {
	for _, o := range []kltype.Outcome{kltype.Acked, kltype.Dropped, kltype.DeadLettered} {
		fmt.Println(o)
	}
	// Output:
	// acknowledged
	// dropped
	// dead-lettered
}
