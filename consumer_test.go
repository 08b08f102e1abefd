package kinesislease_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
	"github.com/kinesislease/kinesislease/leases/memory"
)

func TestMain(m *testing.M) {
	testutil.Main(m)
}

type order struct {
	ID  int    `json:"id"`
	Key string `json:"key"`
}

// put writes n orders numbered from first, spread over partition keys.
func put(t testing.TB, client *kinesis.Client, stream string, first, n int) {
	t.Helper()
	if err := putOrders(client, stream, first, n); err != nil {
		t.Fatal(err)
	}
}

// putOrders is put for a goroutine other than the test's: it returns the
// error.
func putOrders(client *kinesis.Client, stream string, first, n int) error {
	for start := first; start < first+n; start += 500 {
		var entries []ktypes.PutRecordsRequestEntry
		for id := start; id < min(first+n, start+500); id++ {
			o := order{ID: id, Key: fmt.Sprintf("customer-%d", id%17)}
			data, _ := json.Marshal(o)
			entries = append(entries, ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(o.Key)})
		}
		out, err := client.PutRecords(testutil.WithoutFaults(context.Background()), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
		if err != nil {
			return fmt.Errorf("PutRecords: %w", err)
		}
		if aws.ToInt32(out.FailedRecordCount) != 0 {
			return fmt.Errorf("PutRecords: %d failed", aws.ToInt32(out.FailedRecordCount))
		}
	}
	return nil
}

// tally records what handlers saw, by order id.
type tally struct {
	mu    sync.Mutex
	seen  map[int]int
	byKey map[string][]int // ids in handling order, per partition key
	by    map[int]string   // the last owner that handled each id
	cond  chan struct{}
}

func newTally() *tally {
	return &tally{seen: map[int]int{}, byKey: map[string][]int{}, by: map[int]string{}, cond: make(chan struct{}, 1)}
}

func (ta *tally) handler(owner string) kinesislease.HandlerFunc[order] {
	return func(ctx context.Context, o order) error {
		ta.mu.Lock()
		ta.seen[o.ID]++
		ta.byKey[o.Key] = append(ta.byKey[o.Key], o.ID)
		ta.by[o.ID] = owner
		ta.mu.Unlock()
		select {
		case ta.cond <- struct{}{}:
		default:
		}
		return nil
	}
}

func (ta *tally) count(ids ...int) (distinct, dups int) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	for id, n := range ta.seen {
		if len(ids) == 2 && (id < ids[0] || id >= ids[1]) {
			continue
		}
		distinct++
		dups += n - 1
	}
	return
}

