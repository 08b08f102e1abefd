package kinesislease_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// TestLeastPrivilege records every AWS operation the library calls through a
// whole scenario (publish, consume, dead-letter, rebalance, reshard,
// checkpoint, shutdown) and checks them against the IAM policy the README
// documents: DynamoDB GetItem and UpdateItem only, and exactly the Kinesis
// actions the README lists.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	testutil.Slow(t)
	dynFaults, kinFaults := &testutil.Faults{}, &testutil.Faults{}
	dc := testutil.DynamoClient(t, dynFaults.DynamoOptions)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, dc, table)
	kc := testutil.KinesisClient(t, testutil.KinesisLocal, kinFaults.KinesisOptions)
	stream, dlq := testutil.StreamName(t), testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 2)
	testutil.CreateStream(t, kc, dlq, 1)

	type event struct {
		ID   int  `json:"id"`
		Fail bool `json:"fail"`
	}
	seen := make(chan int, 1000)
	handler := func(ctx context.Context, e event) error {
		if e.Fail {
			return kinesislease.DeadLetter(errors.New("poison"))
		}
		seen <- e.ID
		return nil
	}
	newSvc := func(owner string) *instance {
		svc, err := kinesislease.New(testutil.Config(t), append([]kinesislease.Option{
			testEncoding(t),
			kinesislease.WithKinesisClient(kc),
			kinesislease.WithLeaseStore(dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(dc))),
			kinesislease.WithOwner(owner),
			kinesislease.WithLogger(testLogger(t)),
			kinesislease.WithShardSyncInterval(300 * time.Millisecond),
		}, fastLease...)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := kinesislease.Subscribe(svc, stream, handler,
			kinesislease.WithStartPosition(kltype.TrimHorizon),
			kinesislease.WithCheckpoint(5, 100*time.Millisecond),
			kinesislease.WithPolling(50*time.Millisecond, 100*time.Millisecond, 0),
			kinesislease.WithDeadLetterStream(dlq),
		); err != nil {
			t.Fatal(err)
		}
		return runInstance(t, svc)
	}
	waitIDs := func(want map[int]bool) {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for len(want) > 0 {
			select {
			case id := <-seen:
				delete(want, id)
			case <-deadline:
				t.Fatalf("%d records not handled", len(want))
			}
		}
	}

	a := newSvc("a")
	pub, err := kinesislease.NewPublisher[event](a.svc, stream)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]bool{}
	publish := func(from, to int) {
		for id := from; id < to; id++ {
			if err := pub.Put(context.Background(), fmt.Sprintf("k%d", id%5), event{ID: id}); err != nil {
				t.Fatal(err)
			}
			want[id] = true
		}
	}
	publish(0, 40)
	if err := pub.Put(context.Background(), "poison", event{ID: -1, Fail: true}); err != nil {
		t.Fatal(err)
	}
	waitIDs(want)

	// Rebalance: a second instance joins.
	b := newSvc("b")
	// Reshard while both run (a test-only client: UpdateShardCount is not the
	// library's).
	admin := testutil.KinesisClient(t, testutil.KinesisLocal)
	if _, err := admin.UpdateShardCount(context.Background(), &kinesis.UpdateShardCountInput{
		StreamName: aws.String(stream), TargetShardCount: aws.Int32(4), ScalingType: ktypes.ScalingTypeUniformScaling,
	}); err != nil {
		t.Fatal(err)
	}
	waitActive(t, admin, stream)
	publish(40, 80)
	waitIDs(want)
	a.stop(t)
	publish(80, 100)
	waitIDs(want)
	if err := pub.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.stop(t)

	// The closed parents ended at SHARD_END: the scenario did reshard.
	store := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(testutil.DynamoClient(t)))
	for _, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
		l, err := store.Get(testutil.WithoutFaults(context.Background()), leases.Key{Stream: stream, Shard: id})
		if err != nil || l.Checkpoint.Sequence != leases.ShardEnd {
			t.Fatalf("parent %s: %+v, %v; want SHARD_END", id, l.Checkpoint, err)
		}
	}

	policy := readmePolicy(t)
	dynOps, kinOps := distinct(dynFaults.Ops()), distinct(kinFaults.Ops())
	t.Logf("DynamoDB operations: %v; Kinesis operations: %v", dynOps, kinOps)
	for _, op := range dynOps {
		if !policy["dynamodb:"+op] || (op != "GetItem" && op != "UpdateItem") {
			t.Errorf("the library called dynamodb:%s; only GetItem and UpdateItem are allowed", op)
		}
	}
	var documented []string
	for action := range policy {
		if strings.HasPrefix(action, "kinesis:") {
			documented = append(documented, strings.TrimPrefix(action, "kinesis:"))
		}
	}
	sort.Strings(documented)
	if !slices.Equal(kinOps, documented) {
		t.Errorf("Kinesis operations called %v, README's policy lists %v: they must match exactly", kinOps, documented)
	}
	if got := []string{"GetItem", "UpdateItem"}; !slices.Equal(dynOps, got) {
		t.Errorf("DynamoDB operations called %v, want exactly %v (the scenario exercises both)", dynOps, got)
	}
}

