package kinesislease_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// hookLog is a hook implementing every Hook interface; it records what it
// is told, each event numbered in the order the hooks were called.
type hookLog struct {
	mu          sync.Mutex
	n           int64
	leases      []leaseEvent
	started     []shardEvent
	ended       []shardEvent
	batches     []kltype.BatchInfo
	records     []kltype.RecordInfo
	checkpoints []kltype.CheckpointInfo
	throttles   []kltype.ThrottleInfo
	dead        []*kltype.DeadLetterRecord
	calls       []kltype.CallInfo
	nilCtx      int
}

type leaseEvent struct {
	n    int64
	kind string // acquired, released, lost
	info kltype.LeaseInfo
}

type shardEvent struct {
	n    int64
	info kltype.ShardInfo
}

var (
	_ kltype.HookLeaseAcquired     = (*hookLog)(nil)
	_ kltype.HookLeaseReleased     = (*hookLog)(nil)
	_ kltype.HookLeaseLost         = (*hookLog)(nil)
	_ kltype.HookShardStarted      = (*hookLog)(nil)
	_ kltype.HookShardEnded        = (*hookLog)(nil)
	_ kltype.HookBatchFetched      = (*hookLog)(nil)
	_ kltype.HookRecordHandled     = (*hookLog)(nil)
	_ kltype.HookCheckpointWritten = (*hookLog)(nil)
	_ kltype.HookThrottled         = (*hookLog)(nil)
	_ kltype.HookDeadLettered      = (*hookLog)(nil)
	_ kltype.HookCall              = (*hookLog)(nil)
)

func (h *hookLog) lease(ctx context.Context, kind string, l kltype.LeaseInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ctx == nil {
		h.nilCtx++
	}
	h.n++
	h.leases = append(h.leases, leaseEvent{n: h.n, kind: kind, info: l})
}

func (h *hookLog) OnLeaseAcquired(ctx context.Context, l kltype.LeaseInfo) {
	h.lease(ctx, "acquired", l)
}
func (h *hookLog) OnLeaseReleased(ctx context.Context, l kltype.LeaseInfo) {
	h.lease(ctx, "released", l)
}
func (h *hookLog) OnLeaseLost(ctx context.Context, l kltype.LeaseInfo) { h.lease(ctx, "lost", l) }

func (h *hookLog) OnShardStarted(s kltype.ShardInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	h.started = append(h.started, shardEvent{n: h.n, info: s})
}

func (h *hookLog) OnShardEnded(s kltype.ShardInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	h.ended = append(h.ended, shardEvent{n: h.n, info: s})
}

func (h *hookLog) OnBatchFetched(b kltype.BatchInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.batches = append(h.batches, b)
}

func (h *hookLog) OnRecordHandled(r kltype.RecordInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
}

func (h *hookLog) OnCheckpointWritten(c kltype.CheckpointInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkpoints = append(h.checkpoints, c)
}

func (h *hookLog) OnThrottled(t kltype.ThrottleInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.throttles = append(h.throttles, t)
}

func (h *hookLog) OnDeadLettered(dl *kltype.DeadLetterRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dead = append(h.dead, dl)
}

func (h *hookLog) OnCall(c kltype.CallInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, c)
}

// leaseEvents returns the lease events of shard id, in order.
func (h *hookLog) leaseEvents(id string) []leaseEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	var es []leaseEvent
	for _, e := range h.leases {
		if e.info.ShardID == id {
			es = append(es, e)
		}
	}
	return es
}

// waitUntil polls cond (called with h.mu held) until it holds.
func (h *hookLog) waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h.mu.Lock()
		ok := cond()
		h.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: still waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hookPutRecord is one record put, as Kinesis placed it.
type hookPutRecord struct {
	id   int
	seq  string
	size int
}

// hookPut writes n orders numbered from first (as put does) and returns
// them by shard, in sequence order.
func hookPut(t *testing.T, client *kinesis.Client, stream string, first, n int) map[string][]hookPutRecord {
	t.Helper()
	by := map[string][]hookPutRecord{}
	var entries []ktypes.PutRecordsRequestEntry
	for id := first; id < first+n; id++ {
		o := order{ID: id, Key: fmt.Sprintf("customer-%d", id%17)}
		data, _ := json.Marshal(o)
		entries = append(entries, ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(o.Key)})
	}
	out, err := client.PutRecords(testutil.WithoutFaults(context.Background()), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt32(out.FailedRecordCount) != 0 {
		t.Fatalf("PutRecords: %d failed", aws.ToInt32(out.FailedRecordCount))
	}
	for i, r := range out.Records {
		id := aws.ToString(r.ShardId)
		by[id] = append(by[id], hookPutRecord{id: first + i, seq: aws.ToString(r.SequenceNumber), size: len(entries[i].Data)})
	}
	for _, rs := range by {
		slices.SortFunc(rs, func(a, b hookPutRecord) int { return hookSeqCmp(a.seq, b.seq) })
	}
	return by
}

