package pipeline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/kltype"
)

// TestProcessorMaxAge: a record older than MaxAge at a delivery is
// dead-lettered with ReasonExpired and never reaches the handler; one that
// expires while it is retried is dead-lettered at its next delivery, with
// the attempts made so far; a fresh one is handled; a record without an
// arrival time never expires. The clock is the Processor's Now.
func TestProcessorMaxAge(t *testing.T) {
	t.Parallel()
	arrival := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	errPlain := errors.New("plain")
	for _, tt := range []struct {
		name      string
		arrival   time.Time
		failFirst int           // the handler fails its first calls
		ageAt     time.Duration // the clock at the first delivery, after arrival
		perCall   time.Duration // how far the clock moves at each delivery
		want      kltype.Outcome
		calls     int
		attempts  int // of the dead letter
	}{
		{name: "fresh", arrival: arrival, ageAt: time.Second, want: kltype.Acked, calls: 1},
		{name: "at the limit", arrival: arrival, ageAt: time.Minute, want: kltype.Acked, calls: 1},
		{name: "expired before the first delivery", arrival: arrival, ageAt: time.Minute + time.Millisecond, want: kltype.DeadLettered, calls: 0},
		{name: "expired while retried", arrival: arrival, failFirst: 5, ageAt: 30 * time.Second, perCall: 20 * time.Second, want: kltype.DeadLettered, calls: 2, attempts: 2},
		{name: "no arrival time", ageAt: 1000 * time.Hour, want: kltype.Acked, calls: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := arrival.Add(tt.ageAt)
			calls := 0
			var dls []*kltype.DeadLetterRecord
			p := &pipeline.Processor{
				Handler: func(context.Context, *kltype.Record) error {
					calls++
					now = now.Add(tt.perCall)
					if calls <= tt.failFirst {
						return errPlain
					}
					return nil
				},
				Policy: kltype.RetryPolicy{Attempts: 10, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond},
				Sink: func(_ context.Context, dl *kltype.DeadLetterRecord) error {
					dls = append(dls, dl)
					return nil
				},
				MaxAge: time.Minute,
				Now:    func() time.Time { return now },
				Sleep:  func(context.Context, time.Duration) error { return nil },
			}
			r := &kltype.Record{SequenceNumber: "1", ArrivalTime: tt.arrival}
			if o := p.Process(context.Background(), r, nil); o != tt.want {
				t.Fatalf("outcome %v, want %v", o, tt.want)
			}
			if calls != tt.calls {
				t.Errorf("handler called %d times, want %d", calls, tt.calls)
			}
			if tt.want != kltype.DeadLettered {
				if len(dls) != 0 {
					t.Errorf("dead letters %+v, want none", dls)
				}
				return
			}
			if len(dls) != 1 {
				t.Fatalf("%d dead letters, want 1", len(dls))
			}
			dl := dls[0]
			var exp *kltype.ExpiredError
			if dl.Reason != kltype.ReasonExpired || !errors.As(dl.Err, &exp) || dl.Attempts != tt.attempts {
				t.Fatalf("dead letter reason %q, attempts %d, err %v; want %q, %d, an *ExpiredError", dl.Reason, dl.Attempts, dl.Err, kltype.ReasonExpired, tt.attempts)
			}
			if exp.MaxAge != time.Minute || !exp.Arrival.Equal(arrival) || exp.Age != now.Sub(arrival) {
				t.Errorf("ExpiredError %+v, want arrival %v, age %v, max age 1m", exp, arrival, now.Sub(arrival))
			}
		})
	}
}

// TestProcessBatchMaxAge: in a batch, the expired records are
// dead-lettered and the others handed to the handler; a batch of expired
// records only never calls it.
func TestProcessBatchMaxAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var dls []string
	p := &pipeline.Processor{
		Policy: kltype.DefaultRetryPolicy,
		Sink: func(_ context.Context, dl *kltype.DeadLetterRecord) error {
			if dl.Reason != kltype.ReasonExpired {
				t.Errorf("dead letter %s: reason %q, want %q", dl.Record.SequenceNumber, dl.Reason, kltype.ReasonExpired)
			}
			dls = append(dls, dl.Record.SequenceNumber)
			return nil
		},
		MaxAge: time.Minute,
		Now:    func() time.Time { return now },
	}
	recs := []*kltype.Record{
		{SequenceNumber: "1", ArrivalTime: now.Add(-2 * time.Minute)},
		{SequenceNumber: "2", ArrivalTime: now.Add(-time.Second)},
		{SequenceNumber: "3", ArrivalTime: now.Add(-time.Hour)},
		{SequenceNumber: "4", ArrivalTime: now},
	}
	var handled []string
	handler := func(_ context.Context, rs []*kltype.Record) []pipeline.BatchFailure {
		for _, r := range rs {
			handled = append(handled, r.SequenceNumber)
		}
		return nil
	}
	outcomes := map[string]kltype.Outcome{}
	done := func(i int, o kltype.Outcome) bool { outcomes[recs[i].SequenceNumber] = o; return true }
	if !p.ProcessBatch(context.Background(), recs, handler, nil, done) {
		t.Fatal("ProcessBatch stopped")
	}
	want := map[string]kltype.Outcome{"1": kltype.DeadLettered, "2": kltype.Acked, "3": kltype.DeadLettered, "4": kltype.Acked}
	for seq, o := range want {
		if outcomes[seq] != o {
			t.Errorf("record %s: outcome %v, want %v", seq, outcomes[seq], o)
		}
	}
	if len(handled) != 2 || handled[0] != "2" || handled[1] != "4" || len(dls) != 2 || dls[0] != "1" || dls[1] != "3" {
		t.Errorf("handled %v, dead-lettered %v; want [2 4] and [1 3]", handled, dls)
	}

	handled = nil
	if !p.ProcessBatch(context.Background(), recs[:1], handler, nil, done) || handled != nil {
		t.Errorf("a batch of one expired record: handled %v, want no handler call", handled)
	}
}