// waitFor waits until every id in [first, first+n) was handled.
func (ta *tally) waitFor(t testing.TB, first, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if d, _ := ta.count(first, first+n); d == n {
			return
		}
		select {
		case <-ta.cond:
		case <-deadline:
			d, _ := ta.count(first, first+n)
			t.Fatalf("after %v: %d of the %d records [%d, %d) handled", timeout, d, n, first, first+n)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("KINESISLEASE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// instance is one running service.
type instance struct {
	svc    *kinesislease.Service
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // what Run returned
}

func (in *instance) stop(t testing.TB) {
	t.Helper()
	in.cancel()
	<-in.done
	if in.err != nil {
		t.Fatalf("Run: %v", in.err)
	}
}

// fast lease settings for tests: a heartbeat every 150ms, so that fleets
// form and balance within a second or two, and a takeover only after 6s of
// silence. No test here kills an instance (failover is the simulation's,
// the engine's, the demo's and the chaos run's): a short timeout only
// fenced instances whose goroutines a loaded machine starved for half a
// second (TestBalance, "6 duplicates across balancing and a graceful
// stop": its instances fenced six times on a 600ms timeout under -p 4).
var fastLease = []kinesislease.Option{
	kinesislease.WithHeartbeat(150*time.Millisecond, 6*time.Second),
	kinesislease.WithShutdownTimeout(5 * time.Second),
}

// failoverLease is for the tests whose point is a fence or a takeover: a
// takeover after 600ms of silence. It goes after fastLease (an extra
// option), so it wins.
var failoverLease = kinesislease.WithHeartbeat(150*time.Millisecond, 600*time.Millisecond)

func start(t testing.TB, client *kinesis.Client, store leases.MembershipStore, stream, owner string, ta *tally, extra ...kinesislease.Option) *instance {
	t.Helper()
	return startWith(t, client, store, stream, owner, ta.handler(owner), nil, extra...)
}

// startWith runs a service with the test lease settings and one
// subscription of T to stream: reading from TRIM_HORIZON, checkpointing
// every 10 records or 100ms, polling fast; sub come after those defaults and
// may override them, extra after the service's. Run stops when the test ends.
func startWith[T any](t testing.TB, client kinesislease.Kinesis, store leases.MembershipStore, stream, owner string, h kinesislease.HandlerFunc[T],
	sub []kinesislease.SubscribeOption, extra ...kinesislease.Option,
) *instance {
	t.Helper()
	return runService(t, client, store, owner, func(svc *kinesislease.Service) error {
		return kinesislease.Subscribe(svc, stream, h, testSubscription(sub...)...)
	}, extra...)
}

// testSubscription returns the test subscription settings (reading from
// TRIM_HORIZON, checkpointing every 10 records or 100ms, polling fast)
// followed by sub, which may override them.
func testSubscription(sub ...kinesislease.SubscribeOption) []kinesislease.SubscribeOption {
	return append([]kinesislease.SubscribeOption{
		kinesislease.WithStartPosition(kltype.TrimHorizon),
		kinesislease.WithCheckpoint(10, 100*time.Millisecond),
		kinesislease.WithPolling(20*time.Millisecond, 50*time.Millisecond, 0),
	}, sub...)
}

// runService builds a service of owner with the test lease settings (extra
// after them), lets subscribe add its subscriptions, and runs it; Run is
// cancelled when the test ends, which fails the test if Run does not return
// within 20s.
func runService(t testing.TB, client kinesislease.Kinesis, store leases.MembershipStore, owner string,
	subscribe func(*kinesislease.Service) error, extra ...kinesislease.Option,
) *instance {
	t.Helper()
	opts := append([]kinesislease.Option{
		testEncoding(t),
		kinesislease.WithKinesisClient(client),
		kinesislease.WithLeaseStore(store),
		kinesislease.WithOwner(owner),
		kinesislease.WithLogger(testLogger(t)),
	}, fastLease...)
	svc, err := kinesislease.New(testutil.Config(t), append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := subscribe(svc); err != nil {
		t.Fatal(err)
	}
	return runInstance(t, svc)
}

// testEncoding puts a service on the read path the suite runs on
// (testutil.GetRecordsEncoding). It goes first, so that a test that chooses
// an encoding keeps its own.
func testEncoding(t testing.TB) kinesislease.Option {
	return kinesislease.WithGetRecordsEncoding(kinesislease.GetRecordsEncoding(testutil.GetRecordsEncoding(t)))
}

// runInstance runs svc on a goroutine of its own until in.stop or the end
// of the test: a cleanup cancels Run and waits for it (failing the test if
// it does not return within 20s), so Run does not outlive a test that
// stopped at a t.Fatal.
func runInstance(t testing.TB, svc *kinesislease.Service) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{svc: svc, cancel: cancel, done: make(chan struct{})}
	go func() { in.err = svc.Run(ctx); close(in.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-in.done:
		case <-time.After(20 * time.Second):
			t.Errorf("Run did not return 20s after cancel")
		}
	})
	return in
}

// onMemoryStore runs fn with one memory store (newStore returns the same
// store every time: several services sharing it are instances of one
// application). A whole-service test runs on one store unless the store is
// the point: leases/leasestest holds the memory store and the DynamoDB
// store to the same contract (checkpoints with sub-sequence numbers, stream
// ARNs, membership rows, fences), so running every service test on both
// doubled the suite without testing more of the service. The tests about
// the DynamoDB store itself, IAM or cost run the service on DynamoDB Local:
// TestVanishedRow, TestRunConfigErrors, TestRunStoreErrors, TestServiceRewind,
// TestMaxRecordAge, TestLeastPrivilege, TestDeferSinkSIGKILL and TestHealth.
func onMemoryStore(t *testing.T, fn func(t *testing.T, newStore func() leases.MembershipStore)) {
	s := memory.New()
	fn(t, func() leases.MembershipStore { return s })
}

// TestResumeFromCheckpoint: one instance reads every shard; after a restart
// it resumes from its checkpoints: nothing before them redelivered, nothing
// after them missed.
func TestResumeFromCheckpoint(t *testing.T) {
	t.Parallel()
	onMemoryStore(t, func(t *testing.T, newStore func() leases.MembershipStore) {
		kc := testutil.KinesisClient(t, testutil.Kinesalite)
		stream := testutil.StreamName(t)
		testutil.CreateStream(t, kc, stream, 4)
		put(t, kc, stream, 0, 400)

		ta := newTally()
		in := start(t, kc, newStore(), stream, "a", ta)
		ta.waitFor(t, 0, 400, 30*time.Second)
		if held := in.svc.Held(stream); len(held) != 4 {
			t.Fatalf("one instance holds %v, want all 4 shards", held)
		}
		in.stop(t)
		if _, dups := ta.count(); dups != 0 {
			t.Fatalf("%d duplicates in a run without failures", dups)
		}

		// Every row is released with a checkpoint.
		store := newStore()
		for i := range 4 {
			l, err := store.Get(context.Background(), leases.Key{Stream: stream, Shard: fmt.Sprintf("shardId-%012d", i)})
			if err != nil {
				t.Fatal(err)
			}
			if l.Held() || l.Checkpoint.Sequence == "" {
				t.Fatalf("after shutdown row %+v: want released with a checkpoint", l)
			}
		}

		put(t, kc, stream, 400, 200)
		ta2 := newTally()
		in2 := start(t, kc, store, stream, "a2", ta2)
		ta2.waitFor(t, 400, 200, 30*time.Second)
		in2.stop(t)
		if d, _ := ta2.count(0, 400); d != 0 {
			t.Fatalf("after a restart %d records before the checkpoints were redelivered", d)
		}
		if d, dups := ta2.count(400, 600); d != 200 || dups != 0 {
			t.Fatalf("after a restart: %d of 200 new records, %d duplicates", d, dups)
		}
	})
}

// TestBalance: 3 instances on 8 shards converge to 3/3/2; a 4th joining and
// one leaving rebalance again; a graceful stop hands over with no duplicate.
func TestBalance(t *testing.T) {
	t.Parallel()
	onMemoryStore(t, func(t *testing.T, newStore func() leases.MembershipStore) {
		kc := testutil.KinesisClient(t, testutil.Kinesalite)
		stream := testutil.StreamName(t)
		testutil.CreateStream(t, kc, stream, 8)
		ta := newTally()
		ins := map[string]*instance{}
		for _, o := range []string{"a", "b", "c"} {
			ins[o] = start(t, kc, newStore(), stream, o, ta)
		}
		waitSplit(t, stream, ins, []int{3, 3, 2})

		ins["d"] = start(t, kc, newStore(), stream, "d", ta)
		waitSplit(t, stream, ins, []int{2, 2, 2, 2})

		// Records flow while one instance stops gracefully.
		put(t, kc, stream, 0, 300)
		ta.waitFor(t, 0, 300, 30*time.Second)
		ins["a"].stop(t)
		delete(ins, "a")
		waitSplit(t, stream, ins, []int{3, 3, 2})
		put(t, kc, stream, 300, 300)
		ta.waitFor(t, 300, 300, 30*time.Second)
		if _, dups := ta.count(); dups != 0 {
			t.Fatalf("%d duplicates across balancing and a graceful stop, want 0", dups)
		}
	})
}

// waitSplit waits until the instances hold the shards in the given split
// (sorted descending), every shard held once.
func waitSplit(t *testing.T, stream string, ins map[string]*instance, want []int) {
	t.Helper()
	waitHoldings(t, ins, []string{stream}, want)
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(kc), kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := kinesislease.Subscribe(svc, "no-such-stream", newTally().handler("a")); err != nil {
		t.Fatal(err)
	}
	err = svc.Run(context.Background())
	if !errors.Is(err, kinesislease.ErrStreamNotFound) || !strings.Contains(err.Error(), "no-such-stream") {
		t.Fatalf("Run on a missing stream: %v", err)
	}
}

// TestMissingDeadLetterStream: a mistyped dead-letter stream is refused
// at start, naming it and the subscription, before any lease is taken
// (not at the first failing record, which would then hold its shard).
func TestMissingDeadLetterStream(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	store := memory.New()
	svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(kc), kinesislease.WithLeaseStore(store),
		kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := kinesislease.Subscribe(svc, stream, newTally().handler("a"), kinesislease.WithDeadLetterStream("no-such-dead-letters")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a service that started runs until then
	defer cancel()
	err = svc.Run(ctx)
	if !errors.Is(err, kinesislease.ErrStreamNotFound) || !strings.Contains(err.Error(), `dead-letter stream "no-such-dead-letters"`) ||
		!strings.Contains(err.Error(), stream) {
		t.Fatalf("Run with a missing dead-letter stream: %v", err)
	}
	if l, err := store.Get(context.Background(), leases.Key{Stream: stream, Shard: "shardId-000000000000"}); err == nil && l.Owner != "" {
		t.Fatalf("a lease was taken before the dead-letter stream was checked: %+v", l)
	}
}

// TestTwoStreams: one service consumes two streams, each with its own codec
// of records and handler.
func TestTwoStreams(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	s1, s2 := testutil.StreamName(t), testutil.StreamName(t)
	testutil.CreateStream(t, kc, s1, 2)
	testutil.CreateStream(t, kc, s2, 1)
	put(t, kc, s1, 0, 100)
	put(t, kc, s2, 1000, 50)
	t1, t2 := newTally(), newTally()
	svc, err := kinesislease.New(testutil.Config(t), append([]kinesislease.Option{testEncoding(t),
		kinesislease.WithKinesisClient(kc), kinesislease.WithLogger(testLogger(t))}, fastLease...)...)
	if err != nil {
		t.Fatal(err)
	}
	for s, ta := range map[string]*tally{s1: t1, s2: t2} {
		if err := kinesislease.Subscribe(svc, s, ta.handler("a"), kinesislease.WithStartPosition(kltype.TrimHorizon)); err != nil {
			t.Fatal(err)
		}
	}
	in := runInstance(t, svc)
	t1.waitFor(t, 0, 100, 30*time.Second)
	t2.waitFor(t, 1000, 50, 30*time.Second)
	in.stop(t)
	if d, _ := t1.count(1000, 1050); d != 0 {
		t.Fatalf("the first stream's handler saw %d records of the second", d)
	}
}

// TestRunConfigErrors: a missing lease table and denied Kinesis access end
// Run at once with errors naming the resource.
func TestRunConfigErrors(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)

	table := testutil.TableName(t) // never created
	store := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(testutil.DynamoClient(t)))
	svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(kc), kinesislease.WithLeaseStore(store), kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := kinesislease.Subscribe(svc, stream, newTally().handler("a")); err != nil {
		t.Fatal(err)
	}
	err = svc.Run(context.Background())
	if !errors.Is(err, leases.ErrMisconfigured) || !strings.Contains(err.Error(), table) {
		t.Fatalf("Run with a missing table: %v, want leases.ErrMisconfigured naming %s", err, table)
	}

	faults := &testutil.Faults{}
	denied := testutil.KinesisClient(t, testutil.Kinesalite, faults.KinesisOptions)
	faults.Inject(testutil.Fault{Op: "ListShards", Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: kinesis:ListShards"}})
	svc, err = kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(denied), kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := kinesislease.Subscribe(svc, stream, newTally().handler("a")); err != nil {
		t.Fatal(err)
	}
	err = svc.Run(context.Background())
	if !errors.Is(err, kinesislease.ErrAccessDenied) || !strings.Contains(err.Error(), stream) || !strings.Contains(err.Error(), "kinesis:ListShards") {
		t.Fatalf("Run with access denied: %v, want ErrAccessDenied naming the stream and the actions", err)
	}
}

// TestBalanceNoIdleInstance: 4 shards on 3 instances settle at 2/1/1; no
// instance stays idle while another holds two more than it.
func TestBalanceNoIdleInstance(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 4)
	store := memory.New()
	ta := newTally()
	ins := map[string]*instance{}
	// Two instances first (2/2), then a third joins and must get a shard.
	for _, o := range []string{"a", "b"} {
		ins[o] = start(t, kc, store, stream, o, ta)
	}
	waitSplit(t, stream, ins, []int{2, 2})
	ins["c"] = start(t, kc, store, stream, "c", ta)
	waitSplit(t, stream, ins, []int{2, 1, 1})
}

// TestRunStoreErrors: a lease table with the wrong key schema, and DynamoDB
// denying access, end Run with errors naming the table.
func TestRunStoreErrors(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	run := func(store leases.MembershipStore) error {
		svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(kc), kinesislease.WithLeaseStore(store), kinesislease.WithLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		if err := kinesislease.Subscribe(svc, stream, newTally().handler("a")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return svc.Run(ctx)
	}

	dc := testutil.DynamoClient(t)
	wrong := testutil.TableName(t)
	if _, err := dc.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(wrong),
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: dtypes.KeyTypeHash}},
		BillingMode:          dtypes.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	err := run(dynamo.New(testutil.Config(t), wrong, dynamo.WithDynamoDBClient(dc)))
	if !errors.Is(err, leases.ErrMisconfigured) || !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), "lease_key") {
		t.Fatalf("Run on a table keyed id: %v, want ErrMisconfigured naming the table and lease_key", err)
	}

	faults := &testutil.Faults{}
	table := testutil.TableName(t)
	denied := testutil.DynamoClient(t, faults.DynamoOptions)
	testutil.CreateLeaseTable(t, denied, table)
	faults.Inject(testutil.Fault{Op: "GetItem", Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: dynamodb:GetItem"}})
	err = run(dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(denied)))
	if !errors.Is(err, leases.ErrMisconfigured) || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), "access denied") {
		t.Fatalf("Run with DynamoDB access denied: %v, want ErrMisconfigured naming the table", err)
	}
}

