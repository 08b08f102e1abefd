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
// over (its own among them; none before Run): its fair share and cost as
// the plan counts them (balance.FairShares).
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
	if len(fleet) == 0 {
		return b
	}
	us := make([]balance.Usage, 0, len(fleet)+1)
	self := -1
	for _, e := range fleet {
		u := balance.Usage{Capacity: e.Capacity, Load: e.Load, Utilization: e.Utilization}
		b.FleetLoad += max(e.Load, 0)
		if e.Owner == c.owner {
			u.Capacity = balance.Weight(c.capacity) // its own, even before its entry shows it
			self = len(us)
			b.Load, b.Utilization = max(e.Load, 0), float64(max(e.Utilization, 0))/1000
		}
		us = append(us, u)
	}
	if self < 0 { // the plan counts this instance in, as the others will
		self = len(us)
		us = append(us, balance.Usage{Capacity: balance.Weight(c.capacity)})
	}
	fair, costs, legacy := balance.FairShares(us, c.balance.ByLoad)
	b.Members, b.Legacy = len(us), legacy
	b.FairShare, b.Cost = fair[self], float64(costs[self])/1000
	if b.FleetLoad > 0 {
		b.Share = float64(b.Load) / float64(b.FleetLoad)
	}
	return b
}
