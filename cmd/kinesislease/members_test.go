package main

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesislease/kinesislease/internal/balance"
	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// membersTable is a lease table with membership rows written through the
// store: row 0 holds a (capacity 1, load 3000 B/s of which 2500 on shard 1
// of stream hotStream and 400 on an unknown shard, utilization 0.6) and b
// (capacity 3, capped at 5, load 1000, utilization 0.1: a cost per byte of
// 0.3 against a's 0.2 and the fleet's 0.225, a cost of 1.35), row 3 c
// (leaving, of a version before capacities); the header lists both rows.
func membersTable(t *testing.T, hotStream string) (table string, st *dynamo.Store, a, b, c leases.Member) {
	t.Helper()
	client := testutil.DynamoClient(t)
	table = testutil.TableName(t)
	testutil.CreateLeaseTable(t, client, table)
	st = dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(client))
	ctx := context.Background()
	a = leases.Member{Owner: "svc-a", Incarnation: "0.aaaa", Heartbeat: 17, Held: 3, Young: true, Capacity: 1000, Load: 3000, Utilization: 600,
		Hot: balance.EncodeHot([]balance.Hot{{ID: balance.UnitID(plan.Unit{Stream: hotStream, Shard: "shardId-000000000001"}), Load: 2500}, {ID: "zzzzzz", Load: 400}})}
	b = leases.Member{Owner: "svc-b", Incarnation: "0.bbbb", Heartbeat: 4, Held: 1, Capacity: 3000, MaxLeases: 5, Load: 1000, Utilization: 100}
	c = leases.Member{Owner: "svc-c", Incarnation: "3.cccc", Heartbeat: 9, Leaving: true, Ended: 2, Load: 12_000}
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
// the store, and that it calls only GetItem: b's fair share is its capacity
// divided by its cost, 3/1.35 (2222 thousandths, as the plan counts it),
// over the fleet's, 1 + 3/1.35.
func TestMembers(t *testing.T) {
	t.Parallel()
	table, _, a, _, _ := membersTable(t, "orders")
	hotID, _, _ := strings.Cut(a.Hot, ":")
	var f testutil.Faults
	res := runWith(&cli{dynamoOpts: []func(*dynamodb.Options){f.DynamoOptions}}, tableArgs(t, "members", table)...)
	if res.code != exitOK || res.stderr != "" {
		t.Fatalf("members: %v", res)
	}
	t.Logf("members:\n%s", res.stdout)
	want := [][]string{
		{"ROW", "OWNER", "INCARNATION", "HEARTBEAT", "LEAVING", "HELD", "ENDED", "CAPACITY", "MAX_LEASES", "LOAD_B/S", "UTILIZATION", "COST", "SHARE", "FAIR_SHARE", "HOT"},
		{"0", "svc-a", "0.aaaa", "17", "no", "3", "0", "1", "-", "3k", "60%", "1", "75%", "31%", hotID + "=2.5k,zzzzzz=400"},
		{"0", "svc-b", "0.bbbb", "4", "no", "1", "0", "3", "5", "1k", "10%", "1.35", "25%", "69%", "-"},
		{"3", "svc-c", "3.cccc", "9", "yes", "0", "2", "-", "-", "12k", "-", "-", "-", "-", "-"},
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
		"leaving": false, "held": 3.0, "ended": 0.0, "young": true, "capacity": 1.0, "max_leases": 0.0, "load_bytes_per_s": 3000.0,
		"utilization": 0.6, "cost": 1.0, "share": 0.75, "fair_share": 1000.0 / 3222,
		"hot": []any{map[string]any{"id": hotID, "bytes_per_s": 2500.0}, map[string]any{"id": "zzzzzz", "bytes_per_s": 400.0}}}
	if len(got[0]) != len(wantA) {
		t.Errorf("fields %v, want those of %v", got[0], wantA)
	}
	for k, v := range wantA {
		if !reflect.DeepEqual(got[0][k], v) {
			t.Errorf("%s = %v, want %v", k, got[0][k], v)
		}
	}
	if got[1]["capacity"] != 3.0 || got[1]["max_leases"] != 5.0 || got[1]["utilization"] != 0.1 || got[1]["cost"] != 1.35 ||
		got[1]["share"] != 0.25 || got[1]["fair_share"] != 2222.0/3222 || !reflect.DeepEqual(got[1]["hot"], []any{}) {
		t.Errorf("second object %v", got[1])
	}
	if got[2]["owner"] != "svc-c" || got[2]["leaving"] != true || got[2]["row"] != 3.0 || got[2]["capacity"] != nil ||
		got[2]["utilization"] != nil || got[2]["cost"] != nil || got[2]["share"] != nil || got[2]["fair_share"] != nil || got[2]["load_bytes_per_s"] != 12000.0 {
		t.Errorf("third object %v", got[2])
	}
}

// TestMembersInterval: two reads, between which a heartbeats, b is removed
// and d joins; c stays as it was. a, the only one left that publishes a
// utilization, costs what the fleet does: 1.
func TestMembersInterval(t *testing.T) {
	t.Parallel()
	table, st, a, b, _ := membersTable(t, "orders")
	hotID, _, _ := strings.Cut(a.Hot, ":")
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
		_, err := st.Join(ctx, 0, leases.Member{Owner: "svc-d", Incarnation: "0.dddd", Heartbeat: 1, Capacity: 1000, Load: 1000})
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
		{"ROW", "OWNER", "INCARNATION", "HEARTBEAT", "CHANGE", "LEAVING", "HELD", "ENDED", "CAPACITY", "MAX_LEASES", "LOAD_B/S", "UTILIZATION", "COST", "SHARE", "FAIR_SHARE", "HOT"},
		{"0", "svc-a", "0.aaaa", "18", "advanced", "no", "3", "0", "1", "-", "3k", "60%", "1", "75%", "50%", hotID + "=2.5k,zzzzzz=400"},
		{"0", "svc-b", "0.bbbb", "4", "gone", "no", "1", "0", "3", "5", "1k", "10%", "-", "-", "-", "-"},
		{"0", "svc-d", "0.dddd", "1", "joined", "no", "0", "0", "1", "-", "1k", "-", "1", "25%", "50%", "-"},
		{"3", "svc-c", "3.cccc", "9", "unchanged", "yes", "0", "2", "-", "-", "12k", "-", "-", "-", "-", "-"},
	})
}

