package migrate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/migrate"
)

const fast = 50 * time.Millisecond // the interval between the two reads

// topology is the stream most tests use: seven shards, shard 0 split into
// 7 and 8, with records whose sequence numbers the checkpoints name.
type topology struct {
	e          *env
	p0, s7, s5 string // plain records on shards 0, 7 and 5
	agg1, agg2 string // KPL aggregates of 4 user records on shards 1 and 2
	at         time.Time
}

func newTopology(t *testing.T) *topology {
	e := newEnv(t, 7)
	tp := &topology{e: e, at: time.Now().Add(-time.Hour).Truncate(time.Millisecond)}
	tp.p0 = e.put(shardID(0), 1)
	e.split(shardID(0))
	tp.s7 = e.put(shardID(7), 2)
	e.put(shardID(7), 3)
	tp.agg1 = e.putAggregate(shardID(1), 100, 4)
	tp.agg2 = e.putAggregate(shardID(2), 200, 4)
	tp.s5 = e.put(shardID(5), 500)
	return tp
}

// kclLeases are the KCL's leases of the topology, as a KCL 2.x/3.x
// application leaves them (shard 3's as KCL 1.x does), with every sentinel.
func (tp *topology) kclLeases(streamID string) []kclLease {
	parent := []string{shardID(0)}
	return []kclLease{
		{streamID: streamID, shard: shardID(0), checkpoint: "SHARD_END", counter: 12, children: []string{shardID(7), shardID(8)}},
		{streamID: streamID, shard: shardID(7), checkpoint: tp.s7, counter: 4, owner: "kcl-worker-1", parents: parent},
		{streamID: streamID, shard: shardID(8), checkpoint: "TRIM_HORIZON", counter: 2, owner: "kcl-worker-2", parents: parent},
		{streamID: streamID, shard: shardID(1), checkpoint: tp.agg1, sub: 1, counter: 7, owner: "kcl-worker-1"},
		{streamID: streamID, shard: shardID(2), checkpoint: tp.agg2, sub: 3, counter: 7, owner: "kcl-worker-2"},
		{streamID: streamID, shard: shardID(3), checkpoint: "LATEST", counter: 1, v1: true},
		{streamID: streamID, shard: shardID(4), checkpoint: "AT_TIMESTAMP", counter: 3, owner: "kcl-worker-1"},
		{streamID: streamID, shard: shardID(5), checkpoint: tp.s5, sub: -1, counter: 9, owner: "kcl-worker-2"},
		// shard 6: no lease. shard 9 is not a shard of the stream.
		{streamID: streamID, shard: shardID(9), checkpoint: "SHARD_END", counter: 40},
	}
}

// want is what our rows say after importing kclLeases.
func (tp *topology) want() map[string]leases.Checkpoint {
	return map[string]leases.Checkpoint{
		shardID(0): {Sequence: leases.ShardEnd},
		shardID(7): {Sequence: tp.s7},
		shardID(8): {Sequence: leases.RewindTrimHorizon},
		shardID(1): {Sequence: tp.agg1, SubSequence: 2}, // user records 0 and 1 done
		shardID(2): {Sequence: tp.agg2},                 // the last user record done: the record
		shardID(3): {Sequence: leases.RewindLatest},
		shardID(4): leases.RewindAtTimestamp(tp.at),
		shardID(5): leases.RewindAtSequence(tp.s5),
		shardID(6): {},
	}
}

func (tp *topology) checkRows(t *testing.T, st leases.Store, want map[string]leases.Checkpoint) {
	t.Helper()
	for shard, cp := range want {
		l, ok := tp.e.row(st, shard)
		if !ok || l.Checkpoint != cp || l.Held() || !l.RewindTo.IsZero() {
			t.Errorf("row %s: %+v (exists %v), want free at %+v", shard, l, ok, cp)
		}
	}
	if l, ok := tp.e.row(st, shardID(9)); ok {
		t.Errorf("a row for shard 9, which the stream does not list: %+v", l)
	}
}

