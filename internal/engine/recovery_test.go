package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestRecoveredRowTakenOnlyAfterTheWait: a member that finds a row it saw
// vanished recreates it at once, free, recovered and from the checkpoint it
// saw; the plan gives it the shard, yet it takes the row only once the
// recovery wait has passed since it first read the recovered row: the row's
// last holder may deliver until then.
func TestRecoveredRowTakenOnlyAfterTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, st, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		held := heldRow(t, store, key, "b", "0.B", "300")
		if err := g.readRow(ctx, st, u.Shard); err != nil {
			t.Fatal(err)
		}
		if !store.Delete(key) {
			t.Fatal("no row to delete")
		}

		acquireRound(ctx, g, u) // finds it missing: recreates it, free
		got, err := store.Get(ctx, key)
		if err != nil {
			t.Fatalf("the row was not recreated at once: %v", err)
		}
		if got.Held() || got.Recovered == "" || got.Checkpoint != held.Checkpoint {
			t.Fatalf("recreated row %+v: want it free, recovered, at the checkpoint this instance saw (%v)", got, held.Checkpoint)
		}
		start := time.Now()
		wait := g.recoveryWait(st)
		for time.Since(start) < wait-100*time.Millisecond {
			g.m.Fence().Store(mono() + int64(time.Minute))
			acquireRound(ctx, g, u)
			if g.holds(u) {
				t.Fatalf("took the recovered row %v after its recreation, before the recovery wait (%v)", time.Since(start), wait)
			}
			time.Sleep(250 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		g.m.Fence().Store(mono() + int64(time.Minute))
		acquireRound(ctx, g, u)
		if !g.holds(u) {
			t.Fatalf("did not take the recovered row %v after its recreation (the wait is %v)", time.Since(start), wait)
		}
	})
}

// TestHolderTakesRecoveredRowBackAtOnce: the row of a shard this instance
// holds vanishes, and another member recreates it first, free and
// recovered, from an older checkpoint. The holder, at its next re-read,
// takes it back at once (it is the one that may still deliver; nobody else
// may before the recovery wait), writing its own checkpoint in the take; its
// next write clears the recovery.
func TestHolderTakesRecoveredRowBackAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, _, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		mine := leases.Checkpoint{Sequence: "300"}
		takeFreedRow(t, g, store, u, key, mine.Sequence)
		if !store.Delete(key) {
			t.Fatal("no row to delete")
		}
		older := leases.Checkpoint{Sequence: "100"}
		if _, err := store.CreateAs(ctx, key, "", "", older, ""); err != nil {
			t.Fatal(err)
		}

		g.mu.Lock()
		w := g.workers[u]
		g.mu.Unlock()
		g.recheck(ctx, u, w)
		got, err := store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got.Owner != "a" || got.Incarnation != "0.CUR" || got.Checkpoint != mine {
			t.Fatalf("after the holder re-read its row, recreated by another: %+v; want it held by a/0.CUR at its own checkpoint %v, written by the take", got, mine)
		}
		if w.Lease().Current().Recovered != "" {
			t.Fatalf("the holder's lease %+v is still recovered: its next write would keep the mark", w.Lease().Current())
		}
		if w.Lease().IsLost() || w.Lease().Vanished() {
			t.Fatalf("the holder's lease: lost %v, vanished %v; want it delivering again", w.Lease().IsLost(), w.Lease().Vanished())
		}
	})
}

// TestKnowerWritesItsCheckpointOnRecoveredRow: a member that knows a row's
// checkpoint (it read the row lately) finds, at a vanished report, the row
// recreated free by a member that knew none (no checkpoint). It writes the
// checkpoint it knows on the row, keeping it recovered and free, so that
// whoever the plan gives the shard to resumes from there after the wait,
// not from the start position.
func TestKnowerWritesItsCheckpointOnRecoveredRow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, st, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		cp := leases.Checkpoint{Sequence: "84"}
		heldRow(t, store, key, "b", "0.B", cp.Sequence)
		if err := g.readRow(ctx, st, u.Shard); err != nil {
			t.Fatal(err)
		}
		if !store.Delete(key) {
			t.Fatal("no row to delete")
		}
		rec, err := store.CreateAs(ctx, key, "", "", leases.Checkpoint{}, "") // by a member that knew none
		if err != nil {
			t.Fatal(err)
		}

		if !g.recheckReleased(ctx) {
			t.Fatal("recheckReleased: a read failed")
		}
		o, ok := g.lost.Lookup(u)
		if !ok {
			t.Fatal("the recovered row with no checkpoint is no orphan of the member that knows one")
		}
		g.releaseOrphan(ctx, u, o) // the plan gives it to another member
		got, err := store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got.Held() || got.Checkpoint != cp || got.Recovered != rec.Recovered {
			t.Fatalf("after the knower's repair: %+v; want it free, at %v, still recovered (%q)", got, cp, rec.Recovered)
		}
	})
}