// TestMembersHot: with --stream, the members' hot shards are named by
// their shard ids (stream/shard with several streams); one that none of
// the streams has keeps the entry's id; a stream that does not exist is
// an error (exit code 3).
func TestMembersHot(t *testing.T) {
	t.Parallel()
	r := newRig(t, testutil.Kinesalite, 2)
	other := testutil.StreamName(t) + "-other"
	testutil.CreateStream(t, r.kc, other, 1)
	table, _, _, _, _ := membersTable(t, r.stream)
	args := func(streams ...string) []string {
		a := []string{"members", "--table", table, "--region", testutil.Region, "--dynamodb-endpoint-url", r.ddbURL, "--kinesis-endpoint-url", r.kinURL}
		for _, s := range streams {
			a = append(a, "--stream", s)
		}
		return a
	}
	res := runCLI(args(r.stream)...)
	if res.code != exitOK || res.stderr != "" {
		t.Fatalf("members --stream: %v", res)
	}
	t.Logf("members --stream:\n%s", res.stdout)
	if line := strings.Fields(strings.Split(res.stdout, "\n")[1]); line[len(line)-1] != "shardId-000000000001=2.5k,zzzzzz=400" {
		t.Errorf("svc-a's hot shards: %q, want shardId-000000000001=2.5k,zzzzzz=400", line[len(line)-1])
	}
	res = runCLI(args(other, r.stream)...)
	if line := strings.Fields(strings.Split(res.stdout, "\n")[1]); res.code != exitOK || line[len(line)-1] != r.stream+"/shardId-000000000001=2.5k,zzzzzz=400" {
		t.Errorf("members with two streams: %v, want svc-a's hot shards as stream/shard", res)
	}
	res = runCLI(append(args(r.stream), "--json")...)
	var got []memberStatus
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil || res.code != exitOK {
		t.Fatalf("members --stream --json: %v (%v)", res, err)
	}
	if hot := got[0].Hot; len(hot) != 2 || hot[0].Stream != r.stream || hot[0].Shard != "shardId-000000000001" || hot[0].Load != 2500 ||
		hot[1].ID != "zzzzzz" || hot[1].Stream != "" || hot[1].Shard != "" || hot[1].Load != 400 {
		t.Errorf("svc-a's hot shards in JSON: %+v", hot)
	}
	res = runCLI(args("no-such-stream")...)
	if res.code != exitNotFound || !strings.Contains(res.stderr, `stream "no-such-stream" not found`) || res.stdout != "" {
		t.Errorf("members --stream no-such-stream: %v, want exit code %d", res, exitNotFound)
	}
}

// TestMembersEmpty: a table no service ran on, a missing one, bad usage.
func TestMembersEmpty(t *testing.T) {
	t.Parallel()
	client := testutil.DynamoClient(t)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, client, table)
	res := runCLI(tableArgs(t, "members", table)...)
	if res.code != exitOK || strings.TrimSpace(res.stdout) != "ROW  OWNER  INCARNATION  HEARTBEAT  LEAVING  HELD  ENDED  CAPACITY  MAX_LEASES  LOAD_B/S  UTILIZATION  COST  SHARE  FAIR_SHARE  HOT" ||
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
		{"members", "--table", "t-leases", "--stream", ""},
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
		got[0].Leaving || got[0].Held != 1 || got[0].Capacity == nil || *got[0].Capacity != 1 || got[0].MaxLeases != 0 ||
		got[0].FairShare == nil || *got[0].FairShare != 1 {
		t.Errorf("members of a running service of one shard: %s", res.stdout)
	}

	// Records read: the holder writes the shard's throughput on the row
	// with its checkpoints (status shows it) and publishes its load in its
	// entry (members shows it, the whole fleet's).
	ps := putRecords(t, r.kc, r.stream, 0, 100, nil)
	last := ps[len(ps)-1].seq
	l := r.waitRow("shardId-000000000000", 20*time.Second, "checkpointed at the last record with a throughput", func(l leases.Lease) bool {
		return l.Checkpoint.Sequence == last && l.Throughput.BytesPerSecond > 0
	})
	// Nothing more to checkpoint: the row stays as it is while status reads it.
	res = runCLI(r.args("status", "--json")...)
	var rows []shardStatus
	if err := json.Unmarshal([]byte(res.stdout), &rows); err != nil || len(rows) != 1 || rows[0].Checkpoint != last ||
		rows[0].BytesPerSecond != l.Throughput.BytesPerSecond || rows[0].RecordsPerSecond != l.Throughput.RecordsPerSecond {
		t.Errorf("status --json after records, the row's throughput being %+v: %v (%v)", l.Throughput, res, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		res = runCLI(tableArgs(t, "members", r.table, "--json")...)
		got = nil
		if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
			t.Fatalf("members --json: %v (%v)", res, err)
		}
		if len(got) == 1 && got[0].Load > 0 && got[0].Share != nil && *got[0].Share == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s, members shows no load carried by svc-live: %s", res.stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("members with records read:\n%s", runCLI(tableArgs(t, "members", r.table)...).stdout)
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
