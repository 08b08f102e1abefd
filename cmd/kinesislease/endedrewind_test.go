package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// TestRewindRequestOutlivesShardEnd: a rewind is requested from the holder
// of a closed shard, which reaches the shard's end before it reads the
// request and releases the row at SHARD_END, the request still pending (its release
// conflicts with the request, re-reads the row, still owns it and releases
// again). The next instance must still apply the request: take the row,
// move its checkpoint and read the shard again. Before the coordinator
// looked at pending requests, a row at SHARD_END was never taken again and
// the request stayed pending for ever.
func TestRewindRequestOutlivesShardEnd(t *testing.T) {
	t.Parallel()
	r := newRig(t, testutil.KinesisLocal, 1)
	ps := putRecords(t, r.kc, r.stream, 0, 3, nil)
	parent := ps[0].shard
	split(t, r, 2)

	// svc-old holds the parent, read to its last record.
	st := r.store()
	ctx := context.Background()
	key := leases.Key{Stream: r.stream, Shard: parent}
	l, err := st.Create(ctx, key)
	if err == nil {
		l, err = st.TakeAs(ctx, l, "svc-old", "inc-old")
	}
	if err == nil {
		l, err = st.Checkpoint(ctx, l, leases.Checkpoint{Sequence: ps[2].seq})
	}
	if err != nil {
		t.Fatal(err)
	}
	res := runCLI(r.args("rewind", "--shard", parent, "--to", "TRIM_HORIZON")...)
	if res.code != 0 || !strings.Contains(res.stdout, "requested from svc-old") {
		t.Fatalf("rewind: %v", res)
	}
	// svc-old's worker reaches the end: its release conflicts with the
	// request, it re-reads the row, still owns it and releases at SHARD_END.
	if _, err := st.Release(ctx, l, leases.Checkpoint{Sequence: leases.ShardEnd}); !errors.Is(err, leases.ErrConflict) {
		t.Fatalf("release at the counter before the request: %v, want a conflict", err)
	}
	if l, err = st.Get(ctx, key); err == nil {
		l, err = st.Release(ctx, l, leases.Checkpoint{Sequence: leases.ShardEnd})
	}
	if err != nil {
		t.Fatal(err)
	}
	if l.Checkpoint.Sequence != leases.ShardEnd || l.RewindTo.Sequence != leases.RewindTrimHorizon || l.Held() {
		t.Fatalf("row %+v, want free at SHARD_END with the rewind to TRIM_HORIZON pending", l)
	}

	// A service starts: it applies the request and reads the parent again.
	j := newJournal()
	svc := r.startService("svc-new", j, kltype.TrimHorizon)
	j.waitUntil(t, 20*time.Second, "the parent's 3 records handled again", func(ds []delivery) bool {
		return len(idsOf(ds, parent)) >= 3
	})
	r.waitRow(parent, 20*time.Second, "at SHARD_END again without a pending rewind", func(l leases.Lease) bool {
		return l.Checkpoint.Sequence == leases.ShardEnd && l.RewindTo.IsZero()
	})
	svc.stop(t)
	if got, want := idsOf(j.deliveries(), parent), putIDs(ps, parent); !slices.Equal(got, want) {
		t.Errorf("the parent was read again as %v, want %v", got, want)
	}
}

// split reshards the rig's stream to n open shards (UNIFORM_SCALING) and
// waits until it is ACTIVE again.
func split(t *testing.T, r *rig, n int32) {
	t.Helper()
	ctx := testutil.WithoutFaults(context.Background())
	for {
		_, err := r.kc.UpdateShardCount(ctx, &kinesis.UpdateShardCountInput{
			StreamName: aws.String(r.stream), TargetShardCount: aws.Int32(n), ScalingType: ktypes.ScalingTypeUniformScaling,
		})
		var inUse *ktypes.ResourceInUseException
		if errors.As(err, &inUse) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("UpdateShardCount: %v", err)
		}
		break
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := r.kc.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(r.stream)})
		if err != nil {
			t.Fatal(err)
		}
		if s := out.StreamDescriptionSummary; s.StreamStatus == ktypes.StreamStatusActive && aws.ToInt32(s.OpenShardCount) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream not ACTIVE with %d open shards after 60s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
