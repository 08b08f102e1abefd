package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/leases"
)

var update = flag.Bool("update", false, "rewrite testdata/status.golden")

// Hash keys of the four children of a 2-shard stream split to 4
// (UNIFORM_SCALING): shardId-000000000002 and 3 split shard 0's half of the
// key space, 4 and 5 shard 1's.
var childHashKeys = map[string]string{
	"shardId-000000000002": "1",
	"shardId-000000000003": "100000000000000000000000000000000000000", // 1e38 > 2^126
	"shardId-000000000004": "170141183460469231731687303715884105728", // 2^127
	"shardId-000000000005": "300000000000000000000000000000000000000", // 3e38 > 3·2^126
}

// reshardedStream builds, on kinesis-local, a stream created with 2 shards
// and split to 4: shards 0 and 1 are closed parents, 2 and 3 the children of
// 0, 4 and 5 those of 1. Each parent holds 3 records (p0-1..3, p1-1..3),
// each child 2 (c2-1, c2-2, ...). It returns the records' labels by
// sequence number and the sequence numbers by label.
func reshardedStream(t *testing.T, r *rig) (labels map[string]string, seqs map[string]string) {
	t.Helper()
	labels, seqs = map[string]string{}, map[string]string{}
	ctx := testutil.WithoutFaults(context.Background())
	putOne := func(label, hashKey, wantShard string) {
		out, err := r.kc.PutRecord(ctx, &kinesis.PutRecordInput{
			StreamName: aws.String(r.stream), Data: []byte(label), PartitionKey: aws.String(label), ExplicitHashKey: aws.String(hashKey),
		})
		if err != nil {
			t.Fatalf("PutRecord %s: %v", label, err)
		}
		if got := aws.ToString(out.ShardId); got != wantShard {
			t.Fatalf("record %s went to %s, want %s", label, got, wantShard)
		}
		labels[aws.ToString(out.SequenceNumber)] = label
		seqs[label] = aws.ToString(out.SequenceNumber)
		time.Sleep(15 * time.Millisecond) // distinct arrival times: a lag is > 0 when records follow the checkpoint
	}
	for i := 1; i <= 3; i++ {
		putOne(label("p0", i), lowHashKey, "shardId-000000000000")
		putOne(label("p1", i), highHashKey, "shardId-000000000001")
	}
	split(t, r, 4)
	for i := 1; i <= 2; i++ {
		for c := 2; c <= 5; c++ {
			id := shardID(c)
			putOne(label("c"+string(rune('0'+c)), i), childHashKeys[id], id)
		}
	}
	return labels, seqs
}

func label(prefix string, i int) string { return prefix + "-" + string(rune('0'+i)) }

func shardID(n int) string { return "shardId-00000000000" + string(rune('0'+n)) }

