package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/kltype"
)

var errPlain = errors.New("plain")

// rig is a worker's side of deferrals, without a shard: records whose
// contexts hand their resolutions to one Tracker, a Processor whose waits
// return at once, and what its sink confirmed.
type rig struct {
	t     *testing.T
	trk   *pipeline.Tracker
	p     *pipeline.Processor
	dead  []*kltype.DeadLetterRecord
	waits []pipeline.Wait
}

// newRig returns a rig whose Processor calls handler, with a policy of
// attempts attempts and a sink.
func newRig(t *testing.T, attempts int, handler pipeline.Handler) *rig {
	rg := &rig{t: t, trk: pipeline.NewTracker()}
	rg.p = &pipeline.Processor{
		Handler: handler,
		Policy:  kltype.RetryPolicy{Attempts: attempts, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond},
		Sink: func(_ context.Context, dl *kltype.DeadLetterRecord) error {
			rg.dead = append(rg.dead, dl)
			return nil
		},
		OnWait: func(_ *kltype.Record, w pipeline.Wait) { rg.waits = append(rg.waits, w) },
		Sleep:  func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	}
	return rg
}

// record returns a record context of the rig's worker, for the record
// with sequence number seq.
func (rg *rig) record(seq string) *pipeline.RecordContext {
	rc := &pipeline.RecordContext{}
	rc.Init(context.Background(), rg.trk)
	rc.Record = kltype.Record{SequenceNumber: seq}
	return rc
}

// taken returns the sequence numbers of the records whose resolutions the
// tracker hands over now, in its order.
func (rg *rig) taken() []string {
	var seqs []string
	for _, d := range rg.trk.Take() {
		seq := "?" // a deferral the rig did not tell the tracker of
		if rc, ok := d.Held.Owner.(*pipeline.RecordContext); ok {
			seq = rc.Record.SequenceNumber
		}
		seqs = append(seqs, seq)
	}
	return seqs
}

