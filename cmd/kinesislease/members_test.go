package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// membersTable is a lease table with membership rows written through the
// store: row 0 holds a and b, row 3 c (leaving); the header lists both
// rows.
func membersTable(t *testing.T) (table string, st *dynamo.Store, a, b, c leases.Member) {
	t.Helper()
	client := testutil.DynamoClient(t)
	table = testutil.TableName(t)
	testutil.CreateLeaseTable(t, client, table)
	st = dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(client))
	ctx := context.Background()
	a = leases.Member{Owner: "svc-a", Incarnation: "0.aaaa", Heartbeat: 17, Held: 3, Young: true}
	b = leases.Member{Owner: "svc-b", Incarnation: "0.bbbb", Heartbeat: 4, Held: 1}
	c = leases.Member{Owner: "svc-c", Incarnation: "3.cccc", Heartbeat: 9, Leaving: true, Ended: 2}
	for _, j := range []struct {
		row int
		m   leases.Member
	}{{0, a}, {0, b}, {3, c}} {
		if _, err := st.Join(ctx, j.row, j.m); err != nil {
			t.Fatal(err)
		}
		if err := st.BumpRow(ctx, j.row); err != nil {
			t.Fatal(err)
		}
	}
	return table, st, a, b, c
}

// TestMembers checks members' text and JSON output on rows written through
// the store, and that it calls only GetItem.
func TestMembers(t *testing.T) {
	t.Parallel()
	table, _, _, _, _ := membersTable(t)
	var f testutil.Faults
	res := runWith(&cli{dynamoOpts: []func(*dynamodb.Options){f.DynamoOptions}}, tableArgs(t, "members", table)...)
	if res.code != exitOK || res.stderr != "" {
		t.Fatalf("members: %v", res)
	}
	t.Logf("members:\n%s", res.stdout)
	want := [][]string{
		{"ROW", "OWNER", "INCARNATION", "HEARTBEAT", "LEAVING", "HELD", "ENDED"},
		{"0", "svc-a", "0.aaaa", "17", "no", "3", "0"},
		{"0", "svc-b", "0.bbbb", "4", "no", "1", "0"},
		{"3", "svc-c", "3.cccc", "9", "yes", "0", "2"},
	}
	checkTable(t, res.stdout, want)
	for _, op := range f.Ops() {
		if op != "GetItem" {
			t.Errorf("members called dynamodb:%s; it may call only GetItem", op)
		}
	}
	if n := f.Calls("GetItem"); n != 3 {
		t.Errorf("%d GetItem calls, want 3 (the header and 2 rows)", n)
	}

	res = runCLI(tableArgs(t, "members", table, "--json")...)
	if res.code != exitOK || res.stderr != "" {
		t.Fatalf("members --json: %v", res)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatalf("members --json: %v\n%s", err, res.stdout)
	}
	if len(got) != 3 {
		t.Fatalf("members --json: %d objects, want 3:\n%s", len(got), res.stdout)
	}
	wantA := map[string]any{"row": 0.0, "owner": "svc-a", "incarnation": "0.aaaa", "heartbeat": 17.0, "heartbeat_change": nil,
		"leaving": false, "held": 3.0, "ended": 0.0, "young": true}
	if len(got[0]) != len(wantA) {
		t.Errorf("fields %v, want those of %v", got[0], wantA)
	}
	for k, v := range wantA {
		if got[0][k] != v {
			t.Errorf("%s = %v, want %v", k, got[0][k], v)
		}
	}
	if got[2]["owner"] != "svc-c" || got[2]["leaving"] != true || got[2]["row"] != 3.0 {
		t.Errorf("third object %v", got[2])
	}
}

