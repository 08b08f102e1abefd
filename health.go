package kinesislease

import "github.com/kinesislease/kinesislease/kltype"

// Health returns a snapshot of the running service for readiness and
// liveness probes: ready once Run passed its start-up checks and joined the
// fleet, live while it may deliver (within its fence), and per subscription
// the shards it reads with their lag and last error, and the shards or
// streams set aside after a failure (see kltype.Health). Before Run, and
// after it returned, it reports neither ready nor live. It may be called
// from any goroutine.
func (s *Service) Health() kltype.Health {
	s.mu.Lock()
	g, running := s.group, s.running
	subs := s.subs
	coords := make(map[string]bool, len(s.coords))
	for name := range s.coords {
		coords[name] = true
	}
	s.mu.Unlock()
	if g != nil && running {
		return g.Health()
	}
	h := kltype.Health{Owner: s.cfg.owner}
	for _, sub := range subs {
		sh := kltype.StreamHealth{Stream: sub.stream}
		if running && coords[sub.stream] {
			for _, id := range s.Held(sub.stream) {
				sh.Shards = append(sh.Shards, kltype.ShardHealth{ShardID: id, Reading: true, MillisBehindLatest: -1})
			}
		}
		h.Streams = append(h.Streams, sh)
	}
	// Under PerRowRenewal: ready and live while the coordinators run.
	h.Ready = running && len(coords) > 0
	h.Live = h.Ready
	return h
}
