package kinesislease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestSubscribeRunningObeysContext: a Subscribe while Run runs gives up
// with its context's error (WithSubscribeContext) and adds nothing, so the
// same stream can be subscribed again; without it, it is added and read.
func TestSubscribeRunningObeysContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := kinesisfake.New()
		kc := k.Client()
		for _, s := range []string{"orders", "audit"} {
			if err := k.CreateStream(s, 2); err != nil {
				t.Fatal(err)
			}
		}
		var svc *kinesislease.Service
		runService(t, kc, memory.New(), "a", func(s *kinesislease.Service) error {
			svc = s
			return kinesislease.Subscribe(s, "orders", newTally().handler("a"))
		})
		if err := svc.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := kinesislease.Subscribe(svc, "audit", newTally().handler("a"), kinesislease.WithSubscribeContext(ctx))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Subscribe while running with a cancelled context: %v; want context.Canceled", err)
		}
		if err := kinesislease.Subscribe(svc, "audit", newTally().handler("a")); err != nil {
			t.Fatalf("Subscribe again after the cancelled one: %v", err)
		}
		if err := svc.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := len(readingShards(svc)); n != 4 {
			t.Errorf("%d shards read after both subscriptions, want 4", n)
		}
	})
}
