package migrate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kpl"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
	"github.com/kinesislease/kinesislease/migrate"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// env is one test's stream on kinesalite and tables on DynamoDB Local.
type env struct {
	t      *testing.T
	ddb    *dynamodb.Client
	kc     *kinesis.Client
	stream string
}

func newEnv(t *testing.T, shards int32) *env {
	t.Helper()
	e := &env{t: t, ddb: testutil.DynamoClient(t), kc: testutil.KinesisClient(t, testutil.Kinesalite), stream: testutil.StreamName(t)}
	testutil.CreateStream(t, e.kc, e.stream, shards)
	return e
}

// ourTable creates a kinesislease lease table and returns a store on it.
func (e *env) ourTable() *dynamo.Store {
	e.t.Helper()
	name := testutil.TableName(e.t)
	testutil.CreateLeaseTable(e.t, e.ddb, name)
	return dynamo.New(testutil.Config(e.t), name, dynamo.WithDynamoDBClient(e.ddb))
}

// foreignTable creates a table keyed hashKey (leaseKey for the KCL, ShardID
// for vmware-go-kcl), as those libraries create theirs.
func (e *env) foreignTable(hashKey string) string {
	e.t.Helper()
	name := testutil.TableName(e.t)
	testutil.CreateKeyedTable(e.t, e.ddb, name, hashKey)
	return name
}

func (e *env) ours(st leases.Store) migrate.Ours {
	return migrate.Ours{Store: st, Kinesis: e.kc, Stream: e.stream}
}

// shards lists the stream's shards by id.
func (e *env) shards() map[string]ktypes.Shard {
	e.t.Helper()
	out, err := e.kc.ListShards(context.Background(), &kinesis.ListShardsInput{StreamName: aws.String(e.stream)})
	if err != nil {
		e.t.Fatal(err)
	}
	m := map[string]ktypes.Shard{}
	for _, s := range out.Shards {
		m[aws.ToString(s.ShardId)] = s
	}
	return m
}

// shardID is the id of shard i as kinesalite names it.
func shardID(i int) string { return fmt.Sprintf("shardId-%012d", i) }

// put puts one plain record {"id": id} on shard and returns its sequence
// number.
func (e *env) put(shard string, id int) string {
	e.t.Helper()
	data, _ := json.Marshal(map[string]int{"id": id})
	return e.putData(shard, data)
}

// putAggregate puts one KPL aggregate of n user records {"id": first+i}
// on shard.
func (e *env) putAggregate(shard string, first, n int) string {
	e.t.Helper()
	users := make([]kpl.UserRecord, n)
	for i := range users {
		data, _ := json.Marshal(map[string]int{"id": first + i})
		users[i] = kpl.UserRecord{PartitionKey: "agg-" + strconv.Itoa(first+i), Data: data}
	}
	return e.putData(shard, kpl.Aggregate(users))
}

func (e *env) putData(shard string, data []byte) string {
	e.t.Helper()
	s, ok := e.shards()[shard]
	if !ok {
		e.t.Fatalf("no shard %s", shard)
	}
	out, err := e.kc.PutRecord(context.Background(), &kinesis.PutRecordInput{
		StreamName: aws.String(e.stream), Data: data, PartitionKey: aws.String("pk"),
		ExplicitHashKey: s.HashKeyRange.StartingHashKey,
	})
	if err != nil {
		e.t.Fatalf("PutRecord: %v", err)
	}
	if got := aws.ToString(out.ShardId); got != shard {
		e.t.Fatalf("PutRecord went to %s, want %s", got, shard)
	}
	return aws.ToString(out.SequenceNumber)
}

