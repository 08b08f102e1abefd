package kinesisfake_test

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
)

var kctx = context.Background()

func kNewStream(t *testing.T, name string, shards int) *kinesisfake.Kinesis {
	t.Helper()
	k := kinesisfake.New()
	if err := k.CreateStream(name, shards); err != nil {
		t.Fatal(err)
	}
	return k
}

func kListAll(t *testing.T, k *kinesisfake.Kinesis, in *kinesis.ListShardsInput) []types.Shard {
	t.Helper()
	shards, err := kTryListAll(k, in)
	if err != nil {
		t.Fatal(err)
	}
	return shards
}

// kTryListAll is kListAll for a goroutine other than the test's.
func kTryListAll(k *kinesisfake.Kinesis, in *kinesis.ListShardsInput) ([]types.Shard, error) {
	var shards []types.Shard
	for {
		out, err := k.ListShards(kctx, in)
		if err != nil {
			return nil, fmt.Errorf("ListShards: %v", err)
		}
		shards = append(shards, out.Shards...)
		if out.NextToken == nil {
			return shards, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: in.MaxResults}
	}
}

func kIDs(shards []types.Shard) []string {
	var out []string
	for _, s := range shards {
		out = append(out, aws.ToString(s.ShardId))
	}
	return out
}

func kPut(t *testing.T, k *kinesisfake.Kinesis, stream string, entries ...types.PutRecordsRequestEntry) []types.PutRecordsResultEntry {
	t.Helper()
	recs, err := kTryPut(k, stream, entries...)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// kTryPut is kPut for a goroutine other than the test's.
func kTryPut(k *kinesisfake.Kinesis, stream string, entries ...types.PutRecordsRequestEntry) ([]types.PutRecordsResultEntry, error) {
	out, err := k.PutRecords(kctx, &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
	if err != nil {
		return nil, fmt.Errorf("PutRecords: %v", err)
	}
	if n := aws.ToInt32(out.FailedRecordCount); n != 0 {
		return nil, fmt.Errorf("PutRecords: %d failed: %+v", n, out.Records)
	}
	return out.Records, nil
}

func kEntry(key, data string) types.PutRecordsRequestEntry {
	return types.PutRecordsRequestEntry{PartitionKey: aws.String(key), Data: []byte(data)}
}

func kEntryAt(hashKey, data string) types.PutRecordsRequestEntry {
	return types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), ExplicitHashKey: aws.String(hashKey), Data: []byte(data)}
}

func kIterator(t *testing.T, k *kinesisfake.Kinesis, in *kinesis.GetShardIteratorInput) string {
	t.Helper()
	it, err := kTryIterator(k, in)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// kTryIterator is kIterator for a goroutine other than the test's.
func kTryIterator(k *kinesisfake.Kinesis, in *kinesis.GetShardIteratorInput) (string, error) {
	out, err := k.GetShardIterator(kctx, in)
	if err != nil {
		return "", fmt.Errorf("GetShardIterator: %v", err)
	}
	return aws.ToString(out.ShardIterator), nil
}

func kIterIn(stream, shard string, typ types.ShardIteratorType) *kinesis.GetShardIteratorInput {
	return &kinesis.GetShardIteratorInput{StreamName: aws.String(stream), ShardId: aws.String(shard), ShardIteratorType: typ}
}

// readAll reads from it until the iterator ends or an answer is empty; it
// returns the records' data and the last answer.
func kReadAll(t *testing.T, k *kinesisfake.Kinesis, it string) ([]string, *kinesis.GetRecordsOutput) {
	t.Helper()
	data, out, err := kTryReadAll(k, it)
	if err != nil {
		t.Fatal(err)
	}
	return data, out
}

// kTryReadAll is kReadAll for a goroutine other than the test's.
func kTryReadAll(k *kinesisfake.Kinesis, it string) ([]string, *kinesis.GetRecordsOutput, error) {
	var data []string
	for {
		out, err := k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
		if err != nil {
			return nil, nil, fmt.Errorf("GetRecords: %v", err)
		}
		for _, r := range out.Records {
			data = append(data, string(r.Data))
		}
		if out.NextShardIterator == nil || len(out.Records) == 0 {
			return data, out, nil
		}
		it = *out.NextShardIterator
	}
}

func kWantErr[E error](t *testing.T, err error) {
	t.Helper()
	var target E
	if !errors.As(err, &target) {
		t.Fatalf("err = %v (%T), want %T", err, err, target)
	}
}

func kHashOf(key string) *big.Int {
	sum := md5.Sum([]byte(key))
	return new(big.Int).SetBytes(sum[:])
}

func kBig(t *testing.T, s *string) *big.Int {
	t.Helper()
	n, ok := new(big.Int).SetString(aws.ToString(s), 10)
	if !ok {
		t.Fatalf("%q is not a decimal number", aws.ToString(s))
	}
	return n
}

func TestCreateStreamShards(t *testing.T) {
	k := kNewStream(t, "orders", 4)
	shards := kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("orders")})
	if got, want := kIDs(shards), []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003"}; !slices.Equal(got, want) {
		t.Fatalf("shards %v, want %v", got, want)
	}
	quarter := new(big.Int).Lsh(big.NewInt(1), 126)
	next := new(big.Int)
	for i, s := range shards {
		lo, hi := kBig(t, s.HashKeyRange.StartingHashKey), kBig(t, s.HashKeyRange.EndingHashKey)
		if lo.Cmp(next) != 0 {
			t.Errorf("shard %d starts at %s, want %s", i, lo, next)
		}
		if w := new(big.Int).Sub(hi, lo); w.Add(w, big.NewInt(1)).Cmp(quarter) != 0 {
			t.Errorf("shard %d is %s wide, want 2^126", i, w)
		}
		next.Add(hi, big.NewInt(1))
		if s.ParentShardId != nil || s.AdjacentParentShardId != nil || s.SequenceNumberRange.EndingSequenceNumber != nil {
			t.Errorf("shard %d: parents or end on a new shard: %+v", i, s)
		}
		if seq := aws.ToString(s.SequenceNumberRange.StartingSequenceNumber); len(seq) != 56 {
			t.Errorf("StartingSequenceNumber %q: want 56 digits", seq)
		}
	}
	if want := new(big.Int).Lsh(big.NewInt(1), 128); next.Cmp(want) != 0 {
		t.Errorf("ranges end at %s, want 2^128-1", next)
	}
	kWantErr[*types.ResourceInUseException](t, k.CreateStream("orders", 1))
	kWantErr[*types.InvalidArgumentException](t, k.CreateStream("other", 0))
	kWantErr[*types.InvalidArgumentException](t, k.CreateStream("bad name", 1))
	if got, want := k.ARN("orders"), "arn:aws:kinesis:us-east-1:000000000000:stream/orders"; got != want {
		t.Errorf("ARN = %q, want %q", got, want)
	}
	byARN := kListAll(t, k, &kinesis.ListShardsInput{StreamARN: aws.String(k.ARN("orders"))})
	if !slices.Equal(kIDs(byARN), kIDs(shards)) {
		t.Errorf("by ARN: %v", kIDs(byARN))
	}
	_, err := k.ListShards(kctx, &kinesis.ListShardsInput{StreamName: aws.String("missing")})
	kWantErr[*types.ResourceNotFoundException](t, err)
	_, err = k.ListShards(kctx, &kinesis.ListShardsInput{StreamARN: aws.String("arn:aws:kinesis:eu-west-1:123456789012:stream/orders")})
	kWantErr[*types.ResourceNotFoundException](t, err)
	_, err = k.ListShards(kctx, &kinesis.ListShardsInput{})
	kWantErr[*types.InvalidArgumentException](t, err)
}

