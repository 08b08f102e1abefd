package kinesisleasetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/typed"
	"github.com/kinesislease/kinesislease/kltype"
)

// Harness runs a Handler[T] on records through the real record pipeline.
// Build it with New; it is safe for concurrent use.
type Harness[T any] struct {
	tb      testing.TB
	handler kinesislease.HandlerFunc[T]
	c       *core
	// runs holds *run values, each with its pipeline built once: a record
	// takes one, so concurrent calls each have their own.
	runs sync.Pool
}

// core is the part of a Harness that knows nothing of T.
type core struct {
	cfg config
	seq atomic.Uint64

	mu   sync.Mutex
	dead []*kltype.DeadLetterRecord
}

// New returns a harness running handler the way a subscription made with
// kinesislease.Subscribe and the same options would. Invalid options fail
// the test at once (tb.Fatalf), each named.
func New[T any](tb testing.TB, handler kinesislease.HandlerFunc[T], opts ...Option) *Harness[T] {
	tb.Helper()
	cfg := defaultConfig()
	if handler == nil {
		cfg.fail("nil handler")
	}
	for _, o := range opts {
		if o == nil {
			cfg.errs = append(cfg.errs, errNilOption)
			continue
		}
		o.apply(&cfg)
	}
	cfg.resolve()
	if len(cfg.errs) > 0 {
		tb.Fatalf("kinesisleasetest.New: invalid option: %v", errors.Join(cfg.errs...))
		return nil
	}
	h := &Harness[T]{tb: tb, handler: handler, c: &core{cfg: cfg}}
	h.runs.New = func() any { return h.newRun() }
	return h
}

// newRun returns a run with its pipeline: the typed edge
// kinesislease.Subscribe builds (decode into a T, a failure being a
// *codec.DecodeError; the record in the context for kinesislease.RecordFrom),
// counting the handler's calls into the run's result.
func (h *Harness[T]) newRun() *run {
	st := &run{c: h.c}
	handler := h.handler
	st.p = pipeline.Processor{
		Handler: typed.Handler(h.c.cfg.codec, func(ctx context.Context, v T) error {
			st.res.Attempts++
			return handler(ctx, v)
		}),
		Policy:    h.c.cfg.policy,
		Timeout:   h.c.cfg.timeout,
		MaxAge:    h.c.cfg.maxAge,
		Log:       h.c.cfg.log,
		Sleep:     st.sleep,
		OnAttempt: st.onAttempt,
		OnWait:    st.onWait,
	}
	if !h.c.cfg.noSink {
		st.p.Sink = st.sink
	}
	return st
}

// Handle encodes v with the harness's codec into a record's data and
// processes the record: it returns once the record is acknowledged,
// dropped, dead-lettered or held, or ctx is done. A value the codec cannot
// encode fails the test (tb.Fatalf, so call Handle from the test's
// goroutine, or use HandleRaw there). ctx is the handler's context.
func (h *Harness[T]) Handle(ctx context.Context, v T, opts ...RecordOption) Result {
	data, err := h.c.cfg.codec.Marshal(v)
	if err != nil {
		h.tb.Helper()
		h.tb.Fatalf("kinesisleasetest: Handle: encode %T with codec %s: %v", v, h.c.cfg.codec.Name(), err)
		return Result{}
	}
	res, err := h.process(ctx, data, opts)
	if err != nil {
		h.tb.Helper()
		h.tb.Fatalf("kinesisleasetest: Handle: %v", err)
	}
	return res
}

// HandleRaw processes a record whose data is data, as it would be read from
// the stream: the codec decodes it into T (a failure is a *codec.DecodeError,
// dead-lettered with reason "decode" without calling the handler). Use it
// for records your producers did not write, or wrote wrong.
func (h *Harness[T]) HandleRaw(ctx context.Context, data []byte, opts ...RecordOption) Result {
	res, err := h.process(ctx, bytes.Clone(data), opts)
	if err != nil {
		h.tb.Helper()
		h.tb.Fatalf("kinesisleasetest: HandleRaw: %v", err)
	}
	return res
}

// DeadLetters returns every dead letter confirmed so far by this harness's
// sink (the recording default or one given WithDeadLetter), oldest first.
func (h *Harness[T]) DeadLetters() []*kltype.DeadLetterRecord {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	return append([]*kltype.DeadLetterRecord(nil), h.c.dead...)
}

