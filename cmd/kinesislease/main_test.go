package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

func TestMain(m *testing.M) {
	testutil.Main(m)
}

// rig is one test's table and stream on the emulators.
type rig struct {
	t              *testing.T
	ddb            *dynamodb.Client
	kc             *kinesis.Client
	table, stream  string
	ddbURL, kinURL string
	// namespace, if set, is the lease namespace services subscribe with
	// (WithLeaseNamespace).
	namespace string
	// fanOut, if set, is the consumer name services subscribe with
	// enhanced fan-out, through svcKC (newFanOutRig).
	fanOut string
	svcKC  *kinesis.Client
}

// newFanOutRig is newRig on an in-memory Kinesis (kinesisfake) served
// on a local HTTP endpoint: the rig's services read it with enhanced
// fan-out through its SDK client, the command reads it at its URL as it
// would read Kinesis.
func newFanOutRig(t *testing.T, shards int) *rig {
	t.Helper()
	k := kinesisfake.New()
	srv := httptest.NewServer(k)
	t.Cleanup(srv.Close)
	r := &rig{
		t:      t,
		ddb:    testutil.DynamoClient(t),
		kc:     k.Client(),
		table:  testutil.TableName(t),
		stream: testutil.StreamName(t),
		ddbURL: testutil.Endpoint(t, testutil.DynamoDBLocal),
		kinURL: srv.URL,
		fanOut: "rewind-test",
		svcKC:  k.Client(),
	}
	testutil.CreateLeaseTable(t, r.ddb, r.table)
	if err := k.CreateStream(r.stream, shards); err != nil {
		t.Fatal(err)
	}
	return r
}

func newRig(t *testing.T, kinesisEmulator testutil.Emulator, shards int32) *rig {
	t.Helper()
	r := &rig{
		t:      t,
		ddb:    testutil.DynamoClient(t),
		kc:     testutil.KinesisClient(t, kinesisEmulator),
		table:  testutil.TableName(t),
		stream: testutil.StreamName(t),
		ddbURL: testutil.Endpoint(t, testutil.DynamoDBLocal),
		kinURL: testutil.Endpoint(t, kinesisEmulator),
	}
	testutil.CreateLeaseTable(t, r.ddb, r.table)
	testutil.CreateStream(t, r.kc, r.stream, shards)
	return r
}

// store is a lease store on the rig's table.
func (r *rig) store() *dynamo.Store { return r.storeOn(r.table) }

// storeOn is a lease store on another table.
func (r *rig) storeOn(table string) *dynamo.Store {
	return dynamo.New(testutil.Config(r.t), table, dynamo.WithDynamoDBClient(r.ddb))
}

// args returns a command line for cmd on the rig's table and stream.
func (r *rig) args(cmd string, extra ...string) []string {
	return append([]string{cmd,
		"--table", r.table, "--stream", r.stream, "--region", testutil.Region,
		"--dynamodb-endpoint-url", r.ddbURL, "--kinesis-endpoint-url", r.kinURL,
	}, extra...)
}

// result is what one run of the command printed.
type result struct {
	code           int
	stdout, stderr string
}

func (res result) String() string {
	return fmt.Sprintf("exit code %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
}

// runCLI runs the command in-process through run.
func runCLI(args ...string) result {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// runWith runs the command with a prepared cli (a clock, client options).
func runWith(c *cli, args ...string) result {
	var out, errOut bytes.Buffer
	c.ctx, c.stdout, c.stderr = context.Background(), &out, &errOut
	if c.now == nil {
		c.now = time.Now
	}
	code := c.execute(args)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// put is one record put on the stream.
type put struct {
	id         int
	shard, seq string
}

// putRecords puts records with ids first..first+n-1 (JSON {"id": n}), one
// PutRecords call, to the shards hashKey(id) chooses (nil: partition keys
// spread the records), and returns them in id order.
func putRecords(t *testing.T, kc *kinesis.Client, stream string, first, n int, hashKey func(id int) string) []put {
	t.Helper()
	var entries []ktypes.PutRecordsRequestEntry
	for id := first; id < first+n; id++ {
		data, _ := json.Marshal(order{ID: id})
		e := ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(fmt.Sprintf("key-%d", id))}
		if hashKey != nil {
			e.ExplicitHashKey = aws.String(hashKey(id))
		}
		entries = append(entries, e)
	}
	out, err := kc.PutRecords(testutil.WithoutFaults(context.Background()), &kinesis.PutRecordsInput{StreamName: aws.String(stream), Records: entries})
	if err != nil {
		t.Fatalf("PutRecords: %v", err)
	}
	if aws.ToInt32(out.FailedRecordCount) != 0 {
		t.Fatalf("PutRecords: %d failed", aws.ToInt32(out.FailedRecordCount))
	}
	ps := make([]put, n)
	for i, r := range out.Records {
		ps[i] = put{id: first + i, shard: aws.ToString(r.ShardId), seq: aws.ToString(r.SequenceNumber)}
	}
	return ps
}

// Hash keys that land in the first and the second half of the key space:
// shardId-000000000000 and shardId-000000000001 of a 2-shard stream.
const (
	lowHashKey  = "1"
	highHashKey = "170141183460469231731687303715884105728" // 2^127
)

func alternate(id int) string {
	if id%2 == 0 {
		return lowHashKey
	}
	return highHashKey
}

type order struct {
	ID int `json:"id"`
}

// delivery is one call of a handler.
type delivery struct {
	shard, seq string
	id         int
}

// journal records deliveries and checks that no shard's handler runs twice
// at once.
type journal struct {
	mu         sync.Mutex
	ds         []delivery
	inFlight   map[string]int
	concurrent []string // shards whose handler ran concurrently
	changed    chan struct{}
}

func newJournal() *journal {
	return &journal{inFlight: map[string]int{}, changed: make(chan struct{}, 1)}
}

func (j *journal) handler(ctx context.Context, o order) error {
	rec, _ := kinesislease.RecordFrom(ctx)
	j.mu.Lock()
	j.inFlight[rec.ShardID]++
	if j.inFlight[rec.ShardID] > 1 {
		j.concurrent = append(j.concurrent, rec.ShardID)
	}
	j.mu.Unlock()
	time.Sleep(time.Millisecond) // widen the window a concurrent call would need
	j.mu.Lock()
	j.inFlight[rec.ShardID]--
	j.ds = append(j.ds, delivery{shard: rec.ShardID, seq: rec.SequenceNumber, id: o.ID})
	j.mu.Unlock()
	select {
	case j.changed <- struct{}{}:
	default:
	}
	return nil
}

func (j *journal) deliveries() []delivery {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]delivery(nil), j.ds...)
}

