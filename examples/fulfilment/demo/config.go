package main

// One run's configuration: config, the lease settings it resolves (with
// the library's defaults) and the bounds derived from them (fence,
// expected failover, settle, takeover and drain timeouts), and fan-out
// mode's in-memory Kinesis (startFanOut).

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/kinesisfake"
)

// config is one run of the demo: instances of the fulfilment service as
// separate processes on one stream and lease table (which must exist), a
// trickle of orders, one instance SIGKILLed on the way.
type config struct {
	Stream, Table string
	Orders        int           // orders to publish
	PublishOver   time.Duration // spread over this long
	Instances     int
	// Lease settings of every instance (--heartbeat, --timeout; 0 for the
	// library's defaults) and its checkpoint interval.
	Heartbeat, Timeout time.Duration
	// KeyConcurrency is the instances' --key-concurrency; 0 for the default.
	KeyConcurrency     int
	CheckpointInterval time.Duration
	// FanOut, if set, is an in-memory Kinesis on a local endpoint
	// (startFanOut), holding the stream: the demo publishes to it and the
	// instances read it with enhanced fan-out as the consumer
	// fanOutConsumer. The caller closes it. Nil: the instances poll the
	// run's Kinesis (embedded or kinesalite).
	FanOut *harness.FanOutKinesis
	// FanOutRule is FanOut's 5-second rule (its TakeoverAfter), for the
	// bounds; 0: fanOutTakeover, which startFanOut gives it.
	FanOutRule time.Duration
	// Kill SIGKILLs the instance holding the most shards once KillAt of the
	// orders are published (at once when there are none).
	Kill   bool
	KillAt float64
	// Dir holds the binary, the reports and the instances' logs.
	Dir string
	// Binary is a built examples/fulfilment; empty: build it into Dir
	// (with -race when Race).
	Binary string
	Race   bool
	// Out receives the progress; nil discards it.
	Out io.Writer
}

// fanOutConsumer is the stream consumer the instances read with in fan-out
// mode (their --fan-out).
const fanOutConsumer = "fulfilment-demo"

// fanOutTakeover is the 5-second rule of Kinesis, which the in-memory
// Kinesis keeps: a SubscribeToShard call for a shard within this of the
// previous successful one fails with ResourceInUseException (the library
// retries it every second), a later one takes the subscription over.
const fanOutTakeover = 5 * time.Second

// startFanOut serves an in-memory Kinesis with Kinesis' rules for
// SubscribeToShard (the 5-second rule rule; 0: fanOutTakeover) and a stream
// of shards on it. Close it once the instances are gone.
func startFanOut(stream string, shards int32, rule time.Duration) (*harness.FanOutKinesis, error) {
	fo := harness.StartFanOutKinesis(kinesisfake.FanOutRules{TakeoverAfter: cmp.Or(rule, fanOutTakeover)})
	if err := fo.CreateStream(context.Background(), stream, shards); err != nil {
		fo.Close()
		return nil, fmt.Errorf("demo: the fan-out stream: %w", err)
	}
	return fo, nil
}

// reading says how the instances read the stream.
func (c *config) reading() string {
	if c.FanOut == nil {
		return "polling"
	}
	return fmt.Sprintf("enhanced fan-out as consumer %s from the in-memory Kinesis at %s", fanOutConsumer, c.FanOut.URL())
}

// heartbeat and timeout are the instances' settings, as the fulfilment
// service resolves its flags: the library's defaults when neither is set,
// else a timeout of five heartbeats.
func (c *config) heartbeat() time.Duration {
	switch {
	case c.Heartbeat > 0:
		return c.Heartbeat
	case c.Timeout > 0:
		return c.Timeout / 5
	}
	return kinesislease.DefaultHeartbeat
}

func (c *config) timeout() time.Duration {
	switch {
	case c.Timeout > 0:
		return c.Timeout
	case c.Heartbeat > 0:
		return 5 * c.Heartbeat
	}
	return kinesislease.DefaultTimeout
}

// fence is how long after its last successful heartbeat was sent a holder
// goes on delivering: 5/6 of the timeout (kinesislease.WithHeartbeat).
func (c *config) fence() time.Duration { return c.timeout() - c.timeout()/6 }

// settings describes the lease settings, for the progress and the tally.
func (c *config) settings() string {
	return fmt.Sprintf("heartbeat %v, timeout %v, fence %v", c.heartbeat(), c.timeout(), c.fence().Round(time.Millisecond))
}

// expectedFailover is the time from a SIGKILL until a survivor takes a lease
// over, as the library documents it: a survivor must see the dead
// instance's heartbeat unchanged for the timeout, and it reads the
// membership rows every heartbeat.
func (c *config) expectedFailover() time.Duration { return c.timeout() + c.heartbeat() }

// bestFailover and worstFailover bound it. The dead holder's last heartbeat
// was at most a heartbeat interval before the kill, and a survivor times
// the value from the first read that shows it: no takeover before
// timeout−heartbeat. That read comes at most a jittered heartbeat interval
// after the kill, and the one that finds the value a timeout old at most
// another after that; add a second for the take, scheduling and the report.
// With fan-out the taker's first subscription may come up against the
// 5-second rule (the dead holder subscribed just before the kill): up to
// the rule's length more, as the library documents.
func (c *config) bestFailover() time.Duration { return c.timeout() - c.heartbeat() }

func (c *config) worstFailover() time.Duration {
	w := c.timeout() + 2*c.heartbeat() + time.Second
	if c.FanOut != nil {
		w += c.fanOutRule()
	}
	return w
}

func (c *config) fanOutRule() time.Duration {
	if c.FanOutRule > 0 {
		return c.FanOutRule
	}
	return fanOutTakeover
}

// settleTimeout bounds the wait for every shard to be held before the orders
// start; takeoverTimeout the wait for a failover; drainTimeout the wait for
// the last orders once they are all published. The settle is a
// precondition, not what is measured: it waits up to a minute, as the chaos
// run does, for a fleet starting on a machine loaded past its cores.
func (c *config) settleTimeout() time.Duration   { return 60*time.Second + 2*c.timeout() }
func (c *config) takeoverTimeout() time.Duration { return 2*c.worstFailover() + 5*time.Second }
func (c *config) drainTimeout() time.Duration    { return 30 * time.Second }
