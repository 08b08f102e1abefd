package engine

// Whether this instance holds its part of the plan (WaitHolding): told by
// each round's end, for Service.Ready.

import (
	"context"
	"errors"
	"sync"
)

// ErrStopped: Run returned (or never began its rounds) before what
// WaitHolding waited for came.
var ErrStopped = errors.New("engine: stopped")

// holding is what the rounds tell WaitHolding: how many ended, whether
// the last one ended holding its part of the plan, and a channel closed
// when the next one ends.
type holding struct {
	mu      sync.Mutex
	rounds  int
	ok      bool
	stopped bool
	next    chan struct{}
}

// set records the end of a round, ok if it ended holding its part.
func (h *holding) set(ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rounds++
	h.ok = ok
	if h.next != nil {
		close(h.next)
		h.next = nil
	}
}

// stop records that no round will end again.
func (h *holding) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	if h.next != nil {
		close(h.next)
		h.next = nil
	}
}

// state returns the rounds ended, the last one's ok, whether stopped, and
// a channel closed when the next round ends (or at stop).
func (h *holding) state() (rounds int, ok, stopped bool, next <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.next == nil {
		h.next = make(chan struct{})
	}
	return h.rounds, h.ok, h.stopped, h.next
}

// WaitHolding returns once a round that began after the call ended with
// every subscribed stream listed, every active shard given by the plan to
// a live instance, and every shard the plan gives this instance held by it
// (its lease valid, its worker reading): for a single instance, every
// shard held; for a fleet, this instance's part, so that every instance
// returning means every shard is held. It returns ctx's error if ctx ends
// first, and ErrStopped if Run returns first.
func (g *Group) WaitHolding(ctx context.Context) error {
	from, _, _, _ := g.sig.holding.state()
	for {
		rounds, ok, stopped, next := g.sig.holding.state()
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
		if !st.removing && st.shards == nil {
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
