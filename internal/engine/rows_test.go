package engine

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/lease"
	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// noKinesis is a Kinesis client for Groups whose tests never read a shard.
type noKinesis struct{ kinesisx.Reader }

// TestReleasedRowKnownAtPendingRewind: a fenced holder's orphan whose
// checkpoint never landed (its answer lost) is released on a row the
// operator rewound meanwhile (a rewind pending, no checkpoint); the next
// holder applies the rewind, and the row is deleted. This instance, which
// saw the pending rewind, recreates the row at the rewind's position, not
// from its own checkpoint from before the rewind. Seed 722403: it kept the
// older note (the release's row, with no checkpoint, noted nothing) and
// recreated the row past the records the operator asked to read again.
func TestReleasedRowKnownAtPendingRewind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, _, u, key := oneShardGroup(t, store)
		mine := leases.Checkpoint{Sequence: "100"} // asked for, its answer lost
		rewindTo := leases.Checkpoint{Sequence: "50"}

		held := heldRow(t, store, key, "a", "0.OLD")
		if _, err := store.Rewind(ctx, held, rewindTo); err != nil { // the operator
			t.Fatal(err)
		}
		// The fence passed: the worker's lease is lost (noted where it read
		// to, as the Group's reap does) and the row is an orphan of 0.OLD.
		known := held
		known.Checkpoint = mine
		o := lostrow.Orphan{Inc: "0.OLD", Known: known}
		g.m.AddEarlier("0.OLD")
		g.lost.Put(u, o)
		g.lost.NoteReleased(u, known)
		g.releaseOrphan(ctx, u, o) // a conflict, a read (the rewind pending), a release
		cur, err := store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Held() || cur.RewindTo != rewindTo {
			t.Fatalf("row after the orphan's release: %+v, want it free with the rewind pending", cur)
		}
		// The next holder applies the rewind; then the row is deleted.
		next, err := store.TakeAs(ctx, cur, "b", "0.B")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.ApplyRewind(ctx, next); err != nil {
			t.Fatal(err)
		}
		if !store.Delete(key) {
			t.Fatal("no row to delete")
		}
		// This instance re-reads the rows it released lately (a vanished
		// report) and recreates it free from what it knows.
		if !g.recheckReleased(ctx) {
			t.Fatal("recheckReleased: a read failed")
		}
		for range 3 {
			o, ok := g.lost.Lookup(u)
			if !ok {
				break
			}
			readHeader(t, g) // as each round does first
			g.releaseOrphan(ctx, u, o)
			time.Sleep(time.Second)
		}
		got, err := store.Get(ctx, key)
		if err != nil {
			t.Fatalf("row not recreated: %v", err)
		}
		if got.Checkpoint != rewindTo {
			t.Errorf("row recreated at %+v, want the rewind's position %+v (not past it)", got.Checkpoint, rewindTo)
		}
	})
}

// TestTakeNeverPassesARecreatedRowsCheckpoint: a row recreated with a
// checkpoint is taken from that checkpoint, even when this instance noted
// a later one: an operator's rewind may have been applied since, by a
// holder this instance never read, and the row that carried it deleted
// and recreated from the rewound position. Seeds 1504412, 1510881 and
// 1520568: a take that carried on from its own note skipped the records
// the operator asked to read again.
func TestTakeNeverPassesARecreatedRowsCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, _, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		mine, rewindTo := leases.Checkpoint{Sequence: "300"}, leases.Checkpoint{Sequence: "100"}

		// This instance read the row at "300" (noted: it released it).
		theirs := heldRow(t, store, key, "b", "0.B", "100", "200", "300")
		g.lost.NoteReleased(u, theirs)
		// The operator rewinds to "100"; b applies it. The row is deleted
		// and b recreates it from there, then gives it up.
		theirs, err := store.Rewind(ctx, theirs, rewindTo)
		if err != nil {
			t.Fatal(err)
		}
		if _, err = store.ApplyRewind(ctx, theirs); err != nil {
			t.Fatal(err)
		}
		if !store.Delete(key) {
			t.Fatal("no row to delete")
		}
		again, err := store.CreateAs(ctx, key, "b", "0.B", rewindTo, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Release(ctx, again, leases.Checkpoint{}); err != nil {
			t.Fatal(err)
		}

		acquireRound(ctx, g, u)
		got, err := store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got.Owner != "a" || got.Checkpoint != rewindTo {
			t.Errorf("row after this instance's take: owner %q checkpoint %+v, want owner a at the row's %+v (not its own note %+v, past the rewind)",
				got.Owner, got.Checkpoint, rewindTo, mine)
		}
	})
}

