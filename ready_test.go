package kinesislease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// readingShards returns the shards svc's Health reports as being read, as
// stream/shard.
func readingShards(svc *kinesislease.Service) map[string]bool {
	ids := map[string]bool{}
	for _, st := range svc.Health().Streams {
		for _, sh := range st.Shards {
			if sh.Reading {
				ids[st.Stream+"/"+sh.ShardID] = true
			}
		}
	}
	return ids
}

// TestReady: Ready returns once every shard is held, by one instance alone
// and by a fleet of two (each Ready: every shard held by exactly one of
// them), without a polling loop; called before Run, it waits for Run.
func TestReady(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2} {
		t.Run(map[int]string{1: "one instance", 2: "two instances"}[n], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k := kinesisfake.New()
				kc := k.Client()
				if err := k.CreateStream("orders", 4); err != nil {
					t.Fatal(err)
				}
				store := memory.New()
				var svcs []*kinesislease.Service
				var early []chan error // Ready called before Run
				for i := range n {
					owner := string(rune('a' + i))
					ready := make(chan error, 1)
					runService(t, kc, store, owner, func(s *kinesislease.Service) error {
						svcs = append(svcs, s)
						go func() { ready <- s.Ready(context.Background()) }()
						return kinesislease.Subscribe(s, "orders", newTally().handler(owner))
					})
					early = append(early, ready)
				}
				for i, ready := range early {
					if err := <-ready; err != nil {
						t.Errorf("Ready called before Run (instance %d): %v", i, err)
					}
				}
				for _, svc := range svcs {
					if err := svc.Ready(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				held := map[string]int{}
				for _, svc := range svcs {
					for id := range readingShards(svc) {
						held[id]++
					}
				}
				if len(held) != 4 {
					t.Errorf("after Ready, shards being read: %v; want all 4", held)
				}
				for id, c := range held {
					if c != 1 {
						t.Errorf("shard %s read by %d instances", id, c)
					}
				}
			})
		})
	}
}

// TestReadyErrors: Ready gives up with its context's error, and with
// ErrStopped once Run returned.
func TestReadyErrors(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := kinesisfake.New()
		if err := k.CreateStream("orders", 1); err != nil {
			t.Fatal(err)
		}
		svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(k.Client()), kinesislease.WithLeaseStore(memory.New()),
			kinesislease.WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		if err := kinesislease.Subscribe(svc, "orders", newTally().handler("a")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := svc.Ready(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Ready before Run, its context ending: %v; want context.DeadlineExceeded", err)
		}
		runCtx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- svc.Run(runCtx) }()
		if err := svc.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := svc.Ready(context.Background()); !errors.Is(err, kinesislease.ErrStopped) {
			t.Errorf("Ready after Run returned: %v; want ErrStopped", err)
		}
	})
}