// TestDeferHandle: what a handle from Defer does, by where it was taken
// and what became of its call: outside a handler call or after it returned
// it resolves nothing (ErrNotDeferred); a second resolution and one of a
// call that panicked or overran its timeout are refused
// (ErrAlreadyResolved); once the tracker closed (the shard let go) it is
// refused with ErrLeaseGone; resolved before the handler returned, the
// resolution is the call's result at once, and the tracker gets nothing.
func TestDeferHandle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		timeout time.Duration
		// handle runs as the handler; keep stores the handle it takes.
		handle func(ctx context.Context, keep func(pipeline.AckHandle)) error
		after  func(ctx context.Context, keep func(pipeline.AckHandle)) // after Process, with the handler's context
		close  bool                                                     // the tracker closes after Process
		want   kltype.Outcome
		reason string  // of the dead letter, if one
		then   []error // what the handle's resolutions return, in turn (each resolves with nil)
	}{
		{
			name:   "outside a handler call",
			handle: func(context.Context, func(pipeline.AckHandle)) error { return nil },
			after: func(_ context.Context, keep func(pipeline.AckHandle)) {
				keep(pipeline.Defer(context.Background()))
			},
			want: kltype.Acked,
			then: []error{kltype.ErrNotDeferred},
		},
		{
			name:   "after the handler returned",
			handle: func(context.Context, func(pipeline.AckHandle)) error { return nil },
			after:  func(ctx context.Context, keep func(pipeline.AckHandle)) { keep(pipeline.Defer(ctx)) },
			want:   kltype.Acked,
			then:   []error{kltype.ErrNotDeferred},
		},
		{
			name: "deferred, resolved twice",
			handle: func(ctx context.Context, keep func(pipeline.AckHandle)) error {
				keep(pipeline.Defer(ctx))
				return errPlain // ignored: the handle resolves the call
			},
			want: pipeline.Deferred,
			then: []error{nil, kltype.ErrAlreadyResolved},
		},
		{
			name: "deferred twice in one call: one handle",
			handle: func(ctx context.Context, keep func(pipeline.AckHandle)) error {
				keep(pipeline.Defer(ctx))
				keep(pipeline.Defer(ctx))
				return nil
			},
			want: pipeline.Deferred,
			then: []error{nil, kltype.ErrAlreadyResolved},
		},
		{
			name: "resolved before the handler returned",
			handle: func(ctx context.Context, keep func(pipeline.AckHandle)) error {
				h := pipeline.Defer(ctx)
				keep(h)
				if err := h.Resolve(&kltype.DropError{Err: errPlain}); err != nil {
					return err
				}
				return errPlain // ignored: the resolution is the result
			},
			want: kltype.Dropped,
			then: []error{kltype.ErrAlreadyResolved},
		},
		{
			name: "deferred, then panicked",
			handle: func(ctx context.Context, keep func(pipeline.AckHandle)) error {
				keep(pipeline.Defer(ctx))
				panic("after Defer")
			},
			want:   kltype.DeadLettered,
			reason: kltype.ReasonPanic,
			then:   []error{kltype.ErrAlreadyResolved},
		},
		{
			name:    "deferred, then overran its timeout",
			timeout: time.Millisecond,
			handle: func(ctx context.Context, keep func(pipeline.AckHandle)) error {
				keep(pipeline.Defer(ctx))
				<-ctx.Done()
				return nil
			},
			want:   kltype.DeadLettered,
			reason: kltype.ReasonRetriesExhausted,
			then:   []error{kltype.ErrAlreadyResolved},
		},
		{
			name: "deferred, the shard let go",
			handle: func(ctx context.Context, keep func(pipeline.AckHandle)) error {
				keep(pipeline.Defer(ctx))
				return nil
			},
			close: true,
			want:  pipeline.Deferred,
			then:  []error{kltype.ErrLeaseGone, kltype.ErrAlreadyResolved},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var (
				handles []pipeline.AckHandle
				kept    context.Context
			)
			keep := func(h pipeline.AckHandle) { handles = append(handles, h) }
			rg := newRig(t, 1, func(ctx context.Context, _ *kltype.Record) error {
				kept = ctx
				return tt.handle(ctx, keep)
			})
			rg.p.Timeout = tt.timeout
			rc := rg.record("1")
			if o := rg.p.Process(rc, &rc.Record, nil); o != tt.want {
				t.Fatalf("Process: outcome %v, want %v", o, tt.want)
			}
			if tt.after != nil {
				tt.after(kept, keep)
			}
			if tt.close {
				rg.trk.Close()
			}
			switch {
			case tt.reason == "" && len(rg.dead) > 0:
				t.Errorf("dead letters %+v, want none", rg.dead)
			case tt.reason != "" && (len(rg.dead) != 1 || rg.dead[0].Reason != tt.reason):
				t.Errorf("dead letters %+v, want one with reason %q", rg.dead, tt.reason)
			}
			if len(handles) == 0 {
				t.Fatal("no handle taken")
			}
			h := handles[len(handles)-1]
			for i, want := range tt.then {
				if err := h.Resolve(nil); !errors.Is(err, want) {
					t.Errorf("resolution %d: %v, want %v", i+1, err, want)
				}
			}
			pushed := tt.want == pipeline.Deferred && !tt.close
			if got := rg.taken(); pushed != (len(got) == 1) || len(got) > 1 {
				t.Errorf("tracker hands over %v; want the record: %v", got, pushed)
			}
		})
	}
}