// releaseFailsFor is a store whose Release by owner fails with no answer
// while fail is set.
type releaseFailsFor struct {
	*memory.Store
	owner string
	fail  atomic.Bool
}

func (s *releaseFailsFor) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if s.fail.Load() && l.Owner == s.owner {
		return leases.Lease{}, context.DeadlineExceeded
	}
	return s.Store.Release(ctx, l, cp)
}

// TestRepairedRowRetakenOnlyAfterTheWait: a member that writes the
// checkpoint it knows on a recovered row (a take, then a release) and
// whose release fails holds the row as an orphan of its own; if the plan
// then gives it the shard, it still waits the recovery wait before
// reading: it never waited, and the row's last holder may still deliver.
// (Found by a second read: the orphan named this instance, and orphans
// of its own were retaken at once.)
func TestRepairedRowRetakenOnlyAfterTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memory.New()
		store := &releaseFailsFor{Store: mem, owner: "a"}
		g, st, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		heldRow(t, mem, key, "b", "0.B", "84")
		if err := g.readRow(ctx, st, u.Shard); err != nil {
			t.Fatal(err)
		}
		mem.Delete(key)
		if _, err := mem.CreateAs(ctx, key, "", "", leases.Checkpoint{}, ""); err != nil {
			t.Fatal(err)
		}
		if !g.recheckReleased(ctx) {
			t.Fatal("recheckReleased: a read failed")
		}
		o := g.lost.Orphan(u)
		store.fail.Store(true)
		g.releaseOrphan(ctx, u, o) // the repair: its take lands, its release fails
		store.fail.Store(false)
		o, ok := g.lost.Lookup(u)
		if !ok {
			t.Fatal("no orphan after the repair's release failed")
		}
		g.retake(ctx, u, o) // the plan gives this member the shard now
		if g.holds(u) {
			t.Fatalf("reads the repaired row at once; the recovery wait is %v", g.recoveryWait(st))
		}
		time.Sleep(g.recoveryWait(st) + time.Second)
		g.m.Fence().Store(mono() + int64(time.Minute))
		o = g.lost.Orphan(u)
		g.retake(ctx, u, o)
		if !g.holds(u) {
			t.Fatal("did not take the repaired row after the recovery wait")
		}
	})
}

// TestRecoveredTrimHorizonKeepsWhatThisInstanceKnew: reading a row that a
// member that knew no checkpoint recovered at TRIM_HORIZON does not
// replace the checkpoint this instance knew of it: the plan's member takes
// it, after the wait, from that checkpoint, not from the oldest record.
func TestRecoveredTrimHorizonKeepsWhatThisInstanceKnew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, st, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		heldRow(t, store, key, "b", "0.B", "84")
		if err := g.readRow(ctx, st, u.Shard); err != nil {
			t.Fatal(err)
		}
		store.Delete(key)
		if _, err := store.CreateAs(ctx, key, "", "", leases.Checkpoint{Sequence: leases.RewindTrimHorizon}, ""); err != nil {
			t.Fatal(err)
		}
		acquireRound(ctx, g, u) // reads it: recovered, not yet takeable
		time.Sleep(g.recoveryWait(st) + time.Second)
		g.m.Fence().Store(mono() + int64(time.Minute))
		acquireRound(ctx, g, u)
		if !g.holds(u) {
			t.Fatal("the recovered row was not taken after the wait")
		}
		got, err := store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got.Checkpoint.Sequence != "84" {
			t.Errorf("taken at %v; this instance knew 84", got.Checkpoint)
		}
	})
}