func TestImportKCL(t *testing.T) {
	t.Run("single-stream", func(t *testing.T) {
		t.Parallel()
		tp := newTopology(t)
		e := tp.e
		kcl := e.foreignTable("leaseKey")
		for _, l := range tp.kclLeases("") {
			e.putItem(kcl, l.item())
		}
		// KCL 3.x keeps other entities in its tables; they are not leases.
		e.putItem(kcl, map[string]dtypes.AttributeValue{
			"leaseKey": &dtypes.AttributeValueMemberS{Value: "worker-1"}, "entityType": &dtypes.AttributeValueMemberS{Value: "WORKER_METRIC_STATS"},
		})
		st := e.ourTable()
		rep, err := migrate.Import(context.Background(), migrate.Foreign{Client: e.ddb, Table: kcl}, e.ours(st),
			migrate.WithInterval(fast), migrate.WithAtTimestamp(tp.at))
		if err != nil {
			t.Fatalf("Import: %v\n%v", err, rep)
		}
		tp.checkRows(t, st, tp.want())
		rows := rowsByShard(rep)
		for shard, a := range map[string]migrate.Action{
			shardID(0): migrate.Write, shardID(6): migrate.Create, shardID(9): migrate.Skip, shardID(1): migrate.Write,
		} {
			if rows[shard].Action != a {
				t.Errorf("report row %s: %v, want %s", shard, rows[shard], a)
			}
		}
		if r := rows[shardID(1)]; r.From != tp.agg1+" sub 1" || !strings.Contains(r.Note, "aggregate of 4") {
			t.Errorf("report row of shard 1: %v", r)
		}

		// Again: every row already says it.
		rep, err = migrate.Import(context.Background(), migrate.Foreign{Client: e.ddb, Table: kcl}, e.ours(st),
			migrate.WithInterval(fast), migrate.WithAtTimestamp(tp.at))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Rows {
			if r.Action != migrate.Unchanged && r.Action != migrate.Skip {
				t.Errorf("second import: %v", r)
			}
		}
	})
	t.Run("multi-stream", func(t *testing.T) {
		t.Parallel()
		tp := newTopology(t)
		e := tp.e
		kcl := e.foreignTable("leaseKey")
		id := "123456789012:" + e.stream + ":1700000000"
		for _, l := range tp.kclLeases(id) {
			if l.shard == shardID(0) {
				continue // the KCL deleted the finished parent's lease
			}
			e.putItem(kcl, l.item())
		}
		// Another stream of the application, and an earlier stream of the
		// same name (deleted and created again).
		e.putItem(kcl, kclLease{streamID: "123456789012:other:1700000000", shard: shardID(1), checkpoint: "LATEST"}.item())
		old := "123456789012:" + e.stream + ":1600000000"
		e.putItem(kcl, kclLease{streamID: old, shard: shardID(1), checkpoint: "TRIM_HORIZON"}.item())
		st := e.ourTable()
		_, err := migrate.Import(context.Background(), migrate.Foreign{Client: e.ddb, Table: kcl}, e.ours(st), migrate.WithInterval(fast))
		if !errors.Is(err, migrate.ErrInvalid) || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), old) {
			t.Fatalf("two creation epochs of the stream, none named: %v; want ErrInvalid naming both", err)
		}
		rep, err := migrate.Import(context.Background(), migrate.Foreign{Client: e.ddb, Table: kcl, StreamID: id}, e.ours(st),
			migrate.WithInterval(fast), migrate.WithAtTimestamp(tp.at))
		if err != nil {
			t.Fatalf("Import: %v\n%v", err, rep)
		}
		tp.checkRows(t, st, tp.want())
		if r := rowsByShard(rep)[shardID(0)]; r.From != "-" || !strings.Contains(r.Note, "finished parent") {
			t.Errorf("report row of shard 0: %v", r)
		}
	})
}

