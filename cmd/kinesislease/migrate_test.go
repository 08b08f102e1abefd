package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/kpl"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

func sid(i int) string { return fmt.Sprintf("shardId-%012d", i) }

// putTo puts one plain record {"id": id} on shard (by its starting hash
// key) and returns its sequence number.
func (r *rig) putTo(shard string, id int) string {
	data, _ := json.Marshal(order{ID: id})
	return r.putData(shard, data)
}

// putAggregateTo puts one KPL aggregate of the user records ids on shard.
// Each user record carries the shard's starting hash key, as the KPL builds
// an aggregate of records of one shard: the consumer skips user records
// that hash outside the shard they arrived on (they are re-put where they
// belong).
func (r *rig) putAggregateTo(shard string, ids ...int) string {
	hk := aws.ToString(r.listedShard(shard).HashKeyRange.StartingHashKey)
	users := make([]kpl.UserRecord, len(ids))
	for i, id := range ids {
		data, _ := json.Marshal(order{ID: id})
		users[i] = kpl.UserRecord{PartitionKey: "key-" + strconv.Itoa(id), ExplicitHashKey: hk, Data: data}
	}
	return r.putData(shard, kpl.Aggregate(users))
}

func (r *rig) putData(shard string, data []byte) string {
	r.t.Helper()
	s := r.listedShard(shard)
	out, err := r.kc.PutRecord(context.Background(), &kinesis.PutRecordInput{
		StreamName: aws.String(r.stream), Data: data, PartitionKey: aws.String("pk"), ExplicitHashKey: s.HashKeyRange.StartingHashKey,
	})
	if err != nil || aws.ToString(out.ShardId) != shard {
		r.t.Fatalf("PutRecord to %s: %v (went to %s)", shard, err, aws.ToString(out.ShardId))
	}
	return aws.ToString(out.SequenceNumber)
}

func (r *rig) listedShard(id string) ktypes.Shard {
	r.t.Helper()
	out, err := r.kc.ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String(r.stream)})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, s := range out.Shards {
		if aws.ToString(s.ShardId) == id {
			return s
		}
	}
	r.t.Fatalf("no shard %s", id)
	return ktypes.Shard{}
}

// splitShard splits shard in halves (kinesalite's SplitShard) and waits
// until the stream is ACTIVE.
func (r *rig) splitShard(shard string) {
	r.t.Helper()
	h := r.listedShard(shard).HashKeyRange
	lo, _ := new(big.Int).SetString(aws.ToString(h.StartingHashKey), 10)
	hi, _ := new(big.Int).SetString(aws.ToString(h.EndingHashKey), 10)
	mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
	ctx := context.Background()
	if _, err := r.kc.SplitShard(ctx, &kinesis.SplitShardInput{StreamName: aws.String(r.stream), ShardToSplit: aws.String(shard), NewStartingHashKey: aws.String(mid.String())}); err != nil {
		r.t.Fatalf("SplitShard: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, err := r.kc.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(r.stream)})
		if err != nil {
			r.t.Fatal(err)
		}
		if out.StreamDescriptionSummary.StreamStatus == ktypes.StreamStatusActive {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatal("stream not ACTIVE 30s after SplitShard")
		}
	}
}

// foreignTable creates a table keyed hashKey, as the KCL (leaseKey) or
// vmware-go-kcl (ShardID) creates its own.
func (r *rig) foreignTable(hashKey string) string {
	name := testutil.TableName(r.t)
	testutil.CreateKeyedTable(r.t, r.ddb, name, hashKey)
	return name
}

func (r *rig) putItem(table string, it map[string]dtypes.AttributeValue) {
	r.t.Helper()
	if _, err := r.ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
		r.t.Fatalf("PutItem: %v", err)
	}
}