// rewindOnGet is a store that has an operator rewind the row of key to
// to, once armed, just before the next Get of it answers: between the
// holder's read of the rewind record and its read of the row.
type rewindOnGet struct {
	*memory.Store
	key leases.Key
	to  leases.Checkpoint
	arm atomic.Bool
}

func (s *rewindOnGet) Get(ctx context.Context, key leases.Key) (leases.Lease, error) {
	if key == s.key && s.arm.CompareAndSwap(true, false) {
		if l, err := s.Store.Get(ctx, key); err == nil {
			if _, err := s.Store.Rewind(ctx, l, s.to); err != nil {
				return leases.Lease{}, err
			}
		}
	}
	return s.Store.Get(ctx, key)
}

// TestHolderTakeBackKeepsAnOperatorsRewind: the holder's row vanishes,
// another member recovers it, and an operator rewinds the free recovered
// row between the holder's read of the rewind record and its read of the
// row. The holder takes it at the rewind's position and reads again from
// there: its own, later checkpoint would skip the records the operator
// asked to replay.
func TestHolderTakeBackKeepsAnOperatorsRewind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memory.New()
		rewindTo := leases.Checkpoint{Sequence: "50"}
		store := &rewindOnGet{Store: mem, key: leases.Key{Stream: "s", Shard: "shardId-000000000000"}, to: rewindTo}
		g, _, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		takeFreedRow(t, g, mem, u, key, "300")
		mem.Delete(key)
		if _, err := mem.CreateAs(ctx, key, "", "", leases.Checkpoint{Sequence: "100"}, ""); err != nil {
			t.Fatal(err)
		}
		g.mu.Lock()
		w := g.workers[u]
		g.mu.Unlock()
		w.Lease().SetVanished(true)
		store.arm.Store(true)
		g.recreate(ctx, u, w)
		got, err := mem.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got.Owner != "a" || got.Checkpoint != rewindTo {
			t.Fatalf("after the holder took its recovered row back: %+v; want it held by a at the operator's rewind %v", got, rewindTo)
		}
	})
}

// TestRecoveryWaitCoversTheFleet: the recovery wait is the longest proof
// bound of this instance and of the members whose entries it read, so that
// an instance with a shorter checkpoint interval than a holder's (a rolling
// change of settings) never reads a recovered row while that holder may
// still deliver.
func TestRecoveryWaitCoversTheFleet(t *testing.T) {
	g, st, _, _ := oneShardGroup(t, memory.New())
	own := g.recoveryWait(st)
	if want := g.proof(st) + g.cfg.FenceMargin; own != want {
		t.Fatalf("recoveryWait alone = %v, want the proof bound and the margin, %v", own, want)
	}
	long := g.proof(st) + 20*time.Second
	g.m.Observe(0, []leases.Member{{Owner: "b", Incarnation: "0.B", Heartbeat: 1, Proof: long}}, mono(), mono())
	if got, want := g.recoveryWait(st), long+g.cfg.FenceMargin; got != want {
		t.Fatalf("recoveryWait after reading an entry with a %v proof bound = %v, want %v", long, got, want)
	}
	if p := g.m.Proof(); p != g.proof(st) {
		t.Fatalf("this instance publishes a proof bound of %v, want its stream's %v", p, g.proof(st))
	}
}

// takeFreedRow makes the row of key one another member held and released
// at checkpoint seq, and has g take it: g holds u, its worker running.
func takeFreedRow(t *testing.T, g *Group, store *memory.Store, u unit, key leases.Key, seq string) {
	t.Helper()
	l := heldRow(t, store, key, "x", "0.X", seq)
	if _, err := store.Release(context.Background(), l, leases.Checkpoint{}); err != nil {
		t.Fatal(err)
	}
	g.acquire(context.Background(), u)
	if !g.holds(u) {
		t.Fatal("the free row was not taken")
	}
}

// unanswered is a memory store whose ReportVanished and TakeAs fail with
// no answer, not applied, while report and take are set.
type unanswered struct {
	*memory.Store
	report, take atomic.Bool
}

