package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/leases"
)

// TestLeaseNamespace: status and rewind reach the rows of a subscription
// given WithLeaseNamespace ("ns/stream:shard") with --lease-namespace, and
// the plain rows without it: a stream of one name in two accounts has two
// sets of rows in one table, each shown and rewound alone. A namespace
// WithLeaseNamespace would refuse is a usage error; help describes the
// option.
func TestLeaseNamespace(t *testing.T) {
	t.Parallel()
	r := newRig(t, testutil.Kinesalite, 2)
	ps := putRecords(t, r.kc, r.stream, 0, 4, alternate)
	ctx := context.Background()
	st := r.store()
	const ns = "acct-b"
	nsKey := ns + "/" + r.stream
	// The plain rows: free at the first record of each shard. The
	// namespaced ones: held by svc-b at the last.
	for i, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
		l, err := st.Create(ctx, leases.Key{Stream: r.stream, Shard: id})
		if err == nil {
			l, err = st.TakeAs(ctx, l, "svc-a", "inc-a")
		}
		if err == nil {
			_, err = st.Release(ctx, l, leases.Checkpoint{Sequence: ps[i].seq})
		}
		if err != nil {
			t.Fatal(err)
		}
		l, err = st.Create(ctx, leases.Key{Stream: nsKey, Shard: id})
		if err == nil {
			l, err = st.TakeAs(ctx, l, "svc-b", "inc-b")
		}
		if err == nil {
			_, err = st.Checkpoint(ctx, l, leases.Checkpoint{Sequence: ps[i+2].seq})
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	status := func(extra ...string) []shardStatus {
		t.Helper()
		res := runCLI(r.args("status", append(extra, "--json")...)...)
		if res.code != exitOK {
			t.Fatalf("status %v: %v", extra, res)
		}
		var rows []shardStatus
		if err := json.Unmarshal([]byte(res.stdout), &rows); err != nil {
			t.Fatalf("status %v: %v\n%s", extra, err, res.stdout)
		}
		return rows
	}
	for i, row := range status() {
		if row.Owner != "" || row.Checkpoint != ps[i].seq {
			t.Errorf("status: %+v; want the plain row, free at %s", row, ps[i].seq)
		}
	}
	for i, row := range status("--lease-namespace", ns) {
		if row.Owner != "svc-b" || row.Checkpoint != ps[i+2].seq {
			t.Errorf("status --lease-namespace %s: %+v; want the namespaced row, held by svc-b at %s", ns, row, ps[i+2].seq)
		}
	}

	res := runCLI(r.args("rewind", "--lease-namespace", ns, "--to", "TRIM_HORIZON")...)
	if res.code != exitOK || strings.Count(res.stdout, "requested from svc-b") != 2 {
		t.Fatalf("rewind --lease-namespace %s: %v; want both namespaced rows' holder asked", ns, res)
	}
	for i, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
		l, err := st.Get(ctx, leases.Key{Stream: nsKey, Shard: id})
		if err != nil || l.RewindTo.Sequence != leases.RewindTrimHorizon {
			t.Errorf("row %s:%s after the rewind: %+v, %v; want a rewind to TRIM_HORIZON requested", nsKey, id, l, err)
		}
		l, err = st.Get(ctx, leases.Key{Stream: r.stream, Shard: id})
		if err != nil || l.Checkpoint.Sequence != ps[i].seq || !l.RewindTo.IsZero() {
			t.Errorf("plain row %s:%s after the namespaced rewind: %+v, %v; want it untouched", r.stream, id, l, err)
		}
	}

	for _, bad := range []string{"a/b", "a:b", "#members"} {
		res := runCLI(r.args("status", "--lease-namespace", bad)...)
		if res.code != exitUsage || !strings.Contains(res.stderr, "--lease-namespace") {
			t.Errorf("status --lease-namespace %q: %v; want a usage error naming the option", bad, res)
		}
	}
	for _, cmd := range []string{"status", "rewind", "import", "export"} {
		res := runCLI("help", cmd)
		if !strings.Contains(res.stdout, "--lease-namespace (string)") || !strings.Contains(res.stdout, "WithLeaseNamespace") {
			t.Errorf("help %s does not describe --lease-namespace", cmd)
		}
	}
}