func TestPutRecordsRoutesByHashKey(t *testing.T) {
	k := kNewStream(t, "s", 8)
	shards := kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s")})
	holder := func(h *big.Int) string {
		for _, s := range shards {
			if kBig(t, s.HashKeyRange.StartingHashKey).Cmp(h) <= 0 && h.Cmp(kBig(t, s.HashKeyRange.EndingHashKey)) <= 0 {
				return aws.ToString(s.ShardId)
			}
		}
		t.Fatalf("no shard holds %s", h)
		return ""
	}
	byKey := map[string]string{}
	last := map[string]*big.Int{}
	used := map[string]bool{}
	for round := range 5 {
		var entries []types.PutRecordsRequestEntry
		for i := range 100 {
			entries = append(entries, kEntry(fmt.Sprintf("key-%d", i), fmt.Sprintf("%d/%d", round, i)))
		}
		res := kPut(t, k, "s", entries...)
		if len(res) != len(entries) {
			t.Fatalf("%d results for %d entries", len(res), len(entries))
		}
		for i, r := range res {
			key := aws.ToString(entries[i].PartitionKey)
			shard := aws.ToString(r.ShardId)
			if want := holder(kHashOf(key)); shard != want {
				t.Fatalf("key %s on %s, want %s (MD5 routing)", key, shard, want)
			}
			if prev, ok := byKey[key]; ok && prev != shard {
				t.Fatalf("key %s on %s and %s", key, prev, shard)
			}
			byKey[key] = shard
			used[shard] = true
			seq := aws.ToString(r.SequenceNumber)
			if len(seq) != 56 {
				t.Fatalf("sequence number %q: want 56 digits", seq)
			}
			n := kBig(t, r.SequenceNumber)
			if p := last[shard]; p != nil && p.Cmp(n) >= 0 {
				t.Fatalf("shard %s: sequence number %s after %s", shard, n, p)
			}
			last[shard] = n
		}
	}
	if len(used) != 8 {
		t.Errorf("100 keys used %d of 8 shards", len(used))
	}
	if got := k.Records("s"); got != 500 {
		t.Errorf("Records = %d, want 500", got)
	}

	// An explicit hash key picks the shard, whatever the partition key.
	top := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1)).String()
	res := kPut(t, k, "s", kEntryAt("0", "low"), kEntryAt(top, "high"), kEntryAt(aws.ToString(shards[3].HashKeyRange.StartingHashKey), "three"))
	for i, want := range []string{"shardId-000000000000", "shardId-000000000007", "shardId-000000000003"} {
		if got := aws.ToString(res[i].ShardId); got != want {
			t.Errorf("explicit hash key %d: shard %s, want %s", i, got, want)
		}
	}
	for _, bad := range []string{"-1", "x", new(big.Int).Lsh(big.NewInt(1), 128).String()} {
		_, err := k.PutRecords(kctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []types.PutRecordsRequestEntry{kEntryAt(bad, "")}})
		kWantErr[*types.InvalidArgumentException](t, err)
	}

	// PutRecord, by ARN.
	one, err := k.PutRecord(kctx, &kinesis.PutRecordInput{StreamARN: aws.String(k.ARN("s")), PartitionKey: aws.String("key-7"), Data: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(one.ShardId); got != byKey["key-7"] {
		t.Errorf("PutRecord key-7 on %s, want %s", got, byKey["key-7"])
	}
	if n := kBig(t, one.SequenceNumber); n.Cmp(last[byKey["key-7"]]) <= 0 {
		t.Errorf("PutRecord's sequence number %s not after %s", n, last[byKey["key-7"]])
	}

	_, err = k.PutRecords(kctx, &kinesis.PutRecordsInput{StreamName: aws.String("missing"), Records: []types.PutRecordsRequestEntry{kEntry("a", "b")}})
	kWantErr[*types.ResourceNotFoundException](t, err)
	_, err = k.PutRecord(kctx, &kinesis.PutRecordInput{StreamName: aws.String("missing"), PartitionKey: aws.String("a")})
	kWantErr[*types.ResourceNotFoundException](t, err)
	_, err = k.PutRecords(kctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []types.PutRecordsRequestEntry{kEntry("", "b")}})
	kWantErr[*types.InvalidArgumentException](t, err)
	_, err = k.PutRecords(kctx, &kinesis.PutRecordsInput{StreamName: aws.String("s")})
	kWantErr[*types.InvalidArgumentException](t, err)
	_, err = k.PutRecords(kctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: make([]types.PutRecordsRequestEntry, 501)})
	kWantErr[*types.InvalidArgumentException](t, err)
	_, err = k.PutRecords(kctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []types.PutRecordsRequestEntry{{PartitionKey: aws.String("a"), Data: make([]byte, 1<<20)}}})
	kWantErr[*types.InvalidArgumentException](t, err)
}