func hookSeqCmp(a, b string) int {
	x, _ := new(big.Int).SetString(a, 10)
	y, _ := new(big.Int).SetString(b, 10)
	return x.Cmp(y)
}

// hookFreezable is a lease store that an instance is cut off from while
// frozen: every call fails, as for a process whose network is gone. Its
// heartbeats stop landing, so its fence passes and the others take its
// leases over.
type hookFreezable struct {
	*memory.Store
	frozen atomic.Bool
}

var errHookFrozen = errors.New("test: lease store unreachable")

func (s *hookFreezable) err() error {
	if s.frozen.Load() {
		return errHookFrozen
	}
	return nil
}

func (s *hookFreezable) Get(ctx context.Context, k leases.Key) (leases.Lease, error) {
	if err := s.err(); err != nil {
		return leases.Lease{}, err
	}
	return s.Store.Get(ctx, k)
}

func (s *hookFreezable) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if err := s.err(); err != nil {
		return leases.Lease{}, err
	}
	return s.Store.Checkpoint(ctx, l, cp)
}

func (s *hookFreezable) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if err := s.err(); err != nil {
		return leases.Lease{}, err
	}
	return s.Store.Release(ctx, l, cp)
}

func (s *hookFreezable) TakeAs(ctx context.Context, l leases.Lease, owner, inc string) (leases.Lease, error) {
	if err := s.err(); err != nil {
		return leases.Lease{}, err
	}
	return s.Store.TakeAs(ctx, l, owner, inc)
}

func (s *hookFreezable) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Heartbeat(ctx, row, m)
}

func (s *hookFreezable) Members(ctx context.Context, row int) ([]leases.Member, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.Members(ctx, row)
}

func (s *hookFreezable) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	if err := s.err(); err != nil {
		return nil, err
	}
	return s.Store.ReplaceMember(ctx, row, seen, next)
}

