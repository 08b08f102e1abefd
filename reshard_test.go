package kinesislease_test

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/leases"
)

// event is the payload of the resharding and fault tests: a partition key
// and that key's counter at publication (0, 1, 2, ... per key).
type event struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// delivery is one call of a handler.
type delivery struct {
	event
	Owner, Shard, Seq string
	Attempt           int
}

// journal records every delivery, in handling order. Its gate can hold the
// handlers of chosen shards, as a slow handler would, while a test reshards.
type journal struct {
	mu      sync.Mutex
	log     []delivery
	blocked map[string]chan struct{} // shards whose handlers wait, until the channel is closed
	waiting map[string]int           // handlers waiting at the gate, by shard
	kick    chan struct{}
}

func newJournal() *journal {
	return &journal{blocked: map[string]chan struct{}{}, waiting: map[string]int{}, kick: make(chan struct{}, 1)}
}

func (j *journal) handler(owner string) kinesislease.HandlerFunc[event] {
	return func(ctx context.Context, e event) error {
		r, ok := kinesislease.RecordFrom(ctx)
		if !ok {
			return errors.New("no record in the handler's context")
		}
		j.mu.Lock()
		if open, ok := j.blocked[r.ShardID]; ok {
			j.waiting[r.ShardID]++
			j.mu.Unlock()
			j.signal()
			select {
			case <-open:
			case <-ctx.Done():
			}
			j.mu.Lock()
			j.waiting[r.ShardID]--
			if ctx.Err() != nil {
				j.mu.Unlock()
				return ctx.Err()
			}
		}
		j.log = append(j.log, delivery{event: e, Owner: owner, Shard: r.ShardID, Seq: r.SequenceNumber, Attempt: r.Attempt})
		j.mu.Unlock()
		j.signal()
		return nil
	}
}

func (j *journal) signal() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// block makes the handlers of shards wait until unblock.
func (j *journal) block(shards ...string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, s := range shards {
		if _, ok := j.blocked[s]; !ok {
			j.blocked[s] = make(chan struct{})
		}
	}
}

// unblock lets the handlers of shards go on.
func (j *journal) unblock(shards ...string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, s := range shards {
		if ch, ok := j.blocked[s]; ok {
			close(ch)
			delete(j.blocked, s)
		}
	}
}

// waitBlocked waits until a handler of each of shards waits at the gate.
func (j *journal) waitBlocked(t testing.TB, timeout time.Duration, shards ...string) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		j.mu.Lock()
		var missing []string
		for _, s := range shards {
			if j.waiting[s] == 0 {
				missing = append(missing, s)
			}
		}
		j.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		select {
		case <-j.kick:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("after %v no handler of %v is holding a record", timeout, missing)
		}
	}
}

func (j *journal) deliveries() []delivery {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]delivery(nil), j.log...)
}

// waitUntil waits until cond holds on the deliveries so far; it fails the
// test after timeout, with what(deliveries) as the reason.
func (j *journal) waitUntil(t testing.TB, timeout time.Duration, cond func([]delivery) bool, what func([]delivery) string) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		d := j.deliveries()
		if cond(d) {
			return
		}
		select {
		case <-j.kick:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("after %v: %s", timeout, what(j.deliveries()))
		}
	}
}

// startJournal is start (consumer_test.go) with a journal's handler, any
// kinesis client (a recording wrapper, say) and extra subscription options,
// applied after start's (TRIM_HORIZON, checkpoint every 10 records or
// 100ms, polling 20ms/50ms).
func startJournal(t testing.TB, client kinesislease.Kinesis, store leases.MembershipStore, stream, owner string, j *journal, sub []kinesislease.SubscribeOption, extra ...kinesislease.Option) *instance {
	t.Helper()
	return startWith(t, client, store, stream, owner, j.handler(owner), sub, extra...)
}

// quarterKeys returns n partition keys spread over the four quarters of the
// hash key range (Kinesis hashes a partition key with MD5), so that every
// shard of a 2-shard stream and of its 4 children gets records.
func quarterKeys(n int) []string {
	var keys []string
	per := [4]int{}
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprintf("key-%d", i)
		sum := md5.Sum([]byte(k))
		q := sum[0] >> 6
		if per[q] < (n+3)/4 {
			per[q]++
			keys = append(keys, k)
		}
	}
	return keys
}