func TestIteratorPositions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := kNewStream(t, "s", 2)
		const shard = "shardId-000000000000"
		var seqs []string
		var times []time.Time
		for i := range 5 {
			times = append(times, time.Now())
			res := kPut(t, k, "s", kEntryAt("1", fmt.Sprint(i)))
			seqs = append(seqs, aws.ToString(res[0].SequenceNumber))
			time.Sleep(time.Second)
		}
		latest := kIterator(t, k, kIterIn("s", shard, types.ShardIteratorTypeLatest))

		if got, _ := kReadAll(t, k, kIterator(t, k, kIterIn("s", shard, types.ShardIteratorTypeTrimHorizon))); !slices.Equal(got, []string{"0", "1", "2", "3", "4"}) {
			t.Errorf("TRIM_HORIZON read %v", got)
		}
		at := kIterIn("s", shard, types.ShardIteratorTypeAtSequenceNumber)
		at.StartingSequenceNumber = aws.String(seqs[2])
		if got, _ := kReadAll(t, k, kIterator(t, k, at)); !slices.Equal(got, []string{"2", "3", "4"}) {
			t.Errorf("AT_SEQUENCE_NUMBER read %v", got)
		}
		after := kIterIn("s", shard, types.ShardIteratorTypeAfterSequenceNumber)
		after.StartingSequenceNumber = aws.String(seqs[2])
		if got, _ := kReadAll(t, k, kIterator(t, k, after)); !slices.Equal(got, []string{"3", "4"}) {
			t.Errorf("AFTER_SEQUENCE_NUMBER read %v", got)
		}
		after.StartingSequenceNumber = aws.String(seqs[4])
		if got, _ := kReadAll(t, k, kIterator(t, k, after)); len(got) != 0 {
			t.Errorf("AFTER_SEQUENCE_NUMBER of the newest read %v", got)
		}
		ts := kIterIn("s", shard, types.ShardIteratorTypeAtTimestamp)
		ts.Timestamp = aws.Time(times[3])
		if got, _ := kReadAll(t, k, kIterator(t, k, ts)); !slices.Equal(got, []string{"3", "4"}) {
			t.Errorf("AT_TIMESTAMP read %v", got)
		}
		ts.Timestamp = aws.Time(times[3].Add(time.Millisecond))
		if got, _ := kReadAll(t, k, kIterator(t, k, ts)); !slices.Equal(got, []string{"4"}) {
			t.Errorf("AT_TIMESTAMP just after a record read %v", got)
		}
		if got, _ := kReadAll(t, k, latest); len(got) != 0 {
			t.Errorf("LATEST read %v before new records", got)
		}
		kPut(t, k, "s", kEntryAt("1", "5"))
		if got, _ := kReadAll(t, k, latest); !slices.Equal(got, []string{"5"}) {
			t.Errorf("LATEST read %v", got)
		}

		// The arrival time comes back, and a record's sequence number.
		out, err := k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(kIterator(t, k, at))})
		if err != nil {
			t.Fatal(err)
		}
		if r := out.Records[0]; aws.ToString(r.SequenceNumber) != seqs[2] || !r.ApproximateArrivalTimestamp.Equal(times[2]) || aws.ToString(r.PartitionKey) != "k" {
			t.Errorf("record %+v: want sequence number %s, arrival %v", r, seqs[2], times[2])
		}

		// A sequence number of another shard, or none at all, is refused.
		other := kPut(t, k, "s", kEntryAt(new(big.Int).Lsh(big.NewInt(1), 127).String(), "x"))
		if aws.ToString(other[0].ShardId) != "shardId-000000000001" {
			t.Fatalf("routed to %s", aws.ToString(other[0].ShardId))
		}
		for _, seq := range []string{aws.ToString(other[0].SequenceNumber), "123", "not a number"} {
			at.StartingSequenceNumber = aws.String(seq)
			_, err := k.GetShardIterator(kctx, at)
			kWantErr[*types.InvalidArgumentException](t, err)
		}
		at.StartingSequenceNumber = nil
		_, err = k.GetShardIterator(kctx, at)
		kWantErr[*types.InvalidArgumentException](t, err)
		_, err = k.GetShardIterator(kctx, kIterIn("s", shard, "SIDEWAYS"))
		kWantErr[*types.InvalidArgumentException](t, err)
		_, err = k.GetShardIterator(kctx, kIterIn("s", "shardId-000000000009", types.ShardIteratorTypeTrimHorizon))
		kWantErr[*types.ResourceNotFoundException](t, err)
		_, err = k.GetShardIterator(kctx, kIterIn("missing", shard, types.ShardIteratorTypeTrimHorizon))
		kWantErr[*types.ResourceNotFoundException](t, err)
		_, err = k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String("garbage")})
		kWantErr[*types.InvalidArgumentException](t, err)

		// An iterator of a new, empty shard at its StartingSequenceNumber.
		shards := kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s")})
		at = kIterIn("s", "shardId-000000000001", types.ShardIteratorTypeAtSequenceNumber)
		at.StartingSequenceNumber = shards[1].SequenceNumberRange.StartingSequenceNumber
		if got, _ := kReadAll(t, k, kIterator(t, k, at)); !slices.Equal(got, []string{"x"}) {
			t.Errorf("AT the StartingSequenceNumber read %v", got)
		}
	})
}