// TestTakerWhoseRewindAnswerWasLostRecreatesAtOnce: a take that landed,
// then the apply of the rewind pending on the row whose answer was lost,
// leaves the row held by this incarnation with no worker. Should the row
// then vanish, it recreates it at once, free, from the rewind's position
// (seed 1015883: once both this instance and another waited, and the other
// recreated it from what it knew).
func TestTakerWhoseRewindAnswerWasLostRecreatesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &applyAnswerLost{Store: memory.New()}
		g, _, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		rewindTo := leases.Checkpoint{Sequence: "100"}

		theirs := heldRow(t, store.Store, key, "b", "0.B", "300")
		theirs, err := store.Rewind(ctx, theirs, rewindTo) // the operator
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Release(ctx, theirs, leases.Checkpoint{}); err != nil {
			t.Fatal(err)
		}

		acquireRound(ctx, g, u) // takes it; the rewind's apply lands, its answer is lost
		o, ok := g.lost.Lookup(u)
		if !ok || g.holds(u) {
			t.Fatalf("after the take whose rewind's answer was lost: orphan %v, held %v; want an orphan, no worker", ok, g.holds(u))
		}
		if !store.Delete(key) {
			t.Fatal("no row to delete")
		}
		g.retake(ctx, u, o)
		got, err := store.Get(ctx, key)
		if err != nil {
			t.Fatalf("the row's holder did not recreate it at once: %v", err)
		}
		if got.Checkpoint != rewindTo {
			t.Errorf("row recreated at %+v, want the rewind's position %+v", got.Checkpoint, rewindTo)
		}
	})
}

// applyAnswerLost is a store whose ApplyRewind lands but answers with an
// error, as a lost answer does.
type applyAnswerLost struct{ *memory.Store }

func (s *applyAnswerLost) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	if _, err := s.Store.ApplyRewind(ctx, l); err != nil {
		return leases.Lease{}, err
	}
	return leases.Lease{}, errors.New("i/o timeout (the answer lost; the write landed)")
}

// TestHolderRecreatesOnlyWithinItsFence: the holder of a row found missing
// recreates it at once, but only before its fence: a fence that passes
// while the round runs leaves the row missing (its orphan is recreated, or
// not, by the lost-row rules), never created as the incarnation the fence
// ended. Seeds 1612551 and 1616623: the round's CreateAs landed 0.3-0.6 s
// after the fence, the worker was reaped as lost, and another member took
// the row from the incarnation's leaving entry while the row's write still
// counted, in the model, as a take within that incarnation's lease.
func TestHolderRecreatesOnlyWithinItsFence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, _, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		if _, err := store.Create(ctx, key); err != nil {
			t.Fatal(err)
		}
		acquireRound(ctx, g, u)
		g.mu.Lock()
		w := g.workers[u]
		g.mu.Unlock()
		if w == nil {
			t.Fatal("the take started no worker")
		}
		if !store.Delete(key) {
			t.Fatal("no row to delete")
		}
		w.Lease().SetVanished(true)
		g.m.Fence().Store(mono() - 1) // passed; the heartbeat loop has not fenced the workers yet
		g.recreate(ctx, u, w)
		if l, err := store.Get(ctx, key); err == nil {
			t.Fatalf("row recreated after the fence passed: %+v", l)
		}
	})
}

// TestVanishedRowRecreatedAtPendingRewind: a holder that has adopted an
// operator's rewind and is stopping to apply it, whose row vanishes
// meanwhile, recreates the row at the rewind's position, and its worker
// counts the rewind applied (it reads on from there): the checkpoint never
// goes back later by an ordinary write. Seed 1606534: recreated at the
// worker's own checkpoint, then released at the rewind's position, the
// checkpoint moved backwards outside any rewind.
func TestVanishedRowRecreatedAtPendingRewind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, _, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		rewindTo := leases.Checkpoint{Sequence: "100"}
		if _, err := store.Create(ctx, key); err != nil {
			t.Fatal(err)
		}
		acquireRound(ctx, g, u)
		g.mu.Lock()
		w := g.workers[u]
		g.mu.Unlock()
		if w == nil {
			t.Fatal("the take started no worker")
		}
		held, err := store.Checkpoint(ctx, w.Lease().Current(), leases.Checkpoint{Sequence: "300"})
		if err != nil {
			t.Fatal(err)
		}
		w.Lease().Adopt(held)
		rewound, err := store.Rewind(ctx, held, rewindTo) // the operator
		if err != nil {
			t.Fatal(err)
		}
		w.Lease().Adopt(rewound) // recheck: the rewind adopted, the worker told to stop and apply it
		if !store.Delete(key) {
			t.Fatal("no row to delete")
		}
		w.Lease().SetVanished(true)
		g.recreate(ctx, u, w)
		got, err := store.Get(ctx, key)
		if err != nil {
			t.Fatalf("the holder did not recreate its row: %v", err)
		}
		if got.Checkpoint != rewindTo || !got.RewindTo.IsZero() {
			t.Errorf("row recreated as %+v, want it at the pending rewind's position %+v", got, rewindTo)
		}
		w.Rewind()
		<-w.Finished()
		if !w.Rewound() {
			t.Error("the worker did not count the rewind applied by the recreation: it would release the row instead of reading on")
		}
		if after, err := store.Get(ctx, key); err != nil || after.Checkpoint != rewindTo || after.Owner != "a" {
			t.Errorf("row after the worker stopped: %+v, %v; want it still held at %+v", after, err, rewindTo)
		}
	})
}

