package shard

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
)

// keyRecords returns one plain record per key, in order, their sequence
// numbers "0" to len(keys)-1.
func keyRecords(keys ...string) []types.Record {
	recs := make([]types.Record, len(keys))
	for i, k := range keys {
		recs[i] = types.Record{SequenceNumber: aws.String(strconv.Itoa(i)), PartitionKey: aws.String(k), Data: []byte{byte(i)}}
	}
	return recs
}

// lanesRig runs a worker's per-key lanes (byKey) inside a synctest bubble,
// the test's goroutine playing the consume loop. Its handler reports each
// delivery as it starts; a record in block waits in its handler until the
// test releases it, one in deferring defers its acknowledgement (first
// delivery only) and returns, any other returns at once.
type lanesRig struct {
	t  *testing.T
	w  *Worker
	cp *checkpointer
	k  *byKey

	block     map[string]chan error // per blocking record: what its handler returns
	deferring map[string]bool

	mu      sync.Mutex
	calls   []string // every delivery, as it started
	seen    int      // calls already returned by started
	handles map[string]pipeline.AckHandle
	stopped bool // the consume loop would have ended: a shape method returned false
	ended   bool // the lanes were stopped (end)
}

// newLanes returns a rig of lanes lanes bounded by maxDeferred deferrals,
// with the records of block blocking and those of deferring deferring.
func newLanes(t *testing.T, lanes, maxDeferred int, block, deferring []int) *lanesRig {
	r := &lanesRig{t: t, block: map[string]chan error{}, deferring: map[string]bool{}, handles: map[string]pipeline.AckHandle{}}
	for _, i := range block {
		r.block[strconv.Itoa(i)] = make(chan error, 1)
	}
	for _, i := range deferring {
		r.deferring[strconv.Itoa(i)] = true
	}
	r.w, r.cp = testWorker(t, &WorkerConfig{Handler: r.handle, KeyConcurrency: lanes, MaxDeferred: maxDeferred})
	r.k = r.w.newByKey(&feed{}, r.cp)
	t.Cleanup(func() {
		// A test that failed early: its blocked handlers return, the lanes
		// end, and the bubble with them.
		for _, ch := range r.block {
			select {
			case ch <- nil:
			default:
			}
		}
		if !r.ended {
			r.end()
		}
	})
	return r
}

func (r *lanesRig) handle(ctx context.Context, rec *kltype.Record) error {
	seq := rec.SequenceNumber
	r.mu.Lock()
	first := !slices.Contains(r.calls, seq)
	r.calls = append(r.calls, seq)
	if first && r.deferring[seq] {
		r.handles[seq] = pipeline.Defer(ctx)
	}
	r.mu.Unlock()
	if ch := r.block[seq]; ch != nil && first {
		return <-ch
	}
	return nil
}

// take hands the lanes one GetRecords answer of records with keys, then
// loops until nothing more moves.
func (r *lanesRig) take(keys ...string) {
	r.t.Helper()
	if !r.k.take(read.Batch{Records: keyRecords(keys...)}) {
		r.stopped = true
	}
	r.loop()
}

// loop takes up, as the consume loop does, what the lanes hand back and
// the deferred acknowledgements resolved, until every goroutine of the
// bubble waits and nothing is left to take up.
func (r *lanesRig) loop() {
	for {
		synctest.Wait()
		var ok bool
		select {
		case it := <-r.k.events():
			ok = r.k.event(it)
		case <-r.w.trk.Notify():
			ok = r.k.settle(false)
		default:
			return
		}
		if !ok {
			r.stopped = true
		}
	}
}

// release lets record i's blocked handler return err, then loops.
func (r *lanesRig) release(i int, err error) {
	r.t.Helper()
	ch := r.block[strconv.Itoa(i)]
	if ch == nil {
		r.t.Fatalf("record %d does not block", i)
	}
	ch <- err
	r.loop()
}

// resolve resolves record i's deferred acknowledgement with err, then
// loops.
func (r *lanesRig) resolve(i int, err error) {
	r.t.Helper()
	r.mu.Lock()
	h, ok := r.handles[strconv.Itoa(i)]
	r.mu.Unlock()
	if !ok {
		r.t.Fatalf("record %d was not deferred", i)
	}
	if e := h.Resolve(err); e != nil {
		r.t.Fatalf("resolving record %d: %v", i, e)
	}
	r.loop()
}

// started returns the deliveries started since the last call, sorted
// (lanes run concurrently: their order is not the shard's).
func (r *lanesRig) started() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := slices.Clone(r.calls[r.seen:])
	r.seen = len(r.calls)
	slices.Sort(got)
	return got
}

// allCalls returns every delivery, in the order they started.
func (r *lanesRig) allCalls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// end stops the lanes, as the consume loop does once it returns; every
// blocked handler must have been released.
func (r *lanesRig) end() {
	r.ended = true
	r.k.stop()
	synctest.Wait()
}

