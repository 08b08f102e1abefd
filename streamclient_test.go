package kinesislease_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// twoAccounts is a stream of one name on two in-memory Kinesis, as the
// same stream name in two accounts: a (the service's client) and b (a
// subscription's own, under the lease namespace "acct-b"). b also has the
// subscription's dead-letter stream, which a has not.
type twoAccounts struct {
	ka, kb *kinesisfake.Kinesis
	a, b   *kinesis.Client
	stream string
}

const (
	acctB      = "acct-b"
	acctBDLQ   = "acct-b-dead-letters"
	deadLetter = 1007 // the order b's handler dead-letters
)

func newTwoAccounts(t *testing.T) *twoAccounts {
	t.Helper()
	ta := &twoAccounts{ka: kinesisfake.New(), kb: kinesisfake.New(), stream: "orders"}
	for _, k := range []*kinesisfake.Kinesis{ta.ka, ta.kb} {
		if err := k.CreateStream(ta.stream, 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := ta.kb.CreateStream(acctBDLQ, 1); err != nil {
		t.Fatal(err)
	}
	ta.a, ta.b = ta.ka.Client(), ta.kb.Client()
	return ta
}

// lastSeqs records the sequence number of the last record a handler saw on
// each shard.
type lastSeqs struct {
	mu   sync.Mutex
	last map[string]string
}

func (l *lastSeqs) note(ctx context.Context) {
	r, _ := kinesislease.RecordFrom(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]string{}
	}
	l.last[r.ShardID] = r.SequenceNumber
}

// run starts a service of owner on store reading the stream of both
// accounts, a's orders into ta and b's into tb (b dead-letters order
// deadLetter into its dead-letter stream), and returns it running.
func (two *twoAccounts) run(t *testing.T, store leases.MembershipStore, owner string, ta, tb *tally, la, lb *lastSeqs) *instance {
	t.Helper()
	ha, hb := ta.handler(owner), tb.handler(owner)
	return runService(t, two.a, store, owner, func(svc *kinesislease.Service) error {
		err := kinesislease.Subscribe(svc, two.stream, func(ctx context.Context, o order) error {
			la.note(ctx)
			return ha(ctx, o)
		}, testSubscription()...)
		if err != nil {
			return err
		}
		return kinesislease.Subscribe(svc, two.stream, func(ctx context.Context, o order) error {
			lb.note(ctx)
			if o.ID == deadLetter {
				return kinesislease.DeadLetter(errors.New("test: dead-lettered"))
			}
			return hb(ctx, o)
		}, testSubscription(
			kinesislease.WithKinesisClient(two.b),
			kinesislease.WithLeaseNamespace(acctB),
			kinesislease.WithDeadLetterStream(acctBDLQ),
		)...)
	})
}

// TestStreamClient: one service, one lease table, and a stream of the same
// name in two accounts (two in-memory Kinesis): the service's own client
// reads one, a subscription with WithKinesisClient and WithLeaseNamespace
// the other. Each handler gets the records of its account only; each
// subscription's rows are its own ("orders:shard" and
// "acct-b/orders:shard"), each holding its own last record; b's dead
// letter lands in b's dead-letter stream (a has no such stream: Run's check
// of it went through b's client too), and b's retention was read through
// b's client. A restart resumes each from its own checkpoints: nothing
// redelivered, nothing missed; Rewind by the lease key rewinds b's rows
// only. On the memory store and on DynamoDB Local.
func TestStreamClient(t *testing.T) {
	t.Parallel()
	for _, storeName := range []string{"memory", "dynamo"} {
		t.Run(storeName, func(t *testing.T) {
			t.Parallel()
			var store leases.MembershipStore = memory.New()
			if storeName == "dynamo" {
				_, _, store = dynamoTable(t)
			}
			testStreamClient(t, store)
		})
	}
}

func testStreamClient(t *testing.T, store leases.MembershipStore) {
	ctx := context.Background()
	two := newTwoAccounts(t)
	keyB := acctB + "/" + two.stream
	// Different counts, so that the two accounts' sequence numbers differ.
	put(t, two.a, two.stream, 0, 30)
	put(t, two.b, two.stream, 1000, 50)

	ta, tb := newTally(), newTally()
	la, lb := &lastSeqs{}, &lastSeqs{}
	in := two.run(t, store, "x", ta, tb, la, lb)
	ta.waitFor(t, 0, 30, 30*time.Second)
	tb.waitFor(t, 1000, deadLetter-1000, 30*time.Second)
	tb.waitFor(t, deadLetter+1, 1050-deadLetter-1, 30*time.Second)
	if h := in.svc.Held(keyB); len(h) != 2 {
		t.Errorf("Held(%q) = %v, want both shards", keyB, h)
	}
	in.stop(t)
	if d, dups := ta.count(); d != 30 || dups != 0 {
		t.Errorf("a's handler: %d distinct records, %d duplicates; want its 30 alone", d, dups)
	}
	if d, dups := tb.count(); d != 49 || dups != 0 {
		t.Errorf("b's handler: %d distinct records, %d duplicates; want its 49 alone (one dead-lettered)", d, dups)
	}
	if n := two.kb.Records(acctBDLQ); n != 1 {
		t.Errorf("b's dead-letter stream holds %d records, want 1", n)
	}
	if n := two.kb.Calls(kinesisfake.OpDescribeStreamSummary); n == 0 {
		t.Errorf("b's retention was not read through b's client")
	}
	for _, c := range []struct {
		key  string
		last *lastSeqs
	}{{two.stream, la}, {keyB, lb}} {
		for _, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
			l, err := store.Get(ctx, leases.Key{Stream: c.key, Shard: id})
			if want := c.last.last[id]; err != nil || l.Held() || l.Checkpoint.Sequence != want || want == "" {
				t.Errorf("row %s:%s = %+v, %v; want released at its own last record %q", c.key, id, l, err, want)
			}
		}
	}
	if la.last["shardId-000000000000"] == lb.last["shardId-000000000000"] {
		t.Fatalf("both accounts' first shards ended at %s: the test cannot tell their checkpoints apart", la.last["shardId-000000000000"])
	}

	// A restart resumes each from its own checkpoints.
	put(t, two.a, two.stream, 30, 20)
	put(t, two.b, two.stream, 1050, 20)
	ta2, tb2 := newTally(), newTally()
	in2 := two.run(t, store, "y", ta2, tb2, &lastSeqs{}, &lastSeqs{})
	ta2.waitFor(t, 30, 20, 30*time.Second)
	tb2.waitFor(t, 1050, 20, 30*time.Second)
	in2.stop(t)
	if d, dups := ta2.count(); d != 20 || dups != 0 {
		t.Errorf("a after a restart: %d distinct records, %d duplicates; want the 20 new ones alone", d, dups)
	}
	if d, dups := tb2.count(); d != 20 || dups != 0 {
		t.Errorf("b after a restart: %d distinct records, %d duplicates; want the 20 new ones alone", d, dups)
	}

	// Rewind by the lease key: b's rows, through b's client.
	res, err := in2.svc.Rewind(ctx, keyB, "", kltype.TrimHorizon)
	if err != nil || len(res) != 2 {
		t.Fatalf("Rewind(%q): %v, %v; want both shards", keyB, res, err)
	}
	for _, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
		if l, err := store.Get(ctx, leases.Key{Stream: keyB, Shard: id}); err != nil || l.Checkpoint.Sequence != leases.RewindTrimHorizon {
			t.Errorf("row %s:%s after the rewind: %+v, %v; want TRIM_HORIZON", keyB, id, l, err)
		}
		if l, err := store.Get(ctx, leases.Key{Stream: two.stream, Shard: id}); err != nil || l.Checkpoint.Sequence == leases.RewindTrimHorizon {
			t.Errorf("row %s:%s after b's rewind: %+v, %v; want it untouched", two.stream, id, l, err)
		}
	}
	if _, err := in2.svc.Rewind(ctx, "acct-c/"+two.stream, "", kltype.TrimHorizon); !errors.Is(err, kinesislease.ErrNotSubscribed) {
		t.Errorf("Rewind of a lease key no subscription has: %v, want ErrNotSubscribed", err)
	}
}

