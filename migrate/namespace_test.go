package migrate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/migrate"
)

// TestLeaseNamespace: with Ours.LeaseNamespace, Import writes the rows
// "namespace/stream:shard" (as WithLeaseNamespace keys them) and leaves
// the stream's plain rows alone, and Export reads those rows; Kinesis is
// called with the stream's name (the shards are listed, the records read).
// The plain rows are ahead of the KCL's checkpoints: an Import that
// ignored the namespace would be refused, an Export that ignored it would
// write their checkpoints (and the second shard, which has none there,
// would be skipped). A namespace WithLeaseNamespace refuses is ErrInvalid.
func TestLeaseNamespace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	ctx := context.Background()
	a1, a2 := e.put(shardID(0), 1), e.put(shardID(0), 2)
	b1 := e.put(shardID(1), 11)
	kcl := e.foreignTable("leaseKey")
	e.putItem(kcl, kclLease{shard: shardID(0), checkpoint: a1, counter: 3}.item())
	e.putItem(kcl, kclLease{shard: shardID(1), checkpoint: b1, counter: 3}.item())
	st := e.ourTable()
	plain := e.setRow(st, shardID(0), leases.Checkpoint{Sequence: a2})

	ours := e.ours(st)
	ours.LeaseNamespace = "acct-b"
	nsKey := "acct-b/" + e.stream
	rep, err := migrate.Import(ctx, migrate.Foreign{Client: e.ddb, Table: kcl}, ours, migrate.WithInterval(fast))
	if err != nil {
		t.Fatalf("Import with a lease namespace: %v\n%v", err, rep)
	}
	for shard, want := range map[string]string{shardID(0): a1, shardID(1): b1} {
		key := leases.Key{Stream: nsKey, Shard: shard}
		l, err := st.Get(ctx, key)
		if err != nil || l.Checkpoint != (leases.Checkpoint{Sequence: want}) {
			t.Errorf("row %s: %+v (%v), want the KCL's checkpoint %s", key, l.Checkpoint, err, want)
		}
		if r := rowsByShard(rep)[shard]; r.Key != key.String() || r.Action != migrate.Write {
			t.Errorf("report row %s: %v (key %q), want %s written", shard, r, r.Key, key)
		}
	}
	if l, ok := e.row(st, shardID(0)); !ok || l.Checkpoint != plain.Checkpoint || l.Counter != plain.Counter {
		t.Errorf("plain row of shard 0: %+v (exists %v), want it untouched: %+v", l, ok, plain)
	}
	if l, ok := e.row(st, shardID(1)); ok {
		t.Errorf("a plain row of shard 1 was created: %+v", l)
	}

	// Export with the namespace writes the namespaced rows' checkpoints;
	// without it, the plain rows'.
	for _, tc := range []struct {
		ns   string
		want map[string]string // shard -> exported checkpoint, "" for no item
	}{
		{"acct-b", map[string]string{shardID(0): a1, shardID(1): b1}},
		{"", map[string]string{shardID(0): a2, shardID(1): ""}},
	} {
		from := e.ours(st)
		from.LeaseNamespace = tc.ns
		to := e.foreignTable("leaseKey")
		if rep, err := migrate.Export(ctx, from, migrate.Foreign{Client: e.ddb, Table: to}, migrate.WithInterval(fast)); err != nil {
			t.Fatalf("Export (namespace %q): %v\n%v", tc.ns, err, rep)
		}
		for shard, want := range tc.want {
			got := "" // no item
			if cp, ok := e.getItem(to, shard)["checkpoint"].(*dtypes.AttributeValueMemberS); ok {
				got = cp.Value
			}
			if got != want {
				t.Errorf("export (namespace %q), item %s: checkpoint %q, want %q (\"\": no item)", tc.ns, shard, got, want)
			}
		}
	}

	for _, bad := range []string{"a/b", "a:b", "#members", "a b", strings.Repeat("n", 129)} {
		o := e.ours(st)
		o.LeaseNamespace = bad
		_, errI := migrate.Import(ctx, migrate.Foreign{Client: e.ddb, Table: kcl}, o, migrate.WithInterval(fast))
		_, errE := migrate.Export(ctx, o, migrate.Foreign{Client: e.ddb, Table: kcl}, migrate.WithInterval(fast))
		for what, err := range map[string]error{"Import": errI, "Export": errE} {
			if !errors.Is(err, migrate.ErrInvalid) || !strings.Contains(err.Error(), "LeaseNamespace") {
				t.Errorf("%s with LeaseNamespace %q: %v, want ErrInvalid naming the field", what, bad, err)
			}
		}
	}
}
