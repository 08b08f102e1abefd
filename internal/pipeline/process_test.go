package pipeline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/kltype"
)

var errStopWaiting = errors.New("stop waiting")

// TestProcessorOnWait checks that the Processor reports each wait with its
// reason before sleeping, and that Holding sorts them.
func TestProcessorOnWait(t *testing.T) {
	t.Parallel()
	policy := kltype.RetryPolicy{Attempts: 2, InitialDelay: time.Millisecond, MaxDelay: time.Second}
	errPlain := errors.New("plain")
	errSink := errors.New("sink down")
	failingSink := func(context.Context, *kltype.DeadLetterRecord) error { return errSink }
	tests := []struct {
		name    string
		errs    []error // the handler's errors in order; nil after
		sink    pipeline.Sink
		corrupt bool // DeadLetterNow instead of Process
		want    []pipeline.Wait
	}{
		{
			name: "backoff then exhausted without sink",
			errs: []error{errPlain, errPlain, errPlain},
			want: []pipeline.Wait{
				{Reason: pipeline.WaitBackoff, Err: errPlain},
				{Reason: pipeline.WaitRetriesExhausted, Err: errPlain},
			},
		},
		{
			name: "retry after",
			errs: []error{&kltype.RetryAfterError{Delay: time.Minute, Err: errPlain}},
			want: []pipeline.Wait{{Reason: pipeline.WaitRetryAfter, Delay: time.Minute}},
		},
		{
			name: "decode without sink",
			errs: []error{&pipeline.Undecodable{Err: errPlain}},
			want: []pipeline.Wait{{Reason: pipeline.WaitNoSink, DeadLetterReason: kltype.ReasonDecode}},
		},
		{
			name: "dead letter with a failing sink",
			errs: []error{&kltype.DeadLetterError{Err: errPlain}},
			sink: failingSink,
			want: []pipeline.Wait{{Reason: pipeline.WaitSinkFailed, Err: errSink, DeadLetterReason: kltype.ReasonDeadLetter}},
		},
		{
			name:    "corrupt aggregate without sink",
			corrupt: true,
			want:    []pipeline.Wait{{Reason: pipeline.WaitNoSink, Err: errPlain, DeadLetterReason: kltype.ReasonCorrupt}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			var got []pipeline.Wait
			p := &pipeline.Processor{
				Handler: func(context.Context, *kltype.Record) error {
					calls++
					if calls <= len(tt.errs) {
						return tt.errs[calls-1]
					}
					return nil
				},
				Policy: policy,
				Sink:   tt.sink,
				OnWait: func(_ *kltype.Record, w pipeline.Wait) { got = append(got, w) },
				Sleep: func(context.Context, time.Duration) error {
					if len(got) >= len(tt.want) {
						return errStopWaiting
					}
					return nil
				},
			}
			r := &kltype.Record{SequenceNumber: "1"}
			if tt.corrupt {
				p.DeadLetterNow(context.Background(), r, kltype.ReasonCorrupt, errPlain, nil)
			} else {
				p.Process(context.Background(), r, nil)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("waits %+v, want %+v", got, tt.want)
			}
			for i, w := range tt.want {
				g := got[i]
				if w.Reason != pipeline.WaitRetryAfter { // a jittered backoff
					if g.Delay <= 0 || g.Delay > policy.MaxDelay {
						t.Errorf("wait %d: Delay %v, want in (0, %v]", i, g.Delay, policy.MaxDelay)
					}
					w.Delay = g.Delay
				}
				if w.Err == nil {
					w.Err = g.Err // checked below
					if tt.errs == nil || !errors.Is(g.Err, tt.errs[i]) {
						t.Errorf("wait %d: Err %v, want the delivery's error", i, g.Err)
					}
				}
				if g != w {
					t.Errorf("wait %d: %+v, want %+v", i, g, w)
				}
				if want := w.Reason >= pipeline.WaitRetriesExhausted; g.Holding() != want {
					t.Errorf("wait %d (%v): Holding() = %v, want %v", i, g.Reason, g.Holding(), want)
				}
			}
		})
	}
}