// TestTrackerOrder: the tracker hands resolved deferrals over in the
// shard's order of their records (Held.Order), whatever the order they
// were resolved in; each once; and none after it closed.
func TestTrackerOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// steps: the records resolved (by index; record i has Order 10*i),
		// then a Take; want is what each Take hands over.
		steps [][]int
		close int // the tracker closes before this step (0: never; -1: after the resolutions, before the Take)
		want  [][]string
	}{
		{name: "in order", steps: [][]int{{0, 1, 2}}, want: [][]string{{"0", "1", "2"}}},
		{name: "reversed", steps: [][]int{{4, 3, 2, 1, 0}}, want: [][]string{{"0", "1", "2", "3", "4"}}},
		{name: "interleaved", steps: [][]int{{3, 0, 4, 1}}, want: [][]string{{"0", "1", "3", "4"}}},
		{name: "in two takes", steps: [][]int{{2, 4}, {}, {1, 0}}, want: [][]string{{"2", "4"}, nil, {"0", "1"}}},
		{name: "closed", steps: [][]int{{1}, {0, 2}}, close: 1, want: [][]string{{"1"}, nil}},
		{name: "closed with some not taken", steps: [][]int{{3, 1}}, close: -1, want: [][]string{nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var handles []pipeline.AckHandle
			rg := newRig(t, 1, func(ctx context.Context, _ *kltype.Record) error {
				handles = append(handles, pipeline.Defer(ctx))
				return nil
			})
			for i := range 5 {
				rc := rg.record(strconv.Itoa(i))
				if o := rg.p.Process(rc, &rc.Record, nil); o != pipeline.Deferred {
					t.Fatalf("record %d: outcome %v, want Deferred", i, o)
				}
				d := rc.Deferral()
				d.Held.Owner, d.Held.Order = rc, int64(10*i)
			}
			for s, step := range tt.steps {
				if tt.close > 0 && s == tt.close {
					rg.trk.Close()
				}
				closed := tt.close > 0 && s >= tt.close
				for _, i := range step {
					switch err := handles[i].Resolve(nil); {
					case closed && !errors.Is(err, kltype.ErrLeaseGone):
						t.Errorf("step %d: resolving record %d: %v, want ErrLeaseGone", s, i, err)
					case !closed && err != nil:
						t.Errorf("step %d: resolving record %d: %v", s, i, err)
					}
				}
				if len(step) > 0 && !closed {
					select {
					case <-rg.trk.Notify():
					default:
						t.Errorf("step %d: no notice after resolutions", s)
					}
				}
				if tt.close == -1 {
					rg.trk.Close()
				}
				if got := rg.taken(); !slices.Equal(got, tt.want[s]) {
					t.Errorf("step %d: Take hands over %v, want %v", s, got, tt.want[s])
				}
			}
		})
	}
}

// errDefer, as a handler's return in a script, marks a call that defers
// its acknowledgement (and returns nil).
var errDefer = errors.New("defer")

