package engine

import (
	"time"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/internal/shard"
	"github.com/kinesislease/kinesislease/kltype"
)

// hooks holds the registered hooks by interface, sorted once, so that an
// event nobody listens to costs one length check.
type hooks struct {
	acquired []kltype.HookLeaseAcquired
	released []kltype.HookLeaseReleased
	lost     []kltype.HookLeaseLost
	ended    []kltype.HookShardEnded
	call     []kltype.HookCall
	failed   []kltype.HookFailed
	// worker are those the shards' workers call.
	worker shard.Hooks
}

func newHooks(hs []kltype.Hook) *hooks {
	h := &hooks{}
	adds := [...]func(kltype.Hook){
		adder(&h.acquired), adder(&h.released), adder(&h.lost), adder(&h.worker.Started),
		adder(&h.ended), adder(&h.worker.Batch), adder(&h.worker.Record), adder(&h.worker.Checkpoint),
		adder(&h.worker.Throttled), adder(&h.worker.DeadLettered), adder(&h.call), adder(&h.failed), adder(&h.worker.Filtered),
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

func (h *hooks) wrapKinesis(k kinesisx.Reader) kinesisx.Reader {
	if len(h.call) == 0 {
		return k
	}
	return read.WithCallHook(k, func(op string, start time.Time, err error) { h.onCall("kinesis", op, start, err) })
}

func (h *hooks) onFailed(f kltype.FailureInfo) {
	for _, x := range h.failed {
		x.OnFailed(f)
	}
}

func (h *hooks) onCall(service, op string, start time.Time, err error) {
	ci := kltype.CallInfo{Service: service, Op: op, Duration: time.Since(start), Err: err}
	for _, x := range h.call {
		x.OnCall(ci)
	}
}

func timed[T any](h *hooks, service, op string, call func() (T, error)) (T, error) {
	start := time.Now()
	v, err := call()
	h.onCall(service, op, start, err)
	return v, err
}
