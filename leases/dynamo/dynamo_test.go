package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
	"github.com/kinesislease/kinesislease/leases/leasestest"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// newStore returns a store on a fresh table of DynamoDB Local, whose client
// records every operation in faults.
func newStore(t testing.TB, faults *testutil.Faults, opts ...dynamo.Option) (*dynamo.Store, *dynamodb.Client) {
	t.Helper()
	client := testutil.DynamoClient(t, faults.DynamoOptions)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, client, table)
	return dynamo.New(testutil.Config(t), table, append([]dynamo.Option{dynamo.WithDynamoDBClient(client)}, opts...)...), client
}

// TestConformance runs leasestest against DynamoDB Local and checks that the
// store called no DynamoDB operation but GetItem and UpdateItem.
func TestConformance(t *testing.T) {
	t.Parallel()
	testutil.Slow(t)
	faults := &testutil.Faults{}
	s, _ := newStore(t, faults)
	leasestest.Run(t, func(*testing.T) leases.Store { return s })

	ops := faults.Ops()
	for _, op := range ops {
		if op != "GetItem" && op != "UpdateItem" {
			t.Errorf("the store called dynamodb:%s; it may call only GetItem and UpdateItem", op)
		}
	}
	if faults.Calls("GetItem") == 0 || faults.Calls("UpdateItem") == 0 {
		t.Fatalf("recorded operations %v: the recorder saw no GetItem or UpdateItem, so it checked nothing", ops)
	}
	t.Logf("operations called during the suite: %v (GetItem %d, UpdateItem %d)", ops, faults.Calls("GetItem"), faults.Calls("UpdateItem"))
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// rawItem reads a row as DynamoDB holds it.
func rawItem(t *testing.T, client *dynamodb.Client, table, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := client.GetItem(testutil.WithoutFaults(ctx(t)), &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{"lease_key": &types.AttributeValueMemberS{Value: key}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// TestRowFormat pins the attribute names and types other tools read.
func TestRowFormat(t *testing.T) {
	t.Parallel()
	s, client := newStore(t, &testutil.Faults{})
	k := leases.Key{Stream: "orders", Shard: "shardId-000000000001"}
	l, err := s.Create(ctx(t), k)
	if err != nil {
		t.Fatal(err)
	}
	if l, err = s.TakeAs(ctx(t), l, "instance-a", "inc-a"); err != nil {
		t.Fatal(err)
	}
	if _, err = s.Checkpoint(ctx(t), l, leases.Checkpoint{Sequence: "4959", SubSequence: 2}); err != nil {
		t.Fatal(err)
	}
	item := rawItem(t, client, s.Table(), "orders:shardId-000000000001")
	want := map[string]string{
		"lease_key": "S", "owner": "S", "incarnation": "S", "checkpoint": "S",
		"sub_sequence": "N", "lease_counter": "N", "write_token": "S",
	}
	for name, typ := range want {
		v, ok := item[name]
		if !ok {
			t.Errorf("row lacks attribute %s", name)
			continue
		}
		if got := fmt.Sprintf("%T", v); !strings.HasSuffix(got, "Member"+typ) {
			t.Errorf("attribute %s is %s, want type %s", name, got, typ)
		}
	}
	if got := item["lease_counter"].(*types.AttributeValueMemberN).Value; got != "3" {
		t.Errorf("lease_counter = %s, want 3", got)
	}
	if got := item["owner"].(*types.AttributeValueMemberS).Value; got != "instance-a" {
		t.Errorf("owner = %s", got)
	}
	if len(item) != len(want) {
		t.Errorf("row attributes %v, want exactly %v", item, want)
	}
}

// TestStreamMarkFormat pins a stream's mark item: "#stream:" and the
// stream, its first token in mark (S) and its first marker's subscription
// time in since (N, Unix milliseconds); and a mark item as a version before
// since wrote it (mark alone) reads back with a zero Since and is kept so.
func TestStreamMarkFormat(t *testing.T) {
	t.Parallel()
	s, client := newStore(t, &testutil.Faults{})
	at := time.Date(2026, 4, 2, 9, 30, 0, 250_000_000, time.UTC)
	if _, err := s.MarkStream(ctx(t), "orders", leases.Mark{Token: "inc-a", Since: at}); err != nil {
		t.Fatal(err)
	}
	item := rawItem(t, client, s.Table(), "#stream:orders")
	if len(item) != 3 {
		t.Errorf("mark item %v, want lease_key, mark and since", item)
	}
	if v, ok := item["mark"].(*types.AttributeValueMemberS); !ok || v.Value != "inc-a" {
		t.Errorf("mark = %#v, want S inc-a", item["mark"])
	}
	if v, ok := item["since"].(*types.AttributeValueMemberN); !ok || v.Value != strconv.FormatInt(at.UnixMilli(), 10) {
		t.Errorf("since = %#v, want N %d", item["since"], at.UnixMilli())
	}

	_, err := client.UpdateItem(testutil.WithoutFaults(ctx(t)), &dynamodb.UpdateItemInput{
		TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{"lease_key": &types.AttributeValueMemberS{Value: "#stream:returns"}},
		UpdateExpression:          aws.String("SET mark = :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberS{Value: "inc-old"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []func() (leases.Mark, error){
		func() (leases.Mark, error) { return s.StreamMark(ctx(t), "returns") },
		func() (leases.Mark, error) {
			return s.MarkStream(ctx(t), "returns", leases.Mark{Token: "inc-new", Since: at})
		},
	} {
		if m, err := call(); err != nil || m.Token != "inc-old" || !m.Since.IsZero() {
			t.Errorf("a mark of an older version: %+v, %v; want inc-old with no time", m, err)
		}
	}
	if _, ok := rawItem(t, client, s.Table(), "#stream:returns")["since"]; ok {
		t.Error("MarkStream added a time to a mark of an older version")
	}
}

func TestMissingTable(t *testing.T) {
	t.Parallel()
	client := testutil.DynamoClient(t)
	table := testutil.TableName(t) // never created
	s := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(client))
	for name, err := range map[string]error{
		"Check":  s.Check(ctx(t)),
		"Get":    second(s.Get(ctx(t), leases.Key{Stream: "orders", Shard: "shardId-0"})),
		"Create": second(s.Create(ctx(t), leases.Key{Stream: "orders", Shard: "shardId-0"})),
	} {
		if !errors.Is(err, leases.ErrMisconfigured) {
			t.Errorf("%s on a missing table: %v, want leases.ErrMisconfigured", name, err)
		}
		var notFound *types.ResourceNotFoundException
		if !errors.As(err, &notFound) {
			t.Errorf("%s: the SDK's ResourceNotFoundException is not wrapped: %v", name, err)
		}
		for _, want := range []string{table, "not found", "create-table", "lease_key"} {
			if err != nil && !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", name, err, want)
			}
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestWrongKeySchema(t *testing.T) {
	t.Parallel()
	client := testutil.DynamoClient(t)
	table := testutil.TableName(t)
	_, err := client.CreateTable(ctx(t), &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("leaseKey"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("leaseKey"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(client))
	for name, err := range map[string]error{
		"Check":  s.Check(ctx(t)),
		"Create": second(s.Create(ctx(t), leases.Key{Stream: "orders", Shard: "shardId-0"})),
	} {
		if !errors.Is(err, leases.ErrMisconfigured) {
			t.Fatalf("%s on a table keyed leaseKey: %v, want leases.ErrMisconfigured", name, err)
		}
		for _, want := range []string{table, "lease_key", "key"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", name, err, want)
			}
		}
	}
}

func TestAccessDenied(t *testing.T) {
	t.Parallel()
	faults := &testutil.Faults{}
	s, _ := newStore(t, faults)
	faults.Inject(testutil.Fault{Err: &smithy.GenericAPIError{
		Code:    "AccessDeniedException",
		Message: "User: arn:aws:iam::123456789012:user/app is not authorized to perform: dynamodb:UpdateItem",
	}})
	_, err := s.Create(ctx(t), leases.Key{Stream: "orders", Shard: "shardId-0"})
	if !errors.Is(err, leases.ErrMisconfigured) {
		t.Fatalf("Create with access denied: %v, want leases.ErrMisconfigured", err)
	}
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "AccessDeniedException" {
		t.Fatalf("the SDK error is not wrapped: %v", err)
	}
	for _, want := range []string{s.Table(), "access denied", "dynamodb:GetItem", "dynamodb:UpdateItem"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

// TestAccessDeniedCodes: every AWS error code that says the credentials may
// not act (as internal/kinesisx classifies them) makes Check fail with
// leases.ErrMisconfigured naming the table and the permissions.
func TestAccessDeniedCodes(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"AccessDeniedException", "AccessDenied", "UnrecognizedClientException",
		"InvalidSignatureException", "MissingAuthenticationTokenException", "ExpiredTokenException", "InvalidClientTokenId"} {
		t.Run(code, func(t *testing.T) {
			faults := &testutil.Faults{}
			s, _ := newStore(t, faults)
			faults.Inject(testutil.Fault{Op: "GetItem", Err: &smithy.GenericAPIError{Code: code, Message: "denied"}})
			err := s.Check(ctx(t))
			if !errors.Is(err, leases.ErrMisconfigured) {
				t.Fatalf("Check with %s: %v, want leases.ErrMisconfigured", code, err)
			}
			var api smithy.APIError
			if !errors.As(err, &api) || api.ErrorCode() != code {
				t.Fatalf("the SDK error is not wrapped: %v", err)
			}
			for _, want := range []string{s.Table(), "access denied to GetItem", "dynamodb:GetItem", "dynamodb:UpdateItem"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say %q", err, want)
				}
			}
		})
	}
}

func TestInvalidTableName(t *testing.T) {
	t.Parallel()
	s := dynamo.New(testutil.Config(t), "no spaces allowed")
	err := s.Check(ctx(t))
	if !errors.Is(err, leases.ErrMisconfigured) || !strings.Contains(err.Error(), "no spaces allowed") {
		t.Fatalf("Check with an invalid table name: %v", err)
	}
}

func TestConflictWrapsSDKError(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, &testutil.Faults{})
	k := leases.Key{Stream: "orders", Shard: "shardId-0"}
	if _, err := s.Create(ctx(t), k); err != nil {
		t.Fatal(err)
	}
	_, err := s.Create(ctx(t), k)
	var ccf *types.ConditionalCheckFailedException
	if !errors.Is(err, leases.ErrConflict) || !errors.As(err, &ccf) {
		t.Fatalf("second Create: %v; want ErrConflict wrapping ConditionalCheckFailedException", err)
	}
}

// TestLostResponseRecognised: a write lands on the server, its answer is
// lost, the SDK retries it, the retry fails its condition (the first attempt
// changed the counter) and the store recognises its own write by its token.
func TestLostResponseRecognised(t *testing.T) {
	t.Parallel()
	faults := &testutil.Faults{}
	s, client := newStore(t, faults)
	k := leases.Key{Stream: "orders", Shard: "shardId-0"}
	l, err := s.Create(ctx(t), k)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []struct {
		name string
		do   func(leases.Lease) (leases.Lease, error)
		// before is how many UpdateItems the method sends before the row's
		// (a rewind's record: LastRewind).
		before int
	}{
		{"TakeAs", func(l leases.Lease) (leases.Lease, error) { return s.TakeAs(ctx(t), l, "a", "inc-a") }, 0},
		{"Checkpoint", func(l leases.Lease) (leases.Lease, error) {
			return s.Checkpoint(ctx(t), l, leases.Checkpoint{Sequence: "42"})
		}, 0},
		{"Rewind of a held row", func(l leases.Lease) (leases.Lease, error) {
			return s.Rewind(ctx(t), l, leases.Checkpoint{Sequence: "40"})
		}, 1},
		{"ApplyRewind", func(l leases.Lease) (leases.Lease, error) { return s.ApplyRewind(ctx(t), l) }, 0},
		{"Release", func(l leases.Lease) (leases.Lease, error) { return s.Release(ctx(t), l, leases.Checkpoint{}) }, 0},
		{"Rewind of a free row", func(l leases.Lease) (leases.Lease, error) {
			return s.Rewind(ctx(t), l, leases.Checkpoint{Sequence: "41"})
		}, 1},
		{"TakeAs again", func(l leases.Lease) (leases.Lease, error) { return s.TakeAs(ctx(t), l, "a", "inc-a") }, 0},
		{"TakeAs by a new incarnation", func(l leases.Lease) (leases.Lease, error) { return s.TakeAs(ctx(t), l, "a", "inc-a2") }, 0},
	} {
		before := faults.Attempts("UpdateItem")
		faults.Inject(testutil.Fault{Op: "UpdateItem", Skip: op.before, Times: 1, PerAttempt: true, LoseResponse: true})
		got, err := op.do(l)
		if err != nil {
			t.Fatalf("%s whose first answer was lost: %v, want success (the write landed)", op.name, err)
		}
		if n := faults.Attempts("UpdateItem") - before; n != 2+op.before {
			t.Fatalf("%s: %d UpdateItem attempts, want %d (%d before the row's, then one lost, one retried)", op.name, n, 2+op.before, op.before)
		}
		if got.Counter != l.Counter+1 {
			t.Fatalf("%s: counter %d, want %d: the write must land once", op.name, got.Counter, l.Counter+1)
		}
		stored, err := s.Get(ctx(t), k)
		if err != nil || stored.Token != got.Token || stored.Counter != got.Counter {
			t.Fatalf("%s: store holds %+v (%v), write returned %+v", op.name, stored, err, got)
		}
		l = got
	}
	_ = client
}

// TestLostResponseOfOthersWriteIsConflict: a lost answer whose retry meets
// another writer's change is a conflict, not a success.
func TestLostResponseOfOthersWriteIsConflict(t *testing.T) {
	t.Parallel()
	faults := &testutil.Faults{}
	s, _ := newStore(t, faults)
	other := dynamo.New(testutil.Config(t), s.Table(), dynamo.WithDynamoDBClient(testutil.DynamoClient(t)))
	k := leases.Key{Stream: "orders", Shard: "shardId-0"}
	l, err := s.Create(ctx(t), k)
	if err != nil {
		t.Fatal(err)
	}
	// Another instance takes the lease first; our TakeAs then fails its
	// condition on the first attempt already.
	if _, err := other.TakeAs(ctx(t), l, "b", "inc-b"); err != nil {
		t.Fatal(err)
	}
	_, err = s.TakeAs(ctx(t), l, "a", "inc-a")
	if !errors.Is(err, leases.ErrConflict) {
		t.Fatalf("TakeAs after another's: %v, want ErrConflict", err)
	}
}

func TestLegacyRows(t *testing.T) {
	t.Parallel()
	faults := &testutil.Faults{}
	plain, client := newStore(t, faults)
	table := plain.Table()
	putBare := func(shardID, cp string, sub int64) {
		t.Helper()
		_, err := client.PutItem(testutil.WithoutFaults(ctx(t)), &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				"lease_key":     &types.AttributeValueMemberS{Value: shardID},
				"checkpoint":    &types.AttributeValueMemberS{Value: cp},
				"sub_sequence":  &types.AttributeValueMemberN{Value: fmt.Sprint(sub)},
				"lease_counter": &types.AttributeValueMemberN{Value: "17"},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	putBare("shardId-000000000001", "49590338271490256608559692538361571095921575989136588898", 4)

	// No legacy stream named: the shard is refused, with a named error.
	_, err := plain.Create(ctx(t), leases.Key{Stream: "orders", Shard: "shardId-000000000001"})
	var legacy *dynamo.LegacyRowError
	if !errors.As(err, &legacy) || !errors.Is(err, leases.ErrMisconfigured) {
		t.Fatalf("Create over a bare row without LegacyStream: %v, want *LegacyRowError", err)
	}
	for _, want := range []string{table, "shardId-000000000001", `"orders"`, "LegacyStream"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if _, err := plain.Get(ctx(t), leases.Key{Stream: "orders", Shard: "shardId-000000000001"}); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("the refused Create wrote a row: %v", err)
	}
	// A shard without a bare row is fine.
	if _, err := plain.Create(ctx(t), leases.Key{Stream: "orders", Shard: "shardId-000000000002"}); err != nil {
		t.Fatalf("Create without a bare row: %v", err)
	}

	// The legacy stream named: its row starts from the bare row's checkpoint.
	s := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(client), dynamo.LegacyStream("orders"))
	l, err := s.Create(ctx(t), leases.Key{Stream: "orders", Shard: "shardId-000000000001"})
	if err != nil {
		t.Fatal(err)
	}
	want := leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588898", SubSequence: 4}
	if l.Checkpoint != want || l.Counter != 1 || l.Held() {
		t.Fatalf("row created from the legacy row: %+v, want free at counter 1 with checkpoint %v", l, want)
	}
	if got, err := s.Get(ctx(t), l.Key); err != nil || got.Checkpoint != want {
		t.Fatalf("stored: %+v, %v", got, err)
	}
	// Another stream with the same shard id ignores the bare row.
	other, err := s.Create(ctx(t), leases.Key{Stream: "payments", Shard: "shardId-000000000001"})
	if err != nil || !other.Checkpoint.IsZero() {
		t.Fatalf("Create for another stream: %+v, %v; want no checkpoint", other, err)
	}
	// The bare row is untouched.
	if item := rawItem(t, client, table, "shardId-000000000001"); item["lease_counter"].(*types.AttributeValueMemberN).Value != "17" {
		t.Fatalf("the bare row changed: %v", item)
	}
	for _, op := range faults.Ops() {
		if op != "GetItem" && op != "UpdateItem" {
			t.Errorf("legacy handling called dynamodb:%s", op)
		}
	}
}

// TestCancelDuringCall: a call blocked on a slow DynamoDB returns with the
// context's error when the context is cancelled.
func TestCancelDuringCall(t *testing.T) {
	t.Parallel()
	faults := &testutil.Faults{}
	s, _ := newStore(t, faults)
	faults.Inject(testutil.Fault{Op: "GetItem", Delay: time.Hour})
	c, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Get(c, leases.Key{Stream: "orders", Shard: "shardId-0"})
		done <- err
	}()
	for faults.Calls("GetItem") == 0 {
		time.Sleep(time.Millisecond) // wait until the call is in flight
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Get cancelled while in flight: %v, want context.Canceled", err)
	}
}

// BenchmarkConditionalUpdate measures conditional UpdateItem writes per
// second (Checkpoint, one lease per goroutine) on DynamoDB Local.
func BenchmarkConditionalUpdate(b *testing.B) {
	s, _ := newStore(b, &testutil.Faults{})
	var n atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := context.Background()
		k := leases.Key{Stream: "bench", Shard: fmt.Sprintf("shardId-%d", n.Add(1))}
		l, err := s.Create(c, k)
		if err == nil {
			l, err = s.TakeAs(c, l, "bench", "inc-bench")
		}
		if err != nil {
			b.Error(err)
			return
		}
		for i := 1; pb.Next(); i++ {
			if l, err = s.Checkpoint(c, l, leases.Checkpoint{Sequence: strconv.Itoa(i)}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}

// TestTakenMarkOutlivesItsRow: a row's taken mark (MarkTaken) is an item
// apart from the row: deleting the row leaves it, and a Create of the row
// again is told apart by it.
func TestTakenMarkOutlivesItsRow(t *testing.T) {
	t.Parallel()
	s, client := newStore(t, &testutil.Faults{})
	k := leases.Key{Stream: "orders", Shard: "shardId-9"}
	if _, err := s.Create(ctx(t), k); err != nil {
		t.Fatal(err)
	}
	if got, err := s.MarkTaken(ctx(t), k, "first"); err != nil || got != "first" {
		t.Fatalf("MarkTaken of a new row: %q, %v; want its own token", got, err)
	}
	if _, err := client.DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(s.Table()),
		Key: map[string]types.AttributeValue{"lease_key": &types.AttributeValueMemberS{Value: k.String()}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx(t), k); err != nil {
		t.Fatal(err)
	}
	if got, err := s.MarkTaken(ctx(t), k, "second"); err != nil || got != "first" {
		t.Fatalf("MarkTaken after the row was deleted and created again: %q, %v; want the first token", got, err)
	}
}

// TestRewindOutlivesItsRow: an operator's rewind is recorded apart from its
// row, so a row deleted after it (as DeleteItem, outside the store) is
// created again at the rewind's position with its Rewind id, not at the
// start position; CreateAs writes the id it is given.
func TestRewindOutlivesItsRow(t *testing.T) {
	t.Parallel()
	s, client := newStore(t, &testutil.Faults{})
	k := leases.Key{Stream: "orders", Shard: "shardId-7"}
	l, err := s.Create(ctx(t), k)
	if err != nil {
		t.Fatal(err)
	}
	if l.Rewind != "" || !l.Checkpoint.IsZero() {
		t.Fatalf("Create of a shard never rewound: %+v, want no checkpoint and no Rewind id", l)
	}
	to := leases.RewindAtSequence("49590338271490256608559692538361571095921575989136588898")
	r, err := s.Rewind(ctx(t), l, to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(s.Table()),
		Key: map[string]types.AttributeValue{"lease_key": &types.AttributeValueMemberS{Value: k.String()}}}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.LastRewind(ctx(t), k)
	if err != nil || rec != (leases.RewindRecord{ID: r.Rewind, To: to}) {
		t.Fatalf("LastRewind after the row was deleted: %+v, %v; want id %q at %v", rec, err, r.Rewind, to)
	}
	again, err := s.Create(ctx(t), k)
	if err != nil {
		t.Fatal(err)
	}
	if again.Checkpoint != to || again.Rewind != r.Rewind || again.Held() {
		t.Fatalf("Create after the rewound row was deleted: %+v, want it free at %v with Rewind id %q", again, to, r.Rewind)
	}
	k2 := leases.Key{Stream: "orders", Shard: "shardId-8"}
	c, err := s.CreateAs(ctx(t), k2, "a", "0.inc", leases.Checkpoint{Sequence: "5"}, "some-id")
	if err != nil || c.Rewind != "some-id" {
		t.Fatalf("CreateAs with a Rewind id: %+v, %v", c, err)
	}
	if got, err := s.Get(ctx(t), k2); err != nil || got.Rewind != "some-id" {
		t.Fatalf("row CreateAs made: %+v, %v; want Rewind id kept", got, err)
	}
}