func (s *unanswered) ReportVanished(ctx context.Context) error {
	if s.report.Load() {
		return context.DeadlineExceeded
	}
	return s.Store.ReportVanished(ctx)
}

func (s *unanswered) TakeAs(ctx context.Context, l leases.Lease, owner, inc string) (leases.Lease, error) {
	if s.take.Load() {
		return leases.Lease{}, context.DeadlineExceeded
	}
	return s.Store.TakeAs(ctx, l, owner, inc)
}

// TestBlindRecoveryReportedAgain: a member that recovers a vanished row
// knowing no checkpoint of it (it never saw the row: the start position)
// reports the row again once it is recreated, and counts the recovery wait
// from that report, so that a member that knows where the shard was read to
// re-reads the row on the report and writes its checkpoint on it first
// (TestKnowerWritesItsCheckpointOnRecoveredRow). The report made when the
// row was first found missing does not cover it: a knower may have recovered
// the row on that one, and the row vanished again (seed 96101881). While the
// report fails, the row is not taken, however long it waits.
func TestBlindRecoveryReportedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &unanswered{Store: memory.New()}
		g, st, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		vanished := func() int64 {
			h, err := store.Header(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return h.Vanished
		}

		store.report.Store(true)
		if !g.recover(ctx, st, u, leases.Lease{Key: key}, leases.Checkpoint{}, false) {
			t.Fatal("the row was not recreated")
		}
		if got, err := store.Get(ctx, key); err != nil || !got.Checkpoint.IsZero() || got.Recovered == "" {
			t.Fatalf("recreated row %+v (%v): want it recovered at the start position", got, err)
		}
		wait := g.recoveryWait(st)
		for start := time.Now(); time.Since(start) < 2*wait; time.Sleep(250 * time.Millisecond) {
			g.m.Fence().Store(mono() + int64(time.Minute))
			acquireRound(ctx, g, u)
			if g.holds(u) {
				t.Fatalf("took the row it recovered from the start position %v after, with no report since its recreation", time.Since(start))
			}
		}

		store.report.Store(false)
		before := vanished()
		start := time.Now()
		acquireRound(ctx, g, u) // reports it, at last
		if vanished() != before+1 {
			t.Fatalf("vanished reports %d, want %d: the recovery from the start position was not reported once the store answered", vanished(), before+1)
		}
		for time.Since(start) < wait-100*time.Millisecond {
			g.m.Fence().Store(mono() + int64(time.Minute))
			acquireRound(ctx, g, u)
			if g.holds(u) {
				t.Fatalf("took the row %v after the report, before the recovery wait (%v)", time.Since(start), wait)
			}
			time.Sleep(250 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		g.m.Fence().Store(mono() + int64(time.Minute))
		acquireRound(ctx, g, u)
		if !g.holds(u) {
			t.Fatalf("did not take the row %v after the report (the wait is %v)", time.Since(start), wait)
		}
		if vanished() != before+1 {
			t.Fatalf("vanished reports %d, want %d: reported more than once", vanished(), before+1)
		}
	})
}

// TestUncertainRowReadIsKnown: the read of a row after an unanswered write
// of this instance (recheckUncertain) that finds it someone else's keeps
// its checkpoint as known, as any read of a row does (acquire): should the
// row vanish and come back from the start position by a member that never
// knew it, this instance writes that checkpoint on it (seed 94016513: a
// member that had held the row, its reads since not kept, recovered it at
// TRIM_HORIZON).
func TestUncertainRowReadIsKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, _, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		held := heldRow(t, store, key, "b", "0.B", "179")
		g.lost.SetUncertain(u, mono()-1)
		g.recheckUncertain(ctx)
		r, ok := g.lost.Released(u)
		if !ok || r.Lease.Checkpoint != held.Checkpoint {
			t.Fatalf("after the read of the row held by another at %v: known %+v (%v); want its checkpoint kept", held.Checkpoint, r.Lease, ok)
		}
	})
}

// getHook is a memory store that runs hook once, after a Get.
type getHook struct {
	*memory.Store
	hook func()
}

func (s *getHook) Get(ctx context.Context, key leases.Key) (leases.Lease, error) {
	l, err := s.Store.Get(ctx, key)
	if h := s.hook; h != nil {
		s.hook = nil
		h()
	}
	return l, err
}

