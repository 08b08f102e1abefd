package kinesislease_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/internal/subopts"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opt  kinesislease.Option
		want string
	}{
		{"empty owner", kinesislease.WithOwner(""), "WithOwner"},
		{"nil store", kinesislease.WithLeaseStore(nil), "WithLeaseStore"},
		{"heartbeat not below a quarter of the timeout", kinesislease.WithHeartbeat(2*time.Second, 5*time.Second), "WithHeartbeat"},
		{"zero heartbeat", kinesislease.WithHeartbeat(0, 5*time.Second), "WithHeartbeat"},
		{"zero timeout", kinesislease.WithHeartbeat(time.Second, 0), "WithHeartbeat"},
		{"zero max leases", kinesislease.WithMaxLeases(0), "WithMaxLeases"},
		{"small memory budget", kinesislease.WithMemoryBudget(1024, 100), "WithMemoryBudget"},
		{"hook implementing nothing", kinesislease.WithHooks(struct{}{}), "WithHooks"},
		{"zero shard sync", kinesislease.WithShardSyncInterval(0), "WithShardSyncInterval"},
		{"zero shutdown", kinesislease.WithShutdownTimeout(0), "WithShutdownTimeout"},
		{"negative max record age", kinesislease.WithMaxRecordAge(-time.Second), "WithMaxRecordAge(-1s)"},
		{"nil", nil, "nil option"},
	} {
		_, err := kinesislease.New(awsConfig(), tc.opt)
		if !errors.Is(err, kinesislease.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New: %v, want ErrInvalidOption naming %s", tc.name, err, tc.want)
		}
	}
}

// TestLeaseStoreTypeNeedsMembership: WithLeaseStore's type says that the
// store implements leases.Membership as well as leases.Store, so that a
// store without it is refused when the program is compiled, not by New.
func TestLeaseStoreTypeNeedsMembership(t *testing.T) {
	t.Parallel()
	param := reflect.TypeOf(kinesislease.WithLeaseStore).In(0)
	for _, want := range []reflect.Type{reflect.TypeFor[leases.Store](), reflect.TypeFor[leases.Membership]()} {
		if !param.Implements(want) {
			t.Errorf("WithLeaseStore takes a %v, which does not include %v", param, want)
		}
	}
}

// TestNewReportsEveryInvalidOption: New names every invalid option at once,
// so that Run never meets one.
func TestNewReportsEveryInvalidOption(t *testing.T) {
	t.Parallel()
	_, err := kinesislease.New(awsConfig(), kinesislease.WithOwner(""), kinesislease.WithHeartbeat(time.Second, time.Second),
		kinesislease.WithLeaseStore(nil), kinesislease.WithShutdownTimeout(0))
	if !errors.Is(err, kinesislease.ErrInvalidOption) {
		t.Fatalf("New: %v, want ErrInvalidOption", err)
	}
	for _, want := range []string{"WithOwner", "WithHeartbeat", "WithLeaseStore", "WithShutdownTimeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v, want it to name %s", err, want)
		}
	}
}

