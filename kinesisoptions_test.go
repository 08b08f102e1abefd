package kinesislease_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestWithKinesisOptions: the Kinesis client New builds takes the options
// given (here an endpoint: the in-memory Kinesis served over HTTP), so a
// service reaches another endpoint without building its own client; a nil
// option is refused.
func TestWithKinesisOptions(t *testing.T) {
	t.Parallel()
	k := kinesisfake.New()
	if err := k.CreateStream("orders", 1); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(k)
	t.Cleanup(srv.Close)
	svc, err := kinesislease.New(testutil.Config(t), kinesislease.WithLeaseStore(memory.New()), kinesislease.WithLogger(testLogger(t)),
		kinesislease.WithKinesisOptions(func(o *kinesis.Options) { o.BaseEndpoint = aws.String(srv.URL) }))
	if err != nil {
		t.Fatal(err)
	}
	ta := newTally()
	if err := kinesislease.Subscribe(svc, "orders", ta.handler("a"), kinesislease.WithPolling(20*time.Millisecond, 50*time.Millisecond, 0)); err != nil {
		t.Fatal(err)
	}
	in := runInstance(t, svc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := svc.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v (Run: %v)", err, in.err)
	}
	put(t, k.Client(), "orders", 0, 5)
	ta.waitFor(t, 0, 5, 30*time.Second)

	_, err = kinesislease.New(testutil.Config(t), kinesislease.WithKinesisOptions(nil))
	if !errors.Is(err, kinesislease.ErrInvalidOption) {
		t.Errorf("WithKinesisOptions(nil): %v; want ErrInvalidOption", err)
	}
}