// TestResume: a resolved deferral is taken up as the handler's return
// would have been, the Processor going on from where it stood: its
// attempts and failures count across the deferral, a failure is delivered
// again, and a delivery that defers again keeps what the worker holds of it
// (Held: Owner, Order, Start) but the record count.
func TestResume(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name       string
		attempts   int     // the policy's
		calls      []error // the handler's returns, in turn; the first errDefer is resolved with resolution
		resolution error
		want       kltype.Outcome
		attempt    []int // the record's Attempt at each handler call
		waits      []pipeline.WaitReason
		reason     string // of the dead letter, if one
		dlAttempts int
	}{
		{name: "acknowledged", attempts: 3, calls: []error{errDefer}, want: kltype.Acked, attempt: []int{1}},
		{name: "dropped", attempts: 3, calls: []error{errDefer}, resolution: &kltype.DropError{Err: errPlain},
			want: kltype.Dropped, attempt: []int{1}},
		{name: "dead-lettered", attempts: 3, calls: []error{errDefer}, resolution: &kltype.DeadLetterError{Err: errPlain},
			want: kltype.DeadLettered, attempt: []int{1}, reason: kltype.ReasonDeadLetter, dlAttempts: 1},
		{name: "failed, then acknowledged", attempts: 3, calls: []error{errDefer, nil}, resolution: errPlain,
			want: kltype.Acked, attempt: []int{1, 2}, waits: []pipeline.WaitReason{pipeline.WaitBackoff}},
		{name: "failed: the failure counts toward the policy", attempts: 2, calls: []error{errDefer, errPlain}, resolution: errPlain,
			want: kltype.DeadLettered, attempt: []int{1, 2}, waits: []pipeline.WaitReason{pipeline.WaitBackoff},
			reason: kltype.ReasonRetriesExhausted, dlAttempts: 2},
		{name: "failed before the deferral: the failures made count", attempts: 2, calls: []error{errPlain, errDefer}, resolution: errPlain,
			want: kltype.DeadLettered, attempt: []int{1, 2}, waits: []pipeline.WaitReason{pipeline.WaitBackoff},
			reason: kltype.ReasonRetriesExhausted, dlAttempts: 2},
		{name: "retry after: no attempt counted", attempts: 1, calls: []error{errDefer, nil},
			resolution: &kltype.RetryAfterError{Delay: time.Second, Err: errPlain},
			want:       kltype.Acked, attempt: []int{1, 2}, waits: []pipeline.WaitReason{pipeline.WaitRetryAfter}},
		{name: "failed, deferred again", attempts: 3, calls: []error{errDefer, errDefer}, resolution: errPlain,
			want: pipeline.Deferred, attempt: []int{1, 2}, waits: []pipeline.WaitReason{pipeline.WaitBackoff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var (
				attempt []int
				h       pipeline.AckHandle
				taken   bool
			)
			rg := newRig(t, tt.attempts, func(ctx context.Context, r *kltype.Record) error {
				attempt = append(attempt, r.Attempt)
				err := tt.calls[len(attempt)-1]
				if err != errDefer {
					return err
				}
				if hd := pipeline.Defer(ctx); !taken {
					h, taken = hd, true
				}
				return nil
			})
			rc := rg.record("1")
			if o := rg.p.Process(rc, &rc.Record, nil); o != pipeline.Deferred {
				t.Fatalf("Process: outcome %v, want Deferred", o)
			}
			d := rc.Deferral()
			d.Held = pipeline.Held{Owner: rc, Order: 7, Records: 1, Start: start}
			if err := h.Resolve(tt.resolution); err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			ds := rg.trk.Take()
			if len(ds) != 1 || ds[0] != d {
				t.Fatalf("Take: %v, want the record's deferral", ds)
			}
			if err := d.Result(); err != tt.resolution {
				t.Errorf("Result: %v, want %v", err, tt.resolution)
			}
			if o := rg.p.Resume(rc, &rc.Record, nil, d); o != tt.want {
				t.Fatalf("Resume: outcome %v, want %v", o, tt.want)
			}
			if !slices.Equal(attempt, tt.attempt) {
				t.Errorf("handler called at attempts %v, want %v", attempt, tt.attempt)
			}
			var waits []pipeline.WaitReason
			for _, w := range rg.waits {
				waits = append(waits, w.Reason)
			}
			if !slices.Equal(waits, tt.waits) {
				t.Errorf("waits %v, want %v", waits, tt.waits)
			}
			switch {
			case tt.reason == "" && len(rg.dead) > 0:
				t.Errorf("dead letters %+v, want none", rg.dead)
			case tt.reason != "" && (len(rg.dead) != 1 || rg.dead[0].Reason != tt.reason || rg.dead[0].Attempts != tt.dlAttempts):
				t.Errorf("dead letters %+v, want one with reason %q after %d attempts", rg.dead, tt.reason, tt.dlAttempts)
			}
			if tt.want == pipeline.Deferred {
				again := rc.Deferral()
				if want := (pipeline.Held{Owner: rc, Order: 7, Start: start}); again.Held != want {
					t.Errorf("deferred again: Held %+v, want %+v", again.Held, want)
				}
				if err := h.Resolve(nil); !errors.Is(err, kltype.ErrAlreadyResolved) {
					t.Errorf("the first handle, after the record deferred again: %v, want ErrAlreadyResolved", err)
				}
			}
		})
	}
}

