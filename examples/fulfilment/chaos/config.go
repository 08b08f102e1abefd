package main

// A run's configuration: config (the instances, the stream and lease
// table, the producer's rate, the chaos schedule's seed and duration, the
// lease settings), the consumer fan-out mode reads as, how the instances
// read, its defaults, the plan's configuration drawn from it, and the
// timeouts of the run's waits.

import (
	"fmt"
	"io"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
)

// config is one chaos run: Instances processes of examples/fulfilment on one
// stream and lease table (both must exist), a producer publishing Rate
// orders a second, and the chaos schedule drawn from Seed for Duration.
type config struct {
	Stream, Table string
	Instances     int
	MaxDown       int // at most this many instances disrupted at once
	Rate          int // orders published per second
	Keys          int // partition keys (customers); orders go round-robin over them
	Duration      time.Duration
	Seed          uint64
	// Lease settings of every instance (--heartbeat, --timeout), its
	// checkpoint interval and shutdown timeout.
	Heartbeat, Timeout time.Duration
	CheckpointInterval time.Duration
	ShutdownTimeout    time.Duration
	// Dir holds the binary, the reports and the instances' logs.
	Dir string
	// Binary is a built examples/fulfilment; empty: build it into Dir (with
	// -race when Race).
	Binary string
	Race   bool
	// FanOut, if set, is an in-memory Kinesis on a local endpoint holding
	// the stream (kinesalite has no SubscribeToShard): the run publishes to
	// it and the instances read it with enhanced fan-out as the consumer
	// fanOutConsumer. The caller closes it once run returned. Nil: the
	// instances poll the emulator.
	FanOut *harness.FanOutKinesis
	// Out receives the progress; nil discards it.
	Out io.Writer
}

// fanOutConsumer is the stream consumer the instances read with in fan-out
// mode (their --fan-out).
const fanOutConsumer = "chaos"

// reading says how the instances read the stream.
func (c *config) reading() string {
	if c.FanOut == nil {
		return "polling"
	}
	return fmt.Sprintf("enhanced fan-out as consumer %s from the in-memory Kinesis at %s", fanOutConsumer, c.FanOut.URL())
}

func (c *config) defaults() {
	if c.Instances == 0 {
		c.Instances = 4
	}
	if c.MaxDown == 0 {
		c.MaxDown = min(2, c.Instances-1)
	}
	if c.Rate == 0 {
		c.Rate = 200
	}
	if c.Keys == 0 {
		c.Keys = 64
	}
	if c.Timeout == 0 {
		c.Heartbeat, c.Timeout = 500*time.Millisecond, 2*time.Second
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = c.Timeout / 5
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = time.Second
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
}

func (c *config) planConfig() planConfig {
	return planConfig{
		Duration: c.Duration, Instances: c.Instances, MaxDown: c.MaxDown, Timeout: c.Timeout,
		Drain: 1500 * time.Millisecond, Settle: time.Second,
		MinGap: 300 * time.Millisecond, MaxGap: 2 * time.Second,
	}
}

// settleTimeout bounds the wait for every shard to be held before the chaos;
// catchUpTimeout the wait, after the chaos, for every order to be handled
// and every shard checkpointed at its last record; exitTimeout the wait for
// a SIGINTed or SIGKILLed instance to exit. The settle is a precondition,
// not what is measured: on a machine loaded past its cores (CI25: two
// simulations beside -p 4) a fleet took 18 s to hold its first shard, so it
// waits up to a minute (a fleet that never settles still fails).
func (c *config) settleTimeout() time.Duration  { return 60*time.Second + 2*c.Timeout }
func (c *config) catchUpTimeout() time.Duration { return 30*time.Second + 4*c.Timeout }
func (c *config) exitTimeout() time.Duration    { return c.ShutdownTimeout + 10*time.Second }
