package shard

import (
	"errors"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/kltype"
)

func TestAgeAt(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		arrival time.Time
		want    time.Duration
	}{
		{time.Time{}, 0},                     // unknown
		{now.Add(-time.Minute), time.Minute}, // a minute ago
		{now.Add(time.Second), 0},            // the clocks' skew
	} {
		if got := ageAt(c.arrival, now); got != c.want {
			t.Errorf("ageAt(%v) = %v, want %v", c.arrival, got, c.want)
		}
	}
}

func TestBlockedAt(t *testing.T) {
	since := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		after time.Duration
		want  bool
	}{{0, false}, {100 * time.Millisecond, false}, {101 * time.Millisecond, true}, {time.Hour, true}} {
		if got := blockedAt(since, since.Add(c.after), 100*time.Millisecond); got != c.want {
			t.Errorf("failing for %v of a 100ms delay: blocked %v, want %v", c.after, got, c.want)
		}
	}
}

func TestPastHalfRetention(t *testing.T) {
	for _, c := range []struct {
		age, retention time.Duration
		want           bool
	}{
		{11 * time.Hour, 0, false}, {13 * time.Hour, 0, true}, // the default, 24h
		{12 * time.Hour, 24 * time.Hour, false}, {12*time.Hour + time.Second, 24 * time.Hour, true},
		{13 * time.Hour, 7 * 24 * time.Hour, false}, {11 * time.Second, 20 * time.Second, true},
	} {
		if got := pastHalfRetention(c.age, c.retention); got != c.want {
			t.Errorf("pastHalfRetention(%v, %v) = %v, want %v", c.age, c.retention, got, c.want)
		}
	}
}

func TestWatchInterval(t *testing.T) {
	for r, want := range map[time.Duration]time.Duration{0: time.Minute, 24 * time.Hour: time.Minute, 20 * time.Second: time.Second, 20 * time.Minute: 30 * time.Second} {
		if got := watchInterval(r); got != want {
			t.Errorf("watchInterval(%v) = %v, want %v", r, got, want)
		}
	}
}

// TestUnresolvedReport: the age is the oldest published record's; Blocked
// only once that record has failed for longer than the threshold, its
// attempts and last error as the last wait said; a resolution forgets it.
func TestUnresolvedReport(t *testing.T) {
	var u unresolved
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	if age, b := u.report(t0, time.Second); age != 0 || b != nil {
		t.Fatalf("nothing published: %v, %+v", age, b)
	}
	a, b := &recordContext{}, &recordContext{}
	a.Record = kltype.Record{SequenceNumber: "1", ArrivalTime: t0.Add(-time.Minute)}
	b.Record = kltype.Record{SequenceNumber: "2", SubSequence: 3, ArrivalTime: t0}
	u.publish(a)
	errA, errB := errors.New("a"), errors.New("b")
	b.Record.Attempt = 1
	u.waiting(&b.Record, pipeline.Wait{Reason: pipeline.WaitBackoff, Err: errB}, t0) // a later record fails: not the oldest
	if age, bl := u.report(t0.Add(time.Hour), time.Second); age != time.Hour+time.Minute || bl != nil {
		t.Fatalf("a later record failing: %v, %+v; want a's age, not blocked", age, bl)
	}
	a.Record.Attempt = 1
	u.waiting(&a.Record, pipeline.Wait{Reason: pipeline.WaitBackoff, Err: errA}, t0)
	a.Record.Attempt = 2
	u.waiting(&a.Record, pipeline.Wait{Reason: pipeline.WaitRetriesExhausted, Err: errA}, t0.Add(time.Second))
	if _, bl := u.report(t0.Add(time.Second), time.Second); bl != nil {
		t.Fatalf("failing for the threshold, not longer: blocked %+v", bl)
	}
	_, bl := u.report(t0.Add(2*time.Second), time.Second)
	if bl == nil || bl.SequenceNumber != "1" || !bl.Since.Equal(t0) || bl.Attempts != 2 || bl.LastErr != errA || !bl.ArrivalTime.Equal(a.Record.ArrivalTime) {
		t.Fatalf("blocked %+v, want record 1, since t0, 2 attempts", bl)
	}
	u.settled(&a.Record)
	u.publish(b)
	_, bl = u.report(t0.Add(3*time.Second), time.Second)
	if bl == nil || bl.SequenceNumber != "2" || bl.SubSequence != 3 || bl.LastErr != errB {
		t.Fatalf("b oldest, failing since t0: blocked %+v", bl)
	}
	u.settled(&b.Record)
	if _, bl := u.report(t0.Add(3*time.Second), time.Second); bl != nil || u.nfailing.Load() != 0 {
		t.Fatalf("b resolved: blocked %+v, %d failing", bl, u.nfailing.Load())
	}
	u.publish(nil)
	if age, _ := u.report(t0, time.Second); age != 0 {
		t.Fatalf("nothing unresolved: age %v", age)
	}
}
