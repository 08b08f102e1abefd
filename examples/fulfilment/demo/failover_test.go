package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
)

// TestShardFailover checks the measure's definition on made-up puts and
// deliveries: per shard of the victim, the first delivery by a survivor of
// the first record put after the signal. It must ignore records put before
// the signal (even when a survivor handles them after it), deliveries by the
// victim, later records, and shards the victim did not hold.
func TestShardFailover(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const s0, s1, s2, s3 = "shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003"
	dl := func(owner, shard, id string, ms int) harness.Delivery {
		return harness.Delivery{Owner: owner, Shard: shard, Seq: "1", ID: id, At: at(ms)}
	}
	signal := at(10_000)
	puts := []put{
		{ID: "a-before", Shard: s0, Sent: at(9_950)}, // sent before the signal
		{ID: "a-first", Shard: s0, Sent: at(10_050)},
		{ID: "a-second", Shard: s0, Sent: at(10_150)},
		{ID: "b-at", Shard: s1, Sent: signal}, // at the signal: not after it
		{ID: "b-first", Shard: s1, Sent: at(10_060)},
		{ID: "c-first", Shard: s2, Sent: at(10_070)}, // not the victim's
		{ID: "d-first", Shard: s3, Sent: at(10_080)}, // handled by the victim only
		{ID: "a-first-dup", Shard: s1, Sent: at(10_010)},
	}
	// a-first-dup is really b's first record (sent 10_010 on s1).
	ds := []harness.Delivery{
		dl("survivor", s0, "a-before", 14_000),    // put before the signal: ignored
		dl("victim", s0, "a-first", 10_500),       // by the victim: ignored
		dl("survivor", s0, "a-second", 15_000),    // a later record: ignored
		dl("survivor", s0, "a-first", 15_200),     // counted: 5.2s
		dl("other", s0, "a-first", 16_000),        // a later redelivery: ignored
		dl("survivor", s1, "b-at", 13_000),        // sent at the signal: ignored
		dl("survivor", s1, "b-first", 13_500),     // not the first after the signal
		dl("survivor", s1, "a-first-dup", 14_500), // counted: 4.5s
		dl("survivor", s2, "c-first", 11_000),     // not a victim shard
		dl("victim", s3, "d-first", 10_200),       // by the victim: ignored
	}
	per, first, pending := shardFailover(puts, ds, "victim", []string{s0, s1, s3}, signal)
	want := map[string]time.Duration{s0: 5200 * time.Millisecond, s1: 4500 * time.Millisecond}
	if len(per) != len(want) || per[s0] != want[s0] || per[s1] != want[s1] {
		t.Errorf("per shard %v, want %v", per, want)
	}
	if first[s0] != "a-first" || first[s1] != "a-first-dup" || first[s3] != "d-first" {
		t.Errorf("first records %v", first)
	}
	if !slices.Equal(pending, []string{s3}) {
		t.Errorf("pending %v, want [%s]: only the victim handled its first record", pending, s3)
	}
	// No record put after the signal yet: pending, not measured.
	per, _, pending = shardFailover(puts[:1], ds, "victim", []string{s0}, signal)
	if len(per) != 0 || !slices.Equal(pending, []string{s0}) {
		t.Errorf("with only a record put before the signal: per %v pending %v, want none measured", per, pending)
	}
}

