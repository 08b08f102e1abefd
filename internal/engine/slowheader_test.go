package engine_test

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/testkit/sim"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestSlowHeaderAfterFence: heartbeats fail for longer than the timeout,
// which fences the instance, while every header write takes 3.5 s (a
// throttled header: the SDK's three attempts with a one-second throttle
// base). One fence must give one new incarnation. Before, the new
// incarnation bumped its row's roster version in the header on the
// heartbeat loop, with no deadline: its fence passed while the bump ran,
// the next heartbeat fenced again, and so on while the header stayed
// slow (13 incarnations in 60 s, every record delivered about 7 times).
func TestSlowHeaderAfterFence(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		k := sim.NewKinesis()
		stream := newSimStream(t, k, "slowheader", 2)
		var outage, slowHeader atomic.Bool
		store := sim.NewFaultStore(memory.New(), sim.StoreHooks{Decide: func(op string, key leases.Key) sim.Decision {
			var d sim.Decision
			switch {
			case outage.Load() && op == "Heartbeat":
				d.Err = &sim.InjectedError{Op: op, Key: key, Msg: "unavailable"}
			case slowHeader.Load() && key == sim.MemberRowKey(-1) && op != "Header":
				d.Delay = 3500 * time.Millisecond
			}
			return d
		}})
		logs := &countingHandler{counts: map[string]int{}, subs: []string{"fenced: every lease is lost", "new incarnation after a fence"}}
		var handled atomic.Int64
		cfg := engine.GroupConfig{
			Owner: "solo", Store: store, Client: k, Logger: slog.New(teeHandler{logs, os.Getenv("KINESISLEASE_SCALE_LOG") != ""}),
			Streams: []engine.StreamConfig{{Stream: stream.Name(), Start: kltype.TrimHorizon, Worker: engine.WorkerConfig{
				MinInterval: 200 * time.Millisecond, IdleInterval: 200 * time.Millisecond,
				Handler: func(context.Context, *kltype.Record) error { handled.Add(1); return nil },
			}}},
		}
		// On a failure too, the cleanup stops Run inside the bubble: it
		// must end with no goroutine left.
		_, stop := startGroup(t, cfg)
		defer stop()
		for _, id := range stream.ShardIDs() {
			if _, err := stream.Put(id, "k", []byte("first")); err != nil {
				t.Fatal(err)
			}
		}
		for handled.Load() < 2 {
			time.Sleep(100 * time.Millisecond)
		}

		slowHeader.Store(true)
		outage.Store(true)
		time.Sleep(engine.DefaultTimeout + 2*time.Second)
		outage.Store(false)
		time.Sleep(time.Minute) // the header stays slow all along
		if n := logs.count("fenced: every lease is lost"); n != 1 {
			t.Errorf("fenced %d times by one outage of heartbeats with a slow header, want 1", n)
		}
		if n := logs.count("new incarnation after a fence"); n != 1 {
			t.Errorf("%d new incarnations after one outage with a slow header, want 1", n)
		}
	})
}
