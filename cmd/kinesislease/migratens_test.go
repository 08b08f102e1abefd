package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// TestImportExportLeaseNamespace: import --lease-namespace writes the
// checkpoints of a KCL table into the rows "ns/stream:shard", which a
// subscription given WithLeaseNamespace(ns) resumes from (exactly the
// records after them), and leaves the stream's plain rows as they were;
// export --lease-namespace reads those rows, not the plain ones. The plain
// rows are ahead of the KCL's checkpoints, so an import that ignored the
// namespace would be refused (or would move them), and an export that
// ignored it would write their checkpoints. A namespace WithLeaseNamespace
// refuses is a usage error naming the option.
func TestImportExportLeaseNamespace(t *testing.T) {
	t.Parallel()
	r := newRig(t, testutil.Kinesalite, 2)
	ctx := context.Background()
	seq := map[int]string{}
	for id := range 6 {
		seq[id] = r.putTo(sid(0), id)
		seq[10+id] = r.putTo(sid(1), 10+id)
	}
	const ns = "acct-b"
	nsKey := ns + "/" + r.stream

	// The plain rows (the stream's subscription without a namespace): free,
	// at records 4 and 14.
	st := r.store()
	plain := map[string]leases.Lease{}
	for shard, id := range map[string]int{sid(0): 4, sid(1): 14} {
		l, err := st.Create(ctx, leases.Key{Stream: r.stream, Shard: shard})
		if err == nil {
			l, err = st.Rewind(ctx, l, leases.Checkpoint{Sequence: seq[id]})
		}
		if err != nil {
			t.Fatal(err)
		}
		plain[shard] = l
	}
	checkPlain := func(when string) {
		t.Helper()
		for shard, want := range plain {
			l, err := st.Get(ctx, leases.Key{Stream: r.stream, Shard: shard})
			if err != nil || l.Checkpoint != want.Checkpoint || l.Counter != want.Counter || l.Held() || !l.RewindTo.IsZero() {
				t.Errorf("%s: plain row %s: %+v (%v), want it untouched: %+v", when, shard, l, err, want)
			}
		}
	}

	// The KCL application stopped after records 2 and 12.
	kcl := r.foreignTable("leaseKey")
	r.putItem(kcl, kclItem("", sid(0), seq[2], 0, "kcl-worker-1", nil, nil))
	r.putItem(kcl, kclItem("", sid(1), seq[12], 0, "kcl-worker-2", nil, nil))

	for _, cmd := range [][]string{{"import", "--from-table", kcl}, {"export", "--to-table", kcl}} {
		for _, bad := range []string{"a/b", "a:b", "#members", strings.Repeat("n", 129)} {
			res := runCLI(r.args(cmd[0], append(cmd[1:], "--lease-namespace", bad, "--interval", "100ms")...)...)
			if res.code != exitUsage || !strings.Contains(res.stderr, "argument --lease-namespace") || !strings.Contains(res.stderr, bad) {
				t.Errorf("%s --lease-namespace %q: %v; want a usage error naming the option", cmd[0], bad, res)
			}
		}
	}

	res := runCLI(r.args("import", "--lease-namespace", ns, "--from-table", kcl, "--interval", "100ms")...)
	if res.code != exitOK || strings.Count(res.stdout, ": written") != 2 {
		t.Fatalf("import --lease-namespace %s: %v; want both rows written", ns, res)
	}
	for shard, id := range map[string]int{sid(0): 2, sid(1): 12} {
		l, err := st.Get(ctx, leases.Key{Stream: nsKey, Shard: shard})
		if err != nil || l.Checkpoint != (leases.Checkpoint{Sequence: seq[id]}) || l.Held() {
			t.Errorf("row %s:%s after the import: %+v (%v), want free at record %d", nsKey, shard, l, err, id)
		}
	}
	checkPlain("after the import")

	// The namespaced subscription resumes right after the KCL's
	// checkpoints: records 3 to 5 and 13 to 15, each once.
	r.namespace = ns
	j := newJournal()
	svc := r.startService("svc-1", j, kltype.Latest)
	want := map[string][]int{sid(0): {3, 4, 5}, sid(1): {13, 14, 15}}
	j.waitUntil(t, 60*time.Second, "the records after the checkpoints handled", func(ds []delivery) bool {
		return len(idsOf(ds, sid(0))) >= 3 && len(idsOf(ds, sid(1))) >= 3
	})
	svc.stop(t)
	for shard, w := range want {
		if got := idsOf(j.deliveries(), shard); !slices.Equal(got, w) {
			t.Errorf("shard %s: handled %v, want %v", shard, got, w)
		}
	}
	checkPlain("after the namespaced subscription ran")

	// Export reads the namespaced rows (records 5 and 15 now), not the
	// plain ones (4 and 14).
	back := r.foreignTable("leaseKey")
	res = runCLI(r.args("export", "--lease-namespace", ns, "--to-table", back, "--interval", "100ms")...)
	if res.code != exitOK {
		t.Fatalf("export --lease-namespace %s: %v", ns, res)
	}
	for shard, id := range map[string]int{sid(0): 5, sid(1): 15} {
		out, err := r.ddb.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(back), ConsistentRead: aws.Bool(true),
			Key: map[string]dtypes.AttributeValue{"leaseKey": &dtypes.AttributeValueMemberS{Value: shard}},
		})
		if err != nil {
			t.Fatal(err)
		}
		cp, _ := out.Item["checkpoint"].(*dtypes.AttributeValueMemberS)
		if cp == nil || cp.Value != seq[id] {
			t.Errorf("exported item %s: %v, want the namespaced row's checkpoint, record %d (%s)", shard, out.Item["checkpoint"], id, seq[id])
		}
	}
}
