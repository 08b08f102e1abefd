package engine

import (
	"slices"
	"strings"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
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
		if st.listing.n > 0 {
			sh.Err, sh.RetryAt = st.listing.err, st.listing.until
		}
		for id, f := range st.failed {
			if !slices.ContainsFunc(sh.Shards, func(x kltype.ShardHealth) bool { return x.ShardID == id }) {
				sh.Shards = append(sh.Shards, kltype.ShardHealth{ShardID: id, MillisBehindLatest: -1, Err: f.err, RetryAt: f.until})
			}
		}
		slices.SortFunc(sh.Shards, func(a, b kltype.ShardHealth) int { return strings.Compare(a.ShardID, b.ShardID) })
		h.Streams = append(h.Streams, sh)
	}
	return h
}
