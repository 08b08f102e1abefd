package kinesislease_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestLatestFromSubscribe: the first program a newcomer writes. With the
// default start position (LATEST), a service subscribes, starts Run and at
// once puts 10 records: all 10 are handled, though the first lease comes
// seconds after Run. Before, LATEST was resolved when the lease was taken,
// and 0 of 10 were handled. Records put before Subscribe are not, as LATEST
// promises; and in polling as in enhanced fan-out.
func TestLatestFromSubscribe(t *testing.T) {
	t.Parallel()
	for _, fanOut := range []bool{false, true} {
		name := map[bool]string{false: "polling", true: "fan-out"}[fanOut]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := kinesisfake.New()
				kc := k.Client()
				stream := "orders"
				if err := k.CreateStream(stream, 1); err != nil {
					t.Fatal(err)
				}
				put(t, kc, stream, 0, 5) // before Subscribe: not handled
				time.Sleep(time.Second)
				ta := newTally()
				sub := []kinesislease.SubscribeOption{kinesislease.WithPolling(20*time.Millisecond, 50*time.Millisecond, 0)}
				if fanOut {
					sub = fanOutSub(sub...)
				}
				runService(t, kc, memory.New(), "a", func(svc *kinesislease.Service) error {
					return kinesislease.Subscribe(svc, stream, ta.handler("a"), sub...) // the default start position
				})
				put(t, kc, stream, 5, 10) // at once, before any lease
				ta.waitFor(t, 5, 10, time.Minute)
				// One shard, in order: a record put before Subscribe would
				// have come before these.
				if d, _ := ta.count(0, 5); d != 0 {
					t.Errorf("%d of the 5 records put before Subscribe handled: LATEST reached back before the subscription", d)
				}
			})
		})
	}
}

// TestStartPositionGiven: a start position given explicitly is used as
// given, not moved to the subscription's time: TRIM_HORIZON reads the
// records put before Subscribe.
func TestStartPositionGiven(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := kinesisfake.New()
		kc := k.Client()
		if err := k.CreateStream("orders", 1); err != nil {
			t.Fatal(err)
		}
		put(t, kc, "orders", 0, 5)
		time.Sleep(time.Second)
		ta := newTally()
		runService(t, kc, memory.New(), "a", func(svc *kinesislease.Service) error {
			return kinesislease.Subscribe(svc, "orders", ta.handler("a"), kinesislease.WithStartPosition(kltype.TrimHorizon))
		})
		ta.waitFor(t, 0, 5, time.Minute)
	})
}

// TestLatestRecordedForTheFleet: two members start seconds apart on a new
// stream with LATEST, and records are put between their Subscribe calls.
// The first to mark the stream (a, which joined first) records its
// Subscribe time in the mark, and both resolve LATEST as AT_TIMESTAMP of
// that one time for every shard they take with no checkpoint, whoever
// takes it: nothing put after a's Subscribe is skipped, though b subscribed
// after some of it was put, and nothing put before is handled. Before, b
// resolved LATEST on its own Subscribe time and skipped, on its shards,
// what was put between the two.
func TestLatestRecordedForTheFleet(t *testing.T) {
	t.Parallel()
	for _, fanOut := range []bool{false, true} {
		name := map[bool]string{false: "polling", true: "fan-out"}[fanOut]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := kinesisfake.New()
				kc := k.Client()
				stream := "orders"
				if err := k.CreateStream(stream, 4); err != nil {
					t.Fatal(err)
				}
				sub := []kinesislease.SubscribeOption{kinesislease.WithPolling(20*time.Millisecond, 50*time.Millisecond, 0)}
				if fanOut {
					sub = fanOutSub(sub...)
				}
				// A table recreated just now (born now): a new stream's rows
				// are created a timeout (6 s) after the first join, so b,
				// joining 3 s after a, is there, and both take shards with
				// no checkpoint.
				store, ta := memory.New(), newTally()
				store.Clear()
				put(t, kc, stream, 0, 40) // before any Subscribe: not handled
				time.Sleep(time.Second)
				first := time.Now() // a's Subscribe (virtual time stands still until a blocks)
				logs := map[string]*acquisitions{"a": {}, "b": {}}
				runService(t, kc, store, "a", func(svc *kinesislease.Service) error {
					return kinesislease.Subscribe(svc, stream, ta.handler("a"), sub...)
				}, logs["a"].logger())
				time.Sleep(1500 * time.Millisecond)
				put(t, kc, stream, 40, 40) // after a's Subscribe, before b's
				time.Sleep(1500 * time.Millisecond)
				runService(t, kc, store, "b", func(svc *kinesislease.Service) error {
					return kinesislease.Subscribe(svc, stream, ta.handler("b"), sub...)
				}, logs["b"].logger())
				put(t, kc, stream, 80, 40) // after both
				ta.waitFor(t, 40, 80, 2*time.Minute)
				if d, _ := ta.count(0, 40); d != 0 {
					t.Errorf("%d of the 40 records put before the first Subscribe handled", d)
				}
				want := kltype.AtTimestamp(first).String()
				for _, owner := range []string{"a", "b"} {
					starts := logs[owner].starts(t)
					if len(starts) == 0 {
						t.Fatalf("%s took no shard without a checkpoint: the test shows nothing of its LATEST", owner)
					}
					for shard, start := range starts {
						if start != want {
							t.Errorf("%s started %s at %s, want %s (a's Subscribe, recorded in the mark)", owner, shard, start, want)
						}
					}
				}
				mk, err := store.StreamMark(context.Background(), stream)
				if err != nil || !mk.Since.Equal(first) {
					t.Errorf("the stream's mark: %+v, %v; want since %v", mk, err, first)
				}
			})
		})
	}
}

