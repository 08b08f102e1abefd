package kinesislease_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// stuckPolicy: three deliveries 100ms then 200ms apart, then (no sink) a
// retry every second.
var stuckPolicy = kltype.RetryPolicy{Attempts: 3, InitialDelay: 100 * time.Millisecond, MaxDelay: time.Second}

// TestBlockedShard is the case: one record that keeps failing, no
// dead-letter sink, 150 records behind it. Health says so: the shard is
// Blocked within one retry's delay of the first failure, its attempts grow,
// the age of its oldest unresolved record grows at every sample, and
// neither the shard, the stream nor the service is OK, while the service
// stays live. Once the handler succeeds, Blocked clears, nothing is
// unresolved and Health is OK again.
// Per-key concurrency (4 lanes) too: the records of other keys go on, the
// failing one becomes the oldest unresolved and blocks the shard.
func TestBlockedShard(t *testing.T) {
	t.Parallel()
	for _, lanes := range []int{1, 4} {
		t.Run(map[int]string{1: "one at a time", 4: "per key"}[lanes], func(t *testing.T) { testBlockedShard(t, lanes) })
	}
}

func testBlockedShard(t *testing.T, lanes int) {
	synctest.Test(t, func(t *testing.T) {
		k := kinesisfake.New()
		kc := k.Client()
		if err := k.CreateStream("orders", 1); err != nil {
			t.Fatal(err)
		}
		put(t, kc, "orders", 0, 151)
		poison := errors.New("poison")
		var failing atomic.Bool
		failing.Store(true)
		firstFail := make(chan struct{})
		var once sync.Once
		ta := newTally()
		handle := ta.handler("a")
		in := startWith(t, kc, memory.New(), "orders", "a", func(ctx context.Context, o order) error {
			if o.ID == 0 && failing.Load() {
				once.Do(func() { close(firstFail) })
				return poison
			}
			return handle(ctx, o)
		}, []kinesislease.SubscribeOption{kinesislease.WithRetryPolicy(stuckPolicy), kinesislease.WithKeyConcurrency(lanes)})
		svc := in.svc

		<-firstFail
		synctest.Wait() // the Processor waits before the first retry
		shard := func() (kltype.Health, kltype.ShardHealth) {
			h := svc.Health()
			if len(h.Streams) != 1 || len(h.Streams[0].Shards) != 1 {
				t.Fatalf("Health: %+v, want one stream of one shard", h)
			}
			return h, h.Streams[0].Shards[0]
		}
		if _, sh := shard(); sh.Blocked != nil {
			t.Errorf("Blocked at the first failure, before a retry's delay: %+v", sh.Blocked)
		}
		time.Sleep(stuckPolicy.InitialDelay + time.Millisecond)
		synctest.Wait()
		h, sh := shard()
		if sh.Blocked == nil {
			t.Fatalf("not Blocked one retry's delay after the first failure: %+v", sh)
		}
		b := sh.Blocked
		if !errors.Is(b.LastErr, poison) || b.Attempts < 2 || b.SequenceNumber == "" || b.Since.IsZero() || b.ArrivalTime.IsZero() {
			t.Errorf("Blocked %+v, want the poison record, failing since its first failure, 2 attempts or more", b)
		}
		if h.OK() || h.Streams[0].OK() || sh.OK() || !h.Live || !h.Ready || !sh.Reading || sh.Err != nil {
			t.Errorf("Health while Blocked: OK %v, stream OK %v, shard OK %v, live %v, ready %v, reading %v, err %v; want not OK, live, ready, reading, no error",
				h.OK(), h.Streams[0].OK(), sh.OK(), h.Live, h.Ready, sh.Reading, sh.Err)
		}
		seq, since := b.SequenceNumber, b.Since
		attempts, age := b.Attempts, sh.OldestUnresolvedAge
		for range 10 {
			time.Sleep(500 * time.Millisecond)
			h, sh := shard()
			if sh.Blocked == nil {
				t.Fatalf("Blocked cleared while the record still fails: %+v", sh)
			}
			if sh.Blocked.SequenceNumber != seq || !sh.Blocked.Since.Equal(since) || sh.Blocked.Attempts < attempts {
				t.Errorf("Blocked %+v after %+v: want the same record, failing since %v, attempts not fewer than %d", sh.Blocked, b, since, attempts)
			}
			if sh.OldestUnresolvedAge <= age {
				t.Errorf("age %v after %v: want it growing", sh.OldestUnresolvedAge, age)
			}
			if h.OK() {
				t.Errorf("Health OK while Blocked")
			}
			attempts, age = sh.Blocked.Attempts, sh.OldestUnresolvedAge
		}
		if attempts <= b.Attempts {
			t.Errorf("attempts %d after 5s, %d at first: want them growing", attempts, b.Attempts)
		}
		if d, _ := ta.count(); d != 0 && lanes == 1 {
			t.Errorf("%d records behind the failing one handled", d)
		}

		failing.Store(false)
		ta.waitFor(t, 0, 151, 30*time.Second)
		synctest.Wait()
		h, sh = shard()
		if sh.Blocked != nil || sh.OldestUnresolvedAge != 0 || !sh.OK() || !h.OK() {
			t.Errorf("after the record succeeded: Blocked %+v, age %v, shard OK %v, Health OK %v; want none, 0, OK", sh.Blocked, sh.OldestUnresolvedAge, sh.OK(), h.OK())
		}
	})
}

