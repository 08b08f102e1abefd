package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/engine/sim"
	"github.com/kinesislease/kinesislease/internal/testutil"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// joinCounter counts the Join calls of a store and those refused because
// the row was full.
type joinCounter struct {
	*memory.Store
	calls, full atomic.Int64
	mu          sync.Mutex
	perRow      map[int]int // row-full conflicts per row
}

func (s *joinCounter) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	s.calls.Add(1)
	ms, err := s.Store.Join(ctx, row, m)
	var conflict *leases.MemberConflictError
	if errors.As(err, &conflict) && conflict.Full {
		s.full.Add(1)
		s.mu.Lock()
		s.perRow[row]++
		s.mu.Unlock()
	}
	return ms, err
}

// TestFleetJoinsSpread: 300 members (KINESISLEASE_JOINERS for another
// count) started within one second join the membership with few row-full
// conflicts: a joiner picks at random among the lowest rows with room,
// twice as many after each conflict, instead of every joiner aiming at the
// lowest row with room (300 members made 1,013 Join calls, 713 of them
// row-full conflicts, up to 50 on one row; 1,491 and 80 in this test).
func TestFleetJoinsSpread(t *testing.T) {
	t.Parallel()
	testutil.Slow(t)
	n := 300
	if v, err := strconv.Atoi(os.Getenv("KINESISLEASE_JOINERS")); err == nil && v > 0 {
		n = v
	}
	synctest.Test(t, func(t *testing.T) {
		k := sim.NewKinesis()
		stream := newSimStream(t, k, "joins", 1)
		counter := &joinCounter{Store: memory.New(), perRow: map[int]int{}}
		// 10 ms a call, as DynamoDB across a region: joins overlap.
		store := sim.NewFaultStore(counter, sim.StoreHooks{Decide: func(string, leases.Key) sim.Decision {
			return sim.Decision{Delay: 5 * time.Millisecond, ResponseDelay: 5 * time.Millisecond}
		}})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		groups := make([]*engine.Group, n)
		for i := range n {
			cfg := groupConfig(fmt.Sprintf("member-%03d", i), store, k, stream.Name())
			cfg.Heartbeat, cfg.Timeout = engine.DefaultHeartbeat, engine.DefaultTimeout
			g, err := engine.NewGroup(cfg)
			if err != nil {
				t.Fatal(err)
			}
			groups[i] = g
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Second / time.Duration(n))
				if err := g.Run(ctx); err != nil {
					t.Error(err)
				}
			})
		}
		time.Sleep(10 * time.Second)
		cancel()
		wg.Wait()
		joined := 0
		for _, g := range groups {
			if _, ok := leases.IncarnationRow(g.Incarnation()); ok {
				joined++
			}
		}
		worst := 0
		for _, c := range counter.perRow {
			worst = max(worst, c)
		}
		t.Logf("%d members started within 1s: %d joined, %d Join calls, %d row-full conflicts, at most %d on one row",
			n, joined, counter.calls.Load(), counter.full.Load(), worst)
		if joined != n {
			t.Errorf("%d of %d members joined within 10s", joined, n)
		}
		if f := counter.full.Load(); f > int64(2*n) {
			t.Errorf("%d row-full conflicts for %d joiners, want at most two a joiner on average", f, n)
		}
	})
}
