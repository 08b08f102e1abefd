package engine

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// t0 is an arbitrary instant: liveness never reads a clock.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func lease(owner string, expires time.Duration) leases.Lease {
	return leases.Lease{Owner: owner, ExpiresAt: t0.Add(expires)}
}

// TestLivenessSince: a holder is dead once this instance has seen its
// renewal unchanged for a lease duration, counted from the read that first
// showed it; writes other than renewals are no sign of life.
func TestLivenessSince(t *testing.T) {
	const ttl = 10 * time.Second
	lv := newLiveness("me", ttl)
	lv.begin([]string{"s0"}, nil)
	lv.observe("s0", lease("a", 10*time.Second), t0)
	if lv.expired("s0", t0.Add(ttl-1)) {
		t.Fatal("expired before a lease duration")
	}
	if !lv.expired("s0", t0.Add(ttl)) {
		t.Fatal("not expired after a lease duration")
	}

	// Unchanged, read again later: still counted from the first read.
	lv.begin([]string{"s0"}, nil)
	lv.observe("s0", lease("a", 10*time.Second), t0.Add(5*time.Second))
	if !lv.expired("s0", t0.Add(ttl)) {
		t.Fatal("a second read of the same holding restarted the count")
	}

	// Another writer's request bumps the counter: no sign of life either.
	l := lease("a", 10*time.Second)
	l.Counter, l.HandoffTo = 7, "b"
	lv.observe("s0", l, t0.Add(6*time.Second))
	if !lv.expired("s0", t0.Add(ttl)) {
		t.Fatal("a handoff request by another owner counted as a renewal")
	}
	lv.requested("s0", leases.Lease{Owner: "a", ExpiresAt: t0.Add(10 * time.Second), HandoffTo: "me"})
	if !lv.expired("s0", t0.Add(ttl)) {
		t.Fatal("our own handoff request counted as a renewal")
	}

	// A renewal restarts the count, from the read that showed it.
	lv.observe("s0", lease("a", 20*time.Second), t0.Add(8*time.Second))
	if lv.expired("s0", t0.Add(ttl)) || lv.expired("s0", t0.Add(8*time.Second+ttl-1)) {
		t.Fatal("a renewal did not restart the count")
	}
	// So does a new holder.
	lv.observe("s0", lease("b", 20*time.Second), t0.Add(9*time.Second))
	if lv.expired("s0", t0.Add(8*time.Second+ttl)) {
		t.Fatal("a new holder did not restart the count")
	}

	// Only a row read in this scan can expire: a recalled observation is
	// not evidence of anything.
	lv.begin([]string{"s0"}, nil)
	if lv.expired("s0", t0.Add(time.Hour)) {
		t.Fatal("a row not read in this scan expired")
	}
}

// TestLivenessScans: a full scan reads every row not held; a stable
// assignment reads only the watched rows (and the rows never seen) except
// every fullScanEvery-th scan; an ended row is not read in a partial scan.
func TestLivenessScans(t *testing.T) {
	lv := newLiveness("me", 10*time.Second)
	order := []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "end"}
	held := map[string]bool{"s0": true}
	s := lv.begin(order, held)
	if !s.full || !slices.Equal(s.read, order[1:]) || len(s.unread) != 0 {
		t.Fatalf("first scan: full %v, read %q, unread %q; want a full read of every row not held", s.full, s.read, s.unread)
	}
	for _, id := range s.read {
		l := lease("a", time.Second)
		if id == "end" {
			l = leases.Lease{Checkpoint: leases.Checkpoint{Sequence: leases.ShardEnd}}
		}
		lv.observe(id, l, t0)
	}
	lv.settle([]string{"a", "b", "me"}, true)

	var watched []string
	for _, id := range order[1 : len(order)-1] {
		if lv.watches(id, "a") {
			watched = append(watched, id)
		}
	}
	if len(watched) == 0 || len(watched) == len(order)-2 {
		t.Fatalf("me watches %q of a's rows: with a third owner it should watch some, not all", watched)
	}
	for scan := 1; scan < 2*fullScanEvery; scan++ {
		s := lv.begin(append(order, "new"), held)
		if scan%fullScanEvery == 0 {
			if !s.full || len(s.read) != len(order) {
				t.Fatalf("scan %d: full %v, read %q; want a full scan", scan, s.full, s.read)
			}
			continue
		}
		wantRead := append(slices.Clone(watched), "new")
		if s.full || !slices.Equal(s.read, wantRead) {
			t.Fatalf("scan %d: full %v, read %q; want a partial scan reading %q", scan, s.full, s.read, wantRead)
		}
		if len(s.read)+len(s.unread)+len(s.rows) != len(order) || s.rows["end"].Checkpoint.Sequence != leases.ShardEnd {
			t.Fatalf("scan %d: read %q, unread %q, kept %v: want every row but the held one, the ended one kept", scan, s.read, s.unread, s.rows)
		}
	}

	// Not stable: every scan is full.
	lv.settle([]string{"a", "b", "me"}, false)
	if s := lv.begin(order, held); !s.full {
		t.Fatal("an unstable assignment scanned partially")
	}
}

// TestLivenessMoved: a partial scan turns full when a row it read is free or
// its holder has not renewed it for a lease duration.
func TestLivenessMoved(t *testing.T) {
	const ttl = 10 * time.Second
	lv := newLiveness("me", ttl)
	lv.observe("s0", lease("a", time.Second), t0)
	lv.observe("s1", lease("b", time.Second), t0.Add(5*time.Second))
	if lv.moved([]string{"s0", "s1"}, t0.Add(ttl-1)) {
		t.Fatal("moved with every holder renewing")
	}
	if !lv.moved([]string{"s0", "s1"}, t0.Add(ttl)) {
		t.Fatal("not moved with a holder silent for a lease duration")
	}
	lv.observe("s2", leases.Lease{}, t0)
	if !lv.moved([]string{"s2"}, t0) {
		t.Fatal("not moved with a free row")
	}
	rows := map[string]leases.Lease{}
	lv.recall([]string{"s1"}, rows)
	if rows["s1"].Owner != "b" {
		t.Fatalf("recall: %v", rows)
	}
	lv.forget("s0")
	lv.retain(func(id string) bool { return id != "s2" })
	if _, ok := lv.seen["s0"]; ok {
		t.Fatal("forget kept s0")
	}
	if _, ok := lv.seen["s2"]; ok {
		t.Fatal("retain kept s2, no longer in the stream")
	}
	if _, ok := lv.seen["s1"]; !ok {
		t.Fatal("retain dropped s1, still in the stream")
	}
}

// TestWatches: every row is watched by exactly one live owner other than its
// holder; with no other live owner, the instance watches everything.
func TestWatches(t *testing.T) {
	live := []string{"a", "b", "c", "d"}
	per := map[string]int{}
	for i := range 200 {
		id := fmt.Sprintf("shardId-%012d", i)
		holder := live[i%len(live)]
		var by []string
		for _, o := range live {
			lv := newLiveness(o, time.Second)
			lv.settle(live, true)
			if lv.watches(id, holder) {
				by = append(by, o)
			}
		}
		if len(by) != 1 || by[0] == holder {
			t.Fatalf("%s held by %s is watched by %q, want one other owner", id, holder, by)
		}
		per[by[0]]++
	}
	for _, o := range live {
		if per[o] < 25 {
			t.Errorf("watches per owner %v: the hash does not spread the rows", per)
			break
		}
	}
	lv := newLiveness("me", time.Second)
	lv.settle([]string{"me"}, true)
	if !lv.watches("s0", "a") {
		t.Error("alone among the live owners, an instance must watch every row")
	}
}
