package engine

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestRecreationBetweenReadsRestartsTheWait: a row this instance finds
// missing round after round is recreated by another member between two of
// its reads, announced (ReportRecreated), and deleted again before its next
// read. Every read finds it missing, yet the wait must begin again after
// the recreation: the other member may deliver from the recreated row, and
// it knows a checkpoint. Without the announcement the reads were joined
// into one sighting and the row was created again a wait after the first
// one: while the recreated row's holder could still deliver (a knower's
// wait), or at the start position while that member knew its checkpoint
// (seed 3303531: i1 created the row at TRIM_HORIZON 20 s after i0 had
// recreated it from its checkpoint and released it, and 115 records were
// read again).
func TestRecreationBetweenReadsRestartsTheWait(t *testing.T) {
	cp := leases.Checkpoint{Sequence: "49000000000000000000000000000000000000000000000012000000"}
	for _, knows := range []bool{true, false} {
		t.Run(fmt.Sprintf("knows a checkpoint=%v", knows), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				store := memory.New()
				g, st, u, key := oneShardGroup(t, store)
				arm(t, g, "0.CUR")
				wait := g.lostRowWait(st)
				seen := leases.Lease{Key: key, Counter: 3, Checkpoint: cp}
				if !knows {
					seen.Checkpoint = leases.Checkpoint{}
					wait += 3*g.cfg.Heartbeat + g.cfg.Timeout
				}
				st.setRow(u.Shard, rowState{lease: seen})
				var deleted, created int64
				for i := 0; i < 60; i++ {
					if sent, ours := sightingRound(t, g, st, u, store); ours {
						created = sent
						break
					}
					if i != 5 {
						time.Sleep(time.Second)
						continue
					}
					// Between this read and the next: member x recreates the
					// row from its checkpoint, announces it, and the row is
					// deleted again under it.
					time.Sleep(200 * time.Millisecond)
					if _, err := store.CreateAs(ctx, key, "x", "0.X", cp, ""); err != nil {
						t.Fatal(err)
					}
					if err := store.ReportRecreated(ctx, key); err != nil {
						t.Fatal(err)
					}
					time.Sleep(300 * time.Millisecond)
					if !store.Delete(key) {
						t.Fatal("no row to delete")
					}
					deleted = mono()
					time.Sleep(500 * time.Millisecond)
				}
				if created == 0 {
					t.Fatal("the row was never created")
				}
				if d := time.Duration(created - deleted); d < wait {
					t.Fatalf("created the row %v after it was deleted under the member that recreated it between this instance's reads, want at least the wait %v", d, wait)
				}
			})
		})
	}
}

// TestRowReadAtListingIsRecheckedWhenReported: a row this instance only
// read at its first listing (held by another member) is known by its
// checkpoint: when a vanished report makes every member re-read what it
// knows, this instance finds it missing and counts itself a knower that
// will recreate it (an orphan, announced in its entry), so that a member
// that knows no checkpoint defers to it rather than create the row at the
// start position (TestDynamoMembership/seed=1 did, while a member that had
// read the row at its first listing knew a checkpoint covering 84 records).
func TestRowReadAtListingIsRecheckedWhenReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, st, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		cp := leases.Checkpoint{Sequence: "49000000000000000000000000000000000000000000000084000000"}
		l, err := store.CreateAs(ctx, key, "b", "0.B", cp, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := g.readRow(ctx, st, u.Shard); err != nil {
			t.Fatal(err)
		}
		if !store.Delete(l.Key) {
			t.Fatal("no row to delete")
		}
		if !g.recheckReleased(ctx) {
			t.Fatal("recheckReleased: a read failed")
		}
		g.mu.Lock()
		o, ok := g.orphans[u]
		g.mu.Unlock()
		if !ok || o.best() != cp {
			t.Fatalf("after the row read at the first listing vanished and was re-read: orphan %+v (present %v), want one that knows %v", o, ok, cp)
		}
		readHeader(t, g)
		g.releaseOrphan(ctx, u, o) // the next round's apply: the release finds the row missing
		if n := g.countVanished(map[unit]string{u: "b"}); n != 1 {
			t.Fatalf("countVanished = %d, want 1: this instance will recreate the row it knows", n)
		}
	})
}

// TestRecreationOfAnotherRowKeepsTheWait: another member's recreation of a
// different row, even of the same bucket, does not restart this
// instance's wait on a missing row: the header names the row recreated
// (RecreatedKey). With a counter alone, one member's recreations restarted
// every other member's waits (82 of 600 classic seeds broke their liveness
// bounds; TestMembershipBalanceAcrossStreams left a stream unread for 30 s
// under load).
func TestRecreationOfAnotherRowKeepsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := memory.New()
		g, st, u, key := oneShardGroup(t, store)
		arm(t, g, "0.CUR")
		other := leases.Key{Stream: key.Stream}
		for i := 0; other.Shard == "" || leases.RecreatedBucket(other) != leases.RecreatedBucket(key); i++ {
			other.Shard = fmt.Sprintf("shardId-%012d", 100+i)
		}
		cp := leases.Checkpoint{Sequence: "49000000000000000000000000000000000000000000000012000000"}
		st.setRow(u.Shard, rowState{lease: leases.Lease{Key: key, Counter: 3, Checkpoint: cp}})
		wait := g.lostRowWait(st)
		start := mono()
		var created int64
		for i := 0; i < 60 && created == 0; i++ {
			if sent, ours := sightingRound(t, g, st, u, store); ours {
				created = sent
				break
			}
			if i == 3 {
				if _, err := store.CreateAs(ctx, other, "x", "0.X", cp, ""); err != nil {
					t.Fatal(err)
				}
				if err := store.ReportRecreated(ctx, other); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Second)
		}
		if created == 0 {
			t.Fatal("the row was never created")
		}
		// The wait, and two rounds: the sighting's first read returns a
		// round in, and a read counts once a header read follows it.
		if d := time.Duration(created - start); d > wait+3*time.Second {
			t.Fatalf("created %v after the first sighting, want about the wait %v: another row's recreation restarted it", d, wait)
		}
	})
}

// sightingRound is one round of a member waiting on u's missing row: the
// header read first, then the row's; it returns when the row read was sent
// and whether the row exists held by g (created), else hands the sighting
// to missingRow.
func sightingRound(t *testing.T, g *Group, st *streamState, u unit, store leases.Store) (sent int64, ours bool) {
	t.Helper()
	ctx := context.Background()
	g.fence.Store(mono() + int64(time.Minute))
	readHeader(t, g)
	sent = mono()
	if l, err := store.Get(ctx, leases.Key{Stream: u.Stream, Shard: u.Shard}); err == nil && l.Owner == g.cfg.Owner {
		return sent, true
	}
	g.missingRow(ctx, st, u, sent, mono())
	return sent, false
}