// TestStreamClientOnly: a subscription's every Kinesis call goes to its own
// client: the service's client has no stream at all, and the subscription
// (with enhanced fan-out, its consumer registered at Run) reads through
// its own; the service's client sees no call.
func TestStreamClientOnly(t *testing.T) {
	t.Parallel()
	home, other := kinesisfake.New(), kinesisfake.New()
	stream := testutil.StreamName(t)
	if err := other.CreateStream(stream, 2); err != nil {
		t.Fatal(err)
	}
	oc := other.Client()
	put(t, oc, stream, 0, 40)
	ta := newTally()
	in := runService(t, home.Client(), memory.New(), "x", func(svc *kinesislease.Service) error {
		return kinesislease.Subscribe(svc, stream, ta.handler("x"), testSubscription(
			kinesislease.WithKinesisClient(oc), kinesislease.WithEnhancedFanOut(fanOutConsumer))...)
	})
	ta.waitFor(t, 0, 40, 30*time.Second)
	in.stop(t)
	for _, op := range []string{kinesisfake.OpListShards, kinesisfake.OpRegisterStreamConsumer, kinesisfake.OpSubscribeToShard} {
		if n := other.Calls(op); n == 0 {
			t.Errorf("the subscription's client got no %s", op)
		}
	}
	for _, op := range []string{kinesisfake.OpListShards, kinesisfake.OpGetShardIterator, kinesisfake.OpGetRecords, kinesisfake.OpDescribeStreamSummary,
		kinesisfake.OpRegisterStreamConsumer, kinesisfake.OpDescribeStreamConsumer, kinesisfake.OpSubscribeToShard} {
		if n := home.Calls(op); n != 0 {
			t.Errorf("the service's client got %d %s calls, want none", n, op)
		}
	}
}

