package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// idsOf returns the ids of the deliveries of shard, in order.
func idsOf(ds []delivery, shard string) []int {
	var ids []int
	for _, d := range ds {
		if d.shard == shard {
			ids = append(ids, d.id)
		}
	}
	return ids
}

func putIDs(ps []put, shard string) []int {
	var ids []int
	for _, p := range ps {
		if p.shard == shard {
			ids = append(ids, p.id)
		}
	}
	return ids
}

// distinctIDs counts the distinct ids delivered.
func distinctIDs(ds []delivery) int {
	seen := map[int]bool{}
	for _, d := range ds {
		seen[d.id] = true
	}
	return len(seen)
}

// TestRewindLive rewinds one shard to a sequence number while a service
// consumes the stream: the holder (membership protocol) is told through its membership entry and applies the request within a heartbeat
// and hands records k..N to the handler again, in order, keeping its lease
// (no second reader, no concurrent handler call, nothing skipped); the
// same with enhanced fan-out, where the rewound shard's new subscription
// waits out the 5-second rule.
func TestRewindLive(t *testing.T) {
	t.Parallel()
	t.Run("polling", func(t *testing.T) { t.Parallel(); testRewindLive(t, newRig(t, testutil.Kinesalite, 2)) })
	t.Run("fan-out", func(t *testing.T) {
		t.Parallel() // a rig of its own
		testRewindLive(t, newFanOutRig(t, 2))
	})
}