// vmware-go-kcl's table: the parent finished, one child checkpointed, the
// other only leased (no Checkpoint yet), an aggregate checkpointed whole.
func TestImportVMware(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	e.put(shardID(0), 1)
	e.split(shardID(0))
	s3 := e.put(shardID(3), 2)
	e.put(shardID(3), 3)
	agg := e.putAggregate(shardID(1), 100, 3)
	vmw := e.foreignTable("ShardID")
	expired := time.Now().Add(-time.Hour)
	for _, l := range []vmwLease{
		{shard: shardID(0), checkpoint: "SHARD_END"},
		{shard: shardID(3), checkpoint: s3, parent: shardID(0), owner: "worker-1", timeout: expired},
		{shard: shardID(4), parent: shardID(0), owner: "worker-2", timeout: expired},
		{shard: shardID(1), checkpoint: agg, owner: "worker-1", timeout: expired},
	} {
		e.putItem(vmw, l.item())
	}
	st := e.ourTable()
	rep, err := migrate.Import(context.Background(), migrate.Foreign{Client: e.ddb, Table: vmw}, e.ours(st), migrate.WithInterval(fast))
	if err != nil {
		t.Fatalf("Import: %v\n%v", err, rep)
	}
	tp := &topology{e: e}
	tp.checkRows(t, st, map[string]leases.Checkpoint{
		shardID(0): {Sequence: leases.ShardEnd},
		shardID(3): {Sequence: s3},
		shardID(4): {},
		shardID(1): {Sequence: agg},
		shardID(2): {},
	})
}

// Export writes items a KCL application reads as its own, and importing
// them gives back every checkpoint exactly.
func TestExportImportRoundTrip(t *testing.T) {
	for _, multi := range []bool{false, true} {
		name := "single-stream"
		if multi {
			name = "multi-stream"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tp := newTopology(t)
			e := tp.e
			streamID := ""
			if multi {
				streamID = "123456789012:" + e.stream + ":1700000000"
			}
			src := e.ourTable()
			want := tp.want()
			for shard, cp := range want {
				e.setRow(src, shard, cp)
			}
			kcl := e.foreignTable("leaseKey")
			ctx := context.Background()
			rep, err := migrate.Export(ctx, e.ours(src), migrate.Foreign{Client: e.ddb, Table: kcl, StreamID: streamID}, migrate.WithInterval(fast))
			if err != nil {
				t.Fatalf("Export: %v\n%v", err, rep)
			}
			key := func(shard string) string {
				if multi {
					return streamID + ":" + shard
				}
				return shard
			}
			// The KCL's forms (see TestToKCLRoundTrip), with the metadata of
			// the leases it creates.
			for shard, w := range map[string]struct {
				seq, sub string
			}{
				shardID(0): {"SHARD_END", "0"}, shardID(7): {tp.s7, "0"}, shardID(8): {"TRIM_HORIZON", "0"},
				shardID(1): {tp.agg1, "1"}, shardID(2): {tp.agg2, "3"}, shardID(3): {"LATEST", "0"},
				shardID(4): {"AT_TIMESTAMP", "0"}, shardID(5): {tp.s5, "-1"},
			} {
				it := e.getItem(kcl, key(shard))
				if s(it, "checkpoint") != w.seq || n(it, "checkpointSubSequenceNumber") != w.sub || n(it, "leaseCounter") != "0" ||
					n(it, "ownerSwitchesSinceCheckpoint") != "0" || s(it, "entityType") != "LEASE" || s(it, "startingHashKey") == "" || it["leaseOwner"] != nil {
					t.Errorf("KCL item %s: %v, want checkpoint %s sub %s", shard, it, w.seq, w.sub)
				}
				if multi && (s(it, "streamName") != streamID || s(it, "shardId") != shard) {
					t.Errorf("KCL item %s: streamName %q shardId %q", shard, s(it, "streamName"), s(it, "shardId"))
				}
			}
			if it := e.getItem(kcl, key(shardID(7))); !equalSS(it["parentShardId"], shardID(0)) {
				t.Errorf("child's parentShardId: %v", it["parentShardId"])
			}
			if it := e.getItem(kcl, key(shardID(0))); !equalSS(it["childShardIds"], shardID(7), shardID(8)) {
				t.Errorf("parent's childShardIds: %v", it["childShardIds"])
			}
			if it := e.getItem(kcl, key(shardID(6))); it != nil {
				t.Errorf("shard 6 has no checkpoint, yet an item: %v", it)
			}
			if r := rowsByShard(rep)[shardID(4)]; !strings.Contains(r.Note, tp.at.UTC().Format(time.RFC3339Nano)) {
				t.Errorf("the AT_TIMESTAMP row does not say which time ours had: %v", r)
			}

			dst := e.ourTable()
			rep, err = migrate.Import(ctx, migrate.Foreign{Client: e.ddb, Table: kcl, StreamID: streamID}, e.ours(dst),
				migrate.WithInterval(fast), migrate.WithAtTimestamp(tp.at))
			if err != nil {
				t.Fatalf("Import: %v\n%v", err, rep)
			}
			tp.checkRows(t, dst, want)

			// Exporting again changes nothing.
			rep, err = migrate.Export(ctx, e.ours(src), migrate.Foreign{Client: e.ddb, Table: kcl, StreamID: streamID}, migrate.WithInterval(fast))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Rows {
				if r.Action != migrate.Unchanged && r.Action != migrate.Skip {
					t.Errorf("second export: %v", r)
				}
			}
		})
	}
}

