package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"time"

	"github.com/kinesislease/kinesislease/internal/balance"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/rowbook"
	"github.com/kinesislease/kinesislease/internal/shardlist"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

// ErrUnknownStream: RemoveStream of a stream the Group does not read.
var ErrUnknownStream = errors.New("engine: no such stream")

// newStreamState checks sc and returns its state, not yet subscribed.
func (g *Group) newStreamState(sc StreamConfig) (*streamState, error) {
	if sc.Worker.Handler == nil && (sc.Worker.Batch == nil || sc.Worker.Batch.Handler == nil) {
		return nil, fmt.Errorf("engine: stream %q: no handler", sc.Stream)
	}
	sc.Worker.Defaults()
	sc.Client = g.h.WrapKinesis(cmp.Or(sc.Client, g.cfg.Client))
	key := cmp.Or(sc.Key, kinesisx.Name(sc.Stream))
	if prev, dup := g.streams[key]; dup {
		return nil, fmt.Errorf("engine: stream %q subscribed twice (as %q and %q)", key, prev.cfg.Stream, sc.Stream)
	}
	return &streamState{cfg: sc, key: key, log: g.log.With("stream", sc.Stream), list: shardlist.NewStream(sc.Stream, sc.Client),
		book: rowbook.New(mono, sc.Start, sc.Since), failed: map[string]*failure{}}, nil
}

// AddStream subscribes one more stream while Run runs: its shards join the
// plan at the next round, spread over the members as every stream's are.
// Every instance of the service must add it too: until one has, the shards
// the plan gives that one wait. It returns once the stream is in the plan,
// or when ctx ends. A stream subscribed already is refused.
func (g *Group) AddStream(ctx context.Context, sc StreamConfig) error {
	g.streamsMu.RLock()
	st, err := g.newStreamState(sc)
	g.streamsMu.RUnlock()
	if err != nil {
		return err
	}
	return g.change(ctx, streamChange{add: st, done: make(chan error, 1)})
}

// RemoveStream stops reading a stream while Run runs: each of its shards
// drains (the record in flight finishes, bounded by ShutdownTimeout),
// writes its final checkpoint and is released; then the stream leaves the
// plan. It returns once every shard of the stream is released, or when ctx
// ends (the removal goes on). Every instance must remove it: the shards the
// plan gives one that still reads the stream are read on by it.
func (g *Group) RemoveStream(ctx context.Context, stream string) error {
	return g.change(ctx, streamChange{remove: kinesisx.Name(stream), done: make(chan error, 1)})
}

// change hands c to the round goroutine and returns its outcome, or ctx's
// error when ctx ends first (an addition the round has not taken is withdrawn).
func (g *Group) change(ctx context.Context, c streamChange) error {
	g.changesMu.Lock()
	g.changes = append(g.changes, c)
	g.changesMu.Unlock()
	g.kickRound()
	select {
	case err := <-c.done:
		return err
	case <-ctx.Done():
		// An addition still pending is withdrawn; one the round took is in.
		if c.add != nil && !syncx.Guarded(&g.changesMu, func() bool {
			n := len(g.changes)
			g.changes = slices.DeleteFunc(g.changes, func(x streamChange) bool { return x.done == c.done })
			return len(g.changes) < n
		}) {
			return <-c.done
		}
		return ctx.Err()
	}
}

// applyStreamChanges applies the pending AddStream and RemoveStream calls
// (round goroutine).
func (g *Group) applyStreamChanges() {
	g.changesMu.Lock()
	changes := g.changes
	g.changes = nil
	g.changesMu.Unlock()
	for _, c := range changes {
		switch {
		case c.add != nil:
			g.streamsMu.Lock()
			prev, dup := g.streams[c.add.key]
			if !dup {
				g.streams[c.add.key] = c.add
				g.order = append(g.order, c.add.key)
			}
			g.streamsMu.Unlock()
			if dup {
				c.done <- fmt.Errorf("engine: stream %q subscribed twice (as %q and %q)", c.add.key, prev.cfg.Stream, c.add.cfg.Stream)
				continue
			}
			c.add.log.Info("kinesislease: stream added")
			c.done <- nil
		default:
			st := g.streams[c.remove]
			if st == nil {
				c.done <- fmt.Errorf("%w: %q", ErrUnknownStream, c.remove)
				continue
			}
			if !st.removing {
				st.removing = true
				st.log.Info("kinesislease: removing stream: draining and releasing its shards")
			}
			st.removed = append(st.removed, c.done)
		}
	}
	if len(changes) > 0 {
		g.setDigest() // the next heartbeat tells the others
	}
	// Hand every shard of a stream being removed back: drain and release.
	g.mu.Lock()
	for u, w := range g.workers {
		if st := g.streams[u.Stream]; st != nil && st.removing && !w.Stopping() {
			w.StopWithin(g.cfg.ShutdownTimeout)
		}
	}
	g.mu.Unlock()
}

// removeStreams forgets each stream being removed once none of its shards
// is held or an orphan any more (round goroutine, after reap).
func (g *Group) removeStreams() {
	for key, st := range g.streams {
		if !st.removing {
			continue
		}
		g.mu.Lock()
		orphaned := g.lost.DropWhere(func(u unit) bool { return u.Stream == key })
		busy := hasStream(g.workers, key) || orphaned
		g.mu.Unlock()
		if busy {
			continue
		}
		g.streamsMu.Lock()
		delete(g.streams, key)
		g.order = slices.DeleteFunc(g.order, func(k string) bool { return k == key })
		g.streamsMu.Unlock()
		st.log.Info("kinesislease: stream removed: every shard released")
		for _, d := range st.removed {
			d <- nil
		}
	}
}

// subscribed yields the streams not being removed, in subscription order
// (round goroutine).
func (g *Group) subscribed() iter.Seq[*streamState] {
	return func(yield func(*streamState) bool) {
		for _, key := range g.order {
			if st := g.streams[key]; !st.removing && !yield(st) {
				return
			}
		}
	}
}

// subscribedKeys returns the keys of the subscribed streams, sorted.
func (g *Group) subscribedKeys() []string {
	var keys []string
	for st := range g.subscribed() {
		keys = append(keys, st.key)
	}
	slices.Sort(keys)
	return keys
}

// hasStream reports whether a unit of m is of the stream keyed key.
func hasStream[V any](m map[unit]V, key string) bool {
	for u := range m {
		if u.Stream == key {
			return true
		}
	}
	return false
}

// streamsDigest is the digest of the streams this instance subscribes (not
// those being removed), as its membership entry carries it.
func (g *Group) streamsDigest() string { return syncx.LoadString(&g.digest) }

// setDigest computes the digest of the subscribed streams (round
// goroutine, or NewGroup).
func (g *Group) setDigest() {
	d := strconv.FormatUint(shardlist.FNV(g.subscribedKeys()...), 36)
	g.digest.Store(&d)
	var proof time.Duration
	for _, st := range g.streams {
		proof = max(proof, g.proof(st))
	}
	g.m.SetProof(proof)
}

// planMembers returns the live members the plan spreads this instance's
// streams over (balance.SameStreams), warning of those that subscribe
// other streams.
func (g *Group) planMembers(now int64) []leases.Member {
	live, other := balance.SameStreams(g.m.Live(now), g.cfg.Owner, g.streamsDigest())
	if len(other) > 0 && !slices.Equal(other, g.otherStreams) {
		g.log.Warn("kinesislease: some members subscribe other streams; each plans its streams over the members that subscribe the same (subscribe or unsubscribe on every instance)",
			"members", other)
	}
	g.otherStreams = other
	return live
}