func TestGetRecordsLimitAndLag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := kNewStream(t, "s", 1)
		entries := make([]types.PutRecordsRequestEntry, 500)
		for i := range entries {
			entries[i] = kEntry(fmt.Sprint(i), fmt.Sprint(i))
		}
		for range 21 {
			kPut(t, k, "s", entries...)
		}
		time.Sleep(2 * time.Second)
		it := kIterator(t, k, kIterIn("s", "shardId-000000000000", types.ShardIteratorTypeTrimHorizon))
		out, err := k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it), Limit: aws.Int32(7)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Records) != 7 || aws.ToInt64(out.MillisBehindLatest) != 2000 || out.NextShardIterator == nil {
			t.Fatalf("Limit 7: %d records, %d ms behind, next %v", len(out.Records), aws.ToInt64(out.MillisBehindLatest), out.NextShardIterator)
		}
		out, err = k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Records) != 10000 || aws.ToInt64(out.MillisBehindLatest) == 0 {
			t.Fatalf("default limit: %d records, %d ms behind", len(out.Records), aws.ToInt64(out.MillisBehindLatest))
		}
		if got := string(out.Records[0].Data); got != "7" {
			t.Fatalf("second answer starts at %q", got)
		}
		out, err = k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Records) != 10500-10007 || aws.ToInt64(out.MillisBehindLatest) != 0 || out.NextShardIterator == nil || out.ChildShards != nil {
			t.Fatalf("last answer: %d records, %d ms behind, next %v", len(out.Records), aws.ToInt64(out.MillisBehindLatest), out.NextShardIterator)
		}
		for _, l := range []int32{0, 10001} {
			_, err = k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it), Limit: aws.Int32(l)})
			kWantErr[*types.InvalidArgumentException](t, err)
		}
	})
}

func TestIteratorExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := kNewStream(t, "s", 1)
		it := kIterator(t, k, kIterIn("s", "shardId-000000000000", types.ShardIteratorTypeTrimHorizon))
		time.Sleep(4 * time.Minute)
		out, err := k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
		if err != nil {
			t.Fatalf("after 4 minutes: %v", err)
		}
		time.Sleep(time.Minute)
		_, err = k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
		kWantErr[*types.ExpiredIteratorException](t, err)
		// The next iterator is a fresh one.
		if _, err := k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: out.NextShardIterator}); err != nil {
			t.Fatalf("next iterator after 1 minute: %v", err)
		}
	})
}

