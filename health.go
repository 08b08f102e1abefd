package kinesislease

import (
	"github.com/kinesislease/kinesislease/internal/balance"
	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// Health returns a snapshot of the running service for readiness and
// liveness probes: ready once Run passed its start-up checks and joined the
// fleet, live while it may deliver (within its fence), and per subscription
// the shards it reads with their lag and last error, and the shards or
// streams set aside after a failure (see kltype.Health); and its part of
// the fleet's load (kltype.BalanceHealth). Before Run, and after it
// returned, it reports neither ready nor live. It may be called from any
// goroutine.
func (s *Service) Health() kltype.Health {
	s.mu.Lock()
	g, running, subs := s.group, s.running, s.subs
	s.mu.Unlock()
	if g != nil && running {
		h := g.Health()
		h.Balance = balanceHealth(s.cfg, g.Fleet())
		return h
	}
	h := kltype.Health{Owner: s.cfg.owner, Balance: balanceHealth(s.cfg, nil)}
	for _, sub := range subs {
		h.Streams = append(h.Streams, kltype.StreamHealth{Stream: sub.stream})
	}
	return h
}

// balanceHealth returns this instance's part of the fleet's load from its
// configuration and the entries of the live members it plans its streams
// over (its own among them; none before Run).
func balanceHealth(c config, fleet []leases.Member) kltype.BalanceHealth {
	b := kltype.BalanceHealth{Mode: kltype.BalanceByCount, Capacity: float64(balance.Weight(c.capacity)) / 1000, MaxLeases: c.maxLeases}
	if c.balance.ByLoad {
		b.Mode = kltype.BalanceByThroughput
		tol := c.balance.Tolerance
		if tol == 0 {
			tol = plan.DefaultTolerance
		}
		b.Tolerance = float64(max(tol, 0)) / 100
	}
	var capacities int64
	seen := false
	for _, e := range fleet {
		b.Members++
		b.FleetLoad += max(e.Load, 0)
		if e.Owner == c.owner {
			b.Load, seen = max(e.Load, 0), true
			capacities += balance.Weight(c.capacity) // its own, even before its entry shows it
			continue
		}
		if e.Capacity <= 0 {
			b.Legacy = true
		}
		capacities += balance.Weight(e.Capacity)
	}
	if len(fleet) > 0 && !seen { // the plan counts this instance in, as the others will
		b.Members++
		capacities += balance.Weight(c.capacity)
	}
	b.FairShare = balance.FairShare(c.capacity, capacities, b.Members, b.Legacy)
	if b.FleetLoad > 0 {
		b.Share = float64(b.Load) / float64(b.FleetLoad)
	}
	return b
}
