package kinesisleasetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/typed"
	"github.com/kinesislease/kinesislease/kltype"
)

// BatchHarness runs a kinesislease.BatchHandlerFunc[T] on batches of
// records through the library's real batch pipeline (the one
// kinesislease.SubscribeBatch runs), with the same options as New. Build
// it with NewBatch; it is safe for concurrent use.
type BatchHarness[T any] struct {
	tb      testing.TB
	handler kinesislease.BatchHandlerFunc[T]
	c       *core
}

// NewBatch returns a harness for a batch handler; options as for New.
func NewBatch[T any](tb testing.TB, handler kinesislease.BatchHandlerFunc[T], opts ...Option) *BatchHarness[T] {
	tb.Helper()
	h := New[T](tb, func(context.Context, T) error { return nil }, opts...) // checks the options alike
	if handler == nil {
		tb.Fatalf("kinesisleasetest.NewBatch: invalid option: nil handler")
		return nil
	}
	return &BatchHarness[T]{tb: tb, handler: handler, c: h.c}
}

// BatchResult is what became of each record of a batch (in order), with
// what the pipeline did on the way.
type BatchResult struct {
	// Outcomes, Records and DeadLetters are per record, in the batch's
	// order; DeadLetters[i] is nil unless Outcomes[i] is
	// kltype.DeadLettered. A record left unresolved has the zero Outcome.
	Outcomes    []kltype.Outcome
	Records     []*kltype.Record
	DeadLetters []*kltype.DeadLetterRecord
	// Calls counts the handler's calls (each with the records still
	// unresolved); Delays are the waits between them (none took any time).
	Calls  int
	Delays []time.Duration
	// Held reports that the records left unresolved hold the shard (see
	// Result.Held); false when the context ended first.
	Held bool
}

// RequireOutcomes fails the test unless the records ended as want, in
// order.
func (r BatchResult) RequireOutcomes(tb testing.TB, want ...kltype.Outcome) {
	tb.Helper()
	if fmt.Sprint(r.Outcomes) != fmt.Sprint(want) {
		tb.Fatalf("kinesisleasetest: batch outcomes %v, want %v (handler calls %d)", r.Outcomes, want, r.Calls)
	}
}

// RequireHeld fails the test unless some records were left unresolved and
// hold the shard (see Result.Held).
func (r BatchResult) RequireHeld(tb testing.TB) {
	tb.Helper()
	unresolved := 0
	for _, o := range r.Outcomes {
		if o == 0 {
			unresolved++
		}
	}
	if !r.Held || unresolved == 0 {
		tb.Fatalf("kinesisleasetest: want the batch's unresolved records holding the shard, got outcomes %v, held %v (handler calls %d)", r.Outcomes, r.Held, r.Calls)
	}
}

// HandleBatch encodes values with the harness's codec into one shard's
// records, in order, and processes them as one batch: it returns once
// every record is acknowledged, dropped, dead-lettered or held, or ctx is
// done.
func (h *BatchHarness[T]) HandleBatch(ctx context.Context, values ...T) BatchResult {
	res := BatchResult{Outcomes: make([]kltype.Outcome, len(values)), Records: make([]*kltype.Record, len(values)),
		DeadLetters: make([]*kltype.DeadLetterRecord, len(values))}
	for i, v := range values {
		data, err := h.c.cfg.codec.Marshal(v)
		if err != nil {
			h.tb.Helper()
			h.tb.Fatalf("kinesisleasetest: HandleBatch: encode %T with codec %s: %v", v, h.c.cfg.codec.Name(), err)
			return BatchResult{}
		}
		res.Records[i] = &kltype.Record{}
		h.c.fillRecord(res.Records[i], data)
	}
	st := &run{c: h.c}
	byRecord := map[*kltype.Record]int{}
	for i, r := range res.Records {
		byRecord[r] = i
	}
	p := pipeline.Processor{
		Policy:  h.c.cfg.policy,
		Timeout: h.c.cfg.timeout,
		MaxAge:  h.c.cfg.maxAge,
		Log:     h.c.cfg.log,
		Sleep: func(ctx context.Context, d time.Duration) error {
			if err := st.sleep(ctx, d); err != nil {
				return err
			}
			res.Delays = append(res.Delays, d)
			return nil
		},
		OnWait: st.onWait,
	}
	if !h.c.cfg.noSink {
		p.Sink = func(ctx context.Context, dl *kltype.DeadLetterRecord) error {
			if err := st.sink(ctx, dl); err != nil {
				return err
			}
			res.DeadLetters[byRecord[dl.Record]] = dl
			return nil
		}
	}
	handler := typed.BatchHandler[T](h.c.cfg.codec, func(v T, r *kltype.Record) kinesislease.BatchItem[T] {
		return kinesislease.BatchItem[T]{Value: v, Record: r}
	}, func(ctx context.Context, items []kinesislease.BatchItem[T]) error {
		res.Calls++
		return h.handler(ctx, items)
	})
	done := p.ProcessBatch(ctx, res.Records, handler, nil, func(i int, o kltype.Outcome) bool {
		res.Outcomes[i] = o
		return true
	})
	res.Held = !done && st.res.why != ""
	return res
}