func s(it map[string]dtypes.AttributeValue, a string) string {
	v, _ := it[a].(*dtypes.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

func n(it map[string]dtypes.AttributeValue, a string) string {
	v, _ := it[a].(*dtypes.AttributeValueMemberN)
	if v == nil {
		return ""
	}
	return v.Value
}

func equalSS(v dtypes.AttributeValue, want ...string) bool {
	ss, ok := v.(*dtypes.AttributeValueMemberSS)
	if !ok || len(ss.Value) != len(want) {
		return false
	}
	for _, w := range want {
		found := false
		for _, x := range ss.Value {
			found = found || x == w
		}
		if !found {
			return false
		}
	}
	return true
}

// refusalEnv is a two-shard stream with records r0 < r0b on shard 0 and r1
// on shard 1, and a KCL table whose leases checkpoint r0 and r1.
type refusalEnv struct {
	*env
	kcl         string
	r0, r0b, r1 string
	st          leases.Store
}

func newRefusalEnv(t *testing.T) *refusalEnv {
	e := newEnv(t, 2)
	r := &refusalEnv{env: e, r0: e.put(shardID(0), 1), r0b: e.put(shardID(0), 2), r1: e.put(shardID(1), 3)}
	r.kcl = e.foreignTable("leaseKey")
	e.putItem(r.kcl, kclLease{shard: shardID(0), checkpoint: r.r0, counter: 5, owner: "kcl-worker-1"}.item())
	e.putItem(r.kcl, kclLease{shard: shardID(1), checkpoint: r.r1, counter: 5, owner: "kcl-worker-1"}.item())
	r.st = e.ourTable()
	return r
}

func (r *refusalEnv) foreign(c migrate.Client) migrate.Foreign {
	if c == nil {
		c = r.ddb
	}
	return migrate.Foreign{Client: c, Table: r.kcl}
}

func TestImportRefusesRunningSource(t *testing.T) {
	t.Parallel()
	r := newRefusalEnv(t)
	// The KCL renews a lease between the two reads: UpdateItem, leaseCounter + 1.
	renew := func() {
		_, err := r.ddb.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName: aws.String(r.kcl), Key: map[string]dtypes.AttributeValue{"leaseKey": &dtypes.AttributeValueMemberS{Value: shardID(1)}},
			UpdateExpression: aws.String("SET leaseCounter = leaseCounter + :one"), ExpressionAttributeValues: map[string]dtypes.AttributeValue{":one": num(1)},
		})
		if err != nil {
			t.Error(err)
		}
	}
	for _, dry := range []bool{true, false} {
		opts := []migrate.Option{migrate.WithInterval(fast)}
		if dry {
			opts = append(opts, migrate.WithDryRun())
		}
		rep, err := migrate.Import(context.Background(), r.foreign(&afterScan{Client: r.ddb, at: 1, fn: renew}), r.ours(r.st), opts...)
		var running *migrate.RunningError
		if !errors.Is(err, migrate.ErrRefused) || !errors.As(err, &running) || running.Table != r.kcl || len(running.Changed) != 1 || running.Changed[0] != shardID(1) {
			t.Fatalf("dry run %v: %v; want a RunningError naming table %s and item %s", dry, err, r.kcl, shardID(1))
		}
		if msg := err.Error(); !strings.Contains(msg, r.kcl) || !strings.Contains(msg, shardID(1)) || !strings.Contains(msg, "still being written") {
			t.Errorf("message: %s", msg)
		}
		if rep == nil || len(rep.Rows) != 2 || rep.Rows[0].Action != migrate.Write {
			t.Errorf("the report still lists the rows it would write: %v", rep)
		}
		for _, shard := range []string{shardID(0), shardID(1)} {
			if l, ok := r.row(r.st, shard); ok {
				t.Errorf("refused, yet row %s written: %+v", shard, l)
			}
		}
	}
	// Forced: written, the refusal reported.
	rep, err := migrate.Import(context.Background(), r.foreign(&afterScan{Client: r.ddb, at: 1, fn: renew}), r.ours(r.st),
		migrate.WithInterval(fast), migrate.WithForce())
	if err != nil || len(rep.Forced) != 1 || !errors.Is(rep.Forced[0], migrate.ErrStillRunning) {
		t.Fatalf("forced: %v, forced past %v", err, rep.Forced)
	}
	if l, _ := r.row(r.st, shardID(0)); l.Checkpoint.Sequence != r.r0 {
		t.Errorf("forced, row 0: %+v", l)
	}
}

