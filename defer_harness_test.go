package kinesislease_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisleasetest"
	"github.com/kinesislease/kinesislease/kltype"
)

// TestDeferMisuse: Defer outside a handler, or after it returned, says so
// (kltype.ErrNotDeferred) and its Deferred resolves nothing (the same
// error); a second Done is kltype.ErrAlreadyResolved; a handler that
// defers and then panics fails its attempt all the same. In the harness a
// deferred record resolves in place: Handle returns once Done was called,
// from another goroutine.
func TestDeferMisuse(t *testing.T) {
	t.Parallel()
	outside, err := kinesislease.Defer(context.Background())
	if !errors.Is(err, kltype.ErrNotDeferred) {
		t.Errorf("Defer outside a handler: %v, want kltype.ErrNotDeferred", err)
	}
	if err := outside.Done(nil); !errors.Is(err, kltype.ErrNotDeferred) {
		t.Errorf("Defer outside a handler, Done: %v, want kltype.ErrNotDeferred", err)
	}
	var zero kinesislease.Deferred
	if err := zero.Ack(); !errors.Is(err, kltype.ErrNotDeferred) {
		t.Errorf("zero Deferred, Ack: %v, want kltype.ErrNotDeferred", err)
	}

	var saved context.Context
	errs := make(chan error, 2)
	h := kinesisleasetest.New(t, func(ctx context.Context, o order) error {
		saved = ctx
		ack, err := kinesislease.Defer(ctx)
		if err != nil {
			t.Errorf("Defer in the handler: %v", err)
		}
		go func() {
			errs <- ack.Done(nil)
			errs <- ack.Done(nil)
		}()
		return errIgnored
	})
	if res := h.Handle(context.Background(), order{ID: 1}); res.Outcome != kltype.Acked || res.Attempts != 1 {
		t.Fatalf("deferred, then Done(nil): %v after %d attempts, want acknowledged after 1", res.Outcome, res.Attempts)
	}
	if err := <-errs; err != nil {
		t.Errorf("first Done: %v", err)
	}
	if err := <-errs; !errors.Is(err, kltype.ErrAlreadyResolved) {
		t.Errorf("second Done: %v, want kltype.ErrAlreadyResolved", err)
	}
	late, err := kinesislease.Defer(saved)
	if !errors.Is(err, kltype.ErrNotDeferred) {
		t.Errorf("Defer after the handler returned: %v, want kltype.ErrNotDeferred", err)
	}
	if err := late.Done(nil); !errors.Is(err, kltype.ErrNotDeferred) {
		t.Errorf("Defer after the handler returned, Done: %v, want kltype.ErrNotDeferred", err)
	}

	// A handler that defers with a context that is not its own learns it
	// at once, and returning the error fails the attempt: the record is
	// not acknowledged before the sink has it.
	hb := kinesisleasetest.New(t, func(_ context.Context, o order) error {
		ack, err := kinesislease.Defer(context.Background())
		if err != nil {
			return err
		}
		go func() { _ = ack.Ack() }()
		return nil
	}, kinesisleasetest.WithoutDeadLetter())
	if res := hb.Handle(context.Background(), order{ID: 3}); res.Outcome == kltype.Acked || len(res.Errors) == 0 || !errors.Is(res.Errors[0], kltype.ErrNotDeferred) {
		t.Errorf("Defer with another context, its error returned: %v, want not acknowledged, failing with kltype.ErrNotDeferred", res)
	}

	// Done(err) retries per the policy; a panic after Defer fails the
	// attempt, and its Deferred resolves nothing.
	var first kinesislease.Deferred
	calls := 0
	h2 := kinesisleasetest.New(t, func(ctx context.Context, o order) error {
		calls++
		ack, _ := kinesislease.Defer(ctx) // in the handler: no error
		switch calls {
		case 1:
			go func() { _ = ack.Done(errors.New("sink failed")) }()
		case 2:
			first = ack
			panic("after Defer")
		default:
			go func() { _ = ack.Ack() }()
		}
		return nil
	})
	res := h2.Handle(context.Background(), order{ID: 2})
	if res.Outcome != kltype.Acked || res.Attempts != 3 {
		t.Fatalf("failed by Done(err), then a panic after Defer: %v after %d attempts, want acknowledged after 3", res.Outcome, res.Attempts)
	}
	if err := first.Ack(); !errors.Is(err, kltype.ErrAlreadyResolved) {
		t.Errorf("Ack after the handler panicked: %v, want kltype.ErrAlreadyResolved", err)
	}
}
