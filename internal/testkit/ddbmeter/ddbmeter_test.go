package ddbmeter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/internal/balance"
	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/internal/testkit/ddbmeter"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/dynamo"
	"github.com/kinesislease/kinesislease/leases/leasestest"
)

// TestConformance runs the leases conformance suite on the DynamoDB store
// over the table: the table must answer every request the store sends as
// DynamoDB does, or the bill it draws up is of some other store.
func TestConformance(t *testing.T) {
	tbl := ddbmeter.NewTable()
	s := dynamo.New(aws.Config{}, "meter", dynamo.WithDynamoDBClient(tbl.Client(0)))
	leasestest.Run(t, func(*testing.T) leases.Store { return s })
	b := tbl.Bill().ByClient[0]
	if b.Reads == 0 || b.Writes == 0 || b.FailedWrites == 0 {
		t.Fatalf("bill %+v: the suite's reads, writes and failed writes were not all billed", b)
	}
}

func TestNumberSize(t *testing.T) {
	for _, c := range []struct {
		n    string
		want int
	}{
		{"0", 1}, {"5", 2}, {"10", 2}, {"99", 2}, {"100", 2}, {"120", 3}, {"1234", 3}, {"12345", 4},
		{"-5", 3}, {"0.5", 2}, {"1.5", 3}, {"1e2", 2}, {"000123", 3}, {"1230", 3}, {"12300", 3},
		{"1000000000000000000", 2}, {"9223372036854775807", 11},
	} {
		if got := ddbmeter.NumberSize(c.n); got != c.want {
			t.Errorf("NumberSize(%q) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestSize(t *testing.T) {
	item := map[string]types.AttributeValue{
		"lease_key": &types.AttributeValueMemberS{Value: "abc"},              // 9 + 3
		"n":         &types.AttributeValueMemberN{Value: "8"},                // 1 + 2
		"l":         &types.AttributeValueMemberBOOL{Value: true},            // 1 + 1
		"héllo":     &types.AttributeValueMemberS{Value: "wörld"},            // 6 + 6
		"b":         &types.AttributeValueMemberB{Value: []byte{1, 2, 3, 4}}, // 1 + 4
		"list": &types.AttributeValueMemberL{Value: []types.AttributeValue{ // 4 + 3 + (1+1) + (1+2)
			&types.AttributeValueMemberS{Value: "x"}, &types.AttributeValueMemberN{Value: "7"},
		}},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{ // 1 + 3 + (1+1+2) + (1+1+2)
			"i": &types.AttributeValueMemberS{Value: "ab"},
			"h": &types.AttributeValueMemberN{Value: "5"},
		}},
	}
	want := 12 + 3 + 2 + 12 + 5 + 12 + 12
	if got := ddbmeter.Size(item); got != want {
		t.Errorf("Size = %d, want %d", got, want)
	}
	for _, c := range []struct{ size, w, r int }{{0, 1, 1}, {1, 1, 1}, {1024, 1, 1}, {1025, 2, 1}, {4096, 4, 1}, {4097, 5, 2}} {
		if w, r := ddbmeter.WriteUnits(c.size), ddbmeter.ReadUnits(c.size); w != c.w || r != c.r {
			t.Errorf("size %d: %d write units, %d read units; want %d and %d", c.size, w, r, c.w, c.r)
		}
	}
}

// TestBilling checks what each kind of call is billed: reads by 4 KB,
// writes by 1 KB of the larger of before and after, failed conditional
// writes like the others, reads of missing items one unit.
func TestBilling(t *testing.T) {
	ctx := context.Background()
	tbl := ddbmeter.NewTable()
	tbl.Classify(func(key string) string { return "kind-" + key })
	c := tbl.Client(7)
	key := map[string]types.AttributeValue{ddbmeter.KeyAttr: &types.AttributeValueMemberS{Value: "k"}}
	get := func(consistent bool) {
		t.Helper()
		if _, err := c.GetItem(ctx, &dynamodb.GetItemInput{Key: key, ConsistentRead: aws.Bool(consistent)}); err != nil {
			t.Fatal(err)
		}
	}
	put := func(n int, cond string) error {
		t.Helper()
		in := &dynamodb.UpdateItemInput{Key: key, UpdateExpression: aws.String("SET pad = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: strings.Repeat("x", n)}}}
		if cond != "" {
			in.ConditionExpression = aws.String(cond)
		}
		_, err := c.UpdateItem(ctx, in)
		return err
	}
	get(true) // missing: 1 RCU
	if err := put(2000, ""); err != nil {
		t.Fatal(err) // 0 -> 2013 bytes: 2 WCU
	}
	get(true)  // 2013 bytes: 1 RCU
	get(false) // 0.5 RCU
	if err := put(10, ""); err != nil {
		t.Fatal(err) // 2013 -> 23 bytes: 2 WCU
	}
	var ccf *types.ConditionalCheckFailedException
	if err := put(5000, "attribute_not_exists(lease_key)"); !errors.As(err, &ccf) {
		t.Fatalf("conditional write on an existing item: %v, want a ConditionalCheckFailedException", err) // 23 -> 5013 would-be: 5 WCU
	}
	if got := tbl.Item("k")[`pad`].(*types.AttributeValueMemberS).Value; got != strings.Repeat("x", 10) {
		t.Fatalf("a failed write changed the item: pad %q", got)
	}
	b := tbl.Bill()
	want := ddbmeter.Units{RCU: 2.5, WCU: 9, Reads: 3, Writes: 3, FailedWrites: 1}
	if b.ByClient[7] != want || b.ByKey["k"] != want || b.ByClientKind[7]["kind-k"] != want {
		t.Errorf("bill %+v (by client), %+v (by key) and %+v (by client and kind), want %+v", b.ByClient[7], b.ByKey["k"], b.ByClientKind[7]["kind-k"], want)
	}
}

// TestRejects: what the table cannot evaluate, or DynamoDB would refuse,
// is a ValidationException, never a silent guess.
func TestRejects(t *testing.T) {
	ctx := context.Background()
	c := ddbmeter.NewTable().Client(0)
	key := map[string]types.AttributeValue{ddbmeter.KeyAttr: &types.AttributeValueMemberS{Value: "k"}}
	one := map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: "1"}}
	for _, in := range []*dynamodb.UpdateItemInput{
		{Key: key, UpdateExpression: aws.String("SET a = :v"), ExpressionAttributeValues: one, ExpressionAttributeNames: map[string]string{"#x": "x"}},
		{Key: key, UpdateExpression: aws.String("SET a = :v, b = :w"), ExpressionAttributeValues: one},
		{Key: key, UpdateExpression: aws.String("SET a = :v"), ExpressionAttributeValues: one, ConditionExpression: aws.String("begins_with(a, :v)")},
		{Key: key, UpdateExpression: aws.String("DELETE a :v"), ExpressionAttributeValues: one},
		{Key: key, UpdateExpression: aws.String("SET lease_key = :v"), ExpressionAttributeValues: one},
		{Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k"}}, UpdateExpression: aws.String("SET a = :v"), ExpressionAttributeValues: one},
	} {
		_, err := c.UpdateItem(ctx, in)
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" {
			t.Errorf("UpdateItem %q (condition %q): %v, want a ValidationException", aws.ToString(in.UpdateExpression), aws.ToString(in.ConditionExpression), err)
		}
	}
}

// TestMembershipRowSize: the rows the DynamoDB store writes, sized as
// DynamoDB does. A membership row of driver.RowCapacity entries of 64-byte
// owner ids stays under 1 KB (a heartbeat costs one write unit), as
// package leases promises.
func TestMembershipRowSize(t *testing.T) {
	ctx := context.Background()
	tbl := ddbmeter.NewTable()
	s := dynamo.New(aws.Config{}, "meter", dynamo.WithDynamoDBClient(tbl.Client(0)))
	for i := range driver.RowCapacity {
		owner := fmt.Sprintf("owner-%02d-", i)
		owner += strings.Repeat("x", 64-len(owner))
		// The values of a long-running member: a heartbeat counter of a
		// year at 1.25s, the leases it holds, the shards it ended, a
		// notice bumped, the longest streams digest (13 base-36 digits).
		m := leases.Member{Owner: owner, Incarnation: driver.NewIncarnation(0, "ABCDEFGHIJ"), Heartbeat: 25_228_800, Held: 2000, Ended: 1000, Notice: 99, Streams: "3w5e11264sgsf"}
		if _, err := s.Join(ctx, 0, m); err != nil {
			t.Fatal(err)
		}
	}
	row := ddbmeter.Size(tbl.Item(driver.MemberKey(0)))
	if row >= 1024 {
		t.Errorf("a full membership row is %d bytes: a heartbeat costs %d write units", row, ddbmeter.WriteUnits(row))
	}
	t.Logf("a full membership row of 64-byte owner ids: %d bytes (%d per entry)", row, (row-len(ddbmeter.KeyAttr)-len(driver.MemberKey(0))-3)/driver.RowCapacity)
}

// TestAnswersNeverChange: the items the table answers with are its own
// (shared, not copied), so a later write must never modify them: nested
// writes copy the maps they change.
func TestAnswersNeverChange(t *testing.T) {
	ctx := context.Background()
	c := ddbmeter.NewTable().Client(0)
	key := map[string]types.AttributeValue{ddbmeter.KeyAttr: &types.AttributeValueMemberS{Value: "k"}}
	update := func(expr string, values map[string]types.AttributeValue) map[string]types.AttributeValue {
		t.Helper()
		out, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{Key: key, UpdateExpression: aws.String(expr),
			ExpressionAttributeNames: map[string]string{"#m": "m_owner"}, ExpressionAttributeValues: values, ReturnValues: types.ReturnValueAllNew})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes
	}
	first := update("SET #m = :e", map[string]types.AttributeValue{":e": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"i": &types.AttributeValueMemberS{Value: "inc1"}, "h": &types.AttributeValueMemberN{Value: "1"},
	}}})
	got, err := c.GetItem(ctx, &dynamodb.GetItemInput{Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	second := update("SET #m.i = :i ADD #m.h :one REMOVE other", map[string]types.AttributeValue{
		":i": &types.AttributeValueMemberS{Value: "inc2"}, ":one": &types.AttributeValueMemberN{Value: "1"},
	})
	entry := func(item map[string]types.AttributeValue) string {
		m := item["m_owner"].(*types.AttributeValueMemberM).Value
		return m["i"].(*types.AttributeValueMemberS).Value + "/" + m["h"].(*types.AttributeValueMemberN).Value
	}
	if a, b, s := entry(first), entry(got.Item), entry(second); a != "inc1/1" || b != "inc1/1" || s != "inc2/2" {
		t.Errorf("entries %s (first answer), %s (read), %s (second answer); want inc1/1, inc1/1, inc2/2", a, b, s)
	}
}

// TestMembershipRowSizeWithLoads: what balancing by load adds to a full
// membership row (driver.RowCapacity entries): each entry's capacity (the
// default), total load and hot shards (balance.Summarize), and a
// utilization where published. Logged for
// docs/cost.md; the rows marked under stay under 1 KB: a heartbeat stays
// one write unit.
func TestMembershipRowSizeWithLoads(t *testing.T) {
	ctx := context.Background()
	hot := func(n int) string {
		var hs []balance.Hot
		for i := range n {
			hs = append(hs, balance.Hot{ID: balance.UnitID(plan.Unit{Stream: "orders", Shard: fmt.Sprintf("shardId-%012d", i)}), Load: 1_200_000})
		}
		return balance.EncodeHot(hs)
	}
	for _, c := range []struct {
		ownerLen, hot      int
		loads, under, util bool
	}{
		{64, 0, false, true, false}, {64, 0, true, true, false}, {64, 1, true, false, false}, {64, 4, true, false, false},
		{48, 0, true, true, false}, {48, 1, true, true, false}, {48, 4, true, false, false},
		{40, 0, false, true, false}, {40, 1, true, true, false}, {40, 4, true, false, false}, {32, 4, true, false, false},
		// With a utilization published (WithUtilization), two digits.
		{64, 0, true, false, true}, {56, 0, true, true, true}, {48, 1, true, false, true}, {40, 1, true, true, true},
	} {
		tbl := ddbmeter.NewTable()
		s := dynamo.New(aws.Config{}, "meter", dynamo.WithDynamoDBClient(tbl.Client(0)))
		for i := range driver.RowCapacity {
			owner := fmt.Sprintf("owner-%02d-", i)
			owner += strings.Repeat("x", c.ownerLen-len(owner))
			m := leases.Member{Owner: owner, Incarnation: driver.NewIncarnation(0, "ABCDEFGHIJ"), Heartbeat: 25_228_800, Held: 2000, Ended: 1000, Notice: 99, Streams: "3w5e11264sgsf"}
			if c.loads {
				m.Capacity, m.Load, m.Hot = 1000, balance.Quantize(123_456_789), hot(c.hot)
			}
			if c.util {
				m.Utilization = balance.PublishedUtilization(0, 0.437)
			}
			if _, err := s.Join(ctx, 0, m); err != nil {
				t.Fatal(err)
			}
		}
		row := ddbmeter.Size(tbl.Item(driver.MemberKey(0)))
		t.Logf("owner ids of %d bytes, loads %v, %d hot each, utilization %v: a full row %d bytes, %d write units a heartbeat", c.ownerLen, c.loads, c.hot, c.util, row, ddbmeter.WriteUnits(row))
		if c.under && row >= 1024 {
			t.Errorf("owner ids of %d bytes, %d hot each: a full membership row is %d bytes: a heartbeat costs %d write units", c.ownerLen, c.hot, row, ddbmeter.WriteUnits(row))
		}
	}
}
