package engine_test

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/plan"
)

// utilizations returns each member's work (the sum over the shards it
// holds of rate × cost) and the busiest's ratio to the mean.
func (f *loadFleet) utilizations(rate, cost map[string]int, members []string) (work map[string]int, ratio float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	work = map[string]int{}
	total := 0
	for _, id := range f.ids {
		total += rate[id] * cost[id]
		if h, ok := f.holder[id]; ok {
			work[h] += rate[id] * cost[id]
		}
	}
	busiest := 0
	for _, m := range members {
		busiest = max(busiest, work[m])
	}
	return work, float64(busiest) * float64(len(members)) / float64(total)
}

// TestBalanceByUtilization: 4 members on 32 shards of equal throughput,
// balanced by load, each publishing a utilization derived from what it
// holds (the shards' rates times their handler's cost per byte). Once the
// fleet is settled, the handler costs 4 times as much per byte on the 8
// shards of one member: its utilization is 2.29 times the mean. With
// utilization published, load moves off it until the busiest member's
// utilization is within 1.2 times the mean, within 6 minutes, with at
// most 8 moves, and then no shard moves in 10 minutes. Without
// utilization (the same fleet, no source), nothing moves at all. No shard
// is ever read by two members at once.
func TestBalanceByUtilization(t *testing.T) {
	t.Parallel()
	for _, published := range []bool{true, false} {
		t.Run(map[bool]string{true: "published", false: "unpublished"}[published], func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) { testBalanceByUtilization(t, published) })
		})
	}
}

func testBalanceByUtilization(t *testing.T, published bool) {
	members := defaultMembers(4, plan.Balance{ByLoad: true})
	ids := owners(members)
	var mu sync.Mutex
	rate, cost := map[string]int{}, map[string]int{}
	// The fleet, once started: the members' first heartbeats (their joins)
	// run before startLoadFleet returns, and publish no measure then.
	var started atomic.Pointer[loadFleet]
	for i := range members {
		if !published {
			continue
		}
		owner := members[i].Owner
		// Its utilization: the work of the shards it holds, as a
		// fraction of what 14 shards of cost 1 are (the mean member's,
		// once the costs change, is 0.5).
		members[i].Balance.Utilization = func() float64 {
			f := started.Load()
			if f == nil {
				return -1 // no measure yet
			}
			mu.Lock()
			r, c := maps.Clone(rate), maps.Clone(cost)
			mu.Unlock()
			w, _ := f.utilizations(r, c, ids)
			return float64(w[owner]) / float64(14*20)
		}
	}
	f := startLoadFleet(t, 32, members)
	started.Store(f)
	mu.Lock()
	for _, id := range f.ids {
		rate[id], cost[id] = 20, 1
	}
	mu.Unlock()
	cur := func() (map[string]int, map[string]int) {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(rate), maps.Clone(cost)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.produce(ctx, t, func() map[string]int { r, _ := cur(); return r }, 100)

	// Settled: every shard held, 8 each, and the minimum hold of the first
	// takes passed. With equal costs the published utilizations move
	// nothing.
	f.waitCounts(t, time.Minute, map[string]int{"m0": 8, "m1": 8, "m2": 8, "m3": 8})
	time.Sleep(3 * time.Minute)
	settled := time.Now()
	mu.Lock()
	var costly []string
	f.mu.Lock()
	for _, id := range f.ids {
		if f.holder[id] == "m0" {
			cost[id] = 4
			costly = append(costly, id)
		}
	}
	f.mu.Unlock()
	mu.Unlock()
	if total, _ := f.movesSince(settled.Add(-2 * time.Minute)); total != 0 {
		t.Fatalf("equal costs: %d moves in the 2 minutes before the costs changed, want none", total)
	}
	r, c := cur()
	w, ratio := f.utilizations(r, c, ids)
	t.Logf("costs ×4 on %d shards of m0: work %v, busiest %.2f× the mean", len(costly), w, ratio)

	if !published {
		time.Sleep(10 * time.Minute)
		if total, _ := f.movesSince(settled); total != 0 {
			t.Fatalf("without utilization: %d moves after the costs changed, want none (the plan by throughput alone)", total)
		}
		if _, after := f.utilizations(r, c, ids); after != ratio {
			t.Fatalf("without utilization: busiest at %.2f× the mean, was %.2f×", after, ratio)
		}
	} else {
		var balanced time.Time
		for {
			w, ratio := f.utilizations(r, c, ids)
			if ratio <= 1.2 && f.heldAll() {
				balanced = time.Now()
				t.Logf("balanced %v after the change: work %v, busiest %.2f× the mean, counts %v", balanced.Sub(settled), w, ratio, f.counts())
				break
			}
			if time.Since(settled) > 6*time.Minute {
				t.Fatalf("not balanced 6 minutes after the change: work %v, busiest %.2f× the mean, counts %v", w, ratio, f.counts())
			}
			time.Sleep(time.Second)
		}
		total, most := f.movesSince(settled)
		t.Logf("%d moves (at most %d of one shard) until balanced", total, most)
		if total > 8 {
			t.Errorf("%d moves until balanced, want at most 8", total)
		}
		worst := 0.0
		for end := time.Now().Add(10 * time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
			_, ratio := f.utilizations(r, c, ids)
			worst = max(worst, ratio)
		}
		after, _ := f.movesSince(balanced)
		t.Logf("the 10 minutes after: %d moves, busiest at most %.2f× the mean", after, worst)
		if after != 0 || worst > 1.2 {
			t.Errorf("the 10 minutes after balanced: %d moves, busiest at most %.2f× the mean; want none and 1.2", after, worst)
		}
	}
	if v := f.violations(); len(v) > 0 {
		t.Fatalf("shards read by two members at once:\n%v", v)
	}
	cancel()
}

// heldAll reports whether every shard is held.
func (f *loadFleet) heldAll() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.holder) == len(f.ids)
}
