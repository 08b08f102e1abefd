package kinesislease_test

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

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// putSpread puts orders first..first+n-1, even ids on shardId-0 and odd ids
// on shardId-1 of a 2-shard stream, and returns each one's sequence number
// and shard, by id.
func putSpread(t *testing.T, kc *kinesis.Client, stream string, first, n int) map[int]put2 {
	t.Helper()
	in := &kinesis.PutRecordsInput{StreamName: aws.String(stream)}
	for id := first; id < first+n; id++ {
		hk := filterLow
		if id%2 == 1 {
			hk = filterHigh
		}
		e := plOrder(id)
		in.Records = append(in.Records, ktypes.PutRecordsRequestEntry{Data: e.data, PartitionKey: aws.String(e.pk), ExplicitHashKey: aws.String(hk)})
	}
	out, err := kc.PutRecords(testutil.WithoutFaults(context.Background()), in)
	if err != nil || aws.ToInt32(out.FailedRecordCount) != 0 {
		t.Fatalf("PutRecords: %v (%d failed)", err, aws.ToInt32(out.FailedRecordCount))
	}
	ps := map[int]put2{}
	for i, r := range out.Records {
		ps[first+i] = put2{seq: aws.ToString(r.SequenceNumber), shard: aws.ToString(r.ShardId)}
	}
	return ps
}

// put2 is where a record went.
type put2 struct{ seq, shard string }

// idsFrom returns the ids delivered from shard, in order.
func idsFrom(ds []plDelivery, shard string) []int {
	var ids []int
	for _, d := range ds {
		if d.shardID == shard {
			ids = append(ids, d.id)
		}
	}
	return ids
}