// TestOldestUnresolvedWarn: a record that keeps failing is WARNed about
// once its age passes half the stream's retention (given by
// WithRetention, 20s), and once only.
func TestOldestUnresolvedWarn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := kinesisfake.New()
		kc := k.Client()
		if err := k.CreateStream("orders", 1); err != nil {
			t.Fatal(err)
		}
		logs := &logCapture{}
		put(t, kc, "orders", 0, 1)
		arrived := time.Now()
		in := startWith(t, kc, memory.New(), "orders", "a", func(ctx context.Context, o order) error { return errors.New("poison") },
			[]kinesislease.SubscribeOption{kinesislease.WithRetryPolicy(stuckPolicy), kinesislease.WithRetention(20 * time.Second)},
			kinesislease.WithLogger(slog.New(logs)))
		const warn = "half the stream's retention"
		for time.Since(arrived) < 9*time.Second {
			time.Sleep(500 * time.Millisecond)
			if n := logs.count(slog.LevelWarn, warn); n != 0 {
				t.Fatalf("%d WARNs %v after the record arrived, before half the retention", n, time.Since(arrived))
			}
		}
		time.Sleep(3 * time.Second) // half the retention (10s) and a watch (1s) later
		if n := logs.count(slog.LevelWarn, warn); n != 1 {
			t.Fatalf("%d WARNs %v after the record arrived, want 1", n, time.Since(arrived))
		}
		if age := in.svc.Health().Streams[0].Shards[0].OldestUnresolvedAge; age < 10*time.Second {
			t.Errorf("age %v, want past half the retention", age)
		}
		time.Sleep(15 * time.Second)
		if n := logs.count(slog.LevelWarn, warn); n != 1 {
			t.Errorf("%d WARNs %v after the record arrived, want 1: once", n, time.Since(arrived))
		}
	})
}

// TestRetentionOption: WithRetention must be positive.
func TestRetentionOption(t *testing.T) {
	svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(kinesisfake.New().Client()), kinesislease.WithLeaseStore(memory.New()))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{0, -time.Hour} {
		err := kinesislease.Subscribe(svc, "orders", func(context.Context, order) error { return nil }, kinesislease.WithRetention(d))
		if !errors.Is(err, kinesislease.ErrInvalidOption) {
			t.Errorf("WithRetention(%v): %v, want ErrInvalidOption", d, err)
		}
	}
}

// logCapture is a slog.Handler that keeps what is logged.
type logCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCapture) WithGroup(string) slog.Handler      { return l }

// count counts the records of level whose message contains msg.
func (l *logCapture) count(level slog.Level, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Level == level && strings.Contains(r.Message, msg) {
			n++
		}
	}
	return n
}
