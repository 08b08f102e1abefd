package kinesislease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
)

// streamTally records, per stream, which order ids were handled and by
// whom.
type streamTally struct {
	mu   sync.Mutex
	seen map[string]map[int]int // stream -> id -> times handled
}

func (st *streamTally) handler(stream string) kinesislease.HandlerFunc[order] {
	return func(ctx context.Context, o order) error {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.seen[stream] == nil {
			st.seen[stream] = map[int]int{}
		}
		st.seen[stream][o.ID]++
		return nil
	}
}

// missing returns the ids in [0, n) of stream not handled, and how many
// were handled more than once.
func (st *streamTally) missing(stream string, n int) (missing []int, dups int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for id := range n {
		switch c := st.seen[stream][id]; {
		case c == 0:
			missing = append(missing, id)
		case c > 1:
			dups += c - 1
		}
	}
	return missing, dups
}

// TestStreamsAtRuntime: two instances read stream A; while records flow on
// A and B, both subscribe B, then both unsubscribe A. B is read from its
// start, every record of it; A's shards are released with their final
// checkpoints, and a third instance that subscribes A afterwards reads on
// from them: no record of A is lost across the removal. No shard is ever
// held by both instances at once (sampled every 10ms throughout).
func TestStreamsAtRuntime(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	a, b := testutil.StreamName(t)+"-a", testutil.StreamName(t)+"-b"
	testutil.CreateStream(t, kc, a, 2)
	testutil.CreateStream(t, kc, b, 2)
	_, _, store := dynamoTable(t)
	ta := &streamTally{seen: map[string]map[int]int{}}

	// The producer: an order on each stream every 10ms until stopped.
	var (
		putMu sync.Mutex
		puts  = map[string]int{}
	)
	stopPut := make(chan struct{})
	putErr := make(chan error, 1)
	go func() {
		defer close(putErr)
		for i := 0; ; i++ {
			select {
			case <-stopPut:
				return
			case <-time.After(10 * time.Millisecond):
			}
			for _, s := range []string{a, b} {
				if err := putOrders(kc, s, i, 1); err != nil {
					putErr <- fmt.Errorf("put on %s: %w", s, err)
					return
				}
				putMu.Lock()
				puts[s] = i + 1
				putMu.Unlock()
			}
		}
	}()

	ins := map[string]*instance{}
	for _, o := range []string{"a", "b"} {
		// A short timeout: stream B, new to a table in use, is recovered
		// (a new stream cannot be told from rows that vanished while other
		// streams' leases are held) and read after the recovery wait,
		// which grows with it.
		ins[o] = runService(t, kc, store, o, func(svc *kinesislease.Service) error {
			return kinesislease.Subscribe(svc, a, ta.handler(a), testSubscription()...)
		}, failoverLease)
	}
	// Sample the holdings until the end: never a shard held twice.
	stopSample := make(chan struct{})
	sampled := make(chan string, 1)
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSample:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if _, twice := holdings(ins, []string{a, b}); twice {
				sampled <- "a shard was held by both instances at once"
				return
			}
		}
	}()
	waitHoldings(t, ins, []string{a}, []int{1, 1})

	for o, in := range ins {
		if err := kinesislease.Subscribe(in.svc, b, ta.handler(b), testSubscription()...); err != nil {
			t.Fatalf("%s: Subscribe(%s) while running: %v", o, b, err)
		}
	}
	if err := kinesislease.Subscribe(ins["a"].svc, b, ta.handler(b)); !errors.Is(err, kinesislease.ErrDuplicateSubscription) {
		t.Errorf("a second Subscribe(%s) while running: %v, want ErrDuplicateSubscription", b, err)
	}
	waitHoldings(t, ins, []string{a, b}, []int{2, 2})

	for o, in := range ins {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := in.svc.Unsubscribe(ctx, a)
		cancel()
		if err != nil {
			t.Fatalf("%s: Unsubscribe(%s): %v", o, a, err)
		}
		if held := in.svc.Held(a); len(held) != 0 {
			t.Errorf("%s holds %v of %s after Unsubscribe returned", o, held, a)
		}
	}
	if err := ins["a"].svc.Unsubscribe(context.Background(), a); !errors.Is(err, kinesislease.ErrNotSubscribed) {
		t.Errorf("a second Unsubscribe(%s): %v, want ErrNotSubscribed", a, err)
	}
	waitHoldings(t, ins, []string{b}, []int{1, 1})

	close(stopPut)
	if err := <-putErr; err != nil {
		t.Fatal(err)
	}
	close(stopSample)
	if msg, ok := <-sampled; ok {
		t.Error(msg)
	}
	putMu.Lock()
	nA, nB := puts[a], puts[b]
	putMu.Unlock()

	// B: every record, from the stream's start.
	deadline := time.Now().Add(30 * time.Second)
	for {
		miss, dups := ta.missing(b, nB)
		if len(miss) == 0 {
			t.Logf("%s: %d records handled, %d more than once", b, nB, dups)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d records never handled (first %v)", b, len(miss), nB, miss[:min(5, len(miss))])
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A: a third instance reads on from the checkpoints the removal wrote.
	runService(t, kc, store, "c", func(svc *kinesislease.Service) error {
		return kinesislease.Subscribe(svc, a, ta.handler(a), testSubscription()...)
	})
	deadline = time.Now().Add(30 * time.Second)
	for {
		miss, dups := ta.missing(a, nA)
		if len(miss) == 0 {
			t.Logf("%s: %d records handled, %d more than once (records after the last checkpoints before the removal)", a, nA, dups)
			break
		}
		if time.Now().After(deadline) {
			for _, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
				t.Logf("row %s: %+v", id, plRow(t, store, a, id))
			}
			t.Fatalf("%s: %d of %d records never handled across the removal (first %v)", a, len(miss), nA, miss[:min(5, len(miss))])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