// TestServiceRewind: Service.Rewind against DynamoDB Local and kinesalite.
// While the service reads a 2-shard stream, one shard is rewound to the
// sequence number of one of its records: the result says the row is held
// by the service, which replays the shard from that record, in order and
// once, keeping its lease, and the other shard is left alone. Arguments that
// cannot work fail with errors naming what is wrong and write nothing.
// Once the service has stopped, a second service value (not running)
// rewinds every free row to TRIM_HORIZON at once, and the first service,
// started again, reads the whole stream again.
func TestServiceRewind(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 2)
	dc := testutil.DynamoClient(t)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, dc, table)
	store := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(dc))
	const shard0, shard1 = "shardId-000000000000", "shardId-000000000001"

	const n = 20
	ps := putSpread(t, kc, stream, 0, n)
	if ps[0].shard != shard0 || ps[1].shard != shard1 {
		t.Fatalf("records 0 and 1 went to %s and %s", ps[0].shard, ps[1].shard)
	}
	d := newPLLog()
	handler := func(ctx context.Context, o order) error { d.add(ctx, t, o.ID); return nil }
	// A slower heartbeat than the other tests': a lease lost on a loaded
	// machine would deliver records again.
	svcOpts := []kinesislease.Option{kinesislease.WithHeartbeat(300*time.Millisecond, 3*time.Second)}
	in := plRun(t, kc, store, stream, "a", svcOpts, handler)
	d.waitUntil(t, "every record handled", 30*time.Second, plSeen(1, plSpan(0, n)...))
	plWaitCheckpoint(t, store, stream, shard0, leases.Checkpoint{Sequence: ps[n-2].seq}, 10*time.Second)
	plWaitCheckpoint(t, store, stream, shard1, leases.Checkpoint{Sequence: ps[n-1].seq}, 10*time.Second)

	// Arguments that cannot work.
	ctx := context.Background()
	before := plRow(t, store, stream, shard0)
	for _, tc := range []struct {
		name          string
		stream, shard string
		to            kltype.StartPosition
		want          error
		says          []string
	}{
		{"unknown stream", "no-such-stream", "", kltype.TrimHorizon, kinesislease.ErrStreamNotFound, []string{`"no-such-stream"`}},
		{"unknown shard", stream, "shardId-000000000009", kltype.TrimHorizon, kltype.ErrShardNotFound, []string{"shardId-000000000009", shard0 + ", " + shard1}},
		{"sequence number of another shard", stream, shard0, kltype.AtSequenceNumber(ps[1].seq), kltype.ErrPositionNotInShard, []string{ps[1].seq, shard0, stream}},
		{"sequence number without a shard", stream, "", kltype.AtSequenceNumber(ps[0].seq), kinesislease.ErrInvalidOption, []string{"name it"}},
		{"time in the future", stream, "", kltype.AtTimestamp(time.Now().Add(time.Hour)), kinesislease.ErrInvalidOption, []string{"future"}},
	} {
		res, err := in.svc.Rewind(ctx, tc.stream, tc.shard, tc.to)
		if !errors.Is(err, tc.want) || res != nil {
			t.Errorf("%s: Rewind = %v, %v; want no result and an error matching %v", tc.name, res, err, tc.want)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %v: want it to name %s", tc.name, err, s)
			}
		}
	}
	var pe *kltype.PositionError
	if _, err := in.svc.Rewind(ctx, stream, shard0, kltype.AtSequenceNumber(ps[1].seq)); !errors.As(err, &pe) || pe.ShardID != shard0 || pe.Position != kltype.AtSequenceNumber(ps[1].seq) {
		t.Errorf("a sequence number of another shard: %v, want a *kltype.PositionError naming %s", err, shard0)
	}
	if after := plRow(t, store, stream, shard0); after.Checkpoint != before.Checkpoint || !after.RewindTo.IsZero() {
		t.Errorf("a failed Rewind wrote the row: %+v, before %+v", after, before)
	}

	// Rewind shard 0, held by the running service, to its record 8.
	mark := len(d.all())
	const k = 8
	notice := func() int64 { // the holder's membership entry's Notice
		t.Helper()
		row, ok := driver.IncarnationRow(plRow(t, store, stream, shard0).Incarnation)
		if !ok {
			t.Fatalf("the row of %s names no incarnation", shard0)
		}
		ms, err := store.Members(ctx, row)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Owner == "a" {
				return m.Notice
			}
		}
		t.Fatalf("no membership entry of a in row %d: %+v", row, ms)
		return 0
	}
	noticeBefore := notice()
	res, err := in.svc.Rewind(ctx, stream, shard0, kltype.AtSequenceNumber(ps[k].seq))
	if err != nil {
		t.Fatal(err)
	}
	want := kltype.RewindResult{ShardID: shard0, From: leases.Checkpoint{Sequence: ps[n-2].seq}, To: leases.RewindAtSequence(ps[k].seq), Holder: "a"}
	if len(res) != 1 || res[0] != want {
		t.Fatalf("Rewind = %+v, want [%+v]", res, want)
	}
	// The holder was told through its membership entry, as the command does.
	if got := notice(); got <= noticeBefore {
		t.Errorf("the holder's Notice is %d after the rewind, %d before: want it bumped", got, noticeBefore)
	}
	var replay []int
	for id := k; id < n; id += 2 {
		replay = append(replay, id)
	}
	d.waitUntil(t, "shard 0 replayed from record 8", 30*time.Second, func(ds []plDelivery) bool {
		return len(idsFrom(ds[mark:], shard0)) >= len(replay)
	})
	deadline := time.Now().Add(10 * time.Second)
	for l := plRow(t, store, stream, shard0); !l.RewindTo.IsZero() || l.Owner != "a"; l = plRow(t, store, stream, shard0) {
		if time.Now().After(deadline) {
			t.Fatalf("the row of %s after the rewind: %+v, want held by a with no request pending", shard0, l)
		}
		time.Sleep(20 * time.Millisecond)
	}
	plWaitCheckpoint(t, store, stream, shard0, leases.Checkpoint{Sequence: ps[n-2].seq}, 10*time.Second)
	in.stop(t)
	ds := d.all()[mark:]
	if got := idsFrom(ds, shard0); !slices.Equal(got, replay) {
		t.Errorf("shard 0 after the rewind handled %v, want %v: from record %d on, in order, once", got, replay, k)
	}
	if got := idsFrom(ds, shard1); len(got) != 0 {
		t.Errorf("shard 1 (not rewound) handled %v again", got)
	}

	// With no service running, a service value that is not running rewinds
	// the free rows at once.
	idle, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(kc), kinesislease.WithLeaseStore(store), kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	res, err = idle.Rewind(ctx, stream, "", kltype.TrimHorizon)
	if err != nil {
		t.Fatal(err)
	}
	th := leases.Checkpoint{Sequence: leases.RewindTrimHorizon}
	wantAll := []kltype.RewindResult{
		{ShardID: shard0, From: leases.Checkpoint{Sequence: ps[n-2].seq}, To: th},
		{ShardID: shard1, From: leases.Checkpoint{Sequence: ps[n-1].seq}, To: th},
	}
	if !slices.Equal(res, wantAll) {
		t.Fatalf("Rewind of the free rows = %+v, want %+v", res, wantAll)
	}
	for _, id := range []string{shard0, shard1} {
		if l := plRow(t, store, stream, id); l.Checkpoint != th || l.Held() || !l.RewindTo.IsZero() {
			t.Errorf("the row of %s after the rewind: %+v, want free at TRIM_HORIZON", id, l)
		}
	}
	mark = len(d.all())
	in = plRun(t, kc, store, stream, "a", svcOpts, handler)
	d.waitUntil(t, "every record handled again", 30*time.Second, func(ds []plDelivery) bool { return len(ds[mark:]) >= n })
	in.stop(t)
	ds = d.all()[mark:]
	if got := idsFrom(ds, shard0); !slices.Equal(got, []int{0, 2, 4, 6, 8, 10, 12, 14, 16, 18}) {
		t.Errorf("shard 0 after the rewind to TRIM_HORIZON handled %v, want every even record once, in order", got)
	}
	if got := idsFrom(ds, shard1); !slices.Equal(got, []int{1, 3, 5, 7, 9, 11, 13, 15, 17, 19}) {
		t.Errorf("shard 1 after the rewind to TRIM_HORIZON handled %v, want every odd record once, in order", got)
	}
}