// TestFreshRowReadFromAnotherTableNotTaken: a member reads a free row with
// no checkpoint, and the table is recreated just after the read (its entry
// gone with it, not yet noticed): the row may have been created in the new
// table while its holder in the old one still delivers, so it is not taken
// (sameTable). In the table it is still in, the same row is taken (seed
// 98129615).
func TestFreshRowReadFromAnotherTableNotTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &getHook{Store: memory.New()}
		g, _, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		if _, err := store.Create(ctx, key); err != nil {
			t.Fatal(err)
		}
		store.hook = func() { // the table recreated: the entry is gone
			ms, err := store.Members(ctx, 0)
			if err != nil || len(ms) != 1 {
				t.Fatalf("own row: %v %v", ms, err)
			}
			if _, err := store.ReplaceMember(ctx, 0, ms[0], leases.Member{}); err != nil {
				t.Fatal(err)
			}
		}
		acquireRound(ctx, g, u)
		if g.holds(u) {
			t.Fatal("took a row with no checkpoint read just before its table was recreated")
		}
		if _, err := store.Join(ctx, 0, leases.Member{Owner: g.cfg.Owner, Incarnation: "0.CUR", Heartbeat: 2}); err != nil { // as if never gone
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // the next round's read, after the first check
		acquireRound(ctx, g, u)
		if !g.holds(u) {
			t.Fatal("did not take a free row with no checkpoint in the table its entry is in")
		}
	})
}

// TestOutdatedRecoveryKeepsWhatThisInstanceKnew: a member that knows a
// row's checkpoint reads the row recovered from an older copy (at
// TRIM_HORIZON, with the rewind the copy here applied and read on from):
// what it knew stands, and a take of the row by it writes that checkpoint,
// never reading from TRIM_HORIZON (seed 98328216).
func TestOutdatedRecoveryKeepsWhatThisInstanceKnew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, st, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		rw := driver.NewRewindID(time.Now())
		known := leases.Checkpoint{Sequence: "315"}
		g.lost.NoteReleased(u, leases.Lease{Key: key, Counter: 9, Checkpoint: known, Rewind: rw})
		rec, err := store.CreateAs(ctx, key, "", "", leases.Checkpoint{Sequence: leases.RewindTrimHorizon}, rw)
		if err != nil {
			t.Fatal(err)
		}
		g.lost.NoteReleased(u, rec)
		r, _ := g.lost.Released(u)
		if r.Lease.Checkpoint != known {
			t.Fatalf("known after reading the outdated recovery: %v, want %v", r.Lease.Checkpoint, known)
		}
		g.take(ctx, st, u, rec)
		got, err := store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got.Owner != "a" || got.Checkpoint != known {
			t.Fatalf("row after the take: %+v; want it taken at %v", got, known)
		}
	})
}

// TestOrphanAdoptsARewindItReads: an orphan of this instance knows its row
// at 40; the row, recovered free by another member, is rewound by an
// operator to 26. Read again, the orphan knows 26: should the row vanish
// (the table dropped), it comes back at the rewind, never past it (seed
// 98915512).
func TestOrphanAdoptsARewindItReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, st, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		row, err := store.CreateAs(ctx, key, "", "", leases.Checkpoint{Sequence: "28"}, "")
		if err != nil {
			t.Fatal(err)
		}
		to := leases.Checkpoint{Sequence: "26"}
		if _, err := store.Rewind(ctx, row, to); err != nil {
			t.Fatal(err)
		}
		o := lostrow.Orphan{Inc: "0.OLD", Known: leases.Lease{Key: key, Owner: "a", Incarnation: "0.OLD", Counter: 7, Checkpoint: leases.Checkpoint{Sequence: "40"}}}
		g.lost.Put(u, o)
		if _, ok := g.rereadOrphan(ctx, st, u, o, false); !ok {
			t.Fatal("the orphan's row was not read")
		}
		got := g.lost.Orphan(u)
		if got.Best() != to {
			t.Fatalf("the orphan knows %v after reading the row rewound to %v", got.Best(), to)
		}
	})
}

