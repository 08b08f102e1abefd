package kinesisleasetest_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestWaitReady: WaitReady returns once a running service reads every
// shard, with no polling in the test; it fails the test, naming why, when
// Run returned first.
func TestWaitReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := kinesisfake.New()
		if err := k.CreateStream("orders", 3); err != nil {
			t.Fatal(err)
		}
		svc, err := kinesislease.New(aws.Config{Region: "us-east-1"}, kinesislease.WithKinesisClient(k),
			kinesislease.WithLeaseStore(memory.New()), kinesislease.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		if err := kinesislease.Subscribe(svc, "orders", func(context.Context, map[string]any) error { return nil }); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctx) }()
		kinesisleasetest.WaitReady(t, svc)
		reading := 0
		for _, st := range svc.Health().Streams {
			for _, sh := range st.Shards {
				if sh.Reading {
					reading++
				}
			}
		}
		if reading != 3 {
			t.Errorf("after WaitReady, %d of 3 shards being read", reading)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		msg, ok := fatal(t, func(tb testing.TB) { kinesisleasetest.WaitReady(tb, svc) })
		if !ok || !strings.Contains(msg, "service stopped") {
			t.Errorf("WaitReady after Run returned: failed %v with %q; want a failure naming the stopped service", ok, msg)
		}
	})
}
