package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestSlowListingDoesNotHoldTheRound: a ListShards that takes long (the
// simulation's slow-listing fault: 2.7-5.4 s a call) runs beside the
// rounds, not in them: syncShards returns while it is in flight, and the
// round that finds its answer applies it. Seed 113170: a knower's rounds
// waited on listings for up to 6 s, its sightings of a vanished row came
// too far apart to be joined, and a member that knew no checkpoint
// recreated the row at the start position.
func TestSlowListingDoesNotHoldTheRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		lister := &heldLister{answer: make(chan struct{})}
		g, err := NewGroup(GroupConfig{
			Owner: "a", Store: memory.New(), Client: lister, Heartbeat: time.Second, Timeout: 4 * time.Second,
			Streams: []StreamConfig{{Stream: "s", Start: kltype.TrimHorizon, Worker: WorkerConfig{
				Handler: func(context.Context, *kltype.Record) error { return nil },
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		st, u := g.streams["s"], unit{Stream: "s", Shard: "shardId-000000000000"}

		done := make(chan struct{})
		go func() {
			g.syncShards(ctx)
			close(done)
		}()
		synctest.Wait()
		select {
		case <-done:
		default:
			close(lister.answer)
			<-done
			t.Fatal("syncShards waited for the ListShards in flight")
		}
		if lister.calls.Load() != 1 || st.list.Shards != nil {
			t.Fatalf("after the first syncShards: %d ListShards calls, shards %v; want 1 call in flight, none known yet", lister.calls.Load(), st.list.Shards)
		}
		g.syncShards(ctx) // still in flight: nothing to apply, no second call
		synctest.Wait()
		if lister.calls.Load() != 1 {
			t.Fatalf("%d ListShards calls while one was in flight, want 1", lister.calls.Load())
		}

		close(lister.answer)
		synctest.Wait()
		g.syncShards(ctx)
		if _, ok := st.list.Shards[u.Shard]; !ok || st.list.LastSync.IsZero() {
			t.Fatalf("after the answer: shards %v, last sync %v; want %s listed", st.list.Shards, st.list.LastSync, u.Shard)
		}
	})
}

// heldLister answers ListShards with one shard once answer is closed.
type heldLister struct {
	kinesisx.Reader
	answer chan struct{}
	calls  atomic.Int32
}

func (l *heldLister) ListShards(ctx context.Context, _ *kinesis.ListShardsInput, _ ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	l.calls.Add(1)
	select {
	case <-l.answer:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &kinesis.ListShardsOutput{Shards: []types.Shard{{
		ShardId:             aws.String("shardId-000000000000"),
		HashKeyRange:        &types.HashKeyRange{StartingHashKey: aws.String("0"), EndingHashKey: aws.String("340282366920938463463374607431768211455")},
		SequenceNumberRange: &types.SequenceNumberRange{StartingSequenceNumber: aws.String("1")},
	}}}, nil
}