func TestSplitShard(t *testing.T) {
	k := kNewStream(t, "s", 2)
	const parent = "shardId-000000000000"
	keys := []string{}
	for i := 0; len(keys) < 20; i++ {
		key := fmt.Sprintf("key-%d", i)
		if kHashOf(key).Bit(127) == 0 { // shard 0's half
			keys = append(keys, key)
		}
	}
	var before []string
	for _, key := range keys {
		kPut(t, k, "s", kEntry(key, "before-"+key))
		before = append(before, "before-"+key)
	}
	parentIt := kIterator(t, k, kIterIn("s", parent, types.ShardIteratorTypeTrimHorizon))
	children, err := k.SplitShard("s", parent)
	if err != nil {
		t.Fatal(err)
	}
	if children != [2]string{"shardId-000000000002", "shardId-000000000003"} {
		t.Fatalf("children %v", children)
	}
	shards := kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s")})
	if len(shards) != 4 {
		t.Fatalf("%d shards after a split", len(shards))
	}
	p, a, b := shards[0], shards[2], shards[3]
	if p.SequenceNumberRange.EndingSequenceNumber == nil {
		t.Errorf("parent not closed: %+v", p.SequenceNumberRange)
	}
	mid := new(big.Int).Lsh(big.NewInt(1), 126)
	if aws.ToString(a.ParentShardId) != parent || aws.ToString(b.ParentShardId) != parent || a.AdjacentParentShardId != nil {
		t.Errorf("children's parents: %v %v", a.ParentShardId, b.ParentShardId)
	}
	if kBig(t, a.HashKeyRange.StartingHashKey).Sign() != 0 || kBig(t, a.HashKeyRange.EndingHashKey).Cmp(new(big.Int).Sub(mid, big.NewInt(1))) != 0 ||
		kBig(t, b.HashKeyRange.StartingHashKey).Cmp(mid) != 0 || kBig(t, b.HashKeyRange.EndingHashKey).Cmp(kBig(t, p.HashKeyRange.EndingHashKey)) != 0 {
		t.Errorf("children's ranges %+v %+v, parent's %+v", *a.HashKeyRange, *b.HashKeyRange, *p.HashKeyRange)
	}
	if kBig(t, a.SequenceNumberRange.StartingSequenceNumber).Cmp(kBig(t, p.SequenceNumberRange.EndingSequenceNumber)) <= 0 {
		t.Errorf("child starts at %s, not after its parent's end %s", *a.SequenceNumberRange.StartingSequenceNumber, *p.SequenceNumberRange.EndingSequenceNumber)
	}

	// The same keys now land on the children, each key on the child whose
	// range holds its hash.
	var after [2][]string
	for _, key := range keys {
		res := kPut(t, k, "s", kEntry(key, "after-"+key))
		i := 0
		if kHashOf(key).Cmp(mid) >= 0 {
			i = 1
		}
		if got := aws.ToString(res[0].ShardId); got != children[i] {
			t.Fatalf("key %s after the split on %s, want %s", key, got, children[i])
		}
		after[i] = append(after[i], "after-"+key)
	}

	// The parent is read to its end: its records, then no next iterator and
	// its children.
	got, last := kReadAll(t, k, parentIt)
	if !slices.Equal(got, before) {
		t.Errorf("parent read %v, want %v", got, before)
	}
	if last.NextShardIterator != nil {
		t.Errorf("parent's last answer has a next iterator")
	}
	if len(last.ChildShards) != 2 || aws.ToString(last.ChildShards[0].ShardId) != children[0] || aws.ToString(last.ChildShards[1].ShardId) != children[1] ||
		!slices.Equal(last.ChildShards[0].ParentShards, []string{parent}) || last.ChildShards[1].HashKeyRange == nil {
		t.Errorf("parent's ChildShards %+v", last.ChildShards)
	}
	// LATEST on a closed shard ends at once.
	out, err := k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(kIterator(t, k, kIterIn("s", parent, types.ShardIteratorTypeLatest)))})
	if err != nil || out.NextShardIterator != nil || len(out.ChildShards) != 2 {
		t.Errorf("LATEST on a closed shard: %v, %+v", err, out)
	}
	for i, c := range children {
		if got, _ := kReadAll(t, k, kIterator(t, k, kIterIn("s", c, types.ShardIteratorTypeTrimHorizon))); !slices.Equal(got, after[i]) {
			t.Errorf("child %s read %v, want %v", c, got, after[i])
		}
		if n := k.ShardRecords("s", c); n != len(after[i]) {
			t.Errorf("ShardRecords(%s) = %d", c, n)
		}
	}

	// A sequence number past a closed shard's end is not in it.
	at := kIterIn("s", parent, types.ShardIteratorTypeAtSequenceNumber)
	at.StartingSequenceNumber = aws.String(aws.ToString(p.SequenceNumberRange.EndingSequenceNumber)[:44] + "999999000000")
	_, err = k.GetShardIterator(kctx, at)
	kWantErr[*types.InvalidArgumentException](t, err)

	// Only open shards split.
	_, err = k.SplitShard("s", parent)
	kWantErr[*types.InvalidArgumentException](t, err)
	_, err = k.SplitShard("s", "shardId-000000000042")
	kWantErr[*types.ResourceNotFoundException](t, err)
	_, err = k.SplitShard("missing", parent)
	kWantErr[*types.ResourceNotFoundException](t, err)
	_, err = k.SplitShardAt("s", children[0], "0")
	kWantErr[*types.InvalidArgumentException](t, err)
	if _, err := k.SplitShardAt("s", children[0], "1"); err != nil {
		t.Errorf("SplitShardAt 1: %v", err)
	}

	// AT_LATEST lists the open shards, AT_TRIM_HORIZON those the stream
	// was created with.
	open := kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtLatest}})
	if got := kIDs(open); !slices.Equal(got, []string{"shardId-000000000001", "shardId-000000000003", "shardId-000000000004", "shardId-000000000005"}) {
		t.Errorf("AT_LATEST: %v", got)
	}
	horizon := kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTrimHorizon}})
	if got := kIDs(horizon); !slices.Equal(got, []string{"shardId-000000000000", "shardId-000000000001"}) {
		t.Errorf("AT_TRIM_HORIZON: %v", got)
	}
}