func distinct(ops []string) []string {
	out := slices.Clone(ops)
	slices.Sort(out)
	return slices.Compact(out)
}

// policyStatement is one statement of an IAM policy in the README.
type policyStatement struct {
	Sid      string
	Action   []string
	Resource []string
}

// readmeStatements returns the statements of the IAM policies in the
// README (a block with Action at the top stands for one statement).
func readmeStatements(t *testing.T) []policyStatement {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	type stmt struct {
		Sid      string
		Action   []string
		Resource json.RawMessage
	}
	resources := func(raw json.RawMessage) []string {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			return []string{one}
		}
		var many []string
		_ = json.Unmarshal(raw, &many)
		return many
	}
	var out []policyStatement
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(data, -1) {
		var doc struct {
			stmt
			Statement []stmt
		}
		if err := json.Unmarshal(m[1], &doc); err != nil {
			t.Fatalf("README: a json block is not valid JSON: %v\n%s", err, m[1])
		}
		for _, s := range append(doc.Statement, doc.stmt) {
			if len(s.Action) > 0 {
				out = append(out, policyStatement{Sid: s.Sid, Action: s.Action, Resource: resources(s.Resource)})
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("README has no IAM policy")
	}
	return out
}

// readmePolicy returns the actions of the README's IAM policy statements
// for polling: every statement but the enhanced fan-out ones.
func readmePolicy(t *testing.T) map[string]bool {
	t.Helper()
	actions := map[string]bool{}
	for _, s := range readmeStatements(t) {
		if strings.HasPrefix(s.Sid, "FanOut") {
			continue
		}
		for _, a := range s.Action {
			actions[a] = true
		}
	}
	return actions
}

func waitActive(t *testing.T, kc *kinesis.Client, stream string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out, err := kc.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err == nil && out.StreamDescriptionSummary.StreamStatus == ktypes.StreamStatusActive {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("stream %s not ACTIVE after resharding", stream)
}

// TestLeastPrivilegeFanOut records every Kinesis operation of an enhanced
// fan-out scenario (register the consumer, consume, rebalance between two
// instances, reshard, shut down) with the resource each names, and checks
// them against the README's fan-out policy: exactly its actions, each
// call on a resource its statement allows (SubscribeToShard and
// DescribeStreamConsumer on the consumer's ARN, the others on the
// stream's).
func TestLeastPrivilegeFanOut(t *testing.T) {
	t.Parallel()
	fo := kinesisfake.New(kinesisfake.WithFanOutRules(kinesisfake.FanOutRules{TakeoverAfter: 500 * time.Millisecond}))
	type call struct{ op, resource string }
	var mu sync.Mutex
	var calls []call
	faults := &testutil.Faults{}
	stream := testutil.StreamName(t)
	arnOf := func(name *string, arn *string) string {
		if arn != nil {
			return *arn
		}
		return "arn:aws:kinesis:" + testutil.Region + ":000000000000:stream/" + aws.ToString(name)
	}
	faults.Inject(testutil.Fault{Match: func(input any) bool {
		var c call
		switch in := input.(type) {
		case *kinesis.ListShardsInput:
			if in.NextToken != nil && in.StreamName == nil && in.StreamARN == nil {
				return false // the stream is in the token
			}
			c = call{"ListShards", arnOf(in.StreamName, in.StreamARN)}
		case *kinesis.DescribeStreamSummaryInput:
			c = call{"DescribeStreamSummary", arnOf(in.StreamName, in.StreamARN)}
		case *kinesis.RegisterStreamConsumerInput:
			c = call{"RegisterStreamConsumer", aws.ToString(in.StreamARN)}
		case *kinesis.DescribeStreamConsumerInput:
			r := aws.ToString(in.ConsumerARN)
			if r == "" {
				r = aws.ToString(in.StreamARN) + "/consumer/" + aws.ToString(in.ConsumerName) + ":*"
			}
			c = call{"DescribeStreamConsumer", r}
		case *kinesis.SubscribeToShardInput:
			c = call{"SubscribeToShard", aws.ToString(in.ConsumerARN)}
		default:
			c = call{fmt.Sprintf("%T", input), ""}
		}
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
		return false // records, never applies
	}})
	kc := fo.Client(faults.KinesisOptions)
	admin := fo.Client() // the test's own calls, not recorded
	if err := fo.CreateStream(stream, 2); err != nil {
		t.Fatal(err)
	}
	dc := testutil.DynamoClient(t)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, dc, table)
	store := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(dc))

	ta := newTally()
	a := startWith(t, kc, store, stream, "a", ta.handler("a"), fanOutSub(), kinesislease.WithShardSyncInterval(300*time.Millisecond))
	put(t, admin, stream, 0, 40)
	ta.waitFor(t, 0, 40, 30*time.Second)
	b := startWith(t, kc, store, stream, "b", ta.handler("b"), fanOutSub(), kinesislease.WithShardSyncInterval(300*time.Millisecond))
	for _, parent := range []string{"shardId-000000000000", "shardId-000000000001"} {
		if _, err := fo.SplitShard(stream, parent); err != nil {
			t.Fatal(err)
		}
	}
	put(t, admin, stream, 40, 60)
	ta.waitFor(t, 40, 60, 60*time.Second)
	a.stop(t)
	b.stop(t)

	var statements []policyStatement
	for _, s := range readmeStatements(t) {
		if strings.HasPrefix(s.Sid, "FanOut") {
			statements = append(statements, s)
		}
	}
	if len(statements) == 0 {
		t.Fatal("README has no fan-out policy (statements with a Sid starting FanOut)")
	}
	allowed := func(c call) bool {
		for _, s := range statements {
			if !slices.Contains(s.Action, "kinesis:"+c.op) {
				continue
			}
			for _, r := range s.Resource {
				r = strings.NewReplacer("REGION", testutil.Region, "ACCOUNT_ID", "000000000000", "stream/fulfilment", "stream/"+stream).Replace(r)
				if ok, _ := path.Match(r, c.resource); ok {
					return true
				}
			}
		}
		return false
	}
	mu.Lock()
	defer mu.Unlock()
	var ops, documented []string
	for _, c := range calls {
		ops = append(ops, c.op)
		if !allowed(c) {
			t.Errorf("kinesis:%s on %s: the README's fan-out policy does not allow it", c.op, c.resource)
		}
	}
	for _, s := range statements {
		for _, a := range s.Action {
			documented = append(documented, strings.TrimPrefix(a, "kinesis:"))
		}
	}
	ops, documented = distinct(ops), distinct(documented)
	t.Logf("Kinesis operations with enhanced fan-out: %v", ops)
	if !slices.Equal(ops, documented) {
		t.Errorf("Kinesis operations called %v, README's fan-out policy lists %v: they must match exactly", ops, documented)
	}
}