// TestBatchDeferral: a batch whose handler deferred its acknowledgement
// resolves as its return would have: which records resolve, with which
// outcome and in which order, which stay pending and are handed to the
// handler again, and how the call's resolver (SetBatchResolver, the typed
// edge's) reads the resolution.
func TestBatchDeferral(t *testing.T) {
	t.Parallel()
	failItems := func(fs ...kltype.ItemFailure) error { return &kltype.BatchError{Failures: fs} }
	tests := []struct {
		name string
		// calls: the handler's returns, in turn (nil: every record
		// acknowledged; errDefer: it defers); resolutions: those of its
		// deferrals, in turn.
		calls       []error
		resolutions []error
		resolver    func(error) []pipeline.BatchFailure // set by the first call, if not nil
		want        kltype.Outcome
		done        []int // the records resolved, in the order resolved
		outcomes    []kltype.Outcome
		batches     [][]int // the records of each handler call
		pending     []int   // those not resolved once the run returns
	}{
		{name: "acknowledged", calls: []error{errDefer}, resolutions: []error{nil},
			want: kltype.Acked, done: []int{0, 1, 2},
			outcomes: []kltype.Outcome{kltype.Acked, kltype.Acked, kltype.Acked}, batches: [][]int{{0, 1, 2}}, pending: []int{}},
		{name: "one item failed", calls: []error{errDefer, nil}, resolutions: []error{failItems(kltype.ItemFailure{Index: 1, Err: errPlain})},
			want: kltype.Acked, done: []int{0, 2, 1},
			outcomes: []kltype.Outcome{kltype.Acked, kltype.Acked, kltype.Acked}, batches: [][]int{{0, 1, 2}, {1}}, pending: []int{}},
		{name: "an item failed without an error: acknowledged", calls: []error{errDefer}, resolutions: []error{failItems(kltype.ItemFailure{Index: 1})},
			want: kltype.Acked, done: []int{0, 1, 2},
			outcomes: []kltype.Outcome{kltype.Acked, kltype.Acked, kltype.Acked}, batches: [][]int{{0, 1, 2}}, pending: []int{}},
		{name: "one dropped, one dead-lettered", calls: []error{errDefer},
			resolutions: []error{failItems(kltype.ItemFailure{Index: 0, Err: &kltype.DropError{Err: errPlain}},
				kltype.ItemFailure{Index: 2, Err: &kltype.DeadLetterError{Err: errPlain}})},
			want: kltype.Acked, done: []int{0, 1, 2},
			outcomes: []kltype.Outcome{kltype.Dropped, kltype.Acked, kltype.DeadLettered}, batches: [][]int{{0, 1, 2}}, pending: []int{}},
		{name: "all failed", calls: []error{errDefer, nil}, resolutions: []error{errPlain},
			want: kltype.Acked, done: []int{0, 1, 2},
			outcomes: []kltype.Outcome{kltype.Acked, kltype.Acked, kltype.Acked}, batches: [][]int{{0, 1, 2}, {0, 1, 2}}, pending: []int{}},
		{name: "failed items deferred again", calls: []error{errDefer, errDefer},
			resolutions: []error{failItems(kltype.ItemFailure{Index: 0, Err: errPlain}, kltype.ItemFailure{Index: 2, Err: errPlain})},
			want:        pipeline.Deferred, done: []int{1},
			outcomes: []kltype.Outcome{0, kltype.Acked, 0}, batches: [][]int{{0, 1, 2}, {0, 2}}, pending: []int{0, 2}},
		{name: "failed items deferred again, then one failed", calls: []error{errDefer, errDefer, nil},
			resolutions: []error{failItems(kltype.ItemFailure{Index: 0, Err: errPlain}, kltype.ItemFailure{Index: 2, Err: errPlain}),
				failItems(kltype.ItemFailure{Index: 1, Err: errPlain})}, // index 1 of the second batch: record 2
			want: kltype.Acked, done: []int{1, 0, 2},
			outcomes: []kltype.Outcome{kltype.Acked, kltype.Acked, kltype.Acked}, batches: [][]int{{0, 1, 2}, {0, 2}, {2}}, pending: []int{}},
		{name: "the call's resolver reads its resolution", calls: []error{errDefer, errDefer, nil}, resolutions: []error{errPlain, errPlain},
			resolver: func(err error) []pipeline.BatchFailure { return []pipeline.BatchFailure{{Index: 2, Err: err}} },
			// the second call sets none: its resolution fails all it was given
			want: kltype.Acked, done: []int{0, 1, 2},
			outcomes: []kltype.Outcome{kltype.Acked, kltype.Acked, kltype.Acked}, batches: [][]int{{0, 1, 2}, {2}, {2}}, pending: []int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rg := newRig(t, 3, nil)
			recs := []*kltype.Record{{SequenceNumber: "0"}, {SequenceNumber: "1"}, {SequenceNumber: "2"}}
			index := map[*kltype.Record]int{recs[0]: 0, recs[1]: 1, recs[2]: 2}
			var (
				h       pipeline.AckHandle
				batches [][]int
				done    []int
			)
			outcomes := make([]kltype.Outcome, len(recs))
			handler := func(ctx context.Context, rs []*kltype.Record) []pipeline.BatchFailure {
				var b []int
				for _, r := range rs {
					b = append(b, index[r])
				}
				batches = append(batches, b)
				if len(batches) == 1 && tt.resolver != nil {
					pipeline.SetBatchResolver(ctx, tt.resolver)
				}
				if tt.calls[len(batches)-1] == errDefer {
					h = pipeline.Defer(ctx)
				}
				return nil
			}
			br := pipeline.NewBatchRun(context.Background(), recs, handler, rg.trk, func(i int, o kltype.Outcome) bool {
				done = append(done, i)
				outcomes[i] = o
				return true
			})
			o := rg.p.RunBatch(br, nil)
			if o != pipeline.Deferred {
				t.Fatalf("RunBatch: outcome %v, want Deferred", o)
			}
			if p := br.Pending(); !slices.Equal(p, []int{0, 1, 2}) {
				t.Fatalf("pending once deferred: %v, want every record", p)
			}
			for k := 0; o == pipeline.Deferred && k < len(tt.resolutions); k++ {
				d := br.Deferral()
				if err := h.Resolve(tt.resolutions[k]); err != nil {
					t.Fatalf("resolution %d: %v", k+1, err)
				}
				if ds := rg.trk.Take(); len(ds) != 1 || ds[0] != d {
					t.Fatalf("Take: %v, want the batch's deferral", ds)
				}
				o = rg.p.ResumeBatch(br, nil, d)
			}
			if o != tt.want {
				t.Fatalf("outcome %v, want %v", o, tt.want)
			}
			if !slices.Equal(done, tt.done) || !slices.Equal(outcomes, tt.outcomes) {
				t.Errorf("resolved %v with %v, want %v with %v", done, outcomes, tt.done, tt.outcomes)
			}
			if !slices.EqualFunc(batches, tt.batches, slices.Equal) {
				t.Errorf("handler calls %v, want %v", batches, tt.batches)
			}
			if p := br.Pending(); !slices.Equal(p, tt.pending) {
				t.Errorf("pending %v, want %v", p, tt.pending)
			}
		})
	}
}