func TestMergeShards(t *testing.T) {
	k := kNewStream(t, "s", 3)
	a, b := "shardId-000000000001", "shardId-000000000002"
	kPut(t, k, "s", kEntryAt(new(big.Int).Lsh(big.NewInt(1), 127).String(), "in-1")) // 2^127 is in shard 1 of 3
	_, err := k.MergeShards("s", "shardId-000000000000", b)
	kWantErr[*types.InvalidArgumentException](t, err)
	child, err := k.MergeShards("s", b, a) // either order, if adjacent
	if err != nil {
		t.Fatal(err)
	}
	if child != "shardId-000000000003" {
		t.Fatalf("child %s", child)
	}
	shards := kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s")})
	c := shards[3]
	if aws.ToString(c.ParentShardId) != b || aws.ToString(c.AdjacentParentShardId) != a {
		t.Errorf("child's parents %v %v, want %s %s", aws.ToString(c.ParentShardId), aws.ToString(c.AdjacentParentShardId), b, a)
	}
	if aws.ToString(c.HashKeyRange.StartingHashKey) != aws.ToString(shards[1].HashKeyRange.StartingHashKey) ||
		aws.ToString(c.HashKeyRange.EndingHashKey) != aws.ToString(shards[2].HashKeyRange.EndingHashKey) {
		t.Errorf("child's range %+v", *c.HashKeyRange)
	}
	for _, p := range shards[1:3] {
		if p.SequenceNumberRange.EndingSequenceNumber == nil {
			t.Errorf("parent %s not closed", aws.ToString(p.ShardId))
		}
	}
	got, last := kReadAll(t, k, kIterator(t, k, kIterIn("s", a, types.ShardIteratorTypeTrimHorizon)))
	if !slices.Equal(got, []string{"in-1"}) || last.NextShardIterator != nil || len(last.ChildShards) != 1 ||
		aws.ToString(last.ChildShards[0].ShardId) != child || !slices.Equal(last.ChildShards[0].ParentShards, []string{b, a}) {
		t.Errorf("parent read %v, last answer %+v", got, last)
	}
	res := kPut(t, k, "s", kEntryAt(new(big.Int).Lsh(big.NewInt(1), 127).String(), "merged"))
	if aws.ToString(res[0].ShardId) != child {
		t.Errorf("after the merge, put on %s", aws.ToString(res[0].ShardId))
	}
	_, err = k.MergeShards("s", a, "shardId-000000000000")
	kWantErr[*types.InvalidArgumentException](t, err) // a is closed
}