// TestStatus builds rows in every state on a resharded stream and checks
// status's text output against testdata/status.golden, its --json output,
// and that it calls only GetItem, ListShards, GetShardIterator and
// GetRecords.
func TestStatus(t *testing.T) {
	t.Parallel()
	r := newRig(t, testutil.KinesisLocal, 2)
	labels, seqs := reshardedStream(t, r)

	now := time.Now().Truncate(time.Second)
	st := r.store()
	ctx := context.Background()
	key := func(n int) leases.Key { return leases.Key{Stream: r.stream, Shard: shardID(n)} }
	must := func(l leases.Lease, err error) leases.Lease {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	cp := func(label string) leases.Checkpoint { return leases.Checkpoint{Sequence: seqs[label]} }

	// Parent 0: read to its end by svc-a, released with SHARD_END.
	l := must(st.Create(ctx, key(0)))
	l = must(st.TakeAs(ctx, l, "svc-a", "inc-a1"))
	l = must(st.Checkpoint(ctx, l, cp("p0-3")))
	must(st.Release(ctx, l, leases.Checkpoint{Sequence: leases.ShardEnd}))
	// Parent 1: held by svc-b, checkpoint at p1-2 of 3, with the
	// throughput it measured.
	l = must(st.Create(ctx, key(1)))
	l = must(st.TakeAs(ctx, l, "svc-b", "inc-b"))
	l.Throughput = leases.Throughput{BytesPerSecond: 1_234_567, RecordsPerSecond: 850}
	must(st.Checkpoint(ctx, l, cp("p1-2")))
	// Child 2: held by svc-a, checkpoint c2-1 of 2, and a rewind to
	// TRIM_HORIZON requested from it.
	l = must(st.Create(ctx, key(2)))
	l = must(st.TakeAs(ctx, l, "svc-a", "inc-a2"))
	l = must(st.Checkpoint(ctx, l, cp("c2-1")))
	must(st.Rewind(ctx, l, leases.Checkpoint{Sequence: leases.RewindTrimHorizon}))
	// Child 3: free, read to its tip (c3-2 of 2).
	l = must(st.Create(ctx, key(3)))
	l = must(st.TakeAs(ctx, l, "svc-a", "inc-a2"))
	l = must(st.Checkpoint(ctx, l, cp("c3-2")))
	l.Throughput = leases.Throughput{BytesPerSecond: 4_200, RecordsPerSecond: 12}
	must(st.Release(ctx, l, leases.Checkpoint{}))
	// Child 4: free, rewound to a time before its records: a pending
	// position.
	l = must(st.Create(ctx, key(4)))
	must(st.Rewind(ctx, l, leases.RewindAtTimestamp(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC))))
	// Child 5: no row yet.

	var dynamoOps, kinesisOps testutil.Faults
	c := &cli{
		now:         func() time.Time { return now },
		dynamoOpts:  []func(*dynamodb.Options){dynamoOps.DynamoOptions},
		kinesisOpts: []func(*kinesis.Options){kinesisOps.KinesisOptions},
	}
	res := runWith(c, r.args("status")...)
	if res.code != 0 {
		t.Fatalf("status: %v", res)
	}
	t.Logf("status:\n%s", res.stdout)

	// Only these operations, and as many as the help says.
	var ops []string
	for _, op := range append(dynamoOps.Ops(), kinesisOps.Ops()...) {
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	slices.Sort(ops)
	if want := []string{"GetItem", "GetRecords", "GetShardIterator", "ListShards"}; !slices.Equal(ops, want) {
		t.Errorf("status called %v, want only %v", ops, want)
	}
	for op, want := range map[string]int{"GetItem": 6, "ListShards": 1, "GetShardIterator": 5, "GetRecords": 5} {
		got := dynamoOps.Calls(op) + kinesisOps.Calls(op)
		if got != want {
			t.Errorf("%s called %d times, want %d (one per shard; none for the shard at SHARD_END)", op, got, want)
		}
	}

	// The text output, with the records' labels for their sequence numbers
	// and the lag bucketed, against the golden file.
	got := normalizeStatus(t, res.stdout, labels)
	golden := filepath.Join("testdata", "status.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantText, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestStatus -update to create it)", err)
	}
	if got != string(wantText) {
		t.Errorf("status output (normalized) differs from %s:\n--- got\n%s--- want\n%s", golden, got, wantText)
	}

	// --json: the same facts, for machines.
	res = runWith(&cli{now: func() time.Time { return now }}, r.args("status", "--json")...)
	if res.code != 0 {
		t.Fatalf("status --json: %v", res)
	}
	var objs []map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &objs); err != nil {
		t.Fatalf("status --json: %v\n%s", err, res.stdout)
	}
	fields := []string{"shard_id", "row_exists", "owner", "incarnation", "counter", "checkpoint", "sub_sequence", "checkpoint_pending",
		"shard_end", "closed", "parents", "pending_rewind", "lag_ms", "caught_up", "bytes_per_s", "records_per_s"}
	slices.Sort(fields)
	if len(objs) != 6 {
		t.Fatalf("status --json: %d objects, want 6:\n%s", len(objs), res.stdout)
	}
	for i, o := range objs {
		var keys []string
		for k := range o {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, fields) {
			t.Errorf("object %d has fields %v, want %v", i, keys, fields)
		}
		if o["shard_id"] != shardID(i) {
			t.Errorf("object %d is %v, want %s (sorted by shard id)", i, o["shard_id"], shardID(i))
		}
	}
	type want struct {
		owner, inc, checkpoint, rewind string
		counter                        float64
		row, pending, end, closed      bool
		parents                        []any
		lag                            string // "nil", "0", ">0"
		caughtUp                       any    // bool, or nil
		bytes, records                 float64
	}
	wants := []want{
		{owner: "", checkpoint: leases.ShardEnd, counter: 4, row: true, end: true, closed: true, parents: []any{}, lag: "nil", caughtUp: nil},
		{owner: "svc-b", inc: "inc-b", checkpoint: seqs["p1-2"], counter: 3, row: true, closed: true, parents: []any{}, lag: "0", caughtUp: false, bytes: 1_234_567, records: 850},
		{owner: "svc-a", inc: "inc-a2", checkpoint: seqs["c2-1"], rewind: leases.RewindTrimHorizon, counter: 4, row: true, parents: []any{"shardId-000000000000"}, lag: "0", caughtUp: false},
		{owner: "", checkpoint: seqs["c3-2"], counter: 4, row: true, parents: []any{"shardId-000000000000"}, lag: "0", caughtUp: true, bytes: 4_200, records: 12},
		{owner: "", checkpoint: "AT_TIMESTAMP:1577934245000", counter: 2, row: true, pending: true, parents: []any{"shardId-000000000001"}, lag: ">0", caughtUp: false},
		{owner: "", checkpoint: "", counter: 0, row: false, parents: []any{"shardId-000000000001"}, lag: ">0", caughtUp: false},
	}
	for i, w := range wants {
		o := objs[i]
		check := func(field string, got, want any) {
			t.Helper()
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			if string(gj) != string(wj) {
				t.Errorf("%s: %s = %s, want %s", shardID(i), field, gj, wj)
			}
		}
		check("owner", o["owner"], w.owner)
		check("incarnation", o["incarnation"], w.inc)
		check("checkpoint", o["checkpoint"], w.checkpoint)
		check("pending_rewind", o["pending_rewind"], w.rewind)
		check("counter", o["counter"], w.counter)
		check("row_exists", o["row_exists"], w.row)
		check("checkpoint_pending", o["checkpoint_pending"], w.pending)
		check("shard_end", o["shard_end"], w.end)
		check("closed", o["closed"], w.closed)
		check("parents", o["parents"], w.parents)
		check("caught_up", o["caught_up"], w.caughtUp)
		check("bytes_per_s", o["bytes_per_s"], w.bytes)
		check("records_per_s", o["records_per_s"], w.records)
		lag, isNum := o["lag_ms"].(float64)
		switch {
		case w.lag == "nil" && o["lag_ms"] != nil,
			w.lag == "0" && (!isNum || lag != 0),
			w.lag == ">0" && (!isNum || lag <= 0):
			t.Errorf("%s: lag_ms = %v, want %s", shardID(i), o["lag_ms"], w.lag)
		}
	}
}

