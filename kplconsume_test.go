package kinesislease_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/kpl"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// kplUser is a user record as kpl/testdata/gen-vectors.js reads it.
type kplUser struct {
	PartitionKey    string `json:"partitionKey"`
	ExplicitHashKey string `json:"explicitHashKey,omitempty"`
	Data            []byte `json:"data"` // base64
}

// kplAggregate aggregates users with aws-kinesis-agg (the node script) and
// returns the aggregates' data: one aggregate for a set under 1 MiB.
func kplAggregate(t testing.TB, users []kplUser) []plEntry {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = filepath.Dir(dir)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed (%v): install Node.js 20, then run npm ci at the repo root (%s) to install aws-kinesis-agg", err, dir)
	}
	in, err := json.Marshal(users)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join("kpl", "testdata", "gen-vectors.js"), "aggregate")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 3 {
			t.Fatalf("aws-kinesis-agg is missing: run npm ci at the repo root (%s): %s", dir, strings.TrimSpace(stderr.String()))
		}
		t.Fatalf("node gen-vectors.js aggregate: %v\n%s", err, stderr.String())
	}
	var out []struct {
		PartitionKey string `json:"partitionKey"`
		Data         []byte `json:"data"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	es := make([]plEntry, len(out))
	for i, o := range out {
		if !kpl.IsAggregated(o.Data) {
			t.Fatalf("aggregate %d is not a KPL aggregate", i)
		}
		es[i] = plEntry{pk: o.PartitionKey, data: o.Data}
	}
	return es
}

// kplGroup is a set of orders aggregated into one Kinesis record.
type kplGroup struct {
	users    []kplUser
	orderIDs []int
}

// kplOrders makes n orders numbered from first, each with its own partition
// key (some unicode) and, for every third, an explicit hash key.
func kplOrders(first, n int) kplGroup {
	var g kplGroup
	keys := []string{"clé-%d", "日本-%d", "🦄-%d", "plain-%d"}
	for id := first; id < first+n; id++ {
		key := fmt.Sprintf(keys[id%len(keys)], id)
		data, _ := json.Marshal(order{ID: id, Key: key})
		u := kplUser{PartitionKey: key, Data: data}
		if id%3 == 0 {
			u.ExplicitHashKey = fmt.Sprintf("1701411834604692317316873037158841%05d", id)
		}
		g.users = append(g.users, u)
		g.orderIDs = append(g.orderIDs, id)
	}
	return g
}

// putKPL aggregates each group into one record with aws-kinesis-agg, puts
// them in one call, and returns each group's sequence number.
func putKPL(t testing.TB, kc *kinesis.Client, stream string, groups ...kplGroup) ([]string, [][]byte) {
	t.Helper()
	var es []plEntry
	for _, g := range groups {
		aggs := kplAggregate(t, g.users)
		if len(aggs) != 1 {
			t.Fatalf("%d records aggregated into %d aggregates, want 1", len(g.users), len(aggs))
		}
		es = append(es, aggs[0])
	}
	blobs := make([][]byte, len(es))
	for i, e := range es {
		blobs[i] = e.data
	}
	return plPut(t, kc, stream, es), blobs
}

// TestKPLConsume: each user record of an aggregate produced by
// aws-kinesis-agg is handled on its own, with its own partition key,
// explicit hash key and sub-sequence number and the aggregate's sequence
// number; a plain record between aggregates is handled as itself; the final
// checkpoint covers the last aggregate whole.
func TestKPLConsume(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	a, b := kplOrders(0, 7), kplOrders(8, 5)
	seqA, _ := putKPL(t, kc, stream, a)
	seqP := plPut(t, kc, stream, []plEntry{plOrder(7)})
	seqB, _ := putKPL(t, kc, stream, b)

	d := newPLLog()
	store := memory.New()
	in := plRun(t, kc, store, stream, "a", nil, func(ctx context.Context, o order) error {
		d.add(ctx, t, o.ID)
		return nil
	}, kinesislease.WithCheckpoint(1000, 50*time.Millisecond))
	d.waitUntil(t, "13 orders handled", 15*time.Second, plSeen(1, plSpan(0, 13)...))
	plWaitCheckpoint(t, store, stream, plShard0, leases.Checkpoint{Sequence: seqB[0]}, 5*time.Second)
	in.stop(t)

	got := d.all()
	if !slices.Equal(plIDs(got), plSpan(0, 13)) {
		t.Fatalf("handled %v, want 0 to 12 once each, in order", plIDs(got))
	}
	check := func(g kplGroup, seq string) {
		for i, id := range g.orderIDs {
			dv, u := got[id], g.users[i]
			if dv.seq != seq || dv.sub != int64(i) || dv.pk != u.PartitionKey || dv.ehk != u.ExplicitHashKey || !bytes.Equal(dv.dataCopy, u.Data) {
				t.Errorf("order %d: seq %s sub %d pk %q ehk %q data %s; want %s %d %q %q %s",
					id, dv.seq, dv.sub, dv.pk, dv.ehk, dv.dataCopy, seq, i, u.PartitionKey, u.ExplicitHashKey, u.Data)
			}
		}
	}
	check(a, seqA[0])
	check(b, seqB[0])
	if p := got[7]; p.seq != seqP[0] || p.sub != 0 || p.pk != "customer-7" {
		t.Errorf("plain record: seq %s sub %d pk %q, want %s 0 customer-7", p.seq, p.sub, p.pk, seqP[0])
	}
}

// TestKPLRestartMidAggregate: a restart inside an aggregate resumes at the
// user record after the last acknowledged one: the stored checkpoint is the
// aggregate's sequence number and the count of user records done, nothing
// before it is redelivered and nothing after it is missed. The handler
// stops acknowledging at user record k (it fails with no dead-letter sink,
// holding the shard) and the service is stopped.
func TestKPLRestartMidAggregate(t *testing.T) {
	t.Parallel()
	for _, k := range []int{0, 3, 5} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			// A stream and a memory store of its own: the subtests' services
			// share owner ids, which one store's membership would refuse.
			t.Parallel()
			onMemoryStore(t, func(t *testing.T, newStore func() leases.MembershipStore) {
				kplRestartMidAggregate(t, newStore, k, false)
			})
		})
	}
	// With enhanced fan-out: the restart subscribes AT_SEQUENCE_NUMBER of
	// the aggregate and skips the user records done.
	t.Run("fan-out", func(t *testing.T) {
		store := memory.New()
		kplRestartMidAggregate(t, func() leases.MembershipStore { return store }, 3, true)
	})
}

func kplRestartMidAggregate(t *testing.T, newStore func() leases.MembershipStore, k int, fanOut bool) {
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	var sub []kinesislease.SubscribeOption
	if fanOut {
		// The aggregates on an in-memory Kinesis, read through its SDK
		// client with enhanced fan-out.
		k := kinesisfake.New(kinesisfake.WithFanOutRules(kinesisfake.FanOutRules{TakeoverAfter: 500 * time.Millisecond}))
		if err := k.CreateStream(stream, 1); err != nil {
			t.Fatal(err)
		}
		kc = k.Client()
		sub = fanOutSub()
	} else {
		testutil.CreateStream(t, kc, stream, 1)
	}
	a, b, c := kplOrders(0, 4), kplOrders(4, 6), kplOrders(10, 3)
	seqs, _ := putKPL(t, kc, stream, a, b, c)
	stopAt := b.orderIDs[k]
	probe := newStore()

	d1 := newPLLog()
	in := plRun(t, kc, newStore(), stream, "a", nil, func(ctx context.Context, o order) error {
		d1.add(ctx, t, o.ID)
		if o.ID == stopAt {
			return fmt.Errorf("order %d fails", o.ID)
		}
		return nil
	}, append(sub, kinesislease.WithRetryPolicy(kltype.RetryPolicy{Attempts: 1, InitialDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond}))...)
	d1.waitUntil(t, "the failing record tried twice", 15*time.Second, plSeen(2, stopAt))
	// k user records of b done; none done means a is done whole.
	want := leases.Checkpoint{Sequence: seqs[1], SubSequence: int64(k)}
	if k == 0 {
		want = leases.Checkpoint{Sequence: seqs[0]}
	}
	plWaitCheckpoint(t, probe, stream, plShard0, want, 5*time.Second)
	in.stop(t)
	if l := plRow(t, probe, stream, plShard0); l.Held() || l.Checkpoint != want {
		t.Fatalf("after the stop: row %+v, want released at %+v", l, want)
	}
	first := plIDs(d1.all())
	if i := slices.Index(first, stopAt); !slices.Equal(first[:i], plSpan(0, stopAt)) || slices.ContainsFunc(first[i:], func(id int) bool { return id != stopAt }) {
		t.Fatalf("first run handled %v, want 0 to %d then only %d", first, stopAt, stopAt)
	}

	d2 := newPLLog()
	in2 := plRun(t, kc, newStore(), stream, "b", nil, func(ctx context.Context, o order) error {
		d2.add(ctx, t, o.ID)
		return nil
	}, sub...)
	d2.waitUntil(t, "the rest handled", 15*time.Second, plSeen(1, plSpan(stopAt, 13-stopAt)...))
	plWaitCheckpoint(t, probe, stream, plShard0, leases.Checkpoint{Sequence: seqs[2]}, 5*time.Second)
	in2.stop(t)
	got := d2.all()
	if !slices.Equal(plIDs(got), plSpan(stopAt, 13-stopAt)) {
		t.Fatalf("after the restart handled %v, want %d to 12 once each, in order", plIDs(got), stopAt)
	}
	if got[0].seq != seqs[1] || got[0].sub != int64(k) {
		t.Fatalf("first record after the restart: seq %s sub %d, want %s %d", got[0].seq, got[0].sub, seqs[1], k)
	}
}

// TestKPLCorruptAggregate: an aggregate whose checksum is wrong is
// dead-lettered whole (reason corrupt-aggregate, its bytes intact, no
// handler call) and the records around it are handled.
func TestKPLCorruptAggregate(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	a, b, c := kplOrders(0, 3), kplOrders(3, 4), kplOrders(7, 2)
	aggA, aggB, aggC := kplAggregate(t, a.users)[0], kplAggregate(t, b.users)[0], kplAggregate(t, c.users)[0]
	aggB.data[len(aggB.data)-3] ^= 0x55 // the MD5
	seqs := plPut(t, kc, stream, []plEntry{aggA, aggB, aggC})

	d := newPLLog()
	var dead plSinkLog
	store := memory.New()
	in := plRun(t, kc, store, stream, "a", nil, func(ctx context.Context, o order) error {
		d.add(ctx, t, o.ID)
		return nil
	}, kinesislease.WithRetryPolicy(plRetry), kinesislease.WithDeadLetter(dead.sink))
	d.waitUntil(t, "a and c handled", 15*time.Second, plSeen(1, 0, 1, 2, 7, 8))
	plWaitCheckpoint(t, store, stream, plShard0, leases.Checkpoint{Sequence: seqs[2]}, 5*time.Second)
	in.stop(t)
	if got := plIDs(d.all()); !slices.Equal(got, []int{0, 1, 2, 7, 8}) {
		t.Fatalf("handled %v, want 0 1 2 7 8 (none of the corrupt aggregate)", got)
	}
	dls := dead.all()
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	dl := dls[0]
	if dl.Reason != "corrupt-aggregate" || dl.Attempts != 0 || !errors.Is(dl.Err, kpl.ErrCorrupt) {
		t.Errorf("dead letter: reason %q attempts %d err %v; want corrupt-aggregate, 0, kpl.ErrCorrupt", dl.Reason, dl.Attempts, dl.Err)
	}
	if r := dl.Record; r.SequenceNumber != seqs[1] || r.SubSequence != 0 || r.PartitionKey != aggB.pk || !bytes.Equal(r.Data, aggB.data) {
		t.Errorf("dead letter: seq %s sub %d pk %q %d bytes; want %s 0 %q and the aggregate's %d bytes intact",
			r.SequenceNumber, r.SubSequence, r.PartitionKey, len(r.Data), seqs[1], aggB.pk, len(aggB.data))
	}
}

// TestKPLStopInsideAggregate: a service stopped while its handler is busy
// with user record k lets it finish, checkpoints k+1 user records done (0 if
// k is the aggregate's last: done whole) and releases; the next service
// resumes with user record k+1.
func TestKPLStopInsideAggregate(t *testing.T) {
	t.Parallel()
	for _, k := range []int{2, 5} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			// A stream and a memory store of its own: the subtests' services
			// share owner ids, which one store's membership would refuse.
			t.Parallel()
			onMemoryStore(t, func(t *testing.T, newStore func() leases.MembershipStore) {
				kc := testutil.KinesisClient(t, testutil.Kinesalite)
				stream := testutil.StreamName(t)
				testutil.CreateStream(t, kc, stream, 1)
				a, b, c := kplOrders(0, 4), kplOrders(4, 6), kplOrders(10, 3)
				seqs, _ := putKPL(t, kc, stream, a, b, c)
				busy := b.orderIDs[k]
				probe := newStore()

				reached, release := make(chan struct{}), make(chan struct{})
				d1 := newPLLog()
				in := plRun(t, kc, newStore(), stream, "a", nil, func(ctx context.Context, o order) error {
					d1.add(ctx, t, o.ID)
					if o.ID == busy {
						close(reached)
						<-release
					}
					return nil
				})
				select {
				case <-reached:
				case <-time.After(15 * time.Second):
					t.Fatalf("order %d not reached: %s", busy, plSummary(d1.all()))
				}
				in.cancel()
				time.Sleep(100 * time.Millisecond) // the worker is told to stop while the handler is busy
				close(release)
				<-in.done
				if in.err != nil {
					t.Fatal(in.err)
				}
				want := leases.Checkpoint{Sequence: seqs[1], SubSequence: int64(k + 1)}
				if k == len(b.orderIDs)-1 {
					want.SubSequence = 0
				}
				if l := plRow(t, probe, stream, plShard0); l.Held() || l.Checkpoint != want {
					t.Fatalf("after the stop: row %+v, want released at %+v", l, want)
				}
				if got := plIDs(d1.all()); !slices.Equal(got, plSpan(0, busy+1)) {
					t.Fatalf("first run handled %v, want 0 to %d", got, busy)
				}

				d2 := newPLLog()
				in2 := plRun(t, kc, newStore(), stream, "b", nil, func(ctx context.Context, o order) error {
					d2.add(ctx, t, o.ID)
					return nil
				})
				d2.waitUntil(t, "the rest handled", 15*time.Second, plSeen(1, plSpan(busy+1, 12-busy)...))
				plWaitCheckpoint(t, probe, stream, plShard0, leases.Checkpoint{Sequence: seqs[2]}, 5*time.Second)
				in2.stop(t)
				if got := plIDs(d2.all()); !slices.Equal(got, plSpan(busy+1, 12-busy)) {
					t.Fatalf("after the restart handled %v, want %d to 12 once each, in order", got, busy+1)
				}
			})
		})
	}
}

// TestKPLUserRecordDeadLettered: a user record of an aggregate that fails
// reaches the dead-letter stream on its own: its bytes, its partition key,
// the aggregate's sequence number and its sub-sequence number.
func TestKPLUserRecordDeadLettered(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream, dlq := testutil.StreamName(t), testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 1)
	testutil.CreateStream(t, kc, dlq, 1)
	a := kplOrders(0, 5)
	seqs, _ := putKPL(t, kc, stream, a)
	d := newPLLog()
	store := memory.New()
	in := plRun(t, kc, store, stream, "a", nil, func(ctx context.Context, o order) error {
		d.add(ctx, t, o.ID)
		if o.ID == 2 {
			return errors.New("order 2 keeps failing")
		}
		return nil
	}, kinesislease.WithRetryPolicy(plRetry), kinesislease.WithDeadLetterStream(dlq))
	d.waitUntil(t, "all handled", 15*time.Second, plSeen(1, plSpan(0, 5)...))
	plWaitCheckpoint(t, store, stream, plShard0, leases.Checkpoint{Sequence: seqs[0]}, 5*time.Second)
	in.stop(t)
	envs, recs := plEnvelopes(t, kc, dlq, 1)
	env, u := envs[0], a.users[2]
	if env.SequenceNumber != seqs[0] || env.SubSequence != 2 || env.PartitionKey != u.PartitionKey ||
		aws.ToString(recs[0].PartitionKey) != u.PartitionKey || !bytes.Equal(env.Data, u.Data) ||
		env.Reason != "retries-exhausted" || env.Attempts != plRetry.Attempts {
		t.Fatalf("envelope %+v (record key %q), want seq %s sub 2 key %q data %s retries-exhausted after %d",
			env, aws.ToString(recs[0].PartitionKey), seqs[0], u.PartitionKey, u.Data, plRetry.Attempts)
	}
}