// kclItem is a lease item as the KCL writes it (DynamoDBLeaseSerializer
// .toDynamoRecord, and DynamoDBMultiStreamLeaseSerializer.toDynamoRecord for
// a multi-stream key, in amazon-kinesis-client/src/main/java/software/
// amazon/kinesis/leases/dynamodb/ at 024eb86e2163a3d211cacf21f44f5411b6c41c53,
// v3.5.1): leaseKey, leaseCounter, leaseOwner, ownerSwitchesSinceCheckpoint,
// checkpoint, checkpointSubSequenceNumber, parentShardId and childShardIds
// (string sets), entityType; streamName and shardId for multi-stream.
func kclItem(streamID, shard, checkpoint string, sub int64, owner string, parents, children []string) map[string]dtypes.AttributeValue {
	key := shard
	if streamID != "" {
		key = streamID + ":" + shard
	}
	it := map[string]dtypes.AttributeValue{
		"leaseKey":                     &dtypes.AttributeValueMemberS{Value: key},
		"leaseCounter":                 &dtypes.AttributeValueMemberN{Value: "17"},
		"ownerSwitchesSinceCheckpoint": &dtypes.AttributeValueMemberN{Value: "0"},
		"checkpoint":                   &dtypes.AttributeValueMemberS{Value: checkpoint},
		"checkpointSubSequenceNumber":  &dtypes.AttributeValueMemberN{Value: strconv.FormatInt(sub, 10)},
		"entityType":                   &dtypes.AttributeValueMemberS{Value: "LEASE"},
	}
	if owner != "" {
		it["leaseOwner"] = &dtypes.AttributeValueMemberS{Value: owner}
	}
	if len(parents) > 0 {
		it["parentShardId"] = &dtypes.AttributeValueMemberSS{Value: parents}
	}
	if len(children) > 0 {
		it["childShardIds"] = &dtypes.AttributeValueMemberSS{Value: children}
	}
	if streamID != "" {
		it["streamName"] = &dtypes.AttributeValueMemberS{Value: streamID}
		it["shardId"] = &dtypes.AttributeValueMemberS{Value: shard}
	}
	return it
}

// vmwItem is a checkpoint item as vmware-go-kcl-v2 writes it
// (DynamoCheckpoint.GetLease and CheckpointSequence, PutItem of ShardID,
// AssignedTo, LeaseTimeout as RFC 3339 with nanoseconds, ParentShardId and
// Checkpoint when set, in clientlibrary/checkpoint/dynamodb-checkpointer.go
// at f6e79f1a2d4169e05d949d465563c1c45f0a050c).
func vmwItem(shard, checkpoint, parent, owner string) map[string]dtypes.AttributeValue {
	it := map[string]dtypes.AttributeValue{"ShardID": &dtypes.AttributeValueMemberS{Value: shard}}
	if owner != "" {
		it["AssignedTo"] = &dtypes.AttributeValueMemberS{Value: owner}
		it["LeaseTimeout"] = &dtypes.AttributeValueMemberS{Value: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)}
	}
	if parent != "" {
		it["ParentShardId"] = &dtypes.AttributeValueMemberS{Value: parent}
	}
	if checkpoint != "" {
		it["Checkpoint"] = &dtypes.AttributeValueMemberS{Value: checkpoint}
	}
	return it
}

// TestImportResume moves a consumer from each source to kinesislease: the
// foreign table is left as its library leaves it when stopped mid-stream
// (a finished parent and its children, one checkpointed, one not started;
// an unfinished parent whose children wait; a checkpoint inside a KPL
// aggregate), imported with the command, and a service started at LATEST on
// the imported rows must hand over every record after the checkpoints once
// (none lost, none twice), children only after their parent's last record.
func TestImportResume(t *testing.T) {
	t.Parallel()
	for _, source := range []string{"kcl", "kcl-multi-stream", "vmware-go-kcl"} {
		t.Run(source, func(t *testing.T) { t.Parallel(); testImportResume(t, source) }) // a rig of its own
	}
}