func TestInvalidSubscriptions(t *testing.T) {
	t.Parallel()
	handle := func(context.Context, order) error { return nil }
	for _, tc := range []struct {
		name    string
		stream  string
		handler kinesislease.HandlerFunc[order]
		opt     kinesislease.SubscribeOption
		want    string
	}{
		{"empty stream", "", handle, nil, `stream ""`},
		{"bad stream name", "orders/eu", handle, nil, `"orders/eu"`},
		{"long stream name", strings.Repeat("s", 129), handle, nil, "stream"},
		{"bad ARN", "arn:aws:sqs:us-east-1:123456789012:queue", handle, nil, "arn:aws:sqs"},
		{"nil handler", "orders", nil, nil, "nil handler"},
		{"nil codec", "orders", handle, kinesislease.WithCodec(nil), "WithCodec"},
		{"zero checkpoint cadence", "orders", handle, kinesislease.WithCheckpoint(0, time.Second), "WithCheckpoint"},
		{"zero timestamp", "orders", handle, kinesislease.WithStartPosition(kltype.AtTimestamp(time.Time{})), "AtTimestamp"},
		{"empty sequence", "orders", handle, kinesislease.WithStartPosition(kltype.AfterSequenceNumber("")), "sequence"},
		{"polling", "orders", handle, kinesislease.WithPolling(0, time.Second, 0), "WithPolling"},
		{"key concurrency", "orders", handle, kinesislease.WithKeyConcurrency(0), "WithKeyConcurrency"},
		{"handler timeout", "orders", handle, kinesislease.WithHandlerTimeout(0), "WithHandlerTimeout"},
		{"negative max record age", "orders", handle, kinesislease.WithMaxRecordAge(-time.Minute), "WithMaxRecordAge(-1m0s)"},
		{"max record age without a sink", "orders", handle, kinesislease.WithMaxRecordAge(time.Minute), "needs a dead-letter sink"},
	} {
		svc, err := kinesislease.New(awsConfig())
		if err != nil {
			t.Fatal(err)
		}
		var opts []kinesislease.SubscribeOption
		if tc.opt != nil {
			opts = append(opts, tc.opt)
		}
		err = kinesislease.Subscribe(svc, tc.stream, tc.handler, opts...)
		if !errors.Is(err, kinesislease.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Subscribe: %v, want ErrInvalidOption naming %s", tc.name, err, tc.want)
		}
	}
	// Valid: a name, an ARN, and two streams on one service.
	svc, _ := kinesislease.New(awsConfig())
	for _, s := range []string{"orders", "arn:aws:kinesis:eu-west-1:123456789012:stream/payments"} {
		if err := kinesislease.Subscribe(svc, s, handle); err != nil {
			t.Errorf("Subscribe(%q): %v", s, err)
		}
	}
	// One stream name twice, however named (rows are keyed by the stream
	// name): refused, naming both.
	err := kinesislease.Subscribe(svc, "arn:aws:kinesis:eu-west-1:123456789012:stream/orders", handle)
	if !errors.Is(err, kinesislease.ErrDuplicateSubscription) || !strings.Contains(err.Error(), `"orders"`) || !strings.Contains(err.Error(), "stream/orders") {
		t.Errorf("Subscribe of orders by ARN beside orders by name: %v, want ErrDuplicateSubscription naming both", err)
	}
	// Run without a subscription is refused.
	empty, _ := kinesislease.New(awsConfig())
	if err := empty.Run(context.Background()); !errors.Is(err, kinesislease.ErrInvalidOption) {
		t.Errorf("Run with no subscription: %v", err)
	}
}

// TestDeadLetterOptionsTogether: WithDeadLetter and WithDeadLetterStream
// fill the subscription's one dead-letter sink, so the two together are
// refused, in either order, by Subscribe and by the harness's way in
// (subopts), with an error naming both; either alone, or one given twice,
// is taken.
func TestDeadLetterOptionsTogether(t *testing.T) {
	t.Parallel()
	handle := func(context.Context, order) error { return nil }
	fn := kinesislease.WithDeadLetter(func(context.Context, *kltype.DeadLetterRecord) error { return nil })
	stream := kinesislease.WithDeadLetterStream("orders-dead")
	resolve := func(opts ...kinesislease.SubscribeOption) error {
		all := make([]any, len(opts))
		for i, o := range opts {
			all[i] = o
		}
		return kinesislease.WithCodec(codec.JSON).(subopts.Resolver).ResolveSubscribeOptions(all, nil).Err
	}
	for _, tc := range []struct {
		name string
		opts []kinesislease.SubscribeOption
		ok   bool
	}{
		{"function, then stream", []kinesislease.SubscribeOption{fn, stream}, false},
		{"stream, then function", []kinesislease.SubscribeOption{stream, fn}, false},
		{"alternating", []kinesislease.SubscribeOption{fn, stream, fn, stream}, false},
		{"function alone", []kinesislease.SubscribeOption{fn}, true},
		{"stream alone", []kinesislease.SubscribeOption{stream}, true},
		{"stream twice", []kinesislease.SubscribeOption{stream, kinesislease.WithDeadLetterStream("orders-dead-2")}, true},
	} {
		svc, err := kinesislease.New(awsConfig())
		if err != nil {
			t.Fatal(err)
		}
		for where, err := range map[string]error{"Subscribe": kinesislease.Subscribe(svc, "orders", handle, tc.opts...), "subopts": resolve(tc.opts...)} {
			switch {
			case tc.ok && err != nil:
				t.Errorf("%s: %s: %v, want nil", tc.name, where, err)
			case !tc.ok && (!errors.Is(err, kinesislease.ErrInvalidOption) || strings.Count(err.Error(), "WithDeadLetter and WithDeadLetterStream") != 1):
				t.Errorf("%s: %s: %v, want ErrInvalidOption naming WithDeadLetter and WithDeadLetterStream once", tc.name, where, err)
			}
		}
	}
}

