package engine

// Whether this instance holds its part of the plan (WaitHolding): told by
// each round's end, for Service.Ready.

import (
	"context"
	"errors"
)

// ErrStopped: Run returned (or never began its rounds) before what
// WaitHolding waited for came.
var ErrStopped = errors.New("engine: stopped")

// WaitHolding returns once a round that began after the call ended with
// every subscribed stream listed, every active shard given by the plan to
// a live instance, and every shard the plan gives this instance held by it
// (its lease valid, its worker reading): for a single instance, every
// shard held; for a fleet, this instance's part, so that every instance
// returning means every shard is held. It returns ctx's error if ctx ends
// first, and ErrStopped if Run returns first.
func (g *Group) WaitHolding(ctx context.Context) error {
	from, _, _, _ := g.sig.holding.State()
	for {
		rounds, ok, stopped, next := g.sig.holding.State()
		switch {
		case rounds >= from+2 && ok: // the round ending at from+1 may have begun before the call
			return nil
		case stopped:
			return ErrStopped
		}
		select {
		case <-next:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// holdsPlan reports whether, after apply, this instance holds its part of
// plan a (see WaitHolding); planned is how many active shards the plan
// was made of.
func (g *Group) holdsPlan(a map[unit]string, planned int) bool {
	if len(a) < planned {
		return false // shards the plan gives nobody: no live member, or all at their cap
	}
	for _, st := range g.streams {
		if !st.removing && st.list.Shards == nil {
			return false // not listed yet
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for u, owner := range a {
		if owner != g.cfg.Owner {
			continue
		}
		if w := g.workers[u]; w == nil || !w.Lease().Valid() || w.Stopping() {
			return false
		}
	}
	return true
}