func testImportResume(t *testing.T, source string) {
	r := newRig(t, testutil.Kinesalite, 3)
	ids := func(from, to int) []int {
		var out []int
		for i := from; i <= to; i++ {
			out = append(out, i)
		}
		return out
	}
	seq := map[int]string{}
	for _, id := range ids(0, 5) {
		seq[id] = r.putTo(sid(0), id)
	}
	for _, id := range ids(10, 15) {
		seq[id] = r.putTo(sid(1), id)
	}
	for _, id := range ids(20, 22) {
		seq[id] = r.putTo(sid(2), id)
	}
	agg := r.putAggregateTo(sid(2), ids(23, 26)...)
	for _, id := range ids(27, 29) {
		seq[id] = r.putTo(sid(2), id)
	}
	r.splitShard(sid(0)) // children 3 and 4
	r.splitShard(sid(1)) // children 5 and 6
	for child, first := range map[int]int{3: 30, 4: 40, 5: 50, 6: 60} {
		for _, id := range ids(first, first+3) {
			seq[id] = r.putTo(sid(child), id)
		}
	}

	// The source stopped with: shard 0 finished (SHARD_END); its child 3
	// checkpointed at record 31, child 4 not started; shard 1 checkpointed
	// at record 12, its children 5 and 6 waiting; shard 2 inside the
	// aggregate: for the KCL after its user records 23 and 24 (sub-sequence
	// 1), for vmware-go-kcl, which checkpoints whole records, after it.
	want := map[string][]int{
		sid(0): nil, sid(3): ids(32, 33), sid(4): ids(40, 43),
		sid(1): ids(13, 15), sid(5): ids(50, 53), sid(6): ids(60, 63),
		sid(2): append(ids(25, 26), ids(27, 29)...),
	}
	var table string
	switch source {
	case "kcl", "kcl-multi-stream":
		table = r.foreignTable("leaseKey")
		streamID := ""
		if source == "kcl-multi-stream" {
			streamID = "123456789012:" + r.stream + ":1700000000"
		} else {
			// A multi-stream table may have deleted the finished parent's
			// lease: the import infers SHARD_END from its child's.
			r.putItem(table, kclItem("", sid(0), "SHARD_END", 0, "", nil, []string{sid(3), sid(4)}))
		}
		r.putItem(table, kclItem(streamID, sid(3), seq[31], 0, "kcl-worker-2", []string{sid(0)}, nil))
		r.putItem(table, kclItem(streamID, sid(4), "TRIM_HORIZON", 0, "kcl-worker-1", []string{sid(0)}, nil))
		r.putItem(table, kclItem(streamID, sid(1), seq[12], 0, "kcl-worker-1", nil, nil))
		r.putItem(table, kclItem(streamID, sid(5), "TRIM_HORIZON", 0, "kcl-worker-2", []string{sid(1)}, nil))
		r.putItem(table, kclItem(streamID, sid(6), "TRIM_HORIZON", 0, "kcl-worker-1", []string{sid(1)}, nil))
		r.putItem(table, kclItem(streamID, sid(2), agg, 1, "kcl-worker-2", nil, nil))
	case "vmware-go-kcl":
		table = r.foreignTable("ShardID")
		r.putItem(table, vmwItem(sid(0), "SHARD_END", "", ""))
		r.putItem(table, vmwItem(sid(3), seq[31], sid(0), "worker-2"))
		r.putItem(table, vmwItem(sid(4), "", sid(0), "worker-1")) // leased, no checkpoint yet
		r.putItem(table, vmwItem(sid(1), seq[12], "", "worker-1"))
		r.putItem(table, vmwItem(sid(5), "", sid(1), "worker-2"))
		r.putItem(table, vmwItem(sid(6), "", sid(1), "worker-1"))
		r.putItem(table, vmwItem(sid(2), agg, "", "worker-2"))
		want[sid(2)] = ids(27, 29)
	}

	res := runCLI(r.args("import", "--from-table", table, "--interval", "100ms", "--dry-run")...)
	if res.code != 0 || strings.Count(res.stdout, "\nshardId-") != 7 || strings.Count(res.stdout, ": would write") < 4 {
		t.Fatalf("import --dry-run: %v", res)
	}
	if l, err := r.store().Get(context.Background(), leases.Key{Stream: r.stream, Shard: sid(1)}); err == nil {
		t.Fatalf("a dry run wrote row %+v", l)
	}
	res = runCLI(r.args("import", "--from-table", table, "--interval", "100ms")...)
	if res.code != 0 || len(strings.Split(strings.TrimSpace(res.stdout), "\n")) != 7 {
		t.Fatalf("import: %v; want 7 lines, one per shard", res)
	}
	t.Logf("import:\n%s", res.stdout)

	j := newJournal()
	svc := r.startService("svc-1", j, kltype.Latest)
	total := 0
	for _, w := range want {
		total += len(w)
	}
	j.waitUntil(t, 60*time.Second, "every record after the checkpoints handled", func(ds []delivery) bool {
		got := map[int]bool{}
		for _, d := range ds {
			got[d.id] = true
		}
		for _, w := range want {
			for _, id := range w {
				if !got[id] {
					return false
				}
			}
		}
		return true
	})
	// Records of a shard are handed over in order: a resume too early would
	// have repeated records before the last one waited for, a parent read
	// again would have blocked its children. Stopping now loses nothing.
	svc.stop(t)
	ds := j.deliveries()
	lost, dup := 0, 0
	for shard, w := range want {
		got := idsOf(ds, shard)
		if !slices.Equal(got, w) {
			t.Errorf("shard %s: handled %v, want %v", shard, got, w)
		}
		seen := map[int]int{}
		for _, id := range got {
			seen[id]++
			if seen[id] == 2 {
				dup++
			}
		}
		for _, id := range w {
			if seen[id] == 0 {
				lost++
			}
		}
	}
	if len(ds) != total {
		t.Errorf("%d deliveries, want %d", len(ds), total)
	}
	lastOf := func(shard string) int {
		return slices.IndexFunc(ds, func(d delivery) bool { return d.shard == shard && d.id == 15 })
	}
	parentEnd := lastOf(sid(1))
	for _, child := range []string{sid(5), sid(6)} {
		if first := slices.IndexFunc(ds, func(d delivery) bool { return d.shard == child }); first < parentEnd {
			t.Errorf("child %s handled from delivery %d, before its parent's last record (delivery %d)", child, first, parentEnd)
		}
	}
	t.Logf("%s: %d records after the checkpoints, %d handled, %d lost, %d twice; children of shard 1 from delivery %d, after its last at %d",
		source, total, len(ds), lost, dup, parentEnd+1, parentEnd)
	if l := r.waitRow(sid(1), 10*time.Second, "at SHARD_END", func(l leases.Lease) bool { return l.Checkpoint.Sequence == leases.ShardEnd }); l.Held() {
		t.Errorf("shard 1 still held after the service stopped: %+v", l)
	}

	if source != "kcl" {
		return
	}
	// The way back, and forth again: export the service's checkpoints to a
	// new KCL table, import them into a new lease table: every row the same.
	kcl := r.foreignTable("leaseKey")
	res = runCLI(r.args("export", "--to-table", kcl, "--interval", "100ms")...)
	if res.code != 0 {
		t.Fatalf("export: %v", res)
	}
	t.Logf("export:\n%s", res.stdout)
	back := testutil.TableName(t)
	testutil.CreateLeaseTable(t, r.ddb, back)
	args := r.args("import", "--from-table", kcl, "--interval", "100ms")
	args[2] = back
	if res = runCLI(args...); res.code != 0 {
		t.Fatalf("import of the export: %v", res)
	}
	src, dst := r.store(), r.storeOn(back)
	for i := range 7 {
		key := leases.Key{Stream: r.stream, Shard: sid(i)}
		a, errA := src.Get(context.Background(), key)
		b, errB := dst.Get(context.Background(), key)
		if errA != nil || errB != nil || a.Checkpoint != b.Checkpoint {
			t.Errorf("shard %d: exported %+v (%v), imported back %+v (%v)", i, a.Checkpoint, errA, b.Checkpoint, errB)
		}
	}
}

