package engine_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/pipeline"
	"github.com/kinesislease/kinesislease/internal/testkit/sim"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestRecordContextKeepsItsRecord: the worker hands each record its own
// context (allocated with the batch, not per record): a context kept by a
// handler still returns its own record after the handler returned and the
// shard's later records were handled.
func TestRecordContextKeepsItsRecord(t *testing.T) {
	t.Parallel()
	k := sim.NewKinesis()
	stream := newSimStream(t, k, "ctx", 1)
	id := stream.ShardIDs()[0]
	const n = 50
	for i := range n {
		if _, err := stream.Put(id, "k", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu   sync.Mutex
		kept []context.Context
		seqs []string
		all  = make(chan struct{})
	)
	cfg := groupConfig("one", memory.New(), k, stream.Name())
	cfg.Streams[0].Worker.Handler = func(ctx context.Context, r *kltype.Record) error {
		got, ok := pipeline.RecordFrom(ctx)
		if !ok || got != r {
			t.Errorf("RecordFrom in the handler: %v, %v; want the record handled", got, ok)
		}
		mu.Lock()
		defer mu.Unlock()
		kept = append(kept, ctx)
		seqs = append(seqs, r.SequenceNumber)
		if len(kept) == n {
			close(all)
		}
		return nil
	}
	_, stop := startGroup(t, cfg)
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		t.Fatal("records not handled after 30s")
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	for i, c := range kept {
		r, ok := pipeline.RecordFrom(c)
		if !ok || r.SequenceNumber != seqs[i] || string(r.Data) != strconv.Itoa(i) {
			t.Fatalf("context of record %d (%s) returns %+v after the handler returned", i, seqs[i], r)
		}
	}
}
