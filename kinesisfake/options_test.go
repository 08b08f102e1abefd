package kinesisfake_test

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/kinesisfake"
)

// TestListShardsPageOption: WithListShardsPage(2) lists a 5-shard stream in
// pages of 2, 2 and 1 linked by NextToken, and a smaller MaxResults still
// wins.
func TestListShardsPageOption(t *testing.T) {
	k := kinesisfake.New(kinesisfake.WithListShardsPage(2))
	if err := k.CreateStream("s", 5); err != nil {
		t.Fatal(err)
	}
	var pages []int
	in := &kinesis.ListShardsInput{StreamName: aws.String("s")}
	var ids []string
	for {
		out, err := k.ListShards(kctx, in)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, len(out.Shards))
		ids = append(ids, kIDs(out.Shards)...)
		if out.NextToken == nil {
			break
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
	if !slices.Equal(pages, []int{2, 2, 1}) || len(ids) != 5 || ids[4] != "shardId-000000000004" {
		t.Fatalf("pages %v, shards %v: want pages of 2, 2 and 1 listing the 5 shards", pages, ids)
	}
	out, err := k.ListShards(kctx, &kinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Shards) != 1 || out.NextToken == nil {
		t.Fatalf("MaxResults 1: %d shards, NextToken %v; want 1 and a NextToken", len(out.Shards), out.NextToken)
	}
	defer func() {
		if recover() == nil {
			t.Error("WithListShardsPage(0) did not panic")
		}
	}()
	kinesisfake.WithListShardsPage(0)
}

// TestGetRecordsRateLimit: with WithGetRecordsRateLimit, the sixth
// GetRecords call on a shard within a second fails with
// ProvisionedThroughputExceededException whichever reader makes it, another
// shard is not affected, a refused call does not count, and a second later
// the shard may be read again. Without the option, the calls succeed.
func TestGetRecordsRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := kinesisfake.New(kinesisfake.WithGetRecordsRateLimit())
		if err := k.CreateStream("s", 2); err != nil {
			t.Fatal(err)
		}
		a := kIterator(t, k, kIterIn("s", "shardId-000000000000", types.ShardIteratorTypeTrimHorizon))
		b := kIterator(t, k, kIterIn("s", "shardId-000000000000", types.ShardIteratorTypeLatest))
		other := kIterator(t, k, kIterIn("s", "shardId-000000000001", types.ShardIteratorTypeTrimHorizon))
		get := func(it string) error {
			_, err := k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
			return err
		}
		for i := range kinesisfake.GetRecordsPerSecond {
			it := a
			if i%2 == 1 {
				it = b // a second reader shares the shard's limit
			}
			if err := get(it); err != nil {
				t.Fatalf("call %d within the second: %v", i+1, err)
			}
		}
		kWantErr[*types.ProvisionedThroughputExceededException](t, get(a))
		kWantErr[*types.ProvisionedThroughputExceededException](t, get(b))
		if err := get(other); err != nil {
			t.Fatalf("the other shard: %v", err)
		}
		time.Sleep(999 * time.Millisecond)
		// The refused calls did not count: the first five are a second old.
		kWantErr[*types.ProvisionedThroughputExceededException](t, get(a))
		time.Sleep(time.Millisecond)
		if err := get(a); err != nil {
			t.Fatalf("a second after the first calls: %v", err)
		}

		free := kNewStream(t, "s", 1)
		it := kIterator(t, free, kIterIn("s", "shardId-000000000000", types.ShardIteratorTypeTrimHorizon))
		for i := range 2 * kinesisfake.GetRecordsPerSecond {
			if _, err := free.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)}); err != nil {
				t.Fatalf("without the option, call %d: %v", i+1, err)
			}
		}
	})
}

// TestIteratorShard: IteratorShard names the stream and shard of an
// iterator from GetShardIterator and of a NextShardIterator, and refuses
// another Kinesis' iterators and other strings.
func TestIteratorShard(t *testing.T) {
	k := kNewStream(t, "s", 3)
	it := kIterator(t, k, kIterIn("s", "shardId-000000000002", types.ShardIteratorTypeTrimHorizon))
	if stream, shard, ok := k.IteratorShard(it); !ok || stream != "s" || shard != "shardId-000000000002" {
		t.Fatalf("IteratorShard = %q, %q, %v; want s, shardId-000000000002, true", stream, shard, ok)
	}
	out, err := k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	if err != nil {
		t.Fatal(err)
	}
	if _, shard, ok := k.IteratorShard(aws.ToString(out.NextShardIterator)); !ok || shard != "shardId-000000000002" {
		t.Fatalf("IteratorShard(NextShardIterator) = %q, %v; want shardId-000000000002", shard, ok)
	}
	other := kNewStream(t, "s", 3)
	if _, _, ok := other.IteratorShard(it); ok {
		t.Fatal("another Kinesis took the iterator for its own")
	}
	if _, _, ok := k.IteratorShard("not an iterator"); ok {
		t.Fatal("a string that is no iterator named a shard")
	}
}

// TestCreateStreamManyShards: a stream may have more than 10,000 shards
// (the large simulations use 20,000), listed in full; a shard count of 0 or
// above the fake's bound is refused.
func TestCreateStreamManyShards(t *testing.T) {
	k := kNewStream(t, "s", 20000)
	if ids := kIDs(kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s")})); len(ids) != 20000 || ids[19999] != "shardId-000000019999" {
		t.Fatalf("%d shards listed: want 20000, the last shardId-000000019999", len(ids))
	}
	for _, n := range []int{0, 1_000_001} {
		kWantErr[*types.InvalidArgumentException](t, k.CreateStream(fmt.Sprintf("n%d", n), n))
	}
}