// TestMembersInterval: two reads, between which a heartbeats, b is removed
// and d joins; c stays as it was.
func TestMembersInterval(t *testing.T) {
	t.Parallel()
	table, st, a, b, _ := membersTable(t)
	var waited time.Duration
	between := func(ctx context.Context, d time.Duration) error {
		waited = d
		a.Heartbeat++
		a.Young = false
		if _, err := st.Heartbeat(ctx, 0, a); err != nil {
			return err
		}
		if _, err := st.ReplaceMember(ctx, 0, b, leases.Member{}); err != nil {
			return err
		}
		_, err := st.Join(ctx, 0, leases.Member{Owner: "svc-d", Incarnation: "0.dddd", Heartbeat: 1})
		return err
	}
	res := runWith(&cli{sleep: between}, tableArgs(t, "members", table, "--interval", "7s")...)
	if res.code != exitOK || res.stderr != "" {
		t.Fatalf("members --interval: %v", res)
	}
	if waited != 7*time.Second {
		t.Errorf("waited %v between the reads, want 7s", waited)
	}
	t.Logf("members --interval 7s:\n%s", res.stdout)
	checkTable(t, res.stdout, [][]string{
		{"ROW", "OWNER", "INCARNATION", "HEARTBEAT", "CHANGE", "LEAVING", "HELD", "ENDED"},
		{"0", "svc-a", "0.aaaa", "18", "advanced", "no", "3", "0"},
		{"0", "svc-b", "0.bbbb", "4", "gone", "no", "1", "0"},
		{"0", "svc-d", "0.dddd", "1", "joined", "no", "0", "0"},
		{"3", "svc-c", "3.cccc", "9", "unchanged", "yes", "0", "2"},
	})
}

// TestMembersEmpty: a table no service ran on, a missing one, bad usage.
func TestMembersEmpty(t *testing.T) {
	t.Parallel()
	client := testutil.DynamoClient(t)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, client, table)
	res := runCLI(tableArgs(t, "members", table)...)
	if res.code != exitOK || strings.TrimSpace(res.stdout) != "ROW  OWNER  INCARNATION  HEARTBEAT  LEAVING  HELD  ENDED" ||
		!strings.Contains(res.stderr, `table "`+table+`" has no members`) {
		t.Errorf("members on an empty table: %v", res)
	}
	if res := runCLI(tableArgs(t, "members", table, "--json")...); res.code != exitOK || strings.TrimSpace(res.stdout) != "[]" {
		t.Errorf("members --json on an empty table: %v", res)
	}
	res = runCLI(tableArgs(t, "members", "no-such-table")...)
	if res.code != exitNotFound || !strings.Contains(res.stderr, `table "no-such-table" not found`) || res.stdout != "" {
		t.Errorf("members on a missing table: %v, want exit code %d", res, exitNotFound)
	}
	for _, args := range [][]string{
		{"members"},
		{"members", "--table", "t-leases", "--interval", "-1s"},
		{"members", "--table", "t-leases", "--stream", "s"},
	} {
		if res := runCLI(args...); res.code != exitUsage || !strings.HasPrefix(res.stderr, "usage: kinesislease members") {
			t.Errorf("%q: %v, want the usage and exit code 2", args, res)
		}
	}
}

// TestMembersService: a running service's entry, found through the header
// it bumps, heartbeats between two reads.
func TestMembersService(t *testing.T) {
	t.Parallel()
	r := newRig(t, testutil.Kinesalite, 1)
	j := newJournal()
	svc := r.startService("svc-live", j, kltype.TrimHorizon)
	kinesisleasetest.WaitReady(t, svc.svc) // svc-live holds the shard
	t.Logf("members --interval 2s:\n%s", runCLI(tableArgs(t, "members", r.table, "--interval", "2s")...).stdout)
	res := runCLI(tableArgs(t, "members", r.table, "--interval", "2s", "--json")...)
	if res.code != exitOK {
		t.Fatalf("members: %v", res)
	}
	var got []memberStatus
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Owner != "svc-live" || got[0].HeartbeatChange == nil || *got[0].HeartbeatChange != beatAdvanced ||
		got[0].Leaving || got[0].Held != 1 {
		t.Errorf("members of a running service of one shard: %s", res.stdout)
	}
}

// checkTable compares tabwriter output with want, column by column.
func checkTable(t *testing.T, out string, want [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, line := range lines {
		if got := strings.Fields(line); strings.Join(got, " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d: %q, want %q", i, got, want[i])
		}
	}
}
