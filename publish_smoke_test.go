package kinesislease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestPublishThenConsume: Publish and a Publisher put orders that a
// subscription reads back, per key in order.
func TestPublishThenConsume(t *testing.T) {
	t.Parallel()
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	stream := testutil.StreamName(t)
	testutil.CreateStream(t, kc, stream, 2)
	svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithKinesisClient(kc), kinesislease.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := kinesislease.Publish(ctx, svc, stream, "customer-0", order{ID: 0, Key: "customer-0"}); err != nil {
		t.Fatal(err)
	}
	p, err := kinesislease.NewPublisher[order](svc, stream, kinesislease.WithLinger(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var results []<-chan error
	for id := 1; id < 1200; id++ {
		key := fmt.Sprintf("customer-%d", id%7)
		res, err := p.PutAsync(key, order{ID: id, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, res)
	}
	for i, res := range results {
		if err := <-res; err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ta := newTally()
	in := start(t, kc, memory.New(), stream, "a", ta)
	ta.waitFor(t, 0, 1200, 30*time.Second)
	in.stop(t)
	ta.mu.Lock()
	defer ta.mu.Unlock()
	for key, ids := range ta.byKey {
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("key %s: order %d handled after %d", key, ids[i], ids[i-1])
			}
		}
	}
}