// TestLatestOldMarkFallsBack: a stream marked by a version before the mark
// carried a time (no Since), its rows created free with no checkpoint: a
// member resolves LATEST on its own Subscribe time, as before.
func TestLatestOldMarkFallsBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := kinesisfake.New()
		kc := k.Client()
		stream := "orders"
		if err := k.CreateStream(stream, 2); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		store := memory.New()
		if _, err := store.MarkStream(ctx, stream, leases.Mark{Token: "incarnation-of-an-older-version"}); err != nil {
			t.Fatal(err)
		}
		out, err := kc.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range out.Shards {
			if _, err := store.Create(ctx, leases.Key{Stream: stream, Shard: aws.ToString(sh.ShardId)}); err != nil {
				t.Fatal(err)
			}
		}
		ta := newTally()
		put(t, kc, stream, 0, 20) // before Subscribe: not handled
		time.Sleep(time.Second)
		own := time.Now()
		log := &acquisitions{}
		runService(t, kc, store, "a", func(svc *kinesislease.Service) error {
			return kinesislease.Subscribe(svc, stream, ta.handler("a"), kinesislease.WithPolling(20*time.Millisecond, 50*time.Millisecond, 0))
		}, log.logger())
		put(t, kc, stream, 20, 20)
		ta.waitFor(t, 20, 20, time.Minute)
		if d, _ := ta.count(0, 20); d != 0 {
			t.Errorf("%d of the 20 records put before Subscribe handled", d)
		}
		starts := log.starts(t)
		if len(starts) != len(out.Shards) {
			t.Fatalf("took %d shards without a checkpoint, want %d: %v", len(starts), len(out.Shards), starts)
		}
		for shard, start := range starts {
			if want := kltype.AtTimestamp(own).String(); start != want {
				t.Errorf("%s started at %s, want %s (its own Subscribe)", shard, start, want)
			}
		}
	})
}

// acquisitions keeps one service's log (INFO and above, as JSON) to read
// where it started the shards it took without a checkpoint.
type acquisitions struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (a *acquisitions) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.Write(p)
}

// logger is the option that sends the service's log to a.
func (a *acquisitions) logger() kinesislease.Option {
	return kinesislease.WithLogger(slog.New(slog.NewJSONHandler(a, &slog.HandlerOptions{Level: slog.LevelInfo})))
}

// starts returns, by shard, the start position of each lease taken with no
// checkpoint ("lease acquired" or "lease taken over" with a start).
func (a *acquisitions) starts(t *testing.T) map[string]string {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(a.buf.Bytes()))
	for sc.Scan() {
		var line struct{ Msg, Shard, Start string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if (line.Msg == "kinesislease: lease acquired" || line.Msg == "kinesislease: lease taken over") && line.Start != "" {
			out[line.Shard] = line.Start
		}
	}
	return out
}