func TestListShardsPaging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := kNewStream(t, "s", 7)
		var pages [][]string
		in := &kinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(3)}
		for {
			out, err := k.ListShards(kctx, in)
			if err != nil {
				t.Fatal(err)
			}
			pages = append(pages, kIDs(out.Shards))
			if out.NextToken == nil {
				break
			}
			in = &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: aws.Int32(3)}
		}
		if len(pages) != 3 || len(pages[0]) != 3 || len(pages[1]) != 3 || !slices.Equal(pages[2], []string{"shardId-000000000006"}) {
			t.Fatalf("pages %v", pages)
		}
		out, err := k.ListShards(kctx, &kinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(6)})
		if err != nil || len(out.Shards) != 6 || out.NextToken == nil {
			t.Fatalf("MaxResults 6: %v %+v", err, out)
		}
		_, err = k.ListShards(kctx, &kinesis.ListShardsInput{StreamName: aws.String("s"), NextToken: out.NextToken})
		kWantErr[*types.InvalidArgumentException](t, err)
		_, err = k.ListShards(kctx, &kinesis.ListShardsInput{NextToken: aws.String("garbage")})
		kWantErr[*types.InvalidArgumentException](t, err)
		_, err = k.ListShards(kctx, &kinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(0)})
		kWantErr[*types.InvalidArgumentException](t, err)

		after := kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s"), ExclusiveStartShardId: aws.String("shardId-000000000004")})
		if got := kIDs(after); !slices.Equal(got, []string{"shardId-000000000005", "shardId-000000000006"}) {
			t.Errorf("ExclusiveStartShardId: %v", got)
		}
		after = kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAfterShardId, ShardId: aws.String("shardId-000000000005")}})
		if got := kIDs(after); !slices.Equal(got, []string{"shardId-000000000006"}) {
			t.Errorf("AFTER_SHARD_ID: %v", got)
		}

		// Time filters: shard 0 is split at t1.
		t0 := time.Now()
		time.Sleep(time.Minute)
		if _, err := k.SplitShard("s", "shardId-000000000000"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		atT0 := kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp, Timestamp: aws.Time(t0)}})
		if got := kIDs(atT0); len(got) != 7 || got[0] != "shardId-000000000000" {
			t.Errorf("AT_TIMESTAMP before the split: %v", got)
		}
		now := time.Now()
		atNow := kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp, Timestamp: aws.Time(now)}})
		if got := kIDs(atNow); len(got) != 8 || got[0] != "shardId-000000000001" {
			t.Errorf("AT_TIMESTAMP after the split: %v", got)
		}
		from := kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeFromTimestamp, Timestamp: aws.Time(t0)}})
		if got := kIDs(from); len(got) != 9 {
			t.Errorf("FROM_TIMESTAMP before the split: %v", got)
		}
		from = kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeFromTimestamp, Timestamp: aws.Time(now)}})
		if got := kIDs(from); len(got) != 8 {
			t.Errorf("FROM_TIMESTAMP after the split: %v", got)
		}
		_, err = k.ListShards(kctx, &kinesis.ListShardsInput{StreamName: aws.String("s"), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtTimestamp}})
		kWantErr[*types.InvalidArgumentException](t, err)

		// A filter holds across pages; a token expires after 300 seconds.
		out, err = k.ListShards(kctx, &kinesis.ListShardsInput{StreamName: aws.String("s"), MaxResults: aws.Int32(2), ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeAtLatest}})
		if err != nil {
			t.Fatal(err)
		}
		rest := kListAll(t, k, &kinesis.ListShardsInput{NextToken: out.NextToken})
		if got := append(kIDs(out.Shards), kIDs(rest)...); len(got) != 8 || slices.Contains(got, "shardId-000000000000") {
			t.Errorf("AT_LATEST in pages: %v", got)
		}
		time.Sleep(kinesisfake.NextTokenTTL)
		_, err = k.ListShards(kctx, &kinesis.ListShardsInput{NextToken: out.NextToken})
		kWantErr[*types.ExpiredNextTokenException](t, err)
	})
}

func TestThrottle(t *testing.T) {
	k := kNewStream(t, "s", 2)
	throughput := func(t *testing.T, err error) {
		t.Helper()
		kWantErr[*types.ProvisionedThroughputExceededException](t, err)
	}

	k.Throttle(kinesisfake.OpPutRecords, 1)
	out, err := k.PutRecords(kctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []types.PutRecordsRequestEntry{kEntry("a", "1"), kEntry("b", "2")}})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt32(out.FailedRecordCount) != 2 || len(out.Records) != 2 {
		t.Fatalf("throttled PutRecords: %+v", out)
	}
	for _, r := range out.Records {
		if aws.ToString(r.ErrorCode) != "ProvisionedThroughputExceededException" || r.ErrorMessage == nil || r.SequenceNumber != nil || r.ShardId != nil {
			t.Errorf("throttled entry %+v", r)
		}
	}
	if n := k.Records("s"); n != 0 {
		t.Fatalf("a throttled PutRecords stored %d records", n)
	}
	kPut(t, k, "s", kEntry("a", "1"), kEntry("b", "2"))

	k.Throttle(kinesisfake.OpPutRecord, 1)
	_, err = k.PutRecord(kctx, &kinesis.PutRecordInput{StreamName: aws.String("s"), PartitionKey: aws.String("a")})
	throughput(t, err)

	k.Throttle(kinesisfake.OpListShards, 2)
	for range 2 {
		_, err := k.ListShards(kctx, &kinesis.ListShardsInput{StreamName: aws.String("s")})
		throughput(t, err)
	}
	kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s")})

	in := kIterIn("s", "shardId-000000000000", types.ShardIteratorTypeTrimHorizon)
	k.Throttle(kinesisfake.OpGetShardIterator, 1)
	_, err = k.GetShardIterator(kctx, in)
	throughput(t, err)
	it := kIterator(t, k, in)

	k.Throttle(kinesisfake.OpGetRecords, 3)
	for range 3 {
		_, err := k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
		throughput(t, err)
	}
	kReadAll(t, k, it)

	k.Throttle(kinesisfake.OpGetRecords, 5)
	k.Throttle(kinesisfake.OpGetRecords, 0) // ends it
	kReadAll(t, k, it)

	if got := k.Calls(kinesisfake.OpGetShardIterator); got != 2 {
		t.Errorf("Calls(GetShardIterator) = %d, want 2", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("Throttle of an unknown op did not panic")
		}
	}()
	k.Throttle("DescribeStream", 1)
}