func TestImportRefusesBackwards(t *testing.T) {
	t.Parallel()
	r := newRefusalEnv(t)
	r.setRow(r.st, shardID(0), leases.Checkpoint{Sequence: r.r0b}) // ours is further than the KCL's
	_, err := migrate.Import(context.Background(), r.foreign(nil), r.ours(r.st), migrate.WithInterval(fast))
	var back *migrate.BackwardsError
	if !errors.Is(err, migrate.ErrRefused) || !errors.As(err, &back) || back.Key != r.stream+":"+shardID(0) || back.From != r.r0b || back.To != r.r0 {
		t.Fatalf("%v; want a BackwardsError for shard 0 from %s to %s", err, r.r0b, r.r0)
	}
	if !strings.Contains(err.Error(), "back from "+r.r0b+" to "+r.r0) || !strings.Contains(err.Error(), shardID(0)) {
		t.Errorf("message: %v", err)
	}
	if l, _ := r.row(r.st, shardID(1)); l.Counter != 0 {
		t.Errorf("refused, yet shard 1 written: %+v", l)
	}
	if _, err := migrate.Import(context.Background(), r.foreign(nil), r.ours(r.st), migrate.WithInterval(fast), migrate.WithForce()); err != nil {
		t.Fatal(err)
	}
	if l, _ := r.row(r.st, shardID(0)); l.Checkpoint.Sequence != r.r0 {
		t.Errorf("forced back: %+v", l)
	}
}

func TestImportRefusesHeldRow(t *testing.T) {
	t.Parallel()
	r := newRefusalEnv(t)
	ctx := context.Background()
	mem := r.st.(leases.Membership)
	live := leases.Member{Owner: "svc-a", Incarnation: driver.NewIncarnation(0, "a1"), Heartbeat: 1}
	dead := leases.Member{Owner: "svc-b", Incarnation: driver.NewIncarnation(0, "b1"), Heartbeat: 1}
	for _, m := range []leases.Member{live, dead} {
		if _, err := mem.Join(ctx, 0, m); err != nil {
			t.Fatal(err)
		}
	}
	take := func(shard string, m leases.Member) {
		l := r.setRow(r.st, shard, leases.Checkpoint{})
		if _, err := mem.TakeAs(ctx, l, m.Owner, m.Incarnation); err != nil {
			t.Fatal(err)
		}
	}
	take(shardID(1), live)
	take(shardID(0), dead)
	heartbeat := func() { // svc-a heartbeats between the two reads; svc-b does not
		live.Heartbeat++
		if _, err := mem.Heartbeat(ctx, 0, live); err != nil {
			t.Error(err)
		}
	}
	rep, err := migrate.Import(ctx, r.foreign(&afterScan{Client: r.ddb, at: 1, fn: heartbeat}), r.ours(r.st), migrate.WithInterval(fast))
	var held *migrate.HeldError
	if !errors.Is(err, migrate.ErrHeld) || !errors.As(err, &held) || held.Owner != "svc-a" || held.Key != r.stream+":"+shardID(1) {
		t.Fatalf("%v; want a HeldError for shard 1 held by svc-a", err)
	}
	if strings.Contains(err.Error(), "svc-b") || rowsByShard(rep)[shardID(0)].Action != migrate.Request {
		t.Errorf("svc-b's row (its holder did not heartbeat) is not refused but requested: %v / %v", err, rep.Rows)
	}
	// Forced: both rows get a rewind request; svc-a is told.
	if _, err := migrate.Import(ctx, r.foreign(&afterScan{Client: r.ddb, at: 1, fn: heartbeat}), r.ours(r.st),
		migrate.WithInterval(fast), migrate.WithForce()); err != nil {
		t.Fatal(err)
	}
	for shard, want := range map[string]string{shardID(0): r.r0, shardID(1): r.r1} {
		if l, _ := r.row(r.st, shard); l.RewindTo.Sequence != want || !l.Checkpoint.IsZero() || !l.Held() {
			t.Errorf("row %s: %+v, want still held with a rewind request to %s", shard, l, want)
		}
	}
	ms, _ := mem.Members(ctx, 0)
	for _, m := range ms {
		if m.Owner == "svc-a" && m.Notice != 1 {
			t.Errorf("svc-a's notice %d, want 1", m.Notice)
		}
	}
}