// TestDeferInPlace: outside a worker (no Tracker, the harness's path) a
// deferred acknowledgement is awaited where the handler returned: its
// resolution, from another goroutine, is the call's result; the end of the
// context stops the wait.
func TestDeferInPlace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		resolution error // nil: acknowledged; errCancel: the context ends instead
		want       kltype.Outcome
	}{
		{name: "acknowledged", want: kltype.Acked},
		{name: "dropped", resolution: &kltype.DropError{Err: errPlain}, want: kltype.Dropped},
		{name: "the context ends", resolution: errCancel, want: pipeline.Stopped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resolved := make(chan struct{})
			p := &pipeline.Processor{
				Handler: func(ctx context.Context, _ *kltype.Record) error {
					h := pipeline.Defer(ctx)
					go func() {
						defer close(resolved)
						if tt.resolution == errCancel {
							cancel()
							return
						}
						if err := h.Resolve(tt.resolution); err != nil {
							t.Errorf("Resolve: %v", err)
						}
					}()
					return nil
				},
				Policy: kltype.RetryPolicy{Attempts: 1, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond},
			}
			rctx, r := pipeline.NewRecordContext(ctx)
			r.SequenceNumber = "1"
			o := p.Process(rctx, r, nil)
			<-resolved
			if o != tt.want {
				t.Fatalf("Process: outcome %v, want %v", o, tt.want)
			}
		})
	}
}

// errCancel marks the end of the context instead of a resolution
// (TestDeferInPlace).
var errCancel = errors.New("cancel")
