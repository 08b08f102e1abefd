package kinesislease_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// deadReasons is a HookDeadLettered hook counting dead letters by reason.
type deadReasons struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *deadReasons) OnDeadLettered(dl *kltype.DeadLetterRecord) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[dl.Reason]++
}

func (h *deadReasons) count(reason string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[reason]
}

// TestMaxRecordAge: with WithMaxRecordAge(d), a record put and delivered
// more than d later is dead-lettered as expired without reaching the
// handler, the hooks count it, and the checkpoint moves past it; the
// records around it are handled, once each. The handler holds the first
// record until the second has been in the stream longer than d, then lets
// go; the third is put just before, so it is young when delivered.
// Against kinesalite and DynamoDB Local.
func TestMaxRecordAge(t *testing.T) {
	t.Parallel()
	const maxAge = 3 * time.Second
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	dc := testutil.DynamoClient(t)
	table := testutil.TableName(t)
	testutil.CreateLeaseTable(t, dc, table)
	store := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(dc))

	d := newPLLog()
	var dead plSinkLog
	reasons := &deadReasons{n: map[string]int{}}
	holding, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// A slower heartbeat than the other tests': a lease lost on a loaded
	// machine would deliver record 0 again.
	svcOpts := []kinesislease.Option{kinesislease.WithHooks(reasons), kinesislease.WithHeartbeat(300*time.Millisecond, 3*time.Second)}
	in := plRun(t, kc, store, stream, "a", svcOpts, func(ctx context.Context, o order) error {
		d.add(ctx, t, o.ID)
		if o.ID == 0 {
			once.Do(func() { close(holding) })
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}, kinesislease.WithMaxRecordAge(maxAge), kinesislease.WithDeadLetter(dead.sink))

	// Record 0 is put once the shard is read: put before, it could wait
	// out the start (a new table is read a timeout after the join) and
	// reach the handler past maxAge.
	kinesisleasetest.WaitReady(t, in.svc)
	seq0 := plPut(t, kc, stream, plOrders(0, 1))[0]
	select {
	case <-holding:
	case <-time.After(60 * time.Second):
		t.Fatal("record 0 not delivered after 60s")
	}
	seq1 := plPut(t, kc, stream, plOrders(1, 1))[0]
	put1 := time.Now() // record 1 arrived before this
	// Wait (on the clock: record 1 must age) until record 1 is older than
	// maxAge, then put record 2 and let record 0 go.
	time.Sleep(time.Until(put1.Add(maxAge + 100*time.Millisecond)))
	seq2 := plPut(t, kc, stream, plOrders(2, 1))[0]
	close(release)

	d.waitUntil(t, "record 2 handled", 60*time.Second, plSeen(1, 2))
	plWaitCheckpoint(t, store, stream, plShard0, leases.Checkpoint{Sequence: seq2}, 10*time.Second)
	in.stop(t)

	// At least once: a lease lost under load may deliver a record again,
	// never record 1.
	if got := slices.Compact(slices.Sorted(slices.Values(plIDs(d.all())))); !slices.Equal(got, []int{0, 2}) {
		t.Errorf("handled %v, want 0 and 2: record 1 expired, nothing else lost", plIDs(d.all()))
	}
	dls := dead.all()
	if len(dls) == 0 {
		t.Fatal("no dead letter, want record 1's")
	}
	dl := dls[0]
	var exp *kltype.ExpiredError
	switch {
	case dl.Record.SequenceNumber != seq1 || dl.Reason != kltype.ReasonExpired || dl.Attempts != 0:
		t.Errorf("dead letter %s, reason %q, attempts %d; want record 1 (%s), %q, 0", dl.Record.SequenceNumber, dl.Reason, dl.Attempts, seq1, kltype.ReasonExpired)
	case !errors.As(dl.Err, &exp) || exp.MaxAge != maxAge || exp.Age <= maxAge || !exp.Arrival.Equal(dl.Record.ArrivalTime):
		t.Errorf("dead letter error %v, want a *kltype.ExpiredError older than %v at the record's arrival %v", dl.Err, maxAge, dl.Record.ArrivalTime)
	}
	if want := plOrder(1).data; string(dl.Record.Data) != string(want) {
		t.Errorf("dead letter data %q, want the record's own %q", dl.Record.Data, want)
	}
	for _, other := range dls[1:] {
		if other.Record.SequenceNumber != seq1 {
			t.Errorf("dead letter of %s, want only record 1's (%s)", other.Record.SequenceNumber, seq1)
		}
	}
	if n := reasons.count(kltype.ReasonExpired); n != len(dls) {
		t.Errorf("HookDeadLettered counted %d expired records, the sink got %d", n, len(dls))
	}
	if seq0 == seq1 || seq1 == seq2 {
		t.Fatalf("sequence numbers %s %s %s not distinct", seq0, seq1, seq2)
	}
}