// TestTallyAfterStop feeds the tally a SIGSTOP: the victim's record in
// flight at the SIGSTOP (stamped right after the SIGCONT) is excused and
// its redelivery explained; any other record of its former shards it
// handles before acquiring the shard again is reported, and what it handles
// after acquiring it again is fine.
func TestTallyAfterStop(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const s0, s1 = "shardId-000000000000", "shardId-000000000001"
	ev := func(owner, shard, kind string, ms int) harness.LeaseEvent {
		return harness.LeaseEvent{Owner: owner, Shard: shard, Kind: kind, At: at(ms)}
	}
	dl := func(owner, shard, seq, id string, ms int) harness.Delivery {
		return harness.Delivery{Owner: owner, Shard: shard, Seq: seq, ID: id, At: at(ms)}
	}
	// v holds s0 and s1, is stopped at 4000, s is taker from 10000, v is
	// continued at 12000 and acquires s0 again at 20000.
	es := []harness.LeaseEvent{
		ev("v", s0, "acquired", 0), ev("v", s1, "acquired", 0),
		ev("s", s0, "acquired", 10_000), ev("s", s1, "acquired", 10_000),
		ev("s", s0, "released", 19_900), ev("v", s0, "acquired", 20_000),
	}
	ds := []harness.Delivery{
		dl("v", s0, "10", "o1", 1000),
		dl("v", s1, "20", "o2", 1000),
		dl("s", s0, "11", "o3", 10_100), // o3 was in v's handler at the SIGSTOP
		dl("s", s1, "21", "o4", 10_100),
		dl("v", s0, "11", "o3", 12_010), // in flight: excused, its duplicate explained
		dl("v", s0, "12", "o5", 12_020), // a second one: not allowed
		dl("s", s0, "12", "o5", 12_100),
		dl("v", s0, "13", "o6", 20_100), // after acquiring s0 again: fine
	}
	k := &kill{owner: "v", at: at(4000), shards: []string{s0, s1}, signal: "SIGSTOP", cont: at(12_000)}
	ta := compute([]string{"o1", "o2", "o3", "o4", "o5", "o6"}, ds, es, k, 8*time.Second)
	var report strings.Builder
	ta.print(&report)
	t.Log("\n" + report.String())
	if ta.Lost != 0 || ta.Handled != 6 || ta.Deliveries != len(ds) {
		t.Errorf("lost %d handled %d deliveries %d", ta.Lost, ta.Handled, ta.Deliveries)
	}
	if len(ta.InFlight) != 1 || !strings.Contains(ta.InFlight[0], "o3") {
		t.Errorf("in flight %v, want o3", ta.InFlight)
	}
	if len(ta.AfterStop) != 1 || !strings.Contains(ta.AfterStop[0], "o5") {
		t.Errorf("after stop %v, want o5 only", ta.AfterStop)
	}
	if ta.InFlightDups != 1 {
		t.Errorf("in-flight duplicates %d, want 1 (o3)", ta.InFlightDups)
	}
	if !slices.Equal(ta.OtherDups, []string{"o5"}) {
		t.Errorf("other duplicates %v, want o5", ta.OtherDups)
	}
	// o5: v handled it after s had acquired s0 and was handling it: an
	// overlap, which the fence must not excuse after a SIGSTOP.
	if len(ta.Overlaps) != 1 || !strings.Contains(ta.Overlaps[0], "shard 0") {
		t.Errorf("overlaps %v, want one on shard 0", ta.Overlaps)
	}

	// Without o5, nothing is wrong.
	ds = slices.DeleteFunc(ds, func(d harness.Delivery) bool { return d.ID == "o5" })
	ta = compute([]string{"o1", "o2", "o3", "o4", "o6"}, ds, es, k, 8*time.Second)
	if len(ta.AfterStop) != 0 || len(ta.OtherDups) != 0 || len(ta.Overlaps) != 0 || ta.InFlightDups != 1 {
		t.Errorf("after stop %v, other dups %v, overlaps %v, in-flight dups %d: want none, none, none, 1",
			ta.AfterStop, ta.OtherDups, ta.Overlaps, ta.InFlightDups)
	}
}

// TestKeyOrder: an order of a customer first handled before an earlier one
// of that customer (by sequence number) is reported; redeliveries and
// other customers' orders are not.
func TestKeyOrder(t *testing.T) {
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Millisecond) }
	customer := map[string]string{"o1": "c1", "o2": "c1", "o3": "c2", "o4": "c1"}
	ds := []harness.Delivery{
		{ID: "o1", Seq: "10", At: at(1)},
		{ID: "o3", Seq: "5", At: at(2)}, // another customer
		{ID: "o2", Seq: "20", At: at(3)},
		{ID: "o1", Seq: "10", At: at(4)}, // a redelivery
		{ID: "o4", Seq: "15", At: at(5)}, // c1 out of order: 15 after 20
	}
	bad := keyOrder([]string{"o1", "o2", "o3", "o4"}, ds, func(id string) string { return customer[id] })
	if len(bad) != 1 || !strings.Contains(bad[0], "o4") {
		t.Fatalf("keyOrder = %v, want only o4 reported", bad)
	}
}
