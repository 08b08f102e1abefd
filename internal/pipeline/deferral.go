package pipeline

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/kltype"
)

// Deferred acknowledgements.
//
// A handler may take its delivery's acknowledgement with it (Defer) and
// resolve it later from any goroutine (AckHandle.Resolve): its return then
// no longer resolves the record (or the batch). The Processor returns
// Deferred for such a delivery, keeping where it stood (attempts, failures)
// in the Deferral; the worker keeps the record unresolved, so the checkpoint
// stops before it, and delivers the records after it meanwhile. Once
// resolved, the deferral goes to the worker's Tracker, and the worker takes
// the resolution up on its own goroutine (or the record's lane), as if the
// handler had returned it: Resume goes on from there, and a failure is
// delivered again, before any record of its shard (or key) not delivered
// yet.

// Deferred is the Outcome of a delivery whose handler deferred its
// acknowledgement: not resolved yet.
const Deferred kltype.Outcome = -1

// delivery is the deferrable state of one record's (or one batch's) handler
// calls, embedded in the context the handler gets: no allocation until a
// handler defers.
type delivery struct {
	mu      sync.Mutex
	calling bool      // a handler call is in progress
	gen     uint32    // counts the calls
	d       *Deferral // allocated by the first Defer, reused for later calls
	t       *Tracker  // the worker's; nil outside a worker (the resolution is awaited in place)
	// toFailures, for a batch, turns a resolution into the batch's failures
	// (the typed edge sets it before each call; nil: failBatch).
	toFailures func(error) []BatchFailure
	// batchSize is the number of records of the batch being handled; 0 for
	// a record.
	batchSize int
}

// Deferral is the acknowledgement of one delivery taken by its handler. Its
// fields are guarded by its delivery's mutex, except the Processor's
// progress (attempt, failed) and Held, which only the worker (or the lane
// the record is handed to) touches.
type Deferral struct {
	del      *delivery
	gen      uint32 // the call that deferred
	taken    bool   // Defer was called during call gen
	resolved bool
	err      error          // the resolution, read as the handler's return
	failures []BatchFailure // a batch's resolution
	wake     chan struct{}  // outside a worker: closed by the resolution

	// The Processor's progress with the record, for Resume.
	attempt, failed int

	// Held is what the worker tracks of the deferral.
	Held Held
}

// Held is what a worker keeps with a Deferral, on the goroutine that takes
// up its resolutions. The pipeline reads only Order; when the same delivery
// defers again, Defer keeps Owner, Order and Start and clears Records.
type Held struct {
	// Owner is what the deferral stands for, to the worker: its record, its
	// key's item or its batch.
	Owner any
	// Order is the place of its (first unresolved) record in the shard:
	// the Tracker hands resolutions over in this order.
	Order int64
	// Records counts the records it stands for (1, or the batch's
	// unresolved ones).
	Records int
	// Start is when its record was first delivered, for the hooks.
	Start time.Time
}

type deliveryKey struct{}

// AckHandle resolves a deferred acknowledgement (Defer). The zero value, and
// a handle from outside a handler call, resolve nothing
// (kltype.ErrNotDeferred). It may be copied; any copy resolves it once.
type AckHandle struct {
	d   *Deferral
	gen uint32
}

// Defer takes the acknowledgement of the delivery ctx carries (a handler's
// context) out of the handler: the handler's return no longer resolves it;
// the handle does, once. Outside a handler call, or once the handler
// returned, it returns the zero AckHandle.
func Defer(ctx context.Context) AckHandle {
	if ctx == nil {
		return AckHandle{}
	}
	del, _ := ctx.Value(deliveryKey{}).(*delivery)
	if del == nil {
		return AckHandle{}
	}
	del.mu.Lock()
	defer del.mu.Unlock()
	if !del.calling {
		return AckHandle{}
	}
	d := del.d
	if d == nil {
		d = &Deferral{del: del}
		del.d = d
	}
	if d.gen != del.gen || !d.taken {
		*d = Deferral{del: del, gen: del.gen, taken: true, Held: Held{Owner: d.Held.Owner, Order: d.Held.Order, Start: d.Held.Start}}
	}
	return AckHandle{d: d, gen: del.gen}
}

// Resolve resolves the deferred acknowledgement with err, read as the
// handler's return would be: nil acknowledges, an error retries, drops or
// dead-letters per the outcome rules. It reports kltype.ErrNotDeferred for
// a handle taken outside a handler call, kltype.ErrAlreadyResolved for a
// second resolution, and kltype.ErrLeaseGone once the shard was let go; in
// all three cases it does nothing.
func (h AckHandle) Resolve(err error) error {
	d := h.d
	if d == nil {
		return kltype.ErrNotDeferred
	}
	del := d.del
	del.mu.Lock()
	if d.gen != h.gen || !d.taken || d.resolved {
		del.mu.Unlock()
		return kltype.ErrAlreadyResolved
	}
	size, conv := del.batchSize, del.toFailures
	del.mu.Unlock()
	var failures []BatchFailure
	if size > 0 {
		if conv == nil {
			conv = failBatch(size)
		}
		failures = conv(err)
	}
	del.mu.Lock()
	if d.gen != h.gen || !d.taken || d.resolved {
		del.mu.Unlock()
		return kltype.ErrAlreadyResolved
	}
	d.resolved, d.err, d.failures = true, err, failures
	if del.calling {
		// Resolved before the handler returned: the call's end takes it up.
		del.mu.Unlock()
		return nil
	}
	t, wake := del.t, d.wake
	del.mu.Unlock()
	if t == nil {
		if wake != nil {
			close(wake)
		}
		return nil
	}
	if !t.push(d) {
		return kltype.ErrLeaseGone
	}
	return nil
}