func TestImportRefusesAtTimestampWithoutTime(t *testing.T) {
	t.Parallel()
	r := newRefusalEnv(t)
	r.putItem(r.kcl, kclLease{shard: shardID(1), checkpoint: "AT_TIMESTAMP", counter: 6}.item())
	rep, err := migrate.Import(context.Background(), r.foreign(nil), r.ours(r.st), migrate.WithInterval(fast), migrate.WithForce())
	if !errors.Is(err, migrate.ErrNeedTimestamp) || !strings.Contains(err.Error(), shardID(1)) {
		t.Fatalf("%v; want ErrNeedTimestamp naming shard 1, even forced", err)
	}
	if row := rowsByShard(rep)[shardID(1)]; row.Action != migrate.Refused {
		t.Errorf("report: %v", row)
	}
	if l, ok := r.row(r.st, shardID(0)); ok {
		t.Errorf("refused, yet row 0 written: %+v", l)
	}
}

func TestExportRefusals(t *testing.T) {
	t.Parallel()
	r := newRefusalEnv(t)
	ctx := context.Background()
	r.setRow(r.st, shardID(0), leases.Checkpoint{Sequence: r.r0})
	r.setRow(r.st, shardID(1), leases.Checkpoint{Sequence: r.r1})
	mem := r.st.(leases.Membership)
	m := leases.Member{Owner: "svc-a", Incarnation: driver.NewIncarnation(0, "a1"), Heartbeat: 1}
	if _, err := mem.Join(ctx, 0, m); err != nil {
		t.Fatal(err)
	}
	if err := mem.BumpRow(ctx, 0); err != nil {
		t.Fatal(err)
	}
	heartbeat := func() {
		m.Heartbeat++
		if _, err := mem.Heartbeat(ctx, 0, m); err != nil {
			t.Error(err)
		}
	}
	_, err := migrate.Export(ctx, r.ours(r.st), r.foreign(&afterScan{Client: r.ddb, at: 1, fn: heartbeat}), migrate.WithInterval(fast))
	var running *migrate.RunningError
	if !errors.As(err, &running) || running.Table != "" || !strings.Contains(err.Error(), "member svc-a") || !strings.Contains(err.Error(), "kinesislease service") {
		t.Fatalf("%v; want a RunningError naming member svc-a of our service", err)
	}

	// The KCL's item is further than ours.
	r.putItem(r.kcl, kclLease{shard: shardID(0), checkpoint: r.r0b, counter: 6}.item())
	_, err = migrate.Export(ctx, r.ours(r.st), r.foreign(nil), migrate.WithInterval(fast))
	var back *migrate.BackwardsError
	if !errors.As(err, &back) || back.Table != r.kcl || back.Key != shardID(0) || !strings.Contains(err.Error(), r.kcl) {
		t.Fatalf("%v; want a BackwardsError for item %s of table %s", err, shardID(0), r.kcl)
	}
	if it := r.getItem(r.kcl, shardID(1)); s(it, "checkpoint") != r.r1 || n(it, "leaseCounter") != "5" {
		t.Errorf("refused, yet item 1 written: %v", it)
	}
}
