package engine

import (
	"context"
	"sync/atomic"

	"github.com/kinesislease/kinesislease/leases"
)

// groupStats counts a Group's store calls.
type groupStats struct {
	reads, writes, heartbeats, memberReads atomic.Int64
}

// instrumentedStore is the Group's view of its lease store: every call is
// counted (Stats) and, when call hooks are set, timed for them. It is both
// the Group's store and its mem (NewGroup), which checks that it implements
// leases.Store and leases.Membership.
type instrumentedStore struct {
	leases.Store
	mem leases.Membership
	h   *hooks
	s   *groupStats
}

// countCall counts one call in n and times it for the hooks.
func countCall[T any](s *instrumentedStore, n *atomic.Int64, op string, fn func() (T, error)) (T, error) {
	n.Add(1)
	if len(s.h.call) == 0 {
		return fn()
	}
	return timed(s.h, "dynamodb", op, fn)
}

func (s *instrumentedStore) Get(ctx context.Context, key leases.Key) (leases.Lease, error) {
	return countCall(s, &s.s.reads, "Get", func() (leases.Lease, error) { return s.Store.Get(ctx, key) })
}

func (s *instrumentedStore) Create(ctx context.Context, key leases.Key) (leases.Lease, error) {
	return countCall(s, &s.s.writes, "Create", func() (leases.Lease, error) { return s.Store.Create(ctx, key) })
}

func (s *instrumentedStore) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return countCall(s, &s.s.writes, "Checkpoint", func() (leases.Lease, error) { return s.Store.Checkpoint(ctx, l, cp) })
}

func (s *instrumentedStore) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return countCall(s, &s.s.writes, "Release", func() (leases.Lease, error) { return s.Store.Release(ctx, l, cp) })
}

func (s *instrumentedStore) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return countCall(s, &s.s.writes, "Rewind", func() (leases.Lease, error) { return s.Store.Rewind(ctx, l, cp) })
}

func (s *instrumentedStore) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	return countCall(s, &s.s.writes, "ApplyRewind", func() (leases.Lease, error) { return s.Store.ApplyRewind(ctx, l) })
}

func (s *instrumentedStore) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	return countCall(s, &s.s.heartbeats, "Heartbeat", func() ([]leases.Member, error) { return s.mem.Heartbeat(ctx, row, m) })
}

func (s *instrumentedStore) Members(ctx context.Context, row int) ([]leases.Member, error) {
	return countCall(s, &s.s.memberReads, "Members", func() ([]leases.Member, error) { return s.mem.Members(ctx, row) })
}

func (s *instrumentedStore) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	return countCall(s, &s.s.writes, "ReplaceMember", func() ([]leases.Member, error) { return s.mem.ReplaceMember(ctx, row, seen, next) })
}

func (s *instrumentedStore) TakeAs(ctx context.Context, l leases.Lease, owner, inc string) (leases.Lease, error) {
	return countCall(s, &s.s.writes, "TakeAs", func() (leases.Lease, error) { return s.mem.TakeAs(ctx, l, owner, inc) })
}

func (s *instrumentedStore) CreateAs(ctx context.Context, key leases.Key, owner, inc string, cp leases.Checkpoint, rewind string) (leases.Lease, error) {
	return countCall(s, &s.s.writes, "CreateAs", func() (leases.Lease, error) { return s.mem.CreateAs(ctx, key, owner, inc, cp, rewind) })
}

func (s *instrumentedStore) LastRewind(ctx context.Context, key leases.Key) (leases.RewindRecord, error) {
	return countCall(s, &s.s.reads, "LastRewind", func() (leases.RewindRecord, error) { return s.mem.LastRewind(ctx, key) })
}

func (s *instrumentedStore) MarkStream(ctx context.Context, stream, token string) (string, error) {
	return countCall(s, &s.s.writes, "MarkStream", func() (string, error) { return s.mem.MarkStream(ctx, stream, token) })
}

func (s *instrumentedStore) MarkTaken(ctx context.Context, key leases.Key, token string) (string, error) {
	return countCall(s, &s.s.writes, "MarkTaken", func() (string, error) { return s.mem.MarkTaken(ctx, key, token) })
}

func (s *instrumentedStore) StreamMark(ctx context.Context, stream string) (string, error) {
	return countCall(s, &s.s.reads, "StreamMark", func() (string, error) { return s.mem.StreamMark(ctx, stream) })
}

func (s *instrumentedStore) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	return countCall(s, &s.s.writes, "Join", func() ([]leases.Member, error) { return s.mem.Join(ctx, row, m) })
}

func (s *instrumentedStore) Header(ctx context.Context) (leases.MemberHeader, error) {
	return countCall(s, &s.s.memberReads, "Header", func() (leases.MemberHeader, error) { return s.mem.Header(ctx) })
}

func (s *instrumentedStore) BumpRow(ctx context.Context, row int) error {
	_, err := countCall(s, &s.s.writes, "BumpRow", func() (struct{}, error) { return struct{}{}, s.mem.BumpRow(ctx, row) })
	return err
}

func (s *instrumentedStore) ReportVanished(ctx context.Context) error {
	_, err := countCall(s, &s.s.writes, "ReportVanished", func() (struct{}, error) { return struct{}{}, s.mem.ReportVanished(ctx) })
	return err
}