// afterFirstScan returns client options that call fn once the first Scan
// has answered: between the two reads of import and export.
func afterFirstScan(fn func()) func(*dynamodb.Options) {
	var once sync.Once
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("testAfterFirstScan",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					out, md, err := next.HandleInitialize(ctx, in)
					if _, ok := in.Parameters.(*dynamodb.ScanInput); ok {
						once.Do(fn)
					}
					return out, md, err
				}), middleware.After)
		})
	}
}

// TestImportRefusals: each refusal exits with code 5, writes nothing and
// says what is wrong; --force writes.
func TestImportRefusals(t *testing.T) {
	t.Parallel()
	r := newRig(t, testutil.Kinesalite, 2)
	r0, r0b, r1 := r.putTo(sid(0), 1), r.putTo(sid(0), 2), r.putTo(sid(1), 3)
	kcl := r.foreignTable("leaseKey")
	r.putItem(kcl, kclItem("", sid(0), r0, 0, "kcl-worker-1", nil, nil))
	r.putItem(kcl, kclItem("", sid(1), r1, 0, "kcl-worker-1", nil, nil))
	imp := func(c *cli, extra ...string) result {
		return runWith(c, r.args("import", append([]string{"--from-table", kcl, "--interval", "50ms"}, extra...)...)...)
	}
	ctx := context.Background()
	st := r.store()
	refused := func(name string, res result, stderr ...string) {
		t.Helper()
		if res.code != exitRefused || !strings.Contains(res.stderr, "refused, nothing written") {
			t.Errorf("%s: %v; want exit code %d", name, res, exitRefused)
		}
		for _, s := range stderr {
			if !strings.Contains(res.stderr, s) {
				t.Errorf("%s: stderr lacks %q:\n%s", name, s, res.stderr)
			}
		}
		for _, shard := range []string{sid(0), sid(1)} {
			if !strings.Contains(res.stdout, shard+": ") {
				t.Errorf("%s: shard %s is not listed:\n%s", name, shard, res.stdout)
			}
		}
	}

	if res := runCLI(r.args("import", "--from-table", "no-such-table", "--interval", "50ms")...); res.code != exitNotFound || !strings.Contains(res.stderr, `table "no-such-table"`) {
		t.Errorf("a missing source table: %v; want exit code %d naming it", res, exitNotFound)
	}

	// The KCL application renews a lease between the two reads.
	renew := afterFirstScan(func() {
		_, err := r.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(kcl), Key: map[string]dtypes.AttributeValue{"leaseKey": &dtypes.AttributeValueMemberS{Value: sid(1)}},
			UpdateExpression:          aws.String("SET leaseCounter = leaseCounter + :one"),
			ExpressionAttributeValues: map[string]dtypes.AttributeValue{":one": &dtypes.AttributeValueMemberN{Value: "1"}},
		})
		if err != nil {
			t.Error(err)
		}
	})
	refused("running source", imp(&cli{dynamoOpts: []func(*dynamodb.Options){renew}}),
		fmt.Sprintf("table %q is still being written (%s changed within 50ms)", kcl, sid(1)), "stop the application")

	// AT_TIMESTAMP without its time.
	r.putItem(kcl, kclItem("", sid(1), "AT_TIMESTAMP", 0, "", nil, nil))
	res := imp(&cli{}, "--force")
	if res.code != exitRefused || !strings.Contains(res.stderr, "--at-timestamp") || !strings.Contains(res.stderr, sid(1)) {
		t.Errorf("AT_TIMESTAMP without --at-timestamp: %v", res)
	}
	r.putItem(kcl, kclItem("", sid(1), r1, 0, "kcl-worker-1", nil, nil))

	// Ours is further than the KCL's on shard 0.
	l, err := st.Create(ctx, leases.Key{Stream: r.stream, Shard: sid(0)})
	if err == nil {
		_, err = st.Rewind(ctx, l, leases.Checkpoint{Sequence: r0b})
	}
	if err != nil {
		t.Fatal(err)
	}
	refused("backwards", imp(&cli{}), "our row "+r.stream+":"+sid(0)+": would move the checkpoint back from "+r0b+" to "+r0)

	// Shard 1 held by svc-a, which heartbeats between the two reads.
	m := leases.Member{Owner: "svc-a", Incarnation: driver.NewIncarnation(0, "a1"), Heartbeat: 1}
	if _, err := st.Join(ctx, 0, m); err != nil {
		t.Fatal(err)
	}
	l1, err := st.Create(ctx, leases.Key{Stream: r.stream, Shard: sid(1)})
	if err == nil {
		_, err = st.TakeAs(ctx, l1, m.Owner, m.Incarnation)
	}
	if err != nil {
		t.Fatal(err)
	}
	heartbeat := func() {
		m.Heartbeat++
		if _, err := st.Heartbeat(ctx, 0, m); err != nil {
			t.Error(err)
		}
	}
	refused("held row", imp(&cli{dynamoOpts: []func(*dynamodb.Options){afterFirstScan(heartbeat)}}),
		"our row "+r.stream+":"+sid(1)+" is held by svc-a", "would move the checkpoint back")

	// Forced: shard 0 moves back, svc-a gets a rewind request.
	res = imp(&cli{dynamoOpts: []func(*dynamodb.Options){afterFirstScan(heartbeat)}}, "--force")
	if res.code != 0 || strings.Count(res.stderr, "forced past") != 2 {
		t.Fatalf("--force: %v", res)
	}
	if l, _ := st.Get(ctx, leases.Key{Stream: r.stream, Shard: sid(0)}); l.Checkpoint.Sequence != r0 {
		t.Errorf("forced, shard 0: %+v", l)
	}
	if l, _ := st.Get(ctx, leases.Key{Stream: r.stream, Shard: sid(1)}); l.RewindTo.Sequence != r1 || l.Owner != "svc-a" {
		t.Errorf("forced, shard 1: %+v, want svc-a asked to move to %s", l, r1)
	}
	if !strings.Contains(res.stdout, sid(1)+": requested from the holder") {
		t.Errorf("forced output:\n%s", res.stdout)
	}
}

func TestImportExportUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"import", "--table", "t", "--stream", "s"}, "the following arguments are required: --from-table"},
		{[]string{"export", "--table", "t", "--stream", "s"}, "the following arguments are required: --to-table"},
		{[]string{"import", "--table", "t", "--stream", "s", "--from-table", "k", "--format", "kcl2"}, `argument --format: invalid choice: "kcl2"`},
		{[]string{"import", "--table", "t", "--stream", "s", "--from-table", "k", "--at-timestamp", "yesterday"}, "argument --at-timestamp"},
		{[]string{"export", "--table", "t", "--stream", "s", "--to-table", "k", "--interval", "0s"}, "argument --interval 0s"},
	} {
		res := runCLI(tc.args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, tc.stderr) {
			t.Errorf("%q: %v; want exit code %d and %q", tc.args, res, exitUsage, tc.stderr)
		}
	}
	for _, cmd := range []string{"import", "export"} {
		res := runCLI(cmd, "--help")
		if res.code != 0 || !strings.Contains(res.stdout, "--dry-run") || !strings.Contains(res.stdout, "5  import, export: refused") {
			t.Errorf("%s --help: %v", cmd, res)
		}
	}
}
