package kinesislease_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// bulkSink writes orders in bulk, three at a time, and acknowledges them
// once written: the handler hands each order over with its deferred
// acknowledgement and returns at once.
type bulkSink struct {
	mu      sync.Mutex
	ids     []string
	acks    []kinesislease.Deferred
	written chan int // orders written, per flush
}

func (s *bulkSink) add(id string, ack kinesislease.Deferred) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids, s.acks = append(s.ids, id), append(s.acks, ack)
	if len(s.ids) == 3 {
		s.flushLocked()
	}
}

// flush writes what the sink holds (the release callback calls it too).
func (s *bulkSink) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
}

func (s *bulkSink) flushLocked() {
	if len(s.ids) == 0 {
		return
	}
	fmt.Println("wrote", strings.Join(s.ids, " ")) // the bulk write
	for _, ack := range s.acks {
		_ = ack.Ack() // kltype.ErrLeaseGone if the shard was let go meanwhile: harmless
	}
	s.written <- len(s.ids)
	s.ids, s.acks = nil, nil
}

// A handler that defers its acknowledgement to a sink writing in bulk: the
// checkpoint advances as the sink acknowledges; before a shard is let go
// the sink is told to flush (WithOnRelease).
func ExampleDefer() {
	k := kinesisfake.New() // the in-memory Kinesis; a *kinesis.Client in production
	_ = k.CreateStream("fulfilment", 1)
	p, _ := kinesislease.NewPublisherFromClient[Order](k, "fulfilment")
	ctx, cancel := context.WithCancel(context.Background())
	for i := range 6 {
		_ = p.Put(ctx, "customer-17", Order{ID: fmt.Sprint("ord-", i)})
	}
	_ = p.Close(ctx)

	sink := &bulkSink{written: make(chan int, 10)}
	svc, _ := kinesislease.New(aws.Config{}, kinesislease.WithKinesisClient(k), kinesislease.WithLeaseStore(memory.New()),
		kinesislease.WithLogger(slog.New(slog.DiscardHandler)), kinesislease.WithHeartbeat(50*time.Millisecond, 300*time.Millisecond))
	_ = kinesislease.Subscribe(svc, "fulfilment", func(ctx context.Context, o Order) error {
		ack, err := kinesislease.Defer(ctx)
		if err != nil {
			return err // only with a context that is not the handler's
		}
		sink.add(o.ID, ack)
		return nil // ignored: the Deferred resolves the record
	}, kinesislease.WithStartPosition(kltype.TrimHorizon),
		kinesislease.WithOnRelease(func(ctx context.Context, info kltype.ReleaseInfo) { sink.flush() }))

	done := make(chan error)
	go func() { done <- svc.Run(ctx) }()
	for n := 0; n < 6; n += <-sink.written {
	}
	cancel()
	fmt.Println(<-done)
	// Output:
	// wrote ord-0 ord-1 ord-2
	// wrote ord-3 ord-4 ord-5
	// <nil>
}

// Defer with a context that carries no handler call (here the background
// context; also a handler's context once the handler returned, as in a
// goroutine it started) takes nothing: it returns kltype.ErrNotDeferred at
// once, and its Deferred resolves nothing. A handler that returns the error
// fails its attempt, so the record is not acknowledged before a sink has it.
func ExampleDefer_outsideHandler() {
	ack, err := kinesislease.Defer(context.Background())
	fmt.Println(errors.Is(err, kltype.ErrNotDeferred))
	fmt.Println(err)
	fmt.Println(errors.Is(ack.Ack(), kltype.ErrNotDeferred))
	// Output:
	// true
	// kinesislease: not a deferred acknowledgement: Defer was called outside a handler call
	// true
}
