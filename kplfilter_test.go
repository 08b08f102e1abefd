package kinesislease_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/kpl"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// filterLog is a HookUserRecordsFiltered hook.
type filterLog struct {
	mu sync.Mutex
	fs []kltype.FilterInfo
}

func (l *filterLog) OnUserRecordsFiltered(f kltype.FilterInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fs = append(l.fs, f)
}

func (l *filterLog) all() []kltype.FilterInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.fs)
}

// Hash keys of the two shards of a 2-shard kinesalite stream: shardId-0
// holds [0, 2^127), shardId-1 [2^127, 2^128).
const (
	filterLow  = "12345"
	filterHigh = "170141183460469231731687303715884105728" // 2^127
)

// pkHashing returns a partition key whose MD5 lies in the half of the hash
// key space of hashKey.
func pkHashing(t *testing.T, hashKey string) string {
	t.Helper()
	half, _ := kpl.ParseHashKey(filterHigh)
	wantHigh := hashKey == filterHigh
	for i := range 1000 {
		pk := fmt.Sprintf("customer-%d", i)
		if (kpl.PartitionKeyHash(pk).Compare(half) >= 0) == wantHigh {
			return pk
		}
	}
	t.Fatal("no partition key found")
	return ""
}

// putAt puts one record with data on the shard owning hashKey and returns
// its sequence number and shard.
func putAt(t *testing.T, kc *kinesis.Client, stream, pk, hashKey string, data []byte) (seq, shard string) {
	t.Helper()
	out, err := kc.PutRecord(testutil.WithoutFaults(context.Background()), &kinesis.PutRecordInput{
		StreamName: aws.String(stream), PartitionKey: aws.String(pk), ExplicitHashKey: aws.String(hashKey), Data: data,
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.SequenceNumber), aws.ToString(out.ShardId)
}

func orderData(id int) []byte {
	data, _ := json.Marshal(order{ID: id})
	return data
}

// TestKPLHashRangeFilter: after a reshard, a KPL with a stale shard map
// can put an aggregate on a shard that does not own all its user records'
// hash keys, and puts those again to the shard that does. The consumer of
// the first shard skips them, as KCL does, and tells the hooks; they reach
// the handler once, from the shard owning them. Here an aggregate built by
// kpl.Aggregate is put on shardId-0 (by the explicit hash key of its first
// user record, as the KPL routes it) with user records 1, 3 and 5 hashing
// into shardId-1 (by explicit hash key or by partition key); those three
// are put again to shardId-1, as the KPL's retry would. The last user
// record of the aggregate is one of those skipped: the checkpoint still
// covers the whole aggregate.
func TestKPLHashRangeFilter(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 2)
	lowPK, highPK := pkHashing(t, filterLow), pkHashing(t, filterHigh)

	users := []kpl.UserRecord{
		{PartitionKey: "k0", ExplicitHashKey: filterLow, Data: orderData(0)},
		{PartitionKey: "k1", ExplicitHashKey: filterHigh, Data: orderData(1)}, // outside
		{PartitionKey: lowPK, Data: orderData(2)},
		{PartitionKey: highPK, Data: orderData(3)},                             // outside, by its partition key's MD5
		{PartitionKey: highPK, ExplicitHashKey: filterLow, Data: orderData(4)}, // inside: the explicit key wins
		{PartitionKey: "k5", ExplicitHashKey: filterHigh, Data: orderData(5)},  // outside, and last
	}
	seqA, shardA := putAt(t, kc, stream, "a", filterLow, kpl.Aggregate(users))
	if shardA != plShard0 {
		t.Fatalf("the aggregate went to %s, want %s", shardA, plShard0)
	}

	d := newPLLog()
	store := memory.New()
	filtered := &filterLog{}
	in := plRun(t, kc, store, stream, "a", []kinesislease.Option{kinesislease.WithHooks(filtered)}, func(ctx context.Context, o order) error {
		d.add(ctx, t, o.ID)
		return nil
	})
	d.waitUntil(t, "the in-range user records 0, 2 and 4 handled", 15*time.Second, plSeen(1, 0, 2, 4))
	// The checkpoint covers the whole aggregate (its last user record was
	// skipped, not left undone).
	plWaitCheckpoint(t, store, stream, plShard0, leases.Checkpoint{Sequence: seqA}, 5*time.Second)

	// The KPL's retry of the user records that hashed outside shardId-0.
	var retried []string
	for _, i := range []int{1, 3, 5} {
		u := users[i]
		hk := u.ExplicitHashKey
		if hk == "" {
			hk = filterHigh
		}
		seq, shard := putAt(t, kc, stream, u.PartitionKey, hk, u.Data)
		if shard != "shardId-000000000001" {
			t.Fatalf("the retried user record %d went to %s", i, shard)
		}
		retried = append(retried, seq)
	}
	d.waitUntil(t, "the retried user records handled", 15*time.Second, plSeen(1, 1, 3, 5))
	in.stop(t)

	byID := map[int][]plDelivery{}
	for _, dv := range d.all() {
		byID[dv.id] = append(byID[dv.id], dv)
	}
	for i := range users {
		dvs := byID[i]
		if len(dvs) != 1 {
			t.Errorf("user record %d delivered %d times, want once", i, len(dvs))
			continue
		}
		dv := dvs[0]
		switch i {
		case 0, 2, 4:
			if dv.shardID != plShard0 || dv.seq != seqA || dv.sub != int64(i) {
				t.Errorf("user record %d delivered from %s %s/%d, want %s %s/%d", i, dv.shardID, dv.seq, dv.sub, plShard0, seqA, i)
			}
		default:
			if dv.shardID != "shardId-000000000001" || !slices.Contains(retried, dv.seq) {
				t.Errorf("user record %d delivered from %s %s, want its retried copy on shardId-000000000001", i, dv.shardID, dv.seq)
			}
		}
	}
	fs := filtered.all()
	want := kltype.FilterInfo{Stream: stream, ShardID: plShard0, SequenceNumber: seqA, Filtered: 3, UserRecords: len(users)}
	if len(fs) != 1 || fs[0] != want {
		t.Errorf("filter hook calls %+v, want one: %+v", fs, want)
	}
}

var _ kltype.HookUserRecordsFiltered = (*filterLog)(nil)
