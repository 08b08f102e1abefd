package observe

import (
	"context"
	"sync/atomic"

	"github.com/kinesislease/kinesislease/leases"
)

// Stats counts a Group's store calls.
type Stats struct {
	// Reads counts the lease rows' reads (Get, LastRewind, StreamMark);
	// Writes every write but heartbeats; Heartbeats this instance's
	// heartbeats; MemberReads the reads of the membership rows and header.
	Reads, Writes, Heartbeats, MemberReads atomic.Int64
}

// Store is the Group's view of its lease store: every call is
// counted (Stats) and, when call hooks are set, timed for them. It is both
// the Group's store and its mem (engine.NewGroup), which checks that it
// implements leases.Store and leases.Membership.
type Store struct {
	leases.Store
	mem leases.Membership
	h   *Hooks
	s   *Stats
}

// NewStore returns store and mem (the same lease store, as its two
// interfaces) counting every call in s and timing it for h's call hooks.
func NewStore(store leases.Store, mem leases.Membership, h *Hooks, s *Stats) *Store {
	return &Store{Store: store, mem: mem, h: h, s: s}
}

// countCall counts one call in n and times it for the hooks.
func countCall[T any](s *Store, n *atomic.Int64, op string, fn func() (T, error)) (T, error) {
	n.Add(1)
	if len(s.h.call) == 0 {
		return fn()
	}
	return timed(s.h, "dynamodb", op, fn)
}

// Get counts a read and calls the store's Get.
func (s *Store) Get(ctx context.Context, key leases.Key) (leases.Lease, error) {
	return countCall(s, &s.s.Reads, "Get", func() (leases.Lease, error) { return s.Store.Get(ctx, key) })
}

// Create counts a write and calls the store's Create.
func (s *Store) Create(ctx context.Context, key leases.Key) (leases.Lease, error) {
	return countCall(s, &s.s.Writes, "Create", func() (leases.Lease, error) { return s.Store.Create(ctx, key) })
}

// Checkpoint counts a write and calls the store's Checkpoint.
func (s *Store) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return countCall(s, &s.s.Writes, "Checkpoint", func() (leases.Lease, error) { return s.Store.Checkpoint(ctx, l, cp) })
}

// Release counts a write and calls the store's Release.
func (s *Store) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return countCall(s, &s.s.Writes, "Release", func() (leases.Lease, error) { return s.Store.Release(ctx, l, cp) })
}

// Rewind counts a write and calls the store's Rewind.
func (s *Store) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return countCall(s, &s.s.Writes, "Rewind", func() (leases.Lease, error) { return s.Store.Rewind(ctx, l, cp) })
}

// ApplyRewind counts a write and calls the store's ApplyRewind.
func (s *Store) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	return countCall(s, &s.s.Writes, "ApplyRewind", func() (leases.Lease, error) { return s.Store.ApplyRewind(ctx, l) })
}

// Heartbeat counts a heartbeat and calls the membership's Heartbeat.
func (s *Store) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	return countCall(s, &s.s.Heartbeats, "Heartbeat", func() ([]leases.Member, error) { return s.mem.Heartbeat(ctx, row, m) })
}

// Members counts a member read and calls the membership's Members.
func (s *Store) Members(ctx context.Context, row int) ([]leases.Member, error) {
	return countCall(s, &s.s.MemberReads, "Members", func() ([]leases.Member, error) { return s.mem.Members(ctx, row) })
}

// ReplaceMember counts a write and calls the membership's ReplaceMember.
func (s *Store) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	return countCall(s, &s.s.Writes, "ReplaceMember", func() ([]leases.Member, error) { return s.mem.ReplaceMember(ctx, row, seen, next) })
}

// TakeAs counts a write and calls the membership's TakeAs.
func (s *Store) TakeAs(ctx context.Context, l leases.Lease, owner, inc string) (leases.Lease, error) {
	return countCall(s, &s.s.Writes, "TakeAs", func() (leases.Lease, error) { return s.mem.TakeAs(ctx, l, owner, inc) })
}

// CreateAs counts a write and calls the membership's CreateAs.
func (s *Store) CreateAs(ctx context.Context, key leases.Key, owner, inc string, cp leases.Checkpoint, rewind string) (leases.Lease, error) {
	return countCall(s, &s.s.Writes, "CreateAs", func() (leases.Lease, error) { return s.mem.CreateAs(ctx, key, owner, inc, cp, rewind) })
}

// LastRewind counts a read and calls the membership's LastRewind.
func (s *Store) LastRewind(ctx context.Context, key leases.Key) (leases.RewindRecord, error) {
	return countCall(s, &s.s.Reads, "LastRewind", func() (leases.RewindRecord, error) { return s.mem.LastRewind(ctx, key) })
}

// MarkStream counts a write and calls the membership's MarkStream.
func (s *Store) MarkStream(ctx context.Context, stream string, m leases.Mark) (leases.Mark, error) {
	return countCall(s, &s.s.Writes, "MarkStream", func() (leases.Mark, error) { return s.mem.MarkStream(ctx, stream, m) })
}

// MarkTaken counts a write and calls the membership's MarkTaken.
func (s *Store) MarkTaken(ctx context.Context, key leases.Key, token string) (string, error) {
	return countCall(s, &s.s.Writes, "MarkTaken", func() (string, error) { return s.mem.MarkTaken(ctx, key, token) })
}

// StreamMark counts a read and calls the membership's StreamMark.
func (s *Store) StreamMark(ctx context.Context, stream string) (leases.Mark, error) {
	return countCall(s, &s.s.Reads, "StreamMark", func() (leases.Mark, error) { return s.mem.StreamMark(ctx, stream) })
}

// Join counts a write and calls the membership's Join.
func (s *Store) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	return countCall(s, &s.s.Writes, "Join", func() ([]leases.Member, error) { return s.mem.Join(ctx, row, m) })
}

// Header counts a member read and calls the membership's Header.
func (s *Store) Header(ctx context.Context) (leases.MemberHeader, error) {
	return countCall(s, &s.s.MemberReads, "Header", func() (leases.MemberHeader, error) { return s.mem.Header(ctx) })
}

// BumpRow counts a write and calls the membership's BumpRow.
func (s *Store) BumpRow(ctx context.Context, row int) error {
	_, err := countCall(s, &s.s.Writes, "BumpRow", func() (struct{}, error) { return struct{}{}, s.mem.BumpRow(ctx, row) })
	return err
}

// ReportVanished counts a write and calls the membership's ReportVanished.
func (s *Store) ReportVanished(ctx context.Context) error {
	_, err := countCall(s, &s.s.Writes, "ReportVanished", func() (struct{}, error) { return struct{}{}, s.mem.ReportVanished(ctx) })
	return err
}