// TestHooks: two services on one memory store and a 2-shard kinesalite
// stream. A reads 100 records alone; then A is cut off from the store, B
// takes both its leases over once A's heartbeat stood still for the timeout,
// and A, reconnected, finds them lost; A stops, B reads 50 more and shuts
// down. Every hook is called with the right values.
func TestHooks(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 2)
	shards := []string{"shardId-000000000000", "shardId-000000000001"}
	mem := memory.New()

	put1 := hookPut(t, kc, stream, 0, 100)
	for _, id := range shards {
		if len(put1[id]) == 0 {
			t.Fatalf("no record put on %s: %v", id, put1)
		}
	}
	last := func(by map[string][]hookPutRecord, id string) string { return by[id][len(by[id])-1].seq }

	// Phase 1: A alone reads the 100 records and checkpoints the last one
	// of each shard.
	ha := &hookLog{}
	storeA := &hookFreezable{Store: mem}
	tallyA := newTally()
	a := start(t, kc, storeA, stream, "a", tallyA, kinesislease.WithHooks(ha), failoverLease)
	tallyA.waitFor(t, 0, 100, 30*time.Second)
	ha.waitUntil(t, "A's checkpoints of the last records", func() bool {
		for _, id := range shards {
			ok := false
			for _, c := range ha.checkpoints {
				ok = ok || (c.ShardID == id && c.Err == nil && c.Checkpoint.Sequence == last(put1, id))
			}
			if !ok {
				return false
			}
		}
		return true
	})

	ha.mu.Lock()
	for _, id := range shards {
		// Acquired (no previous owner, no checkpoint), then the reader starts at TRIM_HORIZON.
		var acq []leaseEvent
		for _, e := range ha.leases {
			if e.info.ShardID == id {
				acq = append(acq, e)
			}
		}
		want := kltype.LeaseInfo{Stream: stream, ShardID: id, Owner: "a"}
		if len(acq) != 1 || acq[0].kind != "acquired" || acq[0].info != want {
			t.Errorf("A's lease events on %s: %+v, want one acquired %+v", id, acq, want)
		}
		var st []shardEvent
		for _, s := range ha.started {
			if s.info.ShardID == id {
				st = append(st, s)
			}
		}
		if len(st) != 1 || st[0].info != (kltype.ShardInfo{Stream: stream, ShardID: id, Start: kltype.TrimHorizon}) {
			t.Errorf("A's shard starts on %s: %+v, want one at TRIM_HORIZON", id, st)
		} else if len(acq) == 1 && st[0].n < acq[0].n {
			t.Errorf("A's reader of %s started (event %d) before its lease was reported acquired (event %d)", id, st[0].n, acq[0].n)
		}

		// Batches: every record put, once, with its bytes.
		n, size, wantSize := 0, 0, 0
		for _, b := range ha.batches {
			if b.Stream != stream || b.ShardID == "" {
				t.Errorf("batch %+v: wrong stream or no shard", b)
			}
			if b.Records <= 0 || b.MillisBehindLatest < 0 {
				t.Errorf("batch %+v: want records > 0 and MillisBehindLatest >= 0", b)
			}
			if b.ShardID == id {
				n += b.Records
				size += b.Bytes
			}
		}
		for _, r := range put1[id] {
			wantSize += r.size
		}
		if n != len(put1[id]) || size != wantSize {
			t.Errorf("A's batches on %s: %d records, %d bytes; put %d records, %d bytes", id, n, size, len(put1[id]), wantSize)
		}

		// Checkpoints: every one landed, at a record put on the shard, in order.
		prev := ""
		for _, c := range ha.checkpoints {
			if c.ShardID != id {
				continue
			}
			if c.Err != nil || c.Stream != stream || c.Checkpoint.SubSequence != 0 ||
				!slices.ContainsFunc(put1[id], func(r hookPutRecord) bool { return r.seq == c.Checkpoint.Sequence }) {
				t.Errorf("A's checkpoint %+v on %s: want a landed checkpoint at a record put there", c, id)
			}
			if prev != "" && hookSeqCmp(c.Checkpoint.Sequence, prev) < 0 {
				t.Errorf("A's checkpoints on %s went back from %s to %s", id, prev, c.Checkpoint.Sequence)
			}
			prev = c.Checkpoint.Sequence
		}
	}
	checkHookRecords(t, "A", stream, ha.records, put1)
	ha.mu.Unlock()

	// Phase 2: A is cut off from the store; B starts and takes both leases
	// over once it has seen A's heartbeat unchanged for the timeout.
	storeA.frozen.Store(true)
	hb := &hookLog{}
	tallyB := newTally()
	b := start(t, kc, mem, stream, "b", tallyB, kinesislease.WithHooks(hb), failoverLease)
	hb.waitUntil(t, "B acquiring both shards", func() bool {
		n := 0
		for _, e := range hb.leases {
			if e.kind == "acquired" {
				n++
			}
		}
		return n >= 2
	})
	storeA.frozen.Store(false)
	ha.waitUntil(t, "A finding both leases lost", func() bool {
		n := 0
		for _, e := range ha.leases {
			if e.kind == "lost" {
				n++
			}
		}
		return n >= 2
	})
	a.stop(t)

	for _, id := range shards {
		es := ha.leaseEvents(id)
		want := kltype.LeaseInfo{Stream: stream, ShardID: id, Owner: "a", Checkpoint: leases.Checkpoint{Sequence: last(put1, id)}}
		if len(es) < 2 || es[1].kind != "lost" || es[1].info != want {
			t.Errorf("A's lease events on %s: %+v, want acquired then lost %+v (never released)", id, es, want)
		}
		for i := 2; i < len(es); i++ {
			// Only a later handoff back to A may follow, acquired then released.
			if wantKind := []string{"acquired", "released"}[i%2]; es[i].kind != wantKind || es[i].info.From != "" {
				t.Errorf("A's lease events on %s after the loss: %+v", id, es[2:])
				break
			}
		}
		bs := hb.leaseEvents(id)
		want = kltype.LeaseInfo{Stream: stream, ShardID: id, Owner: "b", Checkpoint: leases.Checkpoint{Sequence: last(put1, id)}, From: "a"}
		if len(bs) == 0 || bs[0].kind != "acquired" || bs[0].info != want {
			t.Errorf("B's first lease event on %s: %+v, want acquired %+v", id, bs, want)
		}
	}
	ha.mu.Lock()
	heartbeatFailed := false
	for _, c := range ha.calls {
		heartbeatFailed = heartbeatFailed || (c.Service == "dynamodb" && c.Op == "Heartbeat" && errors.Is(c.Err, errHookFrozen))
	}
	if !heartbeatFailed {
		t.Errorf("A's calls: no failed Heartbeat reported while the store was cut off")
	}
	if ha.nilCtx != 0 {
		t.Errorf("%d lease hooks of A called with a nil context", ha.nilCtx)
	}
	ha.mu.Unlock()

	// Phase 3: B reads 50 more records from A's checkpoints and shuts down,
	// releasing both leases with its final checkpoints.
	put2 := hookPut(t, kc, stream, 100, 50)
	tallyB.waitFor(t, 100, 50, 30*time.Second)
	hb.waitUntil(t, "a heartbeat by B", func() bool {
		return slices.ContainsFunc(hb.calls, func(c kltype.CallInfo) bool { return c.Op == "Heartbeat" && c.Err == nil })
	})
	b.stop(t)
	if d, _ := tallyB.count(0, 100); d != 0 {
		t.Errorf("B redelivered %d records A had checkpointed", d)
	}

	hb.mu.Lock()
	defer hb.mu.Unlock()
	for _, id := range shards {
		final := last(put1, id)
		if len(put2[id]) > 0 {
			final = last(put2, id)
		}
		var es []leaseEvent
		for _, e := range hb.leases {
			if e.info.ShardID == id {
				es = append(es, e)
			}
		}
		want := kltype.LeaseInfo{Stream: stream, ShardID: id, Owner: "b", Checkpoint: leases.Checkpoint{Sequence: final}}
		if len(es) == 0 {
			t.Errorf("B: no lease event on %s", id)
		} else if e := es[len(es)-1]; e.kind != "released" || e.info != want {
			t.Errorf("B's last lease event on %s: %+v, want released %+v", id, e, want)
		}
		for _, e := range es {
			if e.kind == "lost" {
				t.Errorf("B lost %s: %+v", id, e)
			}
		}
		var st []shardEvent
		for _, s := range hb.started {
			if s.info.ShardID == id {
				st = append(st, s)
			}
		}
		if len(st) == 0 || st[0].info != (kltype.ShardInfo{Stream: stream, ShardID: id, Start: kltype.AfterSequenceNumber(last(put1, id))}) {
			t.Errorf("B's shard starts on %s: %+v, want after A's checkpoint %s", id, st, last(put1, id))
		}
		// The final checkpoint reported is the release's.
		var cps []kltype.CheckpointInfo
		for _, c := range hb.checkpoints {
			if c.ShardID == id {
				cps = append(cps, c)
			}
		}
		if len(cps) == 0 || cps[len(cps)-1] != (kltype.CheckpointInfo{Stream: stream, ShardID: id, Checkpoint: leases.Checkpoint{Sequence: final}}) {
			t.Errorf("B's checkpoints on %s: %+v, want the last at %s", id, cps, final)
		}
	}
	checkHookRecords(t, "B", stream, hb.records, put2)

	ops := map[string]bool{}
	for _, c := range hb.calls {
		if c.Duration < 0 {
			t.Errorf("call %+v: negative duration", c)
		}
		ops[c.Service+"."+c.Op] = true
	}
	for _, op := range []string{"dynamodb.Get", "dynamodb.TakeAs", "dynamodb.Heartbeat", "dynamodb.Members", "dynamodb.Checkpoint", "dynamodb.Release",
		"kinesis.ListShards", "kinesis.GetShardIterator", "kinesis.GetRecords"} {
		if !ops[op] {
			t.Errorf("B's calls: no %s reported (saw %v)", op, ops)
		}
	}
	if len(hb.throttles) != 0 || len(hb.dead) != 0 || len(hb.ended) != 0 {
		t.Errorf("B: %d throttles, %d dead letters, %d shards ended; want none", len(hb.throttles), len(hb.dead), len(hb.ended))
	}
}

