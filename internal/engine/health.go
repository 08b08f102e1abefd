package engine

// What the Group reports of itself: the shards it holds (Held), its health
// (Health), its store calls (LeaseStoreCalls); and the shards and streams
// it sets aside after they failed for good (fail, failing), which Health
// shows.

import (
	"slices"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// Held returns the shard ids of stream this instance holds now, sorted: the
// shards it reads under a lease it can trust (not past its fence).
func (g *Group) Held(stream string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ids []string
	for u, w := range g.workers {
		if u.Stream == kinesisx.Name(stream) && w.Lease().Valid() {
			ids = append(ids, u.Shard)
		}
	}
	slices.Sort(ids)
	return ids
}

// Health returns a snapshot of the instance (see kltype.Health). It may be
// called from any goroutine while Run runs.
func (g *Group) Health() kltype.Health {
	h := kltype.Health{Owner: g.cfg.Owner, Ready: g.ready.Load(), Live: g.ready.Load() && !g.m.Fence().Passed() && !g.m.Fenced()}
	if err := g.m.StoreErr(); err != nil && !h.Live {
		h.Err = err
	}
	g.mu.Lock()
	shards := map[string][]kltype.ShardHealth{}
	for u, w := range g.workers {
		sh := kltype.ShardHealth{ShardID: u.Shard, Reading: w.Lease().Valid() && !w.Stopping(), MillisBehindLatest: w.Lag(), Err: w.ReadErr()}
		sh.OldestUnresolvedAge, sh.Blocked = w.Unresolved()
		shards[u.Stream] = append(shards[u.Stream], sh)
	}
	g.mu.Unlock()
	g.streamsMu.RLock()
	defer g.streamsMu.RUnlock()
	g.healthMu.Lock()
	defer g.healthMu.Unlock()
	for _, key := range g.order {
		st := g.streams[key]
		sh := kltype.StreamHealth{Stream: st.cfg.Stream, Shards: shards[st.key]}
		if st.list.Failure.N > 0 {
			sh.Err, sh.RetryAt = st.list.Failure.Err, st.list.Failure.Until
		}
		for id, f := range st.failed {
			if !slices.ContainsFunc(sh.Shards, func(x kltype.ShardHealth) bool { return x.ShardID == id }) {
				sh.Shards = append(sh.Shards, kltype.ShardHealth{ShardID: id, MillisBehindLatest: -1, Err: f.Err, RetryAt: f.Until})
			}
		}
		slices.SortFunc(sh.Shards, func(a, b kltype.ShardHealth) int { return strings.Compare(a.ShardID, b.ShardID) })
		h.Streams = append(h.Streams, sh)
	}
	return h
}

// LeaseStoreCalls returns the store calls made so far: lease rows and membership rows.
func (g *Group) LeaseStoreCalls() kltype.LeaseStoreCalls {
	return kltype.LeaseStoreCalls{
		Reads:      g.stats.Reads.Load() + g.stats.MemberReads.Load(),
		Writes:     g.stats.Writes.Load() + g.stats.Heartbeats.Load(),
		Heartbeats: g.stats.Heartbeats.Load(), MemberReads: g.stats.MemberReads.Load(),
	}
}

// fail sets a shard (shard "" for the whole stream) aside after it failed
// for good with err: it logs at ERROR, tells the hooks, and leaves it
// alone for a backoff that doubles with each failure in a row. Every other
// shard and stream goes on.
func (g *Group) fail(st *streamState, shard string, err error) {
	g.healthMu.Lock()
	f, what := &st.list.Failure, "stream"
	if shard != "" {
		what = "shard"
		if f = st.failed[shard]; f == nil {
			f = &failure{}
			st.failed[shard] = f
		}
	}
	f.N++
	f.Err = err
	wait := g.cfg.FailureBackoff << min(f.N-1, 20)
	if wait <= 0 || wait > g.cfg.MaxFailureBackoff {
		wait = g.cfg.MaxFailureBackoff
	}
	f.Until = time.Now().Add(wait)
	n := f.N
	g.healthMu.Unlock()
	st.log.Error("kinesislease: "+what+" failed; the other shards and streams go on, this one is tried again later",
		"shard", shard, "err", err, "failures", n, "retry_in", wait)
	g.h.OnFailed(kltype.FailureInfo{Stream: st.cfg.Stream, ShardID: shard, Err: err, Failures: n, RetryIn: wait})
}

// failing reports whether u is set aside now.
func (g *Group) failing(u unit) bool {
	return syncx.Guarded(&g.healthMu, func() bool { return g.streams[u.Stream].failed[u.Shard].Waiting(time.Now()) })
}

// Fleet returns the entries of the members its last plan was made over
// (balance.Balancer.Fleet), for Health's balance, from any goroutine.
func (g *Group) Fleet() []leases.Member { return g.rs.balance.Fleet() }
