package dynamo_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// answerClient answers every call with the same item, without a network:
// what a benchmark of it measures is the store's own work (building the
// request, reading the answer), not DynamoDB's or the SDK's.
type answerClient struct {
	item map[string]types.AttributeValue
}

func (c answerClient) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{Item: c.item}, nil
}

func (c answerClient) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return &dynamodb.UpdateItemOutput{Attributes: c.item}, nil
}

// BenchmarkStoreCPU measures the store's own CPU and allocations per call
// (answerClient: no network, no SDK), on the paths a running fleet takes
// most: a holder's Checkpoint, a TakeAs, a Get, and a member's Heartbeat
// on a full membership row (driver.RowCapacity entries read back). It is
// why the lease-row writes build their expressions by hand (see the
// package doc's Mapping).
func BenchmarkStoreCPU(b *testing.B) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	k := leases.Key{Stream: "orders", Shard: "shardId-000000000001"}
	row := map[string]types.AttributeValue{
		"lease_key": s(k.String()), "owner": s("ip-10-0-0-1.eu-west-1.compute.internal"), "incarnation": s("0.RRBQT7ZPO5"),
		"checkpoint": s("49590338271490256608559692538361571095921575989136588898"), "sub_sequence": n("0"),
		"lease_counter": n("42"), "write_token": s("O3XVRNSH3PFH5TDPJWAQIHUE24"),
	}
	l := leases.Lease{Key: k, Owner: "ip-10-0-0-1.eu-west-1.compute.internal", Incarnation: "0.RRBQT7ZPO5", Counter: 41, Token: "YFJSIVX4C65MDQMD5ANJJMIGB6"}
	cp := leases.Checkpoint{Sequence: "49590338271490256608559692538361571095921575989136588899"}
	members := map[string]types.AttributeValue{"lease_key": s("#members:0"), "n": n("8")}
	for i := range 8 {
		members[fmt.Sprintf("m_worker-%d", i)] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"i": s("0.RRBQT7ZPO5"), "h": n("1234"), "k": n("3"), "s": s("c0ffee"), "p": n("1500"),
		}}
	}
	m := leases.Member{Owner: "worker-0", Incarnation: "0.RRBQT7ZPO5", Heartbeat: 1235, Held: 3, Streams: "c0ffee", Proof: 1500e6}
	rowStore := dynamo.New(aws.Config{}, "bench", dynamo.WithDynamoDBClient(answerClient{row}))
	memberStore := dynamo.New(aws.Config{}, "bench", dynamo.WithDynamoDBClient(answerClient{members}))
	ctx := context.Background()
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Checkpoint", func() error { _, err := rowStore.Checkpoint(ctx, l, cp); return err }},
		{"TakeAs", func() error { _, err := rowStore.TakeAs(ctx, l, "worker-1", "0.ABCDEFGHIJ"); return err }},
		{"Get", func() error { _, err := rowStore.Get(ctx, k); return err }},
		{"Heartbeat", func() error { _, err := memberStore.Heartbeat(ctx, 0, m); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