// normalizeStatus replaces sequence numbers by the labels of their records
// and non-zero lags by "behind", and aligns the columns again.
func normalizeStatus(t *testing.T, out string, labels map[string]string) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := lines[0]
	var offsets []int
	for _, col := range statusHeader {
		i := strings.Index(header, col)
		if i < 0 {
			t.Fatalf("no column %s in the header %q", col, header)
		}
		offsets = append(offsets, i)
	}
	seq := regexp.MustCompile(`\d{20,}`)
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for n, line := range lines {
		var cells []string
		for i, off := range offsets {
			end := len(line)
			if i+1 < len(offsets) {
				end = min(offsets[i+1], len(line))
			}
			cell := strings.TrimSpace(line[min(off, len(line)):end])
			if n > 0 {
				cell = seq.ReplaceAllStringFunc(cell, func(s string) string {
					if l, ok := labels[s]; ok {
						return "<" + l + ">"
					}
					return "<unknown sequence number>"
				})
				if statusHeader[i] == "LAG" && cell != "-" && cell != "0s" && cell != "?" {
					if _, err := time.ParseDuration(cell); err != nil {
						t.Errorf("line %d: LAG %q is not a duration", n, cell)
					}
					cell = "behind"
				}
			}
			cells = append(cells, cell)
		}
		tw.Write([]byte(strings.Join(cells, "\t") + "\n"))
	}
	tw.Flush()
	return b.String()
}

// TestShowRate: rates to three significant digits with an SI prefix.
func TestShowRate(t *testing.T) {
	t.Parallel()
	for v, want := range map[int64]string{
		0: "-", -3: "-", 7: "7", 999: "999", 1000: "1k", 1234: "1.23k", 9996: "10k", 12345: "12.3k", 99_960: "100k",
		123_456: "123k", 999_499: "999k", 999_500: "1M", 1_200_000: "1.2M", 2_097_152: "2.1M", 5_000_000_000: "5G",
	} {
		if got := showRate(v); got != want {
			t.Errorf("showRate(%d) = %q, want %q", v, got, want)
		}
	}
}