// failBatch turns a resolution of a batch of n records into its failures
// when the handler is engine-level (no typed edge): nil acknowledges all, a
// *kltype.BatchError names its failed items, any other error fails all.
func failBatch(n int) func(error) []BatchFailure {
	return func(err error) []BatchFailure {
		if err == nil {
			return nil
		}
		var be *kltype.BatchError
		if errors.As(err, &be) {
			fs := make([]BatchFailure, 0, len(be.Failures))
			for _, f := range be.Failures {
				fs = append(fs, BatchFailure{Index: f.Index, Err: f.Err})
			}
			return fs
		}
		fs := make([]BatchFailure, n)
		for i := range fs {
			fs[i] = BatchFailure{Index: i, Err: err}
		}
		return fs
	}
}

// SetBatchResolver sets how a deferred resolution of the batch ctx carries
// becomes the batch's failures (the typed edge maps the items' indices and
// adds its decode failures). Outside a batch call it does nothing.
func SetBatchResolver(ctx context.Context, fn func(error) []BatchFailure) {
	del, _ := ctx.Value(deliveryKey{}).(*delivery)
	if del == nil {
		return
	}
	del.mu.Lock()
	del.toFailures = fn
	del.mu.Unlock()
}

// begin marks a handler call of del starting.
func (del *delivery) begin(batchSize int) {
	del.mu.Lock()
	del.calling = true
	del.gen++
	del.batchSize, del.toFailures = batchSize, nil
	del.mu.Unlock()
}

// end marks the call ending. If its handler deferred, it returns the
// Deferral: resolved already (done: take its resolution as the call's
// result), or not (done false: the worker learns of its resolution later).
// failed: the call failed whatever the handler did (it panicked or overran
// its timeout): a deferral is void, its handle resolves nothing.
func (del *delivery) end(failed bool) (d *Deferral, done bool) {
	del.mu.Lock()
	defer del.mu.Unlock()
	del.calling = false
	d = del.d
	if d == nil || !d.taken || d.gen != del.gen {
		return nil, false
	}
	if failed {
		d.resolved = true
		return nil, false
	}
	if d.resolved {
		return d, true
	}
	if del.t == nil {
		d.wake = make(chan struct{})
	}
	return d, false
}

// Result returns the resolution of a record's deferral: what its handler's
// return would have been.
func (d *Deferral) Result() error {
	d.del.mu.Lock()
	defer d.del.mu.Unlock()
	return d.err
}

// resultFailures returns the resolution of a batch.
func (d *Deferral) resultFailures() []BatchFailure {
	d.del.mu.Lock()
	defer d.del.mu.Unlock()
	return d.failures
}

// await waits for a deferral outside a worker to be resolved (the harness:
// the record resolves in place), or ctx to end (false).
func (d *Deferral) await(ctx context.Context) bool {
	d.del.mu.Lock()
	wake, resolved := d.wake, d.resolved
	d.del.mu.Unlock()
	if resolved || wake == nil {
		return true
	}
	select {
	case <-wake:
		return true
	case <-ctx.Done():
		return false
	}
}

// Tracker receives a worker's resolved deferrals, from any goroutine, and
// hands them to the worker's goroutine in the shard's order.
type Tracker struct {
	mu       sync.Mutex
	closed   bool
	resolved []*Deferral
	notify   chan struct{} // has a value when resolved is not empty
}

// NewTracker returns a Tracker for one worker.
func NewTracker() *Tracker { return &Tracker{notify: make(chan struct{}, 1)} }

// Notify has a value when resolutions were handed over since the last
// Take (and possibly when none were: Take may return none).
func (t *Tracker) Notify() <-chan struct{} { return t.notify }

// push hands a resolved deferral to the worker; false once the worker let
// its shard go.
func (t *Tracker) push(d *Deferral) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.resolved = append(t.resolved, d)
	select {
	case t.notify <- struct{}{}:
	default:
	}
	return true
}

// Take returns the resolved deferrals handed over so far, in the shard's
// order of their records (Held.Order).
func (t *Tracker) Take() []*Deferral {
	t.mu.Lock()
	ds := t.resolved
	t.resolved = nil
	t.mu.Unlock()
	if len(ds) > 1 {
		sortDeferrals(ds)
	}
	return ds
}

// Close refuses every later resolution (kltype.ErrLeaseGone) and drops
// those not taken.
func (t *Tracker) Close() {
	t.mu.Lock()
	t.closed = true
	t.resolved = nil
	t.mu.Unlock()
}

// sortDeferrals sorts ds by the shard order of their records (insertion
// sort: a handful at a time).
func sortDeferrals(ds []*Deferral) {
	for i := 1; i < len(ds); i++ {
		for j := i; j > 0 && ds[j].Held.Order < ds[j-1].Held.Order; j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
		}
	}
}
