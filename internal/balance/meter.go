// Package balance is the engine's side of balancing by load: what a
// holder measures of a shard (Meter), what a member publishes of its load
// in its membership entry (Publish, the hot shards' encoding), and how a
// member turns the entries it reads into the planner's inputs and holds
// load-driven handoffs back (Balancer), over the pure planner of
// internal/plan. See docs/balance.md.
package balance

import (
	"math"
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// Window is the time constant of a Meter's decayed average: a step in a
// shard's rate shows 63% of its size after Window, 95% after three. A
// minute smooths the batches of GetRecords (a poll a second, or the
// events of a subscription) to within a few percent, so that loads do not
// wobble across the plan's tolerance, and still shows a hot spot to the
// plan within a minute or two.
const Window = time.Minute

// A Meter measures one held shard's throughput: a decayed average of the
// bytes and records its reader fetched, each batch's contribution decaying
// exponentially with Window as its time constant. The reader adds each
// batch (Add: no allocation, one short lock a batch, never per record);
// the heartbeat and the holder's writes read it (Rate). Its methods may be
// called from any goroutine.
type Meter struct {
	mu      sync.Mutex
	at      time.Time // when bytes and records were last decayed
	bytes   float64   // per second
	records float64
}

// NewMeter returns the meter of a shard taken at now, its average starting
// from the row's throughput as its last holder wrote it (so a hot shard
// moved is known hot at once).
func NewMeter(from leases.Throughput, now time.Time) *Meter {
	return &Meter{at: now, bytes: float64(from.BytesPerSecond), records: float64(from.RecordsPerSecond)}
}

// decay brings the averages to now. Called holding mu.
func (m *Meter) decay(now time.Time) {
	dt := now.Sub(m.at)
	if dt <= 0 {
		return
	}
	f := math.Exp(-float64(dt) / float64(Window))
	m.bytes *= f
	m.records *= f
	m.at = now
}

// Add counts a batch of records and bytes fetched at now.
func (m *Meter) Add(records, bytes int, now time.Time) {
	if m == nil || records <= 0 && bytes <= 0 {
		return
	}
	m.mu.Lock()
	m.decay(now)
	w := float64(time.Second) / float64(Window)
	m.bytes += float64(bytes) * w
	m.records += float64(records) * w
	m.mu.Unlock()
}

// Rate returns the shard's throughput at now.
func (m *Meter) Rate(now time.Time) leases.Throughput {
	if m == nil {
		return leases.Throughput{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.decay(now)
	return leases.Throughput{BytesPerSecond: int64(math.Round(m.bytes)), RecordsPerSecond: int64(math.Round(m.records))}
}