// TestApplyRewindNeverAssumed: a lease whose known row shows no pending
// rewind (an older answer replaced the version that carried it) still
// writes the rewind when asked to apply it; it counts it applied without a
// write only after recreating the row at the rewind's position. Seed
// 1722865: an empty target was taken for an applied rewind, the worker
// read on, and the rewind stayed pending on the row for ten minutes.
func TestApplyRewindNeverAssumed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, _, _, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		held := heldRow(t, store, key, "a", "0.CUR")
		if _, err := store.Rewind(ctx, held, leases.Checkpoint{Sequence: "100"}); err != nil { // the operator
			t.Fatal(err)
		}
		h := lease.New(lease.Config{Store: store, Lease: held, Fence: g.m.Fence(), Sent: mono(), Proof: time.Minute}) // knows the row from before the rewind
		_, applyErr := h.ApplyRewind(ctx)
		cur, err := store.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		applied := cur.RewindTo.IsZero() && cur.Checkpoint.Sequence == "100"
		if applyErr == nil && !applied {
			t.Errorf("applyRewind reported the rewind applied, but the row is %+v: still pending", cur)
		}
	})
}

// heldRow creates the row of key in store, held by owner as incarnation
// inc, with the checkpoints seqs written in turn, and returns it.
func heldRow(t *testing.T, store *memory.Store, key leases.Key, owner, inc string, seqs ...string) leases.Lease {
	t.Helper()
	ctx := context.Background()
	l, err := store.Create(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if l, err = store.TakeAs(ctx, l, owner, inc); err != nil {
		t.Fatal(err)
	}
	for _, seq := range seqs {
		if l, err = store.Checkpoint(ctx, l, leases.Checkpoint{Sequence: seq}); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// arm makes g, not running, incarnation inc with a fence a minute away, as
// if its heartbeat had just landed, so that its takes land and start
// workers; they read from a Kinesis that answers nothing, and are killed
// when the test ends.
func arm(t *testing.T, g *Group, inc string) {
	t.Cleanup(func() {
		g.mu.Lock()
		for _, w := range g.workers {
			w.Kill()
		}
		g.mu.Unlock()
		synctest.Wait()
	})
	for _, st := range g.streams {
		st.cfg.Client = silentKinesis{} // each stream's client reads its shards
	}
	// Its entry in the table, standing for an hour: the table is old
	// (TableOld, SameTable).
	if err := g.m.Arm(context.Background(), inc, mono()+int64(time.Minute), mono()-int64(time.Hour)); err != nil {
		t.Fatalf("arm: Join: %v", err)
	}
}

// silentKinesis answers no call until its context ends.
type silentKinesis struct{ kinesisx.Reader }

func (silentKinesis) GetShardIterator(ctx context.Context, _ *kinesis.GetShardIteratorInput, _ ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// oneShardGroup is a Group of owner "a" on store (heartbeat 1s, timeout
// 4s) with one stream "s", not running, and the unit and key of its shard
// 0, for tests that drive its rounds' pieces by hand.
func oneShardGroup(t *testing.T, store leases.Store) (*Group, *streamState, unit, leases.Key) {
	t.Helper()
	return oneShardGroupOf(t, store, "a")
}

// oneShardGroupOf is oneShardGroup for the member owner.
func oneShardGroupOf(t *testing.T, store leases.Store, owner string) (*Group, *streamState, unit, leases.Key) {
	t.Helper()
	g, err := NewGroup(GroupConfig{
		Owner: owner, Store: store, Client: noKinesis{}, Heartbeat: time.Second, Timeout: 4 * time.Second,
		Streams: []StreamConfig{{Stream: "s", Start: kltype.TrimHorizon, Worker: WorkerConfig{
			CheckpointInterval: time.Second,
			Handler:            func(context.Context, *kltype.Record) error { return nil },
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	u := unit{Stream: "s", Shard: "shardId-000000000000"}
	return g, g.streams["s"], u, leases.Key{Stream: u.Stream, Shard: u.Shard}
}

// readHeader reads the membership header as a round does first.
func readHeader(t *testing.T, g *Group) {
	t.Helper()
	if _, err := g.mem.Header(context.Background()); err != nil {
		t.Fatalf("Header: %v", err)
	}
}

// acquireRound does for u what a round's apply does: acquire, and the take
// of a row without a checkpoint after sameTable.
func acquireRound(ctx context.Context, g *Group, u unit) {
	rejoin := g.m.RejoinSent()
	if l, ok := g.acquire(ctx, u); ok && g.m.SameTable(ctx, mono(), rejoin) {
		g.take(ctx, g.streams[u.Stream], u, l)
	}
}
