// Package observe is the engine's instrumentation, with no Group in it:
// the registered hooks sorted by interface (Hooks), the lease store seen
// through a counter of its calls that times them for the call hooks
// (Store, Stats), and the lease events told to the hooks and to a Group's
// Events (Emit). internal/engine builds one Hooks, one Stats and one Store
// per Group from its configuration's values.
package observe

import (
	"time"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/internal/shard"
	"github.com/kinesislease/kinesislease/kltype"
)

// Hooks holds the registered hooks by interface, sorted once, so that an
// event nobody listens to costs one length check.
type Hooks struct {
	acquired []kltype.HookLeaseAcquired
	released []kltype.HookLeaseReleased
	lost     []kltype.HookLeaseLost
	ended    []kltype.HookShardEnded
	call     []kltype.HookCall
	failed   []kltype.HookFailed
	// Worker are those the shards' workers call.
	Worker shard.Hooks
}

// NewHooks sorts hs by the hook interfaces each implements.
func NewHooks(hs []kltype.Hook) *Hooks {
	h := &Hooks{}
	adds := [...]func(kltype.Hook){
		adder(&h.acquired), adder(&h.released), adder(&h.lost), adder(&h.Worker.Started),
		adder(&h.ended), adder(&h.Worker.Batch), adder(&h.Worker.Record), adder(&h.Worker.Checkpoint),
		adder(&h.Worker.Throttled), adder(&h.Worker.DeadLettered), adder(&h.call), adder(&h.failed), adder(&h.Worker.Filtered),
	}
	for _, x := range hs {
		for _, add := range adds {
			add(x)
		}
	}
	return h
}

// adder appends a hook to list if it implements the list's hook interface.
func adder[T any](list *[]T) func(kltype.Hook) {
	return func(x kltype.Hook) {
		if v, ok := x.(T); ok {
			*list = append(*list, v)
		}
	}
}

// WrapKinesis returns k timing every call for the call hooks, or k itself
// when there are none.
func (h *Hooks) WrapKinesis(k kinesisx.Reader) kinesisx.Reader {
	if len(h.call) == 0 {
		return k
	}
	return read.WithCallHook(k, func(op string, start time.Time, err error) { h.onCall("kinesis", op, start, err) })
}

// OnFailed tells the failure hooks of f.
func (h *Hooks) OnFailed(f kltype.FailureInfo) {
	for _, x := range h.failed {
		x.OnFailed(f)
	}
}

// onCall tells the call hooks of a call to service begun at start.
func (h *Hooks) onCall(service, op string, start time.Time, err error) {
	ci := kltype.CallInfo{Service: service, Op: op, Duration: time.Since(start), Err: err}
	for _, x := range h.call {
		x.OnCall(ci)
	}
}

// timed runs call and tells the call hooks how long it took.
func timed[T any](h *Hooks, service, op string, call func() (T, error)) (T, error) {
	start := time.Now()
	v, err := call()
	h.onCall(service, op, start, err)
	return v, err
}