// TestMaxRecordAgeOfService: WithMaxRecordAge given to New is the default
// of every subscription, which then needs a dead-letter sink; a
// subscription's own WithMaxRecordAge(0) lifts it.
func TestMaxRecordAgeOfService(t *testing.T) {
	t.Parallel()
	handle := func(context.Context, order) error { return nil }
	sink := kinesislease.WithDeadLetter(func(context.Context, *kltype.DeadLetterRecord) error { return nil })
	svc, err := kinesislease.New(awsConfig(), kinesislease.WithMaxRecordAge(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := kinesislease.Subscribe(svc, "orders", handle); !errors.Is(err, kinesislease.ErrInvalidOption) || !strings.Contains(err.Error(), "WithMaxRecordAge(1h0m0s) needs a dead-letter sink") {
		t.Errorf("Subscribe without a sink under New's WithMaxRecordAge: %v, want ErrInvalidOption naming it", err)
	}
	if err := kinesislease.Subscribe(svc, "orders", handle, sink); err != nil {
		t.Errorf("Subscribe with a sink: %v", err)
	}
	if err := kinesislease.Subscribe(svc, "payments", handle, kinesislease.WithMaxRecordAge(0)); err != nil {
		t.Errorf("Subscribe with WithMaxRecordAge(0) and no sink: %v", err)
	}
	if err := kinesislease.Subscribe(svc, "refunds", handle, kinesislease.WithDeadLetterStream("refunds-dead")); err != nil {
		t.Errorf("Subscribe with a dead-letter stream: %v", err)
	}
}

// TestSubscribeReportsEveryInvalidOption: Subscribe, like New, names every
// invalid option, not only the first.
func TestSubscribeReportsEveryInvalidOption(t *testing.T) {
	t.Parallel()
	svc, err := kinesislease.New(awsConfig())
	if err != nil {
		t.Fatal(err)
	}
	err = kinesislease.Subscribe(svc, "orders", func(context.Context, order) error { return nil },
		kinesislease.WithCodec(nil), kinesislease.WithCheckpoint(0, time.Second), kinesislease.WithPolling(0, time.Second, 0))
	if !errors.Is(err, kinesislease.ErrInvalidOption) {
		t.Fatalf("Subscribe: %v, want ErrInvalidOption", err)
	}
	for _, want := range []string{"WithCodec", "WithCheckpoint", "WithPolling"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Subscribe: %v, want it to name %s", err, want)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDefaultStoreWarns: a service given no lease store says so at WARN
// when it starts (several instances that forget WithLeaseStore each read
// every shard); one given a store does not.
func TestDefaultStoreWarns(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	for _, tc := range []struct {
		name string
		opts []kinesislease.Option
		warn bool
	}{{"default", nil, true}, {"memory store given", []kinesislease.Option{kinesislease.WithLeaseStore(memory.New())}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			// A short timeout: a new table's shards are read a timeout
			// after the join (5s at the default), and the start is all
			// this test needs.
			opts := append([]kinesislease.Option{kinesislease.WithKinesisClient(kc),
				kinesislease.WithHeartbeat(150*time.Millisecond, 600*time.Millisecond),
				kinesislease.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})))}, tc.opts...)
			svc, err := kinesislease.New(testutil.Config(t), opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := kinesislease.Subscribe(svc, stream, func(context.Context, order) error { return nil }); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- svc.Run(ctx) }()
			kinesisleasetest.WaitReady(t, svc) // started: the warning, if any, is logged
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			got := strings.Contains(logs.String(), "no lease store given (WithLeaseStore)")
			if got != tc.warn {
				t.Errorf("warning logged: %v, want %v; log:\n%s", got, tc.warn, logs.String())
			}
		})
	}
}
