package engine

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestRowReadAtListingIsRecheckedWhenReported: a row this instance only
// read at its first listing (held by another member) is known by its
// checkpoint: when a vanished report makes every member re-read what it
// knows, this instance finds it missing and recreates it free from that
// checkpoint, rather than leave it to a member that knows none, which
// would create it at the start position (TestDynamoMembership/seed=1 did, while a member that had
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
		o, ok := g.lost.Lookup(u)
		if !ok || o.Best() != cp {
			t.Fatalf("after the row read at the first listing vanished and was re-read: orphan %+v (present %v), want one that knows %v", o, ok, cp)
		}
		g.releaseOrphan(ctx, u, o) // the next round's apply: the release finds the row missing
		got, err := store.Get(ctx, key)
		if err != nil || got.Checkpoint != cp || got.Held() || got.Recovered == "" {
			t.Fatalf("after the release found the row missing: %+v, %v; want it recreated free and recovered at %v", got, err, cp)
		}
	})
}