// seqs returns the sequence numbers of records is, as strings.
func seqs(is ...int) []string {
	out := make([]string, len(is))
	for i, n := range is {
		out[i] = strconv.Itoa(n)
	}
	return out
}

// keyStep releases a blocked record's handler, then checks the deliveries
// that started and the checkpoint acknowledged.
type keyStep struct {
	release int
	started []int
	acked   string // the newest acknowledged record's sequence number ("": none)
}

// TestByKeyOrderAndConcurrency: records of one partition key are handled
// one at a time, in the shard's order; records of different keys run at
// once on up to KeyConcurrency lanes; the checkpoint never passes a record
// not handled yet, whatever order the lanes finish in.
func TestByKeyOrderAndConcurrency(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		lanes int
		keys  []string
		first []int // started as the answer is taken
		steps []keyStep
	}{
		{name: "one key: one at a time, in order", lanes: 4, keys: []string{"a", "a", "a"}, first: []int{0}, steps: []keyStep{
			{release: 0, started: []int{1}, acked: "0"},
			{release: 1, started: []int{2}, acked: "1"},
			{release: 2, acked: "2"},
		}},
		{name: "keys at once, the checkpoint behind the slowest", lanes: 4, keys: []string{"a", "b", "c"}, first: []int{0, 1, 2}, steps: []keyStep{
			{release: 2},
			{release: 0, acked: "0"},
			{release: 1, acked: "2"},
		}},
		{name: "a key waits behind its head, the others pass it", lanes: 4, keys: []string{"a", "a", "b"}, first: []int{0, 2}, steps: []keyStep{
			{release: 2},
			{release: 0, started: []int{1}, acked: "0"},
			{release: 1, acked: "2"},
		}},
		{name: "the lanes bound the keys at once", lanes: 2, keys: []string{"a", "b", "c", "d"}, first: []int{0, 1}, steps: []keyStep{
			{release: 1, started: []int{2}},
			{release: 0, started: []int{3}, acked: "1"},
			{release: 3, acked: "1"},
			{release: 2, acked: "3"},
		}},
		{name: "a freed lane takes the next runnable key", lanes: 1, keys: []string{"a", "b", "a"}, first: []int{0}, steps: []keyStep{
			{release: 0, started: []int{1}, acked: "0"},
			{release: 1, started: []int{2}, acked: "1"},
			{release: 2, acked: "2"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				all := make([]int, len(tt.keys))
				for i := range all {
					all[i] = i
				}
				r := newLanes(t, tt.lanes, DefaultMaxDeferred, all, nil)
				r.take(tt.keys...)
				if got := r.started(); !slices.Equal(got, seqs(tt.first...)) {
					t.Fatalf("started at once: %v, want %v", got, seqs(tt.first...))
				}
				for s, st := range tt.steps {
					r.release(st.release, nil)
					if got := r.started(); !slices.Equal(got, seqs(st.started...)) {
						t.Errorf("step %d (record %d returned): started %v, want %v", s, st.release, got, seqs(st.started...))
					}
					if r.cp.acked.Sequence != st.acked {
						t.Errorf("step %d (record %d returned): acknowledged up to %q, want %q", s, st.release, r.cp.acked.Sequence, st.acked)
					}
				}
				if r.stopped {
					t.Error("the lanes ended the consume loop before the shard's end")
				}
				r.end()
				perKey := map[string][]int{}
				for _, c := range r.allCalls() {
					i, _ := strconv.Atoi(c)
					perKey[tt.keys[i]] = append(perKey[tt.keys[i]], i)
				}
				for key, is := range perKey {
					if !slices.IsSorted(is) {
						t.Errorf("key %s delivered as %v: out of the shard's order", key, is)
					}
				}
			})
		})
	}
}

// TestByKeyMaxDeferred: deliveries that may defer (first deliveries) start
// only while the deferrals outstanding and those deliveries stay below
// MaxDeferred; a resolution makes room for the next. Every record of six
// keys defers, on four lanes.
func TestByKeyMaxDeferred(t *testing.T) {
	t.Parallel()
	keys := []string{"a", "b", "c", "d", "e", "f"}
	tests := []struct {
		max      int
		first    []int // started before any resolution
		resolved []int // started once record 0 resolves
		acked    string
	}{
		{max: 1, first: []int{0}, resolved: []int{1}, acked: "0"},
		{max: 2, first: []int{0, 1}, resolved: []int{2}, acked: "0"},
		{max: 4, first: []int{0, 1, 2, 3}, resolved: []int{4}, acked: "0"},
		{max: 5, first: []int{0, 1, 2, 3, 4}, resolved: []int{5}, acked: "0"},
		{max: 100, first: []int{0, 1, 2, 3, 4, 5}, acked: "0"},
	}
	for _, tt := range tests {
		t.Run("max "+strconv.Itoa(tt.max), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				r := newLanes(t, 4, tt.max, nil, []int{0, 1, 2, 3, 4, 5})
				r.take(keys...)
				if got := r.started(); !slices.Equal(got, seqs(tt.first...)) {
					t.Fatalf("started before any resolution: %v, want %v", got, seqs(tt.first...))
				}
				if r.k.outstanding > tt.max {
					t.Fatalf("%d deferrals outstanding, over MaxDeferred %d", r.k.outstanding, tt.max)
				}
				r.resolve(0, nil)
				if got := r.started(); !slices.Equal(got, seqs(tt.resolved...)) {
					t.Errorf("started once record 0 resolved: %v, want %v", got, seqs(tt.resolved...))
				}
				if r.k.outstanding > tt.max {
					t.Errorf("%d deferrals outstanding, over MaxDeferred %d", r.k.outstanding, tt.max)
				}
				if r.cp.acked.Sequence != tt.acked {
					t.Errorf("acknowledged up to %q, want %q", r.cp.acked.Sequence, tt.acked)
				}
				r.end()
			})
		})
	}
}