func testRewindLive(t *testing.T, r *rig) {
	j := newJournal()
	svc := r.startService("svc-1", j, kltype.TrimHorizon)

	const n = 60
	ps := putRecords(t, r.kc, r.stream, 0, n, alternate)
	j.waitUntil(t, 30*time.Second, fmt.Sprintf("all %d records handled", n), func(ds []delivery) bool { return distinctIDs(ds) == n })

	target, other := "shardId-000000000000", "shardId-000000000001"
	xs := putIDs(ps, target)
	if len(xs) != n/2 {
		t.Fatalf("%d records in %s, want %d", len(xs), target, n/2)
	}
	k := len(xs) / 3 // replay from the k-th record of the shard
	kSeq := ps[xs[k]].seq
	last := ps[xs[len(xs)-1]].seq
	// The checkpoint reached the shard's last record: the rewind goes back.
	r.waitRow(target, 10*time.Second, "checkpointed at its last record", func(l leases.Lease) bool {
		return l.Checkpoint.Sequence == last && l.Owner == "svc-1"
	})

	// Watch the row: its owner stays svc-1 throughout.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	var watch sync.WaitGroup
	var owners sync.Map
	watch.Go(func() {
		st := r.store()
		for watchCtx.Err() == nil {
			l, err := st.Get(watchCtx, leases.Key{Stream: r.stream, Shard: target})
			if err == nil {
				owners.Store(l.Owner, true)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	defer func() { stopWatch(); watch.Wait() }() // on a t.Fatal below too

	mark := len(j.deliveries())
	res := runCLI(r.args("rewind", "--shard", target, "--to", kSeq)...)
	if res.code != 0 {
		t.Fatalf("rewind: %v", res)
	}
	want := fmt.Sprintf("%s: requested from svc-1: %s -> %s%s; it applies the rewind within a heartbeat\n",
		target, last, leases.AtSequencePrefix, kSeq)
	if res.stdout != want {
		t.Errorf("rewind printed %q, want %q", res.stdout, want)
	}

	// The replay, then the row without the request.
	replay := xs[k:]
	j.waitUntil(t, 30*time.Second, fmt.Sprintf("records %v of %s handled again", replay, target), func(ds []delivery) bool {
		return len(idsOf(ds[mark:], target)) >= len(replay)
	})
	r.waitRow(target, 10*time.Second, "without a pending rewind", func(l leases.Lease) bool { return l.RewindTo.IsZero() })

	// Records put after the rewind are handled once, after the replay.
	more := putRecords(t, r.kc, r.stream, n, 20, alternate)
	j.waitUntil(t, 30*time.Second, "the records put after the rewind handled", func(ds []delivery) bool {
		return distinctIDs(ds) == n+20
	})
	time.Sleep(300 * time.Millisecond) // anything more would show up here
	stopWatch()
	watch.Wait()
	svc.stop(t)

	ds := j.deliveries()[mark:]
	if got, want := idsOf(ds, target), append(slices.Clone(replay), putIDs(more, target)...); !slices.Equal(got, want) {
		t.Errorf("%s after the rewind handled %v, want %v (from record %d on, in order, once)", target, got, want, xs[k])
	}
	if got, want := idsOf(ds, other), putIDs(more, other); !slices.Equal(got, want) {
		t.Errorf("%s (not rewound) after the rewind handled %v, want only the new records %v", other, got, want)
	}
	j.mu.Lock()
	if len(j.concurrent) > 0 {
		t.Errorf("the handler ran concurrently for shards %v", j.concurrent)
	}
	j.mu.Unlock()
	owners.Range(func(o, _ any) bool {
		if o != "svc-1" {
			t.Errorf("the row of %s had owner %q during the rewind, want svc-1 throughout", target, o)
		}
		return true
	})
	// Each shard acquired once, released once at shutdown: the rewind kept
	// the lease.
	events := svc.leaseEvents()
	slices.Sort(events)
	wantEvents := []string{other + " acquired", other + " released", target + " acquired", target + " released"}
	slices.Sort(wantEvents)
	if !slices.Equal(events, wantEvents) {
		t.Errorf("lease events %v, want %v", events, wantEvents)
	}
}

// TestRewindFree rewinds every shard of a stream no service consumes to a
// time: each row is rewritten at once to the first record at or after the
// time, and a service started afterwards reads from there.
func TestRewindFree(t *testing.T) {
	t.Parallel()
	r := newRig(t, testutil.Kinesalite, 2)
	before := putRecords(t, r.kc, r.stream, 0, 20, alternate)
	time.Sleep(50 * time.Millisecond)
	at := time.Now()
	time.Sleep(50 * time.Millisecond)
	after := putRecords(t, r.kc, r.stream, 20, 20, alternate)

	// A first service reads everything and stops: the rows are free, at
	// the last records.
	j := newJournal()
	svc := r.startService("svc-1", j, kltype.TrimHorizon)
	j.waitUntil(t, 30*time.Second, "all 40 records handled", func(ds []delivery) bool { return distinctIDs(ds) == 40 })
	svc.stop(t)

	st := r.store()
	rows := map[string]leases.Lease{}
	for _, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
		l, err := st.Get(context.Background(), leases.Key{Stream: r.stream, Shard: id})
		if err != nil {
			t.Fatal(err)
		}
		if l.Held() {
			t.Fatalf("%s still held after the service stopped: %+v", id, l)
		}
		rows[id] = l
	}

	// --dry-run writes nothing.
	res := runCLI(r.args("rewind", "--to", at.Format(time.RFC3339Nano), "--dry-run")...)
	if res.code != 0 || strings.Count(res.stdout, "would rewrite (free)") != 2 {
		t.Fatalf("rewind --dry-run: %v", res)
	}
	for id, l := range rows {
		if got, _ := st.Get(context.Background(), leases.Key{Stream: r.stream, Shard: id}); got.Counter != l.Counter {
			t.Fatalf("rewind --dry-run wrote %s: %+v", id, got)
		}
	}

	res = runCLI(r.args("rewind", "--to", at.Format(time.RFC3339Nano))...)
	if res.code != 0 {
		t.Fatalf("rewind: %v", res)
	}
	t.Logf("rewind:\n%s", res.stdout)
	// Each row now starts at the first record at or after the time.
	for id, old := range rows {
		first := after[slices.IndexFunc(after, func(p put) bool { return p.shard == id })]
		l, err := st.Get(context.Background(), leases.Key{Stream: r.stream, Shard: id})
		if err != nil {
			t.Fatal(err)
		}
		if l.Checkpoint != leases.RewindAtSequence(first.seq) || l.Counter != old.Counter+1 || l.Held() || !l.RewindTo.IsZero() {
			t.Errorf("%s after the rewind: %+v, want free at counter %d with checkpoint %s (record %d)",
				id, l, old.Counter+1, leases.RewindAtSequence(first.seq), first.id)
		}
		line := fmt.Sprintf("%s: rewritten (free): %s -> %s%s [the first record at or after", id, old.Checkpoint.Sequence, leases.AtSequencePrefix, first.seq)
		if !strings.Contains(res.stdout, line) {
			t.Errorf("rewind output lacks %q:\n%s", line, res.stdout)
		}
	}

	// A new service reads from there: records 20..39, once each, in order
	// per shard, and none of 0..19.
	j2 := newJournal()
	svc2 := r.startService("svc-2", j2, kltype.Latest)
	j2.waitUntil(t, 30*time.Second, "records 20..39 handled", func(ds []delivery) bool { return distinctIDs(ds) == 20 })
	time.Sleep(300 * time.Millisecond)
	svc2.stop(t)
	ds := j2.deliveries()
	for _, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
		if got, want := idsOf(ds, id), putIDs(after, id); !slices.Equal(got, want) {
			t.Errorf("%s: the new service handled %v, want %v (none of %v)", id, got, want, putIDs(before, id))
		}
	}
}

// TestRewindCreatesMissingRows rewinds a stream no service has consumed
// yet: the rows are created (free) and rewritten, and the first service
// starts where they say rather than at its own start position (LATEST).
func TestRewindCreatesMissingRows(t *testing.T) {
	t.Parallel()
	r := newRig(t, testutil.Kinesalite, 2)
	ps := putRecords(t, r.kc, r.stream, 0, 10, alternate)
	res := runCLI(r.args("rewind", "--to", "TRIM_HORIZON")...)
	if res.code != 0 {
		t.Fatalf("rewind: %v", res)
	}
	want := "shardId-000000000000: row created, rewritten (free): - -> TRIM_HORIZON\n" +
		"shardId-000000000001: row created, rewritten (free): - -> TRIM_HORIZON\n"
	if res.stdout != want {
		t.Errorf("rewind printed\n%s\nwant\n%s", res.stdout, want)
	}
	j := newJournal()
	svc := r.startService("svc-1", j, kltype.Latest)
	j.waitUntil(t, 30*time.Second, "the 10 records handled", func(ds []delivery) bool { return distinctIDs(ds) == 10 })
	svc.stop(t)
	for _, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
		if got, want := idsOf(j.deliveries(), id), putIDs(ps, id); !slices.Equal(got, want) {
			t.Errorf("%s: handled %v, want %v", id, got, want)
		}
	}
}

// TestRewindTimeWithoutRecord rewinds to a time after the newest record
// (kinesis-local: kinesalite never answers an AT_TIMESTAMP iterator request
// past its last record): the row keeps the time itself, and the service
// reads every record put afterwards.
func TestRewindTimeWithoutRecord(t *testing.T) {
	t.Parallel()
	r := newRig(t, testutil.KinesisLocal, 1)
	putRecords(t, r.kc, r.stream, 0, 3, nil)
	time.Sleep(20 * time.Millisecond)
	at := time.Now().Truncate(time.Millisecond)
	res := runCLI(r.args("rewind", "--to", at.Format(time.RFC3339Nano))...)
	if res.code != 0 {
		t.Fatalf("rewind: %v", res)
	}
	id := "shardId-000000000000"
	want := fmt.Sprintf("%s: row created, rewritten (free): - -> %s%s [no record at or after %s yet: the shard is read from that time]\n",
		id, leases.AtTimestampPrefix, at.UTC().Format("2006-01-02T15:04:05.000Z07:00"), at.UTC().Format(time.RFC3339Nano))
	if res.stdout != want {
		t.Errorf("rewind printed\n%q\nwant\n%q", res.stdout, want)
	}
	l := r.waitRow(id, time.Second, "rewritten", func(leases.Lease) bool { return true })
	if l.Checkpoint != leases.RewindAtTimestamp(at) {
		t.Fatalf("row %+v, want checkpoint %s", l, leases.RewindAtTimestamp(at))
	}
	// Records put after the rewind (and before any service applies it).
	later := putRecords(t, r.kc, r.stream, 3, 3, nil)
	j := newJournal()
	svc := r.startService("svc-1", j, kltype.TrimHorizon)
	j.waitUntil(t, 60*time.Second, "the 3 later records handled", func(ds []delivery) bool { return distinctIDs(ds) == 3 })
	time.Sleep(300 * time.Millisecond)
	svc.stop(t)
	if got, want := idsOf(j.deliveries(), id), putIDs(later, id); !slices.Equal(got, want) {
		t.Errorf("handled %v, want only the records put after the time %v", got, want)
	}
}
