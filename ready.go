package kinesislease

import (
	"context"
	"errors"
	"fmt"

	"github.com/kinesislease/kinesislease/internal/engine"
)

// Ready waits until this instance reads its part of the subscribed
// streams: every stream listed, every shard given by the fleet's plan to a
// live instance, and every shard the plan gives this instance held by it
// and being read. For a single instance that is every shard held; in a
// fleet, every instance Ready means every shard is held. A round that began
// after the call decides, so a Subscribe made while running before Ready
// counts. Call it while Run runs (before Run, it waits for Run to start),
// for a readiness probe or in a test before putting records. It returns
// ctx's error if ctx ends first, and an error matching ErrStopped if Run
// returns first. Ready does not stay true: a later fence, a shard moved to
// this instance or a new stream ends it until the next rounds take them.
func (s *Service) Ready(ctx context.Context) error {
	select {
	case <-s.groupSet:
	case <-ctx.Done():
		return fmt.Errorf("kinesislease: Ready: %w", ctx.Err())
	}
	s.mu.Lock()
	g := s.group
	s.mu.Unlock()
	if g == nil {
		return fmt.Errorf("kinesislease: Ready: Run returned before it started reading: %w", ErrStopped)
	}
	switch err := g.WaitHolding(ctx); {
	case errors.Is(err, engine.ErrStopped):
		return fmt.Errorf("kinesislease: Ready: Run returned: %w", ErrStopped)
	case err != nil:
		return fmt.Errorf("kinesislease: Ready: %w", err)
	}
	return nil
}