// TestLeaseNamespaceOptions: a namespace is a stream name's characters;
// anything else, and a nil client, is refused with ErrInvalidOption. Two
// subscriptions of one lease key are refused with ErrDuplicateSubscription
// naming both and the option that keys them apart, whatever their clients;
// one of them namespaced, both are taken; Unsubscribe takes the lease key.
func TestLeaseNamespaceOptions(t *testing.T) {
	t.Parallel()
	k := kinesisfake.New()
	svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(k), kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, order) error { return nil }
	for _, ns := range []string{"", "a/b", "a:b", "#members", "a b", strings.Repeat("n", 129)} {
		err := kinesislease.Subscribe(svc, "orders", h, kinesislease.WithLeaseNamespace(ns))
		if !errors.Is(err, kinesislease.ErrInvalidOption) || !strings.Contains(err.Error(), "WithLeaseNamespace") {
			t.Errorf("WithLeaseNamespace(%q): %v, want ErrInvalidOption naming the option", ns, err)
		}
	}
	if err := kinesislease.Subscribe(svc, "orders", h, kinesislease.WithKinesisClient(nil)); !errors.Is(err, kinesislease.ErrInvalidOption) {
		t.Errorf("Subscribe with WithKinesisClient(nil): %v, want ErrInvalidOption", err)
	}
	if _, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(nil)); !errors.Is(err, kinesislease.ErrInvalidOption) {
		t.Errorf("New with WithKinesisClient(nil): %v, want ErrInvalidOption", err)
	}

	other := kinesisfake.New()
	if err := kinesislease.Subscribe(svc, "orders", h); err != nil {
		t.Fatal(err)
	}
	err = kinesislease.Subscribe(svc, "orders", h, kinesislease.WithKinesisClient(other))
	if !errors.Is(err, kinesislease.ErrDuplicateSubscription) || !strings.Contains(err.Error(), "WithLeaseNamespace") {
		t.Errorf("orders through another client, no namespace: %v, want ErrDuplicateSubscription naming WithLeaseNamespace", err)
	}
	if err := kinesislease.Subscribe(svc, "orders", h, kinesislease.WithKinesisClient(other), kinesislease.WithLeaseNamespace(acctB)); err != nil {
		t.Fatalf("orders through another client in namespace %s: %v", acctB, err)
	}
	arn := other.ARN("orders")
	err = kinesislease.Subscribe(svc, arn, h, kinesislease.WithKinesisClient(other), kinesislease.WithLeaseNamespace(acctB))
	for _, want := range []string{arn, `"orders"`, `"acct-b/orders"`, "WithLeaseNamespace"} {
		if !errors.Is(err, kinesislease.ErrDuplicateSubscription) || !strings.Contains(err.Error(), want) {
			t.Errorf("a second subscription keyed acct-b/orders: %v, want ErrDuplicateSubscription naming %s", err, want)
		}
	}
	if err := svc.Unsubscribe(context.Background(), acctB+"/orders"); err != nil {
		t.Fatalf("Unsubscribe by the lease key: %v", err)
	}
	if err := kinesislease.Subscribe(svc, arn, h, kinesislease.WithKinesisClient(other), kinesislease.WithLeaseNamespace(acctB)); err != nil {
		t.Errorf("subscribing acct-b/orders again after Unsubscribe: %v", err)
	}
	if err := svc.Unsubscribe(context.Background(), "orders"); err != nil {
		t.Errorf("Unsubscribe(orders), the plain one: %v", err)
	}
	if err := svc.Unsubscribe(context.Background(), "orders"); !errors.Is(err, kinesislease.ErrNotSubscribed) {
		t.Errorf("Unsubscribe(orders) again, only acct-b/orders left: %v, want ErrNotSubscribed", err)
	}
}
