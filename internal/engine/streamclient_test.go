package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestStreamClientAndKey: two streams of one name on two Kinesis, one
// subscribed through the Group's client with the default key, the other
// through its own client under the key "b/s". Each handler gets its own
// Kinesis' records only (each stream is listed and read through its own
// client), each stream's rows are keyed apart, and Held tells them apart.
// A second stream of an existing key is refused.
func TestStreamClientAndKey(t *testing.T) {
	t.Parallel()
	ka, kb := kinesisfake.New(), kinesisfake.New()
	for _, k := range []*kinesisfake.Kinesis{ka, kb} {
		if err := k.CreateStream("s", 2); err != nil {
			t.Fatal(err)
		}
	}
	const n = 20
	for i := range n {
		for name, k := range map[string]*kinesisfake.Kinesis{"a": ka, "b": kb} {
			_, err := k.PutRecords(context.Background(), &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []ktypes.PutRecordsRequestEntry{
				{Data: fmt.Appendf(nil, "%s-%d", name, i), PartitionKey: aws.String(fmt.Sprint(i))},
			}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	var (
		mu  sync.Mutex
		got = map[string][]string{} // handler -> data handled
	)
	handler := func(name string) func(context.Context, *kltype.Record) error {
		return func(_ context.Context, r *kltype.Record) error {
			mu.Lock()
			defer mu.Unlock()
			got[name] = append(got[name], string(r.Data))
			return nil
		}
	}
	store := memory.New()
	cfg := groupConfig("x", store, ka, "s")
	cfg.Streams[0].Worker.Handler = handler("a")
	b := cfg.Streams[0]
	b.Key, b.Client, b.Worker.Handler = "b/s", kb, handler("b")
	cfg.Streams = append(cfg.Streams, b)

	dup := cfg
	dup.Streams = append(append([]engine.StreamConfig(nil), cfg.Streams...), b)
	if _, err := engine.NewGroup(dup); err == nil || !strings.Contains(err.Error(), "b/s") {
		t.Errorf("NewGroup with the key b/s twice: %v, want an error naming it", err)
	}

	g, err := engine.NewGroup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		na, nb := len(got["a"]), len(got["b"])
		mu.Unlock()
		if na >= n && nb >= n && len(g.Held("s")) == 2 && len(g.Held("b/s")) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %d and %d records handled, held %v and %v; want %d each and both shards of both", na, nb, g.Held("s"), g.Held("b/s"), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	for name, data := range got {
		for _, d := range data {
			if !strings.HasPrefix(d, name+"-") {
				t.Errorf("handler %s got %q, a record of the other Kinesis", name, d)
			}
		}
	}
	mu.Unlock()
	for _, key := range []string{"s", "b/s"} {
		for _, id := range []string{"shardId-000000000000", "shardId-000000000001"} {
			l, err := store.Get(context.Background(), leases.Key{Stream: key, Shard: id})
			if err != nil || l.Owner != "x" {
				t.Errorf("row %s:%s = %+v, %v; want held by x", key, id, l, err)
			}
		}
	}
	if ka.Calls("ListShards") == 0 || kb.Calls("ListShards") == 0 || kb.Calls("GetRecords") == 0 {
		t.Errorf("calls: ListShards %d on a, %d on b, GetRecords %d on b; want each stream listed and read through its own client",
			ka.Calls("ListShards"), kb.Calls("ListShards"), kb.Calls("GetRecords"))
	}
}