// process runs one record of data through a run's pipeline. The only
// error is a nil RecordOption.
func (h *Harness[T]) process(ctx context.Context, data []byte, opts []RecordOption) (Result, error) {
	rctx, r := pipeline.NewRecordContext(ctx)
	h.c.fillRecord(r, data)
	for _, o := range opts {
		if o == nil {
			return Result{}, errNilRecordOption
		}
		o.applyRecord(r)
	}
	st := h.runs.Get().(*run)
	st.res, st.wait, st.holds = Result{Record: r}, pipeline.Wait{}, 0
	res := st.process(rctx, r)
	st.res = Result{} // the pooled run keeps nothing of this record
	h.runs.Put(st)
	return res, nil
}

var errNilRecordOption = errors.New("nil RecordOption")

// fillRecord fills r with the harness's defaults and data.
func (c *core) fillRecord(r *kltype.Record, data []byte) {
	*r = kltype.Record{
		Stream:         c.cfg.stream,
		ShardID:        c.cfg.shard,
		SequenceNumber: sequenceNumber(c.seq.Add(1)),
		PartitionKey:   DefaultPartitionKey,
		ArrivalTime:    time.Now().UTC().Truncate(time.Millisecond),
		Data:           data,
	}
}

// sequenceNumber is the n-th record's sequence number: "49" and n in 54
// digits, zero-padded (56 digits, as Kinesis' are).
func sequenceNumber(n uint64) string {
	var b [56]byte
	b[0], b[1] = '4', '9'
	for i := len(b) - 1; i >= 2; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[:])
}

func (c *core) keep(dl *kltype.DeadLetterRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead = append(c.dead, dl)
}

// errHeld stops the pipeline when a record has held its shard long enough.
var errHeld = errors.New("kinesisleasetest: record held")

// run is the processing of one record.
type run struct {
	c     *core
	p     pipeline.Processor // built once (newRun), bound to this run
	res   Result
	wait  pipeline.Wait // the wait the pipeline is about to start, as it reported it
	holds int           // waits while holding the shard
}

func (st *run) process(ctx context.Context, r *kltype.Record) Result {
	st.res.Outcome = st.p.Process(ctx, r, nil)
	if st.res.Outcome == 0 {
		if st.res.why != "" {
			st.res.Held = true
		} else {
			if err := context.Cause(ctx); err != nil {
				st.res.why = err.Error()
			}
		}
	}
	return st.res
}

func (st *run) onAttempt(_ *kltype.Record, err error) {
	st.res.Errors = append(st.res.Errors, err)
}

// onWait keeps the pipeline's decision for the sleep that follows it.
func (st *run) onWait(_ *kltype.Record, w pipeline.Wait) { st.wait = w }

func (st *run) sink(ctx context.Context, dl *kltype.DeadLetterRecord) error {
	if st.c.cfg.sink != nil {
		if err := st.c.cfg.sink(ctx, dl); err != nil {
			return err
		}
	}
	st.res.DeadLetter = dl
	st.c.keep(dl)
	return nil
}

// sleep is the pipeline's clock: it records the wait and returns at once,
// unless ctx is done or the record has held its shard long enough.
func (st *run) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if why := st.holding(); why != "" {
		st.holds++
		if st.holds > st.c.cfg.holdAttempts {
			st.res.why = why
			return errHeld
		}
	}
	if len(st.res.Delays) >= MaxWaits {
		st.res.why = fmt.Sprintf("still unresolved after %d waits", MaxWaits)
		return errHeld
	}
	st.res.Delays = append(st.res.Delays, d)
	return nil
}

// holding says why the pipeline, about to wait, is holding the shard rather
// than retrying per the policy, as the pipeline reported it: "" if it is
// not.
func (st *run) holding() string {
	switch st.wait.Reason {
	case pipeline.WaitSinkFailed:
		return fmt.Sprintf("the dead-letter sink keeps failing: %v", st.wait.Err)
	case pipeline.WaitNoSink:
		return fmt.Sprintf("it must be dead-lettered (reason %q) and no dead-letter sink is configured", st.wait.DeadLetterReason)
	case pipeline.WaitRetriesExhausted:
		return fmt.Sprintf("it failed all %d attempts of the retry policy and no dead-letter sink is configured", st.c.cfg.policy.Attempts)
	}
	return ""
}

// NewHandler is New for a kinesislease.Handler value, the interface form a
// subscription takes with kinesislease.SubscribeHandler: the same pipeline
// and options.
func NewHandler[T any](tb testing.TB, handler kinesislease.Handler[T], opts ...Option) *Harness[T] {
	tb.Helper()
	if handler == nil {
		return New[T](tb, nil, opts...)
	}
	return New(tb, kinesislease.HandlerFunc[T](handler.Handle), opts...)
}
