package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// A holder that stops (or fails to apply a rewind) releases its lease with
// the operator's request still pending: Release keeps RewindTo for the next
// holder. If the operator then rewinds the free row elsewhere, the newest
// word must win: Rewind of a free row clears the stale request, or the next
// holder would apply the old one over the new checkpoint.

// TestRewindFreeRowClearsStaleRequest checks it on both stores.
func TestRewindFreeRowClearsStaleRequest(t *testing.T) {
	t.Parallel()
	for name, newStore := range map[string]func(t *testing.T) leases.Store{
		"memory": func(*testing.T) leases.Store { return memory.New() },
		"dynamo": func(t *testing.T) leases.Store {
			client := testutil.DynamoClient(t)
			table := testutil.TableName(t)
			testutil.CreateLeaseTable(t, client, table)
			return (&rig{t: t, ddb: client, table: table}).store()
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a store of its own
			s := newStore(t)
			ctx := context.Background()
			key := leases.Key{Stream: "orders", Shard: "shardId-000000000000"}
			l, err := s.Create(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if l, err = s.(leases.Membership).TakeAs(ctx, l, "a", "inc-a"); err != nil {
				t.Fatal(err)
			}
			if l, err = s.Checkpoint(ctx, l, leases.Checkpoint{Sequence: "900"}); err != nil {
				t.Fatal(err)
			}
			if l, err = s.Rewind(ctx, l, leases.RewindAtSequence("500")); err != nil {
				t.Fatal(err)
			}
			if l, err = s.Release(ctx, l, leases.Checkpoint{}); err != nil {
				t.Fatal(err)
			}
			if l.RewindTo != leases.RewindAtSequence("500") || l.Held() {
				t.Fatalf("after Release with a rewind pending: %+v, want free with the request kept", l)
			}
			l, err = s.Rewind(ctx, l, leases.Checkpoint{Sequence: leases.RewindTrimHorizon})
			if err != nil {
				t.Fatal(err)
			}
			if l.Checkpoint.Sequence != leases.RewindTrimHorizon || !l.RewindTo.IsZero() {
				t.Errorf("Rewind of the free row returned %+v, want checkpoint TRIM_HORIZON and no pending rewind", l)
			}
			if got, _ := s.Get(ctx, key); got.Checkpoint.Sequence != leases.RewindTrimHorizon || !got.RewindTo.IsZero() {
				t.Errorf("the store holds %+v, want checkpoint TRIM_HORIZON and no pending rewind", got)
			}
		})
	}
}

// TestRewindAfterStoppedHolder is the same story end to end: the row a
// stopped holder left with a pending request is rewound by the command, and
// the next service starts where the command said last.
func TestRewindAfterStoppedHolder(t *testing.T) {
	t.Parallel()
	r := newRig(t, testutil.Kinesalite, 1)
	ps := putRecords(t, r.kc, r.stream, 0, 10, nil)
	id := ps[0].shard
	st := r.store()
	ctx := context.Background()
	l, err := st.Create(ctx, leases.Key{Stream: r.stream, Shard: id})
	if err == nil {
		l, err = st.TakeAs(ctx, l, "svc-old", "inc-old")
	}
	if err == nil {
		l, err = st.Checkpoint(ctx, l, leases.Checkpoint{Sequence: ps[9].seq})
	}
	if err == nil {
		l, err = st.Rewind(ctx, l, leases.RewindAtSequence(ps[5].seq)) // asked of svc-old...
	}
	if err == nil {
		_, err = st.Release(ctx, l, leases.Checkpoint{}) // ...which stopped first
	}
	if err != nil {
		t.Fatal(err)
	}

	res := runCLI(r.args("rewind", "--to", "TRIM_HORIZON")...)
	if res.code != 0 {
		t.Fatalf("rewind: %v", res)
	}
	want := fmt.Sprintf("%s: rewritten (free): %s -> TRIM_HORIZON (replacing the pending rewind to %s%s)\n", id, ps[9].seq, leases.AtSequencePrefix, ps[5].seq)
	if res.stdout != want {
		t.Errorf("rewind printed %q, want %q", res.stdout, want)
	}
	res = runCLI(r.args("status")...)
	if res.code != 0 || !strings.Contains(res.stdout, "TRIM_HORIZON") {
		t.Fatalf("status: %v", res)
	}
	j := newJournal()
	svc := r.startService("svc-new", j, kltype.Latest)
	j.waitUntil(t, 30*time.Second, "the 10 records handled", func(ds []delivery) bool { return distinctIDs(ds) == 10 })
	svc.stop(t)
	if got, want := idsOf(j.deliveries(), id), putIDs(ps, id); !slices.Equal(got, want) {
		t.Errorf("the next service handled %v, want %v (from TRIM_HORIZON, not from the stale request's record 5)", got, want)
	}
}