// producer publishes rounds of events, one per key per round, so that a key's
// records are published one PutRecords call after another, in counter order.
type producer struct {
	client *kinesis.Client
	stream string
	keys   []string
	next   map[string]int // per key, the counter of its next record
	count  atomic.Int64   // records published
}

func newProducer(client *kinesis.Client, stream string, keys []string) *producer {
	return &producer{client: client, stream: stream, keys: keys, next: map[string]int{}}
}

// round publishes one event per key, retrying the entries Kinesis refused
// (a stream that is UPDATING may refuse some) until every one is in.
func (p *producer) round(ctx context.Context) error {
	var entries []ktypes.PutRecordsRequestEntry
	for _, k := range p.keys {
		data, _ := json.Marshal(event{Key: k, N: p.next[k]})
		entries = append(entries, ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(k)})
	}
	for attempt := 0; len(entries) > 0; attempt++ {
		if attempt > 0 {
			if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
				return err
			}
		}
		if attempt > 200 {
			return fmt.Errorf("PutRecords: %d entries still refused after %d attempts", len(entries), attempt)
		}
		out, err := p.client.PutRecords(testutil.WithoutFaults(ctx), &kinesis.PutRecordsInput{StreamName: aws.String(p.stream), Records: entries})
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			continue // nothing was written (no faults on this client): retry the lot
		}
		var failed []ktypes.PutRecordsRequestEntry
		for i, r := range out.Records {
			if r.ErrorCode != nil {
				failed = append(failed, entries[i])
			}
		}
		p.count.Add(int64(len(entries) - len(failed)))
		entries = failed
	}
	for _, k := range p.keys {
		p.next[k]++
	}
	return nil
}