// waitUntil waits until ok(deliveries) holds.
func (j *journal) waitUntil(t *testing.T, timeout time.Duration, what string, ok func([]delivery) bool) {
	t.Helper()
	deadline := time.After(timeout)
	for !ok(j.deliveries()) {
		select {
		case <-j.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("after %v: %s; %d deliveries", timeout, what, len(j.deliveries()))
		}
	}
}

// service is one running kinesislease service.
type service struct {
	svc    *kinesislease.Service
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	mu     sync.Mutex
	events []string // "shard kind" of each lease move
}

// startService runs a service with owner on the rig's stream and table,
// handing records to j, with lease settings fast enough for tests.
func (r *rig) startService(owner string, j *journal, start kltype.StartPosition) *service {
	t := r.t
	t.Helper()
	s := &service{done: make(chan struct{})}
	kc := r.kc
	if r.svcKC != nil {
		kc = r.svcKC
	}
	svc, err := kinesislease.New(testutil.Config(t),
		kinesislease.WithGetRecordsEncoding(kinesislease.GetRecordsEncoding(testutil.GetRecordsEncoding(t))),
		kinesislease.WithKinesisClient(kc),
		kinesislease.WithLeaseStore(r.store()),
		kinesislease.WithOwner(owner),
		kinesislease.WithLogger(testLogger(t)),
		// One instance: no failover to wait for, so a timeout that a loaded
		// machine's stalls (DynamoDB Local, kinesis-local) do not reach:
		// a fence would show as a lease lost and acquired again.
		kinesislease.WithHeartbeat(500*time.Millisecond, 3*time.Second),
		kinesislease.WithShutdownTimeout(5*time.Second),
		kinesislease.WithHooks(s),
	)
	if err != nil {
		t.Fatal(err)
	}
	sub := []kinesislease.SubscribeOption{
		kinesislease.WithStartPosition(start),
		kinesislease.WithCheckpoint(10, 100*time.Millisecond),
		kinesislease.WithPolling(20*time.Millisecond, 50*time.Millisecond, 0),
	}
	if r.fanOut != "" {
		sub = append(sub, kinesislease.WithEnhancedFanOut(r.fanOut))
	}
	if r.namespace != "" {
		sub = append(sub, kinesislease.WithLeaseNamespace(r.namespace))
	}
	if err := kinesislease.Subscribe(svc, r.stream, j.handler, sub...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.svc, s.cancel = svc, cancel
	go func() { s.err = svc.Run(ctx); close(s.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			t.Errorf("Run did not return 20s after cancel")
		}
	})
	return s
}

func (s *service) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	<-s.done
	if s.err != nil {
		t.Fatalf("Run: %v", s.err)
	}
}

// leaseEvents returns "shard kind" for each lease move so far.
func (s *service) leaseEvents() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

func (s *service) move(shard, kind string) {
	s.mu.Lock()
	s.events = append(s.events, shard+" "+kind)
	s.mu.Unlock()
}

// service is a lease hook recording its moves (leaseEvents).
func (s *service) OnLeaseAcquired(_ context.Context, l kltype.LeaseInfo) {
	s.move(l.ShardID, "acquired")
}
func (s *service) OnLeaseReleased(_ context.Context, l kltype.LeaseInfo) {
	s.move(l.ShardID, "released")
}
func (s *service) OnLeaseLost(_ context.Context, l kltype.LeaseInfo) { s.move(l.ShardID, "lost") }
func (s *service) OnShardEnded(i kltype.ShardInfo)                   { s.move(i.ShardID, "ended") }

// waitRow waits until the row of shard satisfies ok.
func (r *rig) waitRow(shard string, timeout time.Duration, what string, ok func(leases.Lease) bool) leases.Lease {
	r.t.Helper()
	st := r.store()
	deadline := time.Now().Add(timeout)
	for {
		l, err := st.Get(context.Background(), leases.Key{Stream: r.stream, Shard: shard})
		if err == nil && ok(l) {
			return l
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("after %v, the row of %s is not %s: %+v (%v)", timeout, shard, what, l, err)
		}
		time.Sleep(20 * time.Millisecond)
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