// split splits shard in two halves and waits until the stream is ACTIVE.
func (e *env) split(shard string) {
	e.t.Helper()
	s := e.shards()[shard]
	lo, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.StartingHashKey), 10)
	hi, _ := new(big.Int).SetString(aws.ToString(s.HashKeyRange.EndingHashKey), 10)
	mid := new(big.Int).Add(lo, hi)
	mid.Rsh(mid, 1)
	ctx := context.Background()
	if _, err := e.kc.SplitShard(ctx, &kinesis.SplitShardInput{
		StreamName: aws.String(e.stream), ShardToSplit: aws.String(shard), NewStartingHashKey: aws.String(mid.String()),
	}); err != nil {
		e.t.Fatalf("SplitShard: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		out, err := e.kc.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(e.stream)})
		if err != nil {
			e.t.Fatal(err)
		}
		if out.StreamDescriptionSummary.StreamStatus == ktypes.StreamStatusActive {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatal("stream not ACTIVE 30s after SplitShard")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kclLease is a lease item as the KCL writes it: DynamoDBLeaseSerializer
// .toDynamoRecord, and DynamoDBMultiStreamLeaseSerializer.toDynamoRecord for
// a multi-stream lease (streamName holds the serialized stream identifier,
// MultiStreamLease.getLeaseKey joins it to the shard id with ':'), in
// amazon-kinesis-client/src/main/java/software/amazon/kinesis/leases/dynamodb/
// at 024eb86e2163a3d211cacf21f44f5411b6c41c53 (v3.5.1; the same attributes at
// v2.7.3, 3816fee9451d39c4fb42dcbc2e776adcf380b4e7). v1 marks a lease as KCL
// 1.x writes it (KinesisClientLeaseSerializer.toDynamoRecord in
// src/main/java/com/amazonaws/services/kinesis/leases/impl/ at 1.14.9,
// d039b156f844f74a3c102b0a880db960f36c6b3a): no entityType.
type kclLease struct {
	streamID   string // multi-stream identifier, "" for a single-stream lease
	shard      string
	owner      string
	counter    int64
	checkpoint string
	sub        int64
	parents    []string
	children   []string
	v1         bool
}

func (l kclLease) key() string {
	if l.streamID == "" {
		return l.shard
	}
	return l.streamID + ":" + l.shard
}

func (l kclLease) item() map[string]dtypes.AttributeValue {
	it := map[string]dtypes.AttributeValue{
		"leaseKey":                     &dtypes.AttributeValueMemberS{Value: l.key()},
		"leaseCounter":                 num(l.counter),
		"ownerSwitchesSinceCheckpoint": num(0),
		"checkpoint":                   &dtypes.AttributeValueMemberS{Value: l.checkpoint},
		"checkpointSubSequenceNumber":  num(l.sub),
	}
	if l.owner != "" {
		it["leaseOwner"] = &dtypes.AttributeValueMemberS{Value: l.owner}
	}
	if len(l.parents) > 0 {
		it["parentShardId"] = &dtypes.AttributeValueMemberSS{Value: l.parents}
	}
	if len(l.children) > 0 {
		it["childShardIds"] = &dtypes.AttributeValueMemberSS{Value: l.children}
	}
	if !l.v1 {
		it["entityType"] = &dtypes.AttributeValueMemberS{Value: "LEASE"}
		it["startingHashKey"] = &dtypes.AttributeValueMemberS{Value: "0"}
		it["endingHashKey"] = &dtypes.AttributeValueMemberS{Value: "340282366920938463463374607431768211455"}
	}
	if l.streamID != "" {
		it["streamName"] = &dtypes.AttributeValueMemberS{Value: l.streamID}
		it["shardId"] = &dtypes.AttributeValueMemberS{Value: l.shard}
	}
	return it
}

// vmwLease is a checkpoint item as vmware-go-kcl-v2 writes it:
// DynamoCheckpoint.GetLease (ShardID, AssignedTo, LeaseTimeout in RFC 3339
// with nanoseconds, ParentShardId when set, Checkpoint when set) and
// CheckpointSequence (the same with Checkpoint), both PutItem, in
// clientlibrary/checkpoint/dynamodb-checkpointer.go at
// f6e79f1a2d4169e05d949d465563c1c45f0a050c. The consumer's RemoveLeaseOwner
// removes AssignedTo when it shuts down.
type vmwLease struct {
	shard, owner, checkpoint, parent string
	timeout                          time.Time
}

func (l vmwLease) item() map[string]dtypes.AttributeValue {
	it := map[string]dtypes.AttributeValue{"ShardID": &dtypes.AttributeValueMemberS{Value: l.shard}}
	if l.owner != "" {
		it["AssignedTo"] = &dtypes.AttributeValueMemberS{Value: l.owner}
		it["LeaseTimeout"] = &dtypes.AttributeValueMemberS{Value: l.timeout.UTC().Format(time.RFC3339Nano)}
	}
	if l.parent != "" {
		it["ParentShardId"] = &dtypes.AttributeValueMemberS{Value: l.parent}
	}
	if l.checkpoint != "" {
		it["Checkpoint"] = &dtypes.AttributeValueMemberS{Value: l.checkpoint}
	}
	return it
}

func num(n int64) *dtypes.AttributeValueMemberN {
	return &dtypes.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// putItem writes it into table, as the foreign library does.
func (e *env) putItem(table string, it map[string]dtypes.AttributeValue) {
	e.t.Helper()
	if _, err := e.ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
		e.t.Fatalf("PutItem: %v", err)
	}
}

// getItem reads the item of key from table (keyed leaseKey).
func (e *env) getItem(table, key string) map[string]dtypes.AttributeValue {
	e.t.Helper()
	out, err := e.ddb.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]dtypes.AttributeValue{"leaseKey": &dtypes.AttributeValueMemberS{Value: key}},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Item
}

// row reads our row of shard.
func (e *env) row(st leases.Store, shard string) (leases.Lease, bool) {
	e.t.Helper()
	l, err := st.Get(context.Background(), leases.Key{Stream: e.stream, Shard: shard})
	if errors.Is(err, leases.ErrNotFound) {
		return l, false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return l, true
}

// setRow makes our row of shard free with checkpoint cp (none if zero).
func (e *env) setRow(st leases.Store, shard string, cp leases.Checkpoint) leases.Lease {
	e.t.Helper()
	ctx := context.Background()
	l, err := st.Create(ctx, leases.Key{Stream: e.stream, Shard: shard})
	if err == nil && !cp.IsZero() {
		l, err = st.Rewind(ctx, l, cp)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// afterScan wraps a DynamoDB client: after the n-th Scan (1-based) answered,
// it calls fn, before returning the answer. Import and Export read the
// table twice: fn at the first Scan runs between the two reads. The calls
// go to DynamoDB Local.
type afterScan struct {
	*dynamodb.Client
	mu    sync.Mutex
	scans int
	at    int
	fn    func()
}

func (c *afterScan) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := c.Client.Scan(ctx, in, optFns...)
	c.mu.Lock()
	c.scans++
	n := c.scans
	c.mu.Unlock()
	if n == c.at && c.fn != nil {
		c.fn()
	}
	return out, err
}

// rowsByShard indexes a report's rows.
func rowsByShard(rep *migrate.Report) map[string]migrate.Row {
	m := map[string]migrate.Row{}
	for _, r := range rep.Rows {
		m[r.Shard] = r
	}
	return m
}
