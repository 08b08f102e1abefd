package kinesislease_test

import (
	"context"

	"github.com/kinesislease/kinesislease/kltype"
)

// leaseMoves is a lease hook calling itself with each lease move of an
// instance: kind is "acquired", "released", "lost" or "ended".
type leaseMoves func(kind, stream, shard string)

func (f leaseMoves) OnLeaseAcquired(_ context.Context, l kltype.LeaseInfo) {
	f("acquired", l.Stream, l.ShardID)
}
func (f leaseMoves) OnLeaseReleased(_ context.Context, l kltype.LeaseInfo) {
	f("released", l.Stream, l.ShardID)
}
func (f leaseMoves) OnLeaseLost(_ context.Context, l kltype.LeaseInfo) {
	f("lost", l.Stream, l.ShardID)
}
func (f leaseMoves) OnShardEnded(s kltype.ShardInfo) { f("ended", s.Stream, s.ShardID) }
