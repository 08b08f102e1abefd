package kinesisfake_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/kinesisfake"
)

// A stream of two shards, answered with the SDK's own types: each record
// goes to the shard whose hash key range holds the MD5 of its partition key,
// and a shard reads back in the order its records were put.
func Example() {
	ctx := context.Background()
	k := kinesisfake.New()
	if err := k.CreateStream("orders", 2); err != nil {
		panic(err)
	}
	var shard string
	for _, key := range []string{"alice", "bob", "alice"} {
		out, err := k.PutRecord(ctx, &kinesis.PutRecordInput{
			StreamName:   aws.String("orders"),
			PartitionKey: aws.String(key),
			Data:         []byte("an order of " + key),
		})
		if err != nil {
			panic(err)
		}
		fmt.Println(key, "->", aws.ToString(out.ShardId))
		if key == "alice" {
			shard = aws.ToString(out.ShardId)
		}
	}

	it, err := k.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
		StreamName:        aws.String("orders"),
		ShardId:           aws.String(shard),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		panic(err)
	}
	got, err := k.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		panic(err)
	}
	for _, r := range got.Records {
		fmt.Printf("%s: %s\n", aws.ToString(r.PartitionKey), r.Data)
	}
	fmt.Println("records in the stream:", k.Records("orders"))
	// Output:
	// alice -> shardId-000000000000
	// bob -> shardId-000000000001
	// alice -> shardId-000000000000
	// alice: an order of alice
	// alice: an order of alice
	// records in the stream: 3
}