// TestByKeyDeferralFreesKey: a record whose acknowledgement is deferred
// frees its key for the next record at once; the checkpoint waits for the
// resolution.
func TestByKeyDeferralFreesKey(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newLanes(t, 2, DefaultMaxDeferred, nil, []int{0})
		r.take("a", "a")
		if got := r.started(); !slices.Equal(got, seqs(0, 1)) {
			t.Fatalf("started: %v, want both records of the key, the first deferred", got)
		}
		if r.cp.acked.Sequence != "" || r.k.held() != 1 {
			t.Fatalf("acknowledged up to %q with %d deferred, want nothing acknowledged and record 0 deferred", r.cp.acked.Sequence, r.k.held())
		}
		r.resolve(0, nil)
		if r.cp.acked.Sequence != "1" || r.k.held() != 0 {
			t.Errorf("once resolved: acknowledged up to %q with %d deferred, want %q with none", r.cp.acked.Sequence, r.k.held(), "1")
		}
		r.end()
	})
}

// TestByKeyFailedDeferralFirst: a deferred acknowledgement that comes back
// failed has its record delivered again before the key's records not
// delivered yet, after the one in its lane.
func TestByKeyFailedDeferralFirst(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newLanes(t, 2, DefaultMaxDeferred, []int{1}, []int{0})
		r.take("a", "a", "a")
		r.resolve(0, errors.New("x")) // record 1 is in its lane
		if r.cp.acked.Sequence != "" {
			t.Fatalf("acknowledged up to %q after record 0 failed, want nothing", r.cp.acked.Sequence)
		}
		r.release(1, nil)
		r.end()
		if got, want := r.allCalls(), seqs(0, 1, 0, 2); !slices.Equal(got, want) {
			t.Errorf("deliveries %v, want %v: the failed record again before record 2", got, want)
		}
		if r.cp.acked.Sequence != "2" {
			t.Errorf("acknowledged up to %q, want %q", r.cp.acked.Sequence, "2")
		}
	})
}

// TestByKeyRelease: when the worker stops, the records in the lanes
// finish, unacknowledged, and nothing queued starts; the deferred
// acknowledgements resolved after the loop ended are taken up by the
// release's drain (settle(true)), up to the resolved prefix.
func TestByKeyRelease(t *testing.T) {
	t.Parallel()
	t.Run("in flight", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			r := newLanes(t, 4, DefaultMaxDeferred, []int{0, 2}, nil)
			r.take("a", "a", "b")
			r.w.Stop()
			r.block["0"] <- nil
			r.block["2"] <- nil
			r.end()
			if got := r.allCalls(); len(got) != 2 || slices.Contains(got, "1") {
				t.Errorf("deliveries %v, want records 0 and 2 only: nothing queued starts on a stop", got)
			}
			if !r.cp.acked.IsZero() {
				t.Errorf("acknowledged up to %q after the stop, want nothing", r.cp.acked.Sequence)
			}
		})
	})
	t.Run("drained", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			r := newLanes(t, 4, DefaultMaxDeferred, nil, []int{0, 1, 2})
			r.take("a", "b", "c")
			if r.k.held() != 3 || r.k.awaited() != 3 {
				t.Fatalf("%d deferred, %d awaited; want 3 and 3", r.k.held(), r.k.awaited())
			}
			r.w.Stop()
			r.end()
			for _, i := range []int{1, 0} {
				r.mu.Lock()
				h := r.handles[strconv.Itoa(i)]
				r.mu.Unlock()
				if err := h.Resolve(nil); err != nil {
					t.Fatal(err)
				}
			}
			if !r.k.settle(true) {
				t.Fatal("drain: the lease reported lost")
			}
			if r.cp.acked.Sequence != "1" || r.k.held() != 1 || r.k.awaited() != 1 {
				t.Errorf("drained: acknowledged up to %q with %d deferred, %d awaited; want %q, 1 and 1",
					r.cp.acked.Sequence, r.k.held(), r.k.awaited(), "1")
			}
		})
	})
}
