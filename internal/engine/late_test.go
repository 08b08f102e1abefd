package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// lateTakes is a memory store whose TakeAs calls, while hold is set, get no
// answer (a timeout) and reach the store only when the test lands them:
// DynamoDB applying a request after its caller gave up.
type lateTakes struct {
	*memory.Store
	mu   sync.Mutex
	hold bool
	held []func() (leases.Lease, error)
}

var errNoAnswer = errors.New("i/o timeout (no answer)")

func (s *lateTakes) TakeAs(ctx context.Context, l leases.Lease, owner, inc string) (leases.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold {
		s.held = append(s.held, func() (leases.Lease, error) { return s.Store.TakeAs(context.Background(), l, owner, inc) })
		return leases.Lease{}, errNoAnswer
	}
	return s.Store.TakeAs(ctx, l, owner, inc)
}

// land applies the held takes, in order, and returns their errors.
func (s *lateTakes) land() []error {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	var errs []error
	for _, do := range held {
		_, err := do()
		errs = append(errs, err)
	}
	return errs
}

// TestLateTakeAfterDisproof: a take whose answer was lost is presumed ours
// (an orphan); the plan gives the row to another member, and the read
// before the release shows the take has not landed. Then the take lands,
// late. Before, the orphan was forgotten at that read, the late take
// landed and the row named this live incarnation with nobody reading it,
// for as long as it lived (one seed read 0 of 366 records in 11 minutes).
// Now the row is taken and released at that read, conditional on the
// version the late take is conditional on too: the late take fails.
func TestLateTakeAfterDisproof(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &lateTakes{Store: memory.New()}
		g, st, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		l, err := store.Create(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		store.hold = true
		g.take(ctx, st, u, l)
		store.hold = false
		o, orphaned := g.lost.Lookup(u)
		if !orphaned || !o.Presumed {
			t.Fatalf("a take with no answer must leave a presumed orphan; orphans: %v", g.lost.Orphans())
		}
		g.releaseOrphan(ctx, u, o) // the plan gives it to another member
		for _, err := range store.land() {
			if !errors.Is(err, leases.ErrConflict) {
				t.Errorf("the late take, after the row was taken and released: %v, want a conflict", err)
			}
		}
		cur, err := store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		g.mu.Lock()
		_, orphaned = g.lost.Lookup(u)
		_, reading := g.workers[u]
		g.mu.Unlock()
		if cur.Owner == "a" && !orphaned && !reading {
			t.Fatalf("the row names this instance (%s/%s) and nobody reads it or holds it as an orphan", cur.Owner, cur.Incarnation)
		}
		if cur.Held() {
			t.Fatalf("row %+v: want it free for the plan's member", cur)
		}
	})
}

// TestUncertainWriteReadAgain: a row that an unanswered write of this
// instance may name is read again lateBound timeouts after the write: one
// that names this process while nothing of it reads the row becomes an
// orphan (taken again or released by the next round), not a row held for
// ever by an incarnation that never reads it.
func TestUncertainWriteReadAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, _, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		heldRow(t, store, key, "a", "0.CUR")
		g.lost.SetUncertain(u, mono()+int64(lateBound*g.cfg.Timeout))
		g.recheckUncertain(ctx)
		if _, ok := g.lost.Lookup(u); ok {
			t.Fatal("read again before lateBound")
		}
		time.Sleep(lateBound*g.cfg.Timeout + time.Millisecond)
		g.recheckUncertain(ctx)
		o, ok := g.lost.Lookup(u)
		_, still := g.lost.UncertainAt(u)
		if !ok || o.Inc != "0.CUR" {
			t.Fatalf("a row naming this instance that nothing reads: orphan %v (%v), want one of 0.CUR", o, ok)
		}
		if still {
			t.Fatal("the row is still to be read again after it was")
		}
	})
}

// TestInvalidateKeepsTheCheckpoint: a take whose answer was lost is
// disproved by a read (the row still at the version it was conditional
// on: recreated free, with no checkpoint, by a member that knew none) and
// the plan gives the row to another member: this instance takes it and
// releases it with the checkpoint it knows, never with none (the plan's
// member would read it from the start position).
func TestInvalidateKeepsTheCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, _, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		row, err := store.Create(ctx, key) // recreated free, no checkpoint
		if err != nil {
			t.Fatal(err)
		}
		known := leases.Checkpoint{Sequence: "4900"}
		mine := row
		mine.Owner, mine.Incarnation, mine.Counter = "a", "0.CUR", row.Counter+1
		o := lostrow.Orphan{Inc: "0.CUR", Known: mine, Presumed: true, Knew: known, Vanished: true}
		g.lost.Put(u, o)
		g.releaseOrphan(ctx, u, o)
		cur, err := store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Held() || cur.Checkpoint != known {
			t.Fatalf("row after the disproved take was invalidated: %+v, want it free at %v", cur, known)
		}
	})
}

// TestInvalidateUnansweredKeepsTheCheckpoint: a take of this instance with
// the checkpoint it knew (315), its answer lost, is disproved by a read of
// the row, recreated since from an older copy (257); the take that
// invalidates it loses its answer too. The orphan it leaves still knows 315:
// should the first take land late (315 on the row), the release never
// writes 257 over it (seed 98123718: a checkpoint moved back).
func TestInvalidateUnansweredKeepsTheCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &unanswered{Store: memory.New()}
		g, st, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		row, err := store.CreateAs(ctx, key, "", "", leases.Checkpoint{Sequence: "257"}, "") // recovered from an older copy
		if err != nil {
			t.Fatal(err)
		}
		known := leases.Checkpoint{Sequence: "315"}
		mine := row
		mine.Owner, mine.Incarnation, mine.Counter, mine.Checkpoint = "a", "0.CUR", row.Counter+1, known
		o := lostrow.Orphan{Inc: "0.CUR", Known: mine, Presumed: true, Vanished: true}
		g.lost.Put(u, o)
		store.take.Store(true)
		g.invalidate(ctx, st, u, o, row)
		got, ok := g.lost.Lookup(u)
		if !ok || got.Best() != known {
			t.Fatalf("after the invalidating take's answer was lost: orphan %+v (%v); want it to know %v", got, ok, known)
		}
	})
}
