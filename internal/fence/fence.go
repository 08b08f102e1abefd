// Package fence is an instance's fence of the membership protocol: the
// monotonic instants kept in atomics (Mono), the Fence after which none of
// an instance's leases may deliver, the arithmetic of a heartbeat's fence
// and deadline, and its lock-free wake-up (syncx.Signal)
// (docs/lease-protocol.md, "Membership, heartbeats and the fence").
//
// It is pure state and arithmetic: the heartbeat loop of
// internal/membership moves a Fence, the leases of internal/lease read it.
package fence

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/kinesislease/kinesislease/internal/syncx"
)

// epoch is the base of the monotonic instants kept in atomics (Mono).
var epoch = time.Now()

// Mono returns the instant now on the monotonic clock, in nanoseconds since
// an epoch set when the process started: every instant membership, the
// leases and the engine keep in an atomic (fences, heartbeats' sends, entries' ages)
// is one of these.
func Mono() int64 { return int64(time.Since(epoch)) }

// MonoAt returns the instant t (read from the clock, with its monotonic
// reading) as Mono() read then.
func MonoAt(t time.Time) int64 { return int64(t.Sub(epoch)) }

// Fenced is the fence of an instance that may deliver nothing: before every
// Mono(), which is negative inside a testing/synctest bubble (its clock
// starts in 2000, before the epoch), so 0 would not do.
const Fenced = math.MinInt64

// Fence is an instance's fence of the membership protocol: the Mono()
// after which none of its leases may deliver. Moving it (Store) wakes the
// workers waiting for their lease to be deliverable again (Moved). The
// heartbeat loop alone moves an instance's fence; its leases read it.
//
// The fence passes at the first of two instants: at on the monotonic
// clock, and the same instant as read then on the wall clock (wall). The
// monotonic clock stops while the machine is suspended (a VM paused, an
// instance hibernated) and the wall clock does not, so a process that
// resumes sees its fence passed, not a fence with seconds left while
// takers, whose own clocks ran, may have taken its leases. A wall clock
// stepped forward only passes the fence early (safe); one stepped back
// leaves the monotonic instant in charge. Takers time others on the
// monotonic clock alone: a clock of theirs that stops only makes them wait
// longer.
type Fence struct {
	at    atomic.Int64
	wall  atomic.Int64 // Unix nanoseconds
	moved syncx.Signal
}

// Load returns the fence on the monotonic clock (Mono()).
func (f *Fence) Load() int64 { return f.at.Load() }

// Store moves the fence to at (Mono()) and wakes the workers waiting on
// Moved.
func (f *Fence) Store(at int64) {
	wall := int64(math.MinInt64)
	if at != math.MinInt64 {
		now := time.Now()
		wall = now.UnixNano() + at - int64(now.Sub(epoch))
	}
	// Either order of the two stores, read half old and half new, gives a
	// fence no later than one of the two: never a delivery past a fence.
	f.at.Store(at)
	f.wall.Store(wall)
	f.moved.Broadcast()
}

// Moved returns a channel that the next Store closes (see syncx.Signal.Wait).
func (f *Fence) Moved() <-chan struct{} { return f.moved.Wait() }

// PassedAt reports whether the fence has passed at the instant whose
// monotonic reading is m (Mono()) and wall reading w (Unix nanoseconds).
func (f *Fence) PassedAt(m, w int64) bool { return m >= f.at.Load() || w >= f.wall.Load() }

// Passed reports whether the fence has passed now: no time left.
func (f *Fence) Passed() bool { return f.Left() <= 0 }

// Left returns how long until the fence passes: 0 or less if it has.
func (f *Fence) Left() time.Duration {
	now := time.Now()
	at, wall := f.at.Load(), f.wall.Load()
	if at == math.MinInt64 || wall == math.MinInt64 {
		return math.MinInt64
	}
	return time.Duration(min(at-int64(now.Sub(epoch)), wall-now.UnixNano()))
}

// After is the fence of a heartbeat sent at sent (Mono()): the
// instance delivers until Timeout-FenceMargin after the send, and a taker
// acts only once it has seen the heartbeat unchanged for Timeout, counted
// from a read that returned after the send.
func After(sent int64, timeout, margin time.Duration) int64 {
	return sent + int64(timeout-margin)
}

// HeartbeatDeadline is how long a heartbeat (or a write of this
// incarnation's entry) may take when sent at now with the fence at fence:
// half the time left before the fence, and never less than half the
// interval. A slow store (a DynamoDB Local on a loaded machine, real
// DynamoDB in a latency spike) has as long as the fence allows, while a
// call that hangs (a lost connection) still leaves room for another
// attempt before the fence. Before, every call had half the interval:
// calls slower than that failed one after the other and fenced an instance
// whose store answered every one of them, well within the fence.
//
// Safety: a heartbeat that counts must have landed before any taker can
// find the previous one Timeout old, which is the fence plus the margin
// (After). It is sent before the fence, and answered within the
// deadline: half the interval, which the margin covers, or half of what is
// left, which ends before the fence.
func HeartbeatDeadline(now, fence int64, interval time.Duration) time.Duration {
	d := interval / 2
	if fence != Fenced && fence > now {
		d = max(d, time.Duration(fence-now)/2)
	}
	return d
}

// PassedBefore reports whether a heartbeat sent at sent came too late to
// extend the fence: the fence had passed before it was sent (takers may
// have found the incarnation dead already). An incarnation that holds
// nothing yet has no fence to pass.
func PassedBefore(fence, sent int64) bool {
	return fence != Fenced && sent >= fence
}
