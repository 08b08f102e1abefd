package engine_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/budget"
	"github.com/kinesislease/kinesislease/internal/testkit/sim"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestBudgetBound: 16 shards of 2 KB records behind a slow handler, one
// shared budget far smaller than the backlog. At every handler call the
// budget holds no more than its bytes plus one response per shard, and its
// records never exceed its records plus one response per shard; every
// record is handled once, in order per shard; when all is handled the
// budget holds nothing.
func TestBudgetBound(t *testing.T) {
	t.Parallel()
	const (
		shards   = 16
		perShard = 120 // 3.8 MB and 1,920 records behind a 256 KB, 1,000-record budget (300 took 12s under -race)
		size     = 2048
	)
	k := sim.NewKinesis()
	stream := newSimStream(t, k, "budget", shards)
	data := make([]byte, size)
	for _, id := range stream.ShardIDs() {
		for i := range perShard {
			copy(data, strconv.Itoa(i)+" ")
			if _, err := stream.Put(id, "k", append([]byte(nil), data...)); err != nil {
				t.Fatal(err)
			}
		}
	}
	const maxBytes, maxRecords = 256 << 10, 1000
	budget := budget.NewBudget(maxBytes, maxRecords)
	// The bound: the budget plus one response per shard (a response is
	// sized to the room left from the records seen so far, and may carry
	// more bytes than that: the first ones are sized before any record was
	// seen). Records: Limit caps them, so the budget is exact.
	boundRecords := int64(maxRecords)

	var (
		mu        sync.Mutex
		next      = map[string]int{}
		worst     int64
		worstRecs int64
		violation string
		handled   int
		all       = make(chan struct{})
	)
	handler := func(_ context.Context, r *kltype.Record) error {
		b, n := budget.Held()
		var idx int
		if _, err := fmt.Sscan(string(r.Data[:8]), &idx); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		worst, worstRecs = max(worst, b), max(worstRecs, n)
		boundBytes := maxBytes + shards*budget.Largest()
		if (b > boundBytes || n > boundRecords) && violation == "" {
			violation = fmt.Sprintf("budget holds %d bytes and %d records, bound %d (largest response %d) and %d", b, n, boundBytes, budget.Largest(), boundRecords)
		}
		if idx != next[r.ShardID] && violation == "" {
			violation = fmt.Sprintf("shard %s: record %d, want %d", r.ShardID, idx, next[r.ShardID])
		}
		next[r.ShardID] = idx + 1
		handled++
		if handled == shards*perShard {
			close(all)
		}
		time.Sleep(100 * time.Microsecond) // slow: the backlog waits in Kinesis, not in memory
		return nil
	}
	cfg := groupConfig("one", memory.New(), k, stream.Name())
	cfg.Streams[0].Worker.Handler = handler
	cfg.Streams[0].Worker.Budget = budget
	// A lease timeout no stall of a loaded machine reaches: with the 200 ms
	// of groupConfig, a fence under load (it failed so at a load of 9 on 2
	// cores) had the shard read again from its checkpoint, which breaks
	// "once, in order" for a reason that is not the budget's.
	cfg.Heartbeat, cfg.Timeout = 250*time.Millisecond, 5*time.Second
	_, stop := startGroup(t, cfg)
	select {
	case <-all:
	case <-time.After(60 * time.Second):
		mu.Lock()
		t.Fatalf("%d of %d records handled after 60s", handled, shards*perShard)
	}
	// Caught up: nothing is held once the last batches are handled.
	deadline := time.Now().Add(10 * time.Second)
	for b, n := budget.Held(); b != 0 || n != 0; b, n = budget.Held() {
		if time.Now().After(deadline) {
			t.Fatalf("caught up, the budget still holds %d bytes and %d records", b, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	if violation != "" {
		t.Fatal(violation)
	}
	if worst < maxBytes/2 {
		t.Fatalf("the budget never held more than %d bytes of %d: the test did not fill it", worst, maxBytes)
	}
	if l := budget.Largest(); l > maxBytes+size+200 {
		t.Fatalf("a response of %d bytes, more than the whole budget (%d) and a record: Limit was not sized to the room", l, maxBytes)
	}
	t.Logf("worst holding %d bytes, %d records (budget %d, %d; largest response %d)", worst, worstRecs, maxBytes, maxRecords, budget.Largest())
}
