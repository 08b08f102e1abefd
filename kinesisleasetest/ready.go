package kinesisleasetest

import (
	"context"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease"
)

// ReadyTimeout is how long WaitReady waits by default.
const ReadyTimeout = time.Minute

// WaitReady waits until svc, running (or about to: call it after starting
// Run on another goroutine), holds its part of its subscribed streams
// (kinesislease.Service.Ready): for a single instance, every shard. It
// fails the test with the reason if that does not come within
// ReadyTimeout (in a testing/synctest bubble, of virtual time) or Run
// returns first. Put records after it to test what a running service does
// with them; records put after Subscribe are read even before it.
func WaitReady(t testing.TB, svc *kinesislease.Service) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	if err := svc.Ready(ctx); err != nil {
		t.Fatalf("kinesisleasetest: the service did not become ready: %v", err)
	}
}
