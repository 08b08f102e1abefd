package engine

// The Group's configuration: GroupConfig, one StreamConfig per
// subscription, and the defaults of the membership protocol that NewGroup
// fills in where a duration is not set (orDefault).

import (
	"log/slog"
	"time"

	"github.com/kinesislease/kinesislease/internal/balance"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/observe"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// Defaults of the membership protocol. A heartbeat every 1.25s costs one
// write (one WCU while the membership row stays under 1 KB) per instance:
// 2,880 an hour. The timeout tolerates two failed heartbeats in a row: after
// a failure the next attempt comes half an interval later, so the third
// attempt is sent about 3.75s after the last success at worst, before the
// fence (timeout minus margin: 4.17s; the margin defaults to a sixth of
// the timeout, see GroupConfig.FenceMargin).
const (
	DefaultHeartbeat = 1250 * time.Millisecond
	DefaultTimeout   = 5 * time.Second
	// DefaultReconcile: over how long a holder re-reads every row it holds
	// (one GetItem per held shard, spread evenly over the rounds), a safety
	// net for rows changed while it wrote nothing: rewind requests reach it
	// through its membership entry's Notice, a vanished row at its next
	// write or through the header's vanished reports. An hour keeps the
	// cost at held/3,600 RCU/s per instance (0.28 at 1,000 held rows), so
	// that an instance's reads stay within 2 RCU/s whatever it holds.
	DefaultReconcile = time.Hour
)

// StreamConfig is one subscription of a Group.
type StreamConfig struct {
	Stream string          // name or ARN, what Kinesis is called with
	Key    string          // the stream part of its lease rows' keys; "": its name
	Client kinesisx.Reader // for every Kinesis call of the stream; nil: GroupConfig.Client
	Start  kltype.StartPosition
	Since  time.Time // when the subscription began: LATEST's moment, if this instance marks the stream first
	Worker WorkerConfig
}

// GroupConfig configures a Group: every subscription of one instance.
type GroupConfig struct {
	Owner   string
	Store   leases.Store // must implement leases.Membership
	Client  kinesisx.Reader
	Logger  *slog.Logger
	Streams []StreamConfig
	// Heartbeat is the interval between heartbeats (jittered ±10%).
	Heartbeat time.Duration
	// Timeout: a member whose heartbeat is seen unchanged this long on this
	// instance's clock is dead; its leases are taken.
	Timeout time.Duration
	// FenceMargin: this instance delivers only while its last successful
	// heartbeat was sent less than Timeout-FenceMargin ago.
	FenceMargin time.Duration
	MaxLeases   int          // caps the leases this instance holds (0: no cap); published
	Capacity    int64        // this instance's weight in thousandths (0: 1000); published
	Balance     balance.Mode // by count or by load, and the utilization published (internal/balance)
	// ShardSyncInterval: how often a stream's lister runs ListShards (also
	// when a shard ends; the others list when its digest changes, see
	// internal/shardlist).
	ShardSyncInterval time.Duration
	// ShutdownTimeout bounds the drain on shutdown.
	ShutdownTimeout time.Duration
	// Reconcile: over how long every held row is re-read once.
	Reconcile time.Duration
	// FailureBackoff is the first wait before a shard or stream that
	// failed for good (access denied, a checkpoint not in its shard, the
	// stream gone) is tried again; it doubles with each failure in a row,
	// up to MaxFailureBackoff. Defaults 30s and 10 minutes.
	FailureBackoff, MaxFailureBackoff time.Duration
	Events                            func(observe.LeaseEvent)
	Hooks                             []kltype.Hook
}

// orDefault sets *d to def when it is not positive (not configured).
func orDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}
