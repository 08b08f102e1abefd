package kinesislease

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kinesislease/kinesislease/internal/balance"
	"github.com/kinesislease/kinesislease/internal/engine"
)

// Run consumes every subscription until ctx is cancelled, then stops
// reading, drains in-flight handlers (bounded by the shutdown timeout),
// writes final checkpoints and releases every lease, so other instances take
// over at once. It returns nil after such a shutdown, also when ctx is
// cancelled while a start-up check is in flight.
//
// It returns an error at once for a configuration that cannot work: a
// missing stream (ErrStreamNotFound), denied access (ErrAccessDenied), a
// misconfigured store (leases.ErrMisconfigured, e.g. a missing table); each
// message names the resource. Run may be called once.
func (s *Service) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.run {
		s.mu.Unlock()
		return ErrRunning
	}
	s.run = true
	s.runCtx = ctx
	subs := slices.Clone(s.subs)
	s.mu.Unlock()
	defer s.markGroupSet()
	if len(subs) == 0 {
		return fmt.Errorf("%w: Run with no subscription: call Subscribe first", ErrInvalidOption)
	}
	if s.cfg.storeDefaulted {
		s.log.WarnContext(ctx, "kinesislease: no lease store given (WithLeaseStore): leases and checkpoints are kept in this process's memory; "+
			"other instances cannot see them, so each reads every shard, and a restart starts again from the start position: "+
			"safe only for a single instance that may re-read")
	}
	if err := s.preflight(ctx, subs); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) && errors.Is(err, context.Canceled) {
			// Stopped while a start-up check was in flight: a shutdown
			// like any other, before any lease was taken (the chaos run
			// sent SIGINT while the first ListShards was on its way).
			return nil
		}
		return err
	}
	s.setRunning(true)
	defer s.setRunning(false)
	return s.runGroup(ctx, subs)
}

// markGroupSet closes groupSet once (Run set the group, or returns).
func (s *Service) markGroupSet() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.groupSet:
	default:
		close(s.groupSet)
	}
}

func (s *Service) setRunning(r bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = r
}

// runGroup runs every subscription in one engine.Group.
func (s *Service) runGroup(ctx context.Context, subs []*subscription) error {
	c := s.cfg
	gc := engine.GroupConfig{
		Owner: c.owner, Store: c.store, Client: s.kin, Logger: s.log,
		Heartbeat: c.heartbeat, Timeout: c.timeout, MaxLeases: c.maxLeases,
		Capacity: c.capacity, Balance: balance.Mode{Balance: c.balance, Utilization: c.utilization},
		ShardSyncInterval: c.shardSync, ShutdownTimeout: c.shutdownTimeout,
		Hooks: c.hooks,
	}
	for _, sub := range subs {
		gc.Streams = append(gc.Streams, s.streamConfig(sub))
	}
	g, err := engine.NewGroup(gc)
	if err != nil {
		// New and Subscribe checked every option: this is a bug.
		return fmt.Errorf("kinesislease: %w", err)
	}
	s.mu.Lock()
	s.group = g
	s.mu.Unlock()
	s.markGroupSet()
	s.log.InfoContext(ctx, "kinesislease: starting", "owner", c.owner, "incarnation", g.Incarnation(), "streams", len(subs), "store", fmt.Sprintf("%T", c.store))
	err = g.Run(ctx) // it logs "kinesislease: stopped" once its shutdown is done
	var dup *engine.DuplicateOwnerError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &dup):
		return fmt.Errorf("%w: %w", ErrDuplicateOwner, err)
	}
	return err
}
