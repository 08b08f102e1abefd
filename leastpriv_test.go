package kinesislease_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testutil"
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
	newSvc := func(owner string) (*kinesislease.Service, context.CancelFunc, chan error) {
		svc, err := kinesislease.New(testutil.Config(t), append([]kinesislease.Option{
			kinesislease.WithKinesisClient(kc),
			kinesislease.WithLeaseStore(dynamo.New(testutil.Config(t), table, dynamo.WithClient(dc))),
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
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctx) }()
		return svc, cancel, done
	}
	stop := func(cancel context.CancelFunc, done chan error) {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
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

	pubSvc, cancelA, doneA := newSvc("a")
	pub, err := kinesislease.NewPublisher[event](pubSvc, stream)
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
	_, cancelB, doneB := newSvc("b")
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
	stop(cancelA, doneA)
	publish(80, 100)
	waitIDs(want)
	if err := pub.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	stop(cancelB, doneB)

	// The closed parents ended at SHARD_END: the scenario did reshard.
	store := dynamo.New(testutil.Config(t), table, dynamo.WithClient(testutil.DynamoClient(t)))
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

// readmePolicy returns the actions of the IAM policy statements in the README.
func readmePolicy(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]bool{}
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(data, -1) {
		var doc struct {
			Statement []struct {
				Action []string
			}
			Action []string
		}
		if err := json.Unmarshal(m[1], &doc); err != nil {
			t.Fatalf("README: a json block is not valid JSON: %v\n%s", err, m[1])
		}
		for _, a := range doc.Action {
			actions[a] = true
		}
		for _, s := range doc.Statement {
			for _, a := range s.Action {
				actions[a] = true
			}
		}
	}
	if len(actions) == 0 {
		t.Fatal("README has no IAM policy")
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