// checkHookRecords: each record put was reported handled once, acknowledged on
// its first attempt, with its shard, sequence number and size.
func checkHookRecords(t *testing.T, who, stream string, got []kltype.RecordInfo, put map[string][]hookPutRecord) {
	t.Helper()
	want := map[string]hookPutRecord{}
	shardOf := map[string]string{}
	for id, rs := range put {
		for _, r := range rs {
			want[r.seq] = r
			shardOf[r.seq] = id
		}
	}
	seen := map[string]int{}
	for _, r := range got {
		p, ok := want[r.SequenceNumber]
		if !ok {
			continue // from another put
		}
		seen[r.SequenceNumber]++
		if r.Stream != stream || r.ShardID != shardOf[r.SequenceNumber] || r.SubSequence != 0 || r.Bytes != p.size ||
			r.Attempts != 1 || r.Outcome != kltype.Acked || r.Duration < 0 || r.Duration > 30*time.Second {
			t.Errorf("%s: record %d reported %+v, want acknowledged on attempt 1 on %s, %d bytes", who, p.id, r, shardOf[r.SequenceNumber], p.size)
		}
	}
	for seq, p := range want {
		if seen[seq] != 1 {
			t.Errorf("%s: record %d (%s) reported handled %d times, want 1", who, p.id, seq, seen[seq])
		}
	}
}
