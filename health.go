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
	g, running, subs := s.group, s.running, s.subs
	s.mu.Unlock()
	if g != nil && running {
		return g.Health()
	}
	h := kltype.Health{Owner: s.cfg.owner}
	for _, sub := range subs {
		h.Streams = append(h.Streams, kltype.StreamHealth{Stream: sub.stream})
	}
	return h
}
