package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/roster"
	"github.com/kinesislease/kinesislease/internal/testkit/sim"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
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
// conflicts: a joiner reads only its owner's home rows (placement.go) and
// joins the fullest with room, picking at random among twice as many after
// each conflict, instead of every joiner reading every row and aiming at
// the lowest row with room. It logs the Join calls, the row-full
// conflicts and the membership rows each joiner read before its entry was
// written. Measured (this test, 10 ms a store call):
//
//	joiners  build                   Join calls  row-full  rows read before joining (most by one)  rows joined
//	300      every row, lowest room  786         486       4,529 (31)                               43
//	300      home rows               371         71        3,233 (18)                               47
//	1,000    every row, lowest room  5,333       4,333     41,931 (93)                              148
//	1,000    home rows               1,578       578       16,609 (25)                              158
//
// (KINESISLEASE_JOINERS=1000 go test ./internal/engine -run
// TestFleetJoinsSpread -v; the first build is the parent of the commit
// that brought home rows.)
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
		reads := make([]*joinReads, n)
		for i := range n {
			reads[i] = &joinReads{memberStore: store}
			cfg := groupConfig(fmt.Sprintf("member-%03d", i), reads[i], k, stream.Name())
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
			if _, ok := driver.IncarnationRow(g.Incarnation()); ok {
				joined++
			}
		}
		worst := 0
		for _, c := range counter.perRow {
			worst = max(worst, c)
		}
		// The membership rows each joiner read before its entry was
		// written: every row listed at each pass, before joins read only
		// their owner's home rows.
		var before, most int
		rows := map[int]bool{}
		for _, r := range reads {
			r.mu.Lock()
			n := 0
			for _, p := range r.passes {
				n += len(p)
			}
			before, most = before+n, max(most, n)
			if r.done {
				rows[r.wrote] = true
			}
			r.mu.Unlock()
		}
		t.Logf("%d members started within 1s: %d joined, %d Join calls, %d row-full conflicts, at most %d on one row; %d membership rows read before joining (at most %d by one joiner), %d rows joined",
			n, joined, counter.calls.Load(), counter.full.Load(), worst, before, most, len(rows))
		if joined != n {
			t.Errorf("%d of %d members joined within 10s", joined, n)
		}
		if f := counter.full.Load(); f > int64(2*n) {
			t.Errorf("%d row-full conflicts for %d joiners, want at most two a joiner on average", f, n)
		}
	})
}

// memberStore is a Store with membership rows.
type memberStore interface {
	leases.Store
	leases.Membership
}

// joinReads counts a store's membership reads until the first entry this
// store writes (a Join or a ReplaceMember that lands), pass by pass: a
// pass starts with a read of the header.
type joinReads struct {
	memberStore
	mu     sync.Mutex
	done   bool
	passes [][]int // the rows each pass read
	wrote  int     // the row of the first entry written
}

func (s *joinReads) Header(ctx context.Context) (leases.MemberHeader, error) {
	s.mu.Lock()
	if !s.done {
		s.passes = append(s.passes, nil)
	}
	s.mu.Unlock()
	return s.memberStore.Header(ctx)
}

func (s *joinReads) Members(ctx context.Context, row int) ([]leases.Member, error) {
	s.mu.Lock()
	if !s.done && len(s.passes) > 0 {
		s.passes[len(s.passes)-1] = append(s.passes[len(s.passes)-1], row)
	}
	s.mu.Unlock()
	return s.memberStore.Members(ctx, row)
}

func (s *joinReads) wrote1(row int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && !s.done {
		s.done, s.wrote = true, row
	}
}

func (s *joinReads) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	ms, err := s.memberStore.Join(ctx, row, m)
	s.wrote1(row, err)
	return ms, err
}

func (s *joinReads) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	ms, err := s.memberStore.ReplaceMember(ctx, row, seen, next)
	if next.Owner != "" {
		s.wrote1(row, err)
	}
	return ms, err
}