// TestPublisherRetriesThrottles: a kinesislease.Publisher retries the
// entries a throttled PutRecords failed.
func TestPublisherRetriesThrottles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := kNewStream(t, "s", 2)
		k.Throttle(kinesisfake.OpPutRecords, 2)
		p, err := kinesislease.NewPublisherFromClient[string](k, k.ARN("s"))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Put(kctx, "key", "value"); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(kctx); err != nil {
			t.Fatal(err)
		}
		if got := k.Calls(kinesisfake.OpPutRecords); got != 3 {
			t.Errorf("Calls(PutRecords) = %d, want 3", got)
		}
		if got := k.Records("s"); got != 1 {
			t.Errorf("Records = %d, want 1", got)
		}
	})
}

func TestNoAliasing(t *testing.T) {
	k := kNewStream(t, "s", 1)
	data := []byte("original")
	kPut(t, k, "s", types.PutRecordsRequestEntry{PartitionKey: aws.String("k"), Data: data})
	copy(data, "XXXXXXXX") // the caller reuses its buffer
	it := kIterator(t, k, kIterIn("s", "shardId-000000000000", types.ShardIteratorTypeTrimHorizon))
	out, err := k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.Records[0].Data); got != "original" {
		t.Fatalf("read %q", got)
	}
	copy(out.Records[0].Data, "YYYYYYYY")
	*out.Records[0].PartitionKey = "changed"
	shards, _ := k.ListShards(kctx, &kinesis.ListShardsInput{StreamName: aws.String("s")})
	*shards.Shards[0].HashKeyRange.StartingHashKey = "42"
	if got, _ := kReadAll(t, k, it); !slices.Equal(got, []string{"original"}) {
		t.Fatalf("read %q after the answer was changed", got)
	}
	again, _ := k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	if aws.ToString(again.Records[0].PartitionKey) != "k" {
		t.Errorf("partition key %q", aws.ToString(again.Records[0].PartitionKey))
	}
	if s := kListAll(t, k, &kinesis.ListShardsInput{StreamName: aws.String("s")}); aws.ToString(s[0].HashKeyRange.StartingHashKey) != "0" {
		t.Errorf("StartingHashKey %q", aws.ToString(s[0].HashKeyRange.StartingHashKey))
	}
}

func TestDeleteStream(t *testing.T) {
	k := kNewStream(t, "s", 1)
	kPut(t, k, "s", kEntry("a", "old"))
	it := kIterator(t, k, kIterIn("s", "shardId-000000000000", types.ShardIteratorTypeTrimHorizon))
	if err := k.DeleteStream(k.ARN("s")); err != nil {
		t.Fatal(err)
	}
	_, err := k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	kWantErr[*types.ResourceNotFoundException](t, err)
	kWantErr[*types.ResourceNotFoundException](t, k.DeleteStream("s"))
	if k.Records("s") != -1 {
		t.Error("Records of a deleted stream")
	}
	if err := k.CreateStream("s", 1); err != nil {
		t.Fatal(err)
	}
	_, err = k.GetRecords(kctx, &kinesis.GetRecordsInput{ShardIterator: aws.String(it)})
	kWantErr[*types.ResourceNotFoundException](t, err)
	if got, _ := kReadAll(t, k, kIterator(t, k, kIterIn("s", "shardId-000000000000", types.ShardIteratorTypeTrimHorizon))); len(got) != 0 {
		t.Errorf("new stream read %v", got)
	}
}

func TestContextCancelled(t *testing.T) {
	k := kNewStream(t, "s", 1)
	cctx, cancel := context.WithCancel(kctx)
	cancel()
	_, err := k.ListShards(cctx, &kinesis.ListShardsInput{StreamName: aws.String("s")})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	_, err = k.PutRecords(cctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []types.PutRecordsRequestEntry{kEntry("a", "b")}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}

// TestConcurrent puts and reads from several goroutines (run it with
// -race): each shard holds every record once, in the order of its puts.
func TestConcurrent(t *testing.T) {
	k := kNewStream(t, "s", 4)
	var wg sync.WaitGroup
	for w := range 4 {
		// Not the test's goroutines: they report with t.Error and return.
		wg.Go(func() {
			for i := range 50 {
				if _, err := kTryPut(k, "s", kEntry(fmt.Sprintf("w%d", w), fmt.Sprintf("w%d-%03d", w, i))); err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		})
		wg.Go(func() {
			for range 20 {
				if _, err := kTryListAll(k, &kinesis.ListShardsInput{StreamName: aws.String("s")}); err != nil {
					t.Errorf("reader %d: %v", w, err)
					return
				}
				it, err := kTryIterator(k, kIterIn("s", fmt.Sprintf("shardId-%012d", w), types.ShardIteratorTypeTrimHorizon))
				if err == nil {
					_, _, err = kTryReadAll(k, it)
				}
				if err != nil {
					t.Errorf("reader %d: %v", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for w := range 4 {
		got, _ := kReadAll(t, k, kIterator(t, k, kIterIn("s", fmt.Sprintf("shardId-%012d", w), types.ShardIteratorTypeTrimHorizon)))
		total += len(got)
		last := map[string]string{}
		for _, d := range got {
			writer, _, _ := strings.Cut(d, "-")
			if d <= last[writer] {
				t.Errorf("shard %d: %s after %s", w, d, last[writer])
			}
			last[writer] = d
		}
	}
	if total != 200 {
		t.Errorf("%d records, want 200", total)
	}
}