// orderBook is a Handler value: a type with its dependencies.
type orderBook struct{ ta *tally }

func (b orderBook) Handle(ctx context.Context, o order) error { return b.ta.handler("a")(ctx, o) }

// TestSubscribeHandler: a Handler value (the interface form) consumes a
// stream through the same pipeline as a function: every record once, in
// order per key.
func TestSubscribeHandler(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 2)
	ta := newTally()
	svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(kc), kinesislease.WithLeaseStore(memory.New()),
		kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := kinesislease.SubscribeHandler[order](svc, stream, orderBook{ta}, kinesislease.WithStartPosition(kltype.TrimHorizon)); err != nil {
		t.Fatal(err)
	}
	if err := kinesislease.SubscribeHandler[order](svc, "other", nil); !errors.Is(err, kinesislease.ErrInvalidOption) {
		t.Fatalf("SubscribeHandler(nil): %v, want ErrInvalidOption", err)
	}
	in := runInstance(t, svc)
	put(t, kc, stream, 0, 100)
	ta.waitFor(t, 0, 100, 30*time.Second)
	in.stop(t)
	if _, dups := ta.count(); dups != 0 {
		t.Fatalf("%d duplicates", dups)
	}
	ta.mu.Lock()
	defer ta.mu.Unlock()
	for key, ids := range ta.byKey {
		if !slices.IsSorted(ids) {
			t.Fatalf("key %s handled out of order: %v", key, ids)
		}
	}
}
