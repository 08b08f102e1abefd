package kinesislease_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
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