// TestJoinReadsHomeRows: on a membership of 100 rows (800 members), a
// joiner reads only its owner's home rows (a few per band of rows, from a
// hash of its owner id; placement.go), not every row: before, every join
// read every row the header lists, N/8 reads a joiner and N²/8 for a fleet
// started together (a fleet of 5,000: 625 reads each, 3.1 million in
// all). A process restarted with its fixed owner id still finds its
// predecessor's entry (standing still: a SIGKILL) in one of those rows and
// takes it over in place; a new owner joins one of its home rows.
func TestJoinReadsHomeRows(t *testing.T) {
	t.Parallel()
	const rows = 100 // bands 0 to 7
	for _, restarted := range []bool{false, true} {
		t.Run(fmt.Sprintf("restarted=%v", restarted), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				k := sim.NewKinesis()
				stream := newSimStream(t, k, "home", 1)
				inner := memory.New()
				const owner = "restarted"
				// Its predecessor's entry, in a home row of band 6 (rows 32
				// to 63), with room for nobody else.
				oldRow := roster.HomeRows(owner, 6)[1]
				for r := range rows {
					n := driver.RowCapacity
					if r == oldRow {
						n--
						if restarted {
							old := leases.Member{Owner: owner, Incarnation: driver.NewIncarnation(r, "old"), Heartbeat: 40}
							if _, err := inner.Join(ctx, r, old); err != nil {
								t.Fatal(err)
							}
						}
					}
					for i := range n {
						m := leases.Member{Owner: fmt.Sprintf("member-%03d-%d", r, i), Incarnation: driver.NewIncarnation(r, fmt.Sprint(i)), Heartbeat: 1}
						if _, err := inner.Join(ctx, r, m); err != nil {
							t.Fatal(err)
						}
					}
					if err := inner.BumpRow(ctx, r); err != nil {
						t.Fatal(err)
					}
				}
				store := &joinReads{memberStore: inner}
				g, err := engine.NewGroup(groupConfig(owner, store, k, stream.Name()))
				if err != nil {
					t.Fatal(err)
				}
				runCtx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- g.Run(runCtx) }()
				time.Sleep(2 * time.Second)
				cancel()
				if err := <-done; err != nil {
					t.Fatalf("Run: %v", err)
				}
				store.mu.Lock()
				defer store.mu.Unlock()
				if !store.done {
					t.Fatalf("no entry written in 2s")
				}
				most := 0
				for _, p := range store.passes {
					most = max(most, len(p))
				}
				t.Logf("%d rows listed: %d passes over the membership before the entry was written, at most %d rows read in one; written in row %d",
					rows, len(store.passes), most, store.wrote)
				if most > rows/3 {
					t.Errorf("a pass of the join read %d of the %d rows listed; want only the owner's home rows", most, rows)
				}
				home := false
				for b := 0; b <= 8; b++ {
					home = home || slices.Contains(roster.HomeRows(owner, b), store.wrote)
				}
				switch {
				case restarted && store.wrote != oldRow:
					t.Errorf("the entry was written in row %d, not over its predecessor's in row %d", store.wrote, oldRow)
				case !home:
					t.Errorf("the entry was written in row %d, not one of the owner's home rows", store.wrote)
				}
			})
		})
	}
}

// rosterLog records a store's header bumps and entry removals, in order.
type rosterLog struct {
	memberStore
	mu  sync.Mutex
	ops []string // "bump <row>", "remove <row> <owner>"
}

func (s *rosterLog) BumpRow(ctx context.Context, row int) error {
	err := s.memberStore.BumpRow(ctx, row)
	if err == nil {
		s.mu.Lock()
		s.ops = append(s.ops, fmt.Sprintf("bump %d", row))
		s.mu.Unlock()
	}
	return err
}

func (s *rosterLog) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	ms, err := s.memberStore.ReplaceMember(ctx, row, seen, next)
	if err == nil && next.Owner == "" {
		s.mu.Lock()
		s.ops = append(s.ops, fmt.Sprintf("remove %d %s", row, seen.Owner))
		s.mu.Unlock()
	}
	return ms, err
}

// TestRemovalOfLeavingEntryNotAnnounced: a dead member's entry is marked
// leaving (a roster change every member needs: its leases are free, the
// plan leaves it out), announced by a header bump; three timeouts later it
// is removed, and that removal is not announced: no member's plan changes,
// so no member but those that time the row needs to read it again (before,
// the removal bumped the row too: every member of the fleet read it, a
// read per member per dead member).
func TestRemovalOfLeavingEntryNotAnnounced(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		k := sim.NewKinesis()
		stream := newSimStream(t, k, "removal", 2)
		inner := memory.New()
		dead := leases.Member{Owner: "z-dead", Incarnation: driver.NewIncarnation(0, "dead"), Heartbeat: 1}
		if _, err := inner.Join(ctx, 0, dead); err != nil {
			t.Fatal(err)
		}
		if err := inner.BumpRow(ctx, 0); err != nil {
			t.Fatal(err)
		}
		store := &rosterLog{memberStore: inner}
		runCtx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, owner := range []string{"a", "b"} {
			g, err := engine.NewGroup(groupConfig(owner, store, k, stream.Name()))
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				if err := g.Run(runCtx); err != nil {
					t.Error(err)
				}
			})
		}
		time.Sleep(3 * time.Second) // the timeout is 200ms: dead, marked, removed
		store.mu.Lock()
		ops := slices.Clone(store.ops)
		store.mu.Unlock()
		cancel()
		wg.Wait()
		removed := slices.Index(ops, "remove 0 z-dead")
		if removed < 0 {
			t.Fatalf("the dead member's entry was never removed: %v", ops)
		}
		if i := slices.Index(ops[removed:], "bump 0"); i >= 0 {
			t.Errorf("the removal of an entry marked leaving was announced (ops %v)", ops)
		}
		if slices.Index(ops[:removed], "bump 0") < 0 {
			t.Errorf("no bump of row 0 before the removal (the join's and the death mark's): %v", ops)
		}
	})
}