// run publishes rounds every gap until ctx ends or limit records (read on each
// round) are published. It returns the first error.
func (p *producer) run(ctx context.Context, gap time.Duration, limit *atomic.Int64) error {
	for ctx.Err() == nil {
		if p.count.Load() >= limit.Load() {
			if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
				return nil
			}
			continue
		}
		if err := p.round(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := sleepCtx(ctx, gap); err != nil {
			return nil
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// shardTree is a stream's shards as ListShards returns them.
type shardTree map[string]ktypes.Shard

func listShards(t testing.TB, client *kinesis.Client, stream string) shardTree {
	t.Helper()
	tree := shardTree{}
	in := &kinesis.ListShardsInput{StreamName: aws.String(stream)}
	for {
		out, err := client.ListShards(testutil.WithoutFaults(context.Background()), in)
		if err != nil {
			t.Fatalf("ListShards: %v", err)
		}
		for _, s := range out.Shards {
			tree[aws.ToString(s.ShardId)] = s
		}
		if out.NextToken == nil {
			return tree
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// generation is a shard's depth in the stream's lineage: 0 for a shard
// without parent in the stream.
func (tr shardTree) generation(id string) int {
	s, ok := tr[id]
	if !ok {
		return -1
	}
	g := 0
	for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
		if _, ok := tr[aws.ToString(p)]; ok {
			g = max(g, tr.generation(aws.ToString(p))+1)
		}
	}
	return g
}

func (tr shardTree) closed() (ids []string) {
	for id, s := range tr {
		if s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// updateShardCount reshards the stream with UNIFORM_SCALING and waits until it
// is ACTIVE again.
func updateShardCount(t testing.TB, client *kinesis.Client, stream string, n int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testutil.WithoutFaults(context.Background()), 60*time.Second)
	defer cancel()
	for {
		_, err := client.UpdateShardCount(ctx, &kinesis.UpdateShardCountInput{
			StreamName: aws.String(stream), TargetShardCount: aws.Int32(n), ScalingType: ktypes.ScalingTypeUniformScaling,
		})
		var inUse *ktypes.ResourceInUseException
		if errors.As(err, &inUse) { // still UPDATING from an earlier change
			if sleepCtx(ctx, 20*time.Millisecond) != nil {
				t.Fatalf("UpdateShardCount(%d): %v", n, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("UpdateShardCount(%d): %v", n, err)
		}
		break
	}
	for {
		out, err := client.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			t.Fatalf("DescribeStreamSummary: %v", err)
		}
		if s := out.StreamDescriptionSummary; s.StreamStatus == ktypes.StreamStatusActive && aws.ToInt32(s.OpenShardCount) == n {
			return
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			t.Fatalf("stream %s not ACTIVE with %d shards: %v", stream, n, err)
		}
	}
}

// checkKeyOrder checks, for every key, that the first delivery of each
// counter came in publication order (0, 1, 2, ... with no gap: a record is
// never handled before an earlier record of its key), that every published
// record was handled, and that the key's deliveries never went back to an
// older generation of shards (a child's records only after its parent's).
// Repeated counters are re-deliveries; it returns how many.
func checkKeyOrder(t *testing.T, ds []delivery, published map[string]int, tree shardTree) (dups int) {
	t.Helper()
	next := map[string]int{}
	gen := map[string]int{}
	lastShard := map[string]string{}
	for i, d := range ds {
		switch n := next[d.Key]; {
		case d.N == n:
			next[d.Key]++
		case d.N < n:
			dups++
		default:
			t.Errorf("delivery %d: key %s counter %d (shard %s) handled before counter %d, published earlier", i, d.Key, d.N, d.Shard, n)
			next[d.Key] = d.N + 1
		}
		g := tree.generation(d.Shard)
		if g < 0 {
			t.Errorf("delivery %d: from shard %s, not in the stream", i, d.Shard)
		}
		if prev, ok := gen[d.Key]; ok && g < prev {
			t.Errorf("delivery %d: key %s counter %d from shard %s (generation %d) after records of shard %s (generation %d): a parent delivered after its child",
				i, d.Key, d.N, d.Shard, g, lastShard[d.Key], prev)
		}
		gen[d.Key], lastShard[d.Key] = g, d.Shard
	}
	for k, n := range published {
		if next[k] != n {
			t.Errorf("key %s: %d of %d published records handled", k, next[k], n)
		}
	}
	return dups
}

// TestReshardUnderLoad: two instances consume a 2-shard stream while a
// producer keeps publishing; the stream is split to 4 shards, then merged
// back to 2. Every key's records reach the handler in publication order
// across both reshards (a child starts only after its parents' rows hold
// SHARD_END), nothing is lost, and every closed shard ends at SHARD_END.
//
// At each reshard the parents' handlers are held (a slow handler), so the
// parents still have records in flight while the children exist; they are
// let go once the children's rows show that the coordinators know of the
// children, and a little later (a broken coordinator would have started
// them by then: the order checks catch it).
func TestReshardUnderLoad(t *testing.T) {
	t.Parallel()
	testutil.Slow(t)
	onMemoryStore(t, func(t *testing.T, newStore func() leases.MembershipStore) {
		kc := testutil.KinesisClient(t, testutil.KinesisLocal)
		stream := testutil.StreamName(t)
		testutil.CreateStream(t, kc, stream, 2)
		keys := quarterKeys(10)
		prod := newProducer(kc, stream, keys)
		for range 5 {
			if err := prod.round(context.Background()); err != nil {
				t.Fatal(err)
			}
		}

		j := newJournal()
		syncShards := kinesislease.WithShardSyncInterval(300 * time.Millisecond)
		a := startJournal(t, kc, newStore(), stream, "a", j, nil, syncShards)
		b := startJournal(t, kc, newStore(), stream, "b", j, nil, syncShards)

		var limit atomic.Int64
		limit.Store(1000) // a bound; the test stops the producer itself
		ctx, stopProducing := context.WithCancel(context.Background())
		var prodErr error
		prodDone := make(chan struct{})
		go func() { prodErr = prod.run(ctx, 150*time.Millisecond, &limit); close(prodDone) }()
		defer func() { stopProducing(); <-prodDone }()
		waitCount := func(n int64) {
			t.Helper()
			deadline := time.Now().Add(60 * time.Second)
			for prod.count.Load() < n {
				if time.Now().After(deadline) {
					t.Fatalf("producer published %d records in 60s, want %d", prod.count.Load(), n)
				}
				select {
				case <-prodDone:
					t.Fatalf("producer stopped: %v", prodErr)
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
		store := newStore()
		// waitRow waits until shard id's row exists and satisfies ok.
		waitRow := func(id string, ok func(leases.Lease) bool, what string) {
			t.Helper()
			deadline := time.Now().Add(30 * time.Second)
			for {
				l, err := store.Get(context.Background(), leases.Key{Stream: stream, Shard: id})
				if err == nil && ok(l) {
					return
				}
				if err != nil && !errors.Is(err, leases.ErrNotFound) || time.Now().After(deadline) {
					t.Fatalf("row of shard %s: %+v, %v; want %s", id, l, err, what)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		// reshard holds the handlers of parents (each holding a record),
		// reshards to n shards and waits until every shard has a row (the
		// coordinators know of the new ones). Then it lets the parents go
		// one by one, in order, each after its predecessor's row reached
		// SHARD_END. Before each release it waits a few scans: a broken
		// coordinator would start a child early then (the order checks
		// catch it); a correct one passes whatever the timing.
		reshard := func(parents []string, n int32) shardTree {
			t.Helper()
			j.block(parents...)
			j.waitBlocked(t, 60*time.Second, parents...)
			updateShardCount(t, kc, stream, n)
			tree := listShards(t, kc, stream)
			for id := range tree {
				waitRow(id, func(leases.Lease) bool { return true }, "a row")
			}
			for _, p := range parents {
				time.Sleep(700 * time.Millisecond) // a sync and a few scans
				j.unblock(p)
				waitRow(p, func(l leases.Lease) bool { return l.Checkpoint.Sequence == leases.ShardEnd }, leases.ShardEnd)
			}
			return tree
		}
		ofGeneration := func(tree shardTree, g int) (ids []string) {
			for id := range tree {
				if tree.generation(id) == g {
					ids = append(ids, id)
				}
			}
			return ids
		}

		// Split while producing.
		waitCount(70)
		tree := reshard([]string{"shardId-000000000000", "shardId-000000000001"}, 4)
		if len(tree) != 6 || len(tree.closed()) != 2 {
			t.Fatalf("after UpdateShardCount(4): %d shards, %d closed; want 6 and 2", len(tree), len(tree.closed()))
		}
		// Keep producing; merge back once every child is being read.
		children := ofGeneration(tree, 1)
		slices.Sort(children) // the parent of each merged shard first, then the adjacent one
		waitCount(prod.count.Load() + 30)
		tree = reshard(children, 2)
		if len(tree) != 8 || len(tree.closed()) != 6 {
			t.Fatalf("after UpdateShardCount(2): %d shards, %d closed; want 8 and 6", len(tree), len(tree.closed()))
		}
		waitCount(prod.count.Load() + 50)
		stopProducing()
		<-prodDone
		if prodErr != nil {
			t.Fatalf("producer: %v", prodErr)
		}

		published := map[string]int{}
		for _, k := range keys {
			published[k] = prod.next[k]
		}
		total := int(prod.count.Load())
		tree = listShards(t, kc, stream)
		if len(tree) != 8 || len(tree.closed()) != 6 {
			t.Fatalf("after UpdateShardCount(2): %d shards, %d closed; want 8 and 6", len(tree), len(tree.closed()))
		}

		// Every record handled at least once.
		distinct := func(ds []delivery) int {
			seen := map[event]bool{}
			for _, d := range ds {
				seen[d.event] = true
			}
			return len(seen)
		}
		j.waitUntil(t, 90*time.Second, func(ds []delivery) bool { return distinct(ds) >= total },
			func(ds []delivery) string {
				return fmt.Sprintf("%d of %d published records handled; held: a %v, b %v", distinct(ds), total, a.svc.Held(stream), b.svc.Held(stream))
			})

		// Every closed shard's row ends at SHARD_END.
		for _, id := range tree.closed() {
			waitRow(id, func(l leases.Lease) bool { return l.Checkpoint.Sequence == leases.ShardEnd }, "checkpoint "+leases.ShardEnd)
		}
		a.stop(t)
		b.stop(t)

		ds := j.deliveries()
		dups := checkKeyOrder(t, ds, published, tree)
		perShard := map[string]int{}
		for _, d := range ds {
			perShard[d.Shard]++
		}
		for id := range tree {
			if perShard[id] == 0 {
				t.Errorf("no record handled from shard %s (keys %v should cover every shard)", id, keys)
			}
		}
		t.Logf("%d records published over %d keys, %d deliveries (%d re-deliveries); per shard %v", total, len(keys), len(ds), dups, perShard)
	})
}

// TestStreamARN: a subscription names its stream by ARN (kinesis-local has
// stream ARNs; kinesalite does not): every record is handled, records and
// lease events carry the ARN as subscribed, and the lease rows are keyed by
// the stream's name, its identity however it is named. So switching the
// configuration between the name and the ARN resumes from the same rows:
// no second set of rows, no record read again before the checkpoints.
func TestStreamARN(t *testing.T) {
	t.Parallel()
	onMemoryStore(t, func(t *testing.T, newStore func() leases.MembershipStore) {
		kc := testutil.KinesisClient(t, testutil.KinesisLocal)
		stream := testutil.StreamName(t)
		testutil.CreateStream(t, kc, stream, 2)
		out, err := kc.DescribeStreamSummary(context.Background(), &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			t.Fatal(err)
		}
		arn := aws.ToString(out.StreamDescriptionSummary.StreamARN)
		if !strings.HasPrefix(arn, "arn:") || !strings.HasSuffix(arn, ":stream/"+stream) {
			t.Fatalf("DescribeStreamSummary: stream ARN %q", arn)
		}
		put(t, kc, stream, 0, 100)

		var mu sync.Mutex
		streams := map[string]int{}
		ta := newTally()
		in := start(t, kc, newStore(), arn, "a", ta, kinesislease.WithHooks(leaseMoves(func(_, stream, _ string) {
			mu.Lock()
			streams[stream]++
			mu.Unlock()
		})))
		ta.waitFor(t, 0, 100, 30*time.Second)
		if held := in.svc.Held(arn); len(held) != 2 {
			t.Fatalf("Held(ARN) = %v, want both shards", held)
		}
		in.stop(t)
		if _, dups := ta.count(); dups != 0 {
			t.Errorf("%d duplicates", dups)
		}
		mu.Lock()
		if len(streams) != 1 || streams[arn] == 0 {
			t.Errorf("lease events named streams %v, want only the ARN as subscribed", streams)
		}
		mu.Unlock()

		store := newStore()
		for _, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
			l, err := store.Get(context.Background(), leases.Key{Stream: stream, Shard: id})
			if err != nil {
				t.Fatalf("row %s:%s: %v", stream, id, err)
			}
			if l.Checkpoint.Sequence == "" || l.Held() {
				t.Errorf("row %s:%s = %+v, want released with a checkpoint under the stream name", stream, id, l)
			}
			if l, err := store.Get(context.Background(), leases.Key{Stream: arn, Shard: id}); !errors.Is(err, leases.ErrNotFound) {
				t.Errorf("row keyed by the ARN %s:%s: %+v, %v; want ErrNotFound (one set of rows)", arn, id, l, err)
			}
		}

		// The configuration switched to the name, then back to the ARN:
		// each resumes from the same rows.
		for i, name := range []string{stream, arn} {
			first := 100 + 50*i
			put(t, kc, stream, first, 50)
			ta2 := newTally()
			in2 := start(t, kc, store, name, fmt.Sprintf("b%d", i), ta2)
			ta2.waitFor(t, first, 50, 30*time.Second)
			in2.stop(t)
			if d, _ := ta2.count(0, first); d != 0 {
				t.Errorf("subscribed as %q: %d records before the checkpoints were redelivered", name, d)
			}
		}
	})
}

// shardSeqs returns the sequence numbers of every record of a shard, in
// order.
func shardSeqs(t *testing.T, kc *kinesis.Client, stream, shard string) []string {
	t.Helper()
	it, err := kc.GetShardIterator(context.Background(), &kinesis.GetShardIteratorInput{StreamName: aws.String(stream),
		ShardId: aws.String(shard), ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []string
	iter := it.ShardIterator
	for range 10 {
		out, err := kc.GetRecords(context.Background(), &kinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Records {
			seqs = append(seqs, aws.ToString(r.SequenceNumber))
		}
		if len(out.Records) == 0 {
			break
		}
		iter = out.NextShardIterator
	}
	return seqs
}