// TestLateCreateAfterTakeWaitsTheRecovery: a row taken by another member
// is deleted, and a Create sent long before lands late and makes it again,
// free and as new, while its holder may still deliver: the row is not
// taken at once, as a new row is, but made a recovered row at
// TRIM_HORIZON (never the start position: it was read before), reported,
// and taken after the recovery wait (markFirstTake; seed 93032236). A row
// as Create made it that nobody took is taken at once.
func TestLateCreateAfterTakeWaitsTheRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, st, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		lateCreate(t, store, key)
		before, err := store.Header(ctx)
		if err != nil {
			t.Fatal(err)
		}
		acquireRound(ctx, g, u)
		if g.holds(u) {
			t.Fatal("took at once a row created again by a late Create after another member took it")
		}
		l, err := store.Get(ctx, key)
		if err != nil || l.Recovered == "" || l.Held() || l.Checkpoint.Sequence != leases.RewindTrimHorizon {
			t.Fatalf("row created again by a late Create, after the take that found it: %+v, %v; want it free, recovered, at TRIM_HORIZON", l, err)
		}
		if h, err := store.Header(ctx); err != nil || h.Vanished <= before.Vanished {
			t.Fatalf("header after the row was found created again: %+v, %v; want a vanished report (was %d)", h, err, before.Vanished)
		}
		time.Sleep(g.recoveryWait(st) - time.Millisecond)
		acquireRound(ctx, g, u)
		if g.holds(u) {
			t.Fatal("took the row created again before the recovery wait passed")
		}
		time.Sleep(time.Millisecond)
		acquireRound(ctx, g, u)
		if !g.holds(u) {
			t.Fatal("did not take the row created again once the recovery wait passed")
		}

		fresh := leases.Key{Stream: u.Stream, Shard: "shardId-000000000001"}
		v := unit{Stream: fresh.Stream, Shard: fresh.Shard}
		st.list.Order = append(st.list.Order, fresh.Shard)
		if _, err := store.Create(ctx, fresh); err != nil {
			t.Fatal(err)
		}
		acquireRound(ctx, g, v)
		if !g.holds(v) {
			t.Fatal("did not take at once a row as Create made it that nobody took")
		}
	})
}

// TestLateCreateRepairedStaysRecovered: a member that knows the checkpoint
// of a row created again by a late Create writes it on the row before
// anyone found the row taken before; the row it releases is recovered, so
// that the plan's member still waits the recovery wait before it reads.
func TestLateCreateRepairedStaysRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, st, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		k, _, _, _ := oneShardGroupOf(t, store, "k")
		arm(t, k, "0.KNOW")
		held := lateCreate(t, store, key)
		k.lost.NoteReleased(u, held) // k read it while b held it
		if !k.recheckReleased(ctx) {
			t.Fatal("recheckReleased failed")
		}
		o, ok := k.lost.Lookup(u)
		if !ok {
			t.Fatal("the knower did not take the row created again without its checkpoint for one to repair")
		}
		k.releaseOrphan(ctx, u, o)
		l, err := store.Get(ctx, key)
		if err != nil || l.Checkpoint != held.Checkpoint || l.Held() || l.Recovered == "" {
			t.Fatalf("row after the knower's repair: %+v, %v; want it free at %v and recovered", l, err, held.Checkpoint)
		}
		acquireRound(ctx, g, u)
		if g.holds(u) {
			t.Fatal("took at once the repaired row created again by a late Create")
		}
		time.Sleep(g.recoveryWait(st))
		acquireRound(ctx, g, u)
		if !g.holds(u) {
			t.Fatal("did not take the repaired row once the recovery wait passed")
		}
	})
}

// lateCreate makes the row of key as a Create applied late would after the
// row was marked taken and taken by b, its checkpoint at 179, and deleted:
// free and as new. It returns the row as b held it.
func lateCreate(t *testing.T, store *memory.Store, key leases.Key) leases.Lease {
	t.Helper()
	ctx := context.Background()
	if _, err := store.MarkTaken(ctx, key, "taken-by-b"); err != nil { // b's first take
		t.Fatal(err)
	}
	held := heldRow(t, store, key, "b", "0.B", "179")
	store.Delete(key)
	if _, err := store.Create(ctx, key); err != nil { // the late Create
		t.Fatal(err)
	}
	return held
}
