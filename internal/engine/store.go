package engine

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// groupStats counts a Group's store calls.
type groupStats struct {
	reads, writes, heartbeats, memberReads atomic.Int64
}

// LeaseStoreCalls returns the store calls made so far: lease rows and membership rows.
func (g *Group) LeaseStoreCalls() kltype.LeaseStoreCalls {
	return kltype.LeaseStoreCalls{
		Reads:      g.stats.reads.Load() + g.stats.memberReads.Load(),
		Writes:     g.stats.writes.Load() + g.stats.heartbeats.Load(),
		Heartbeats: g.stats.heartbeats.Load(), MemberReads: g.stats.memberReads.Load(),
	}
}

// instrumentedStore is the Group's view of its lease store: every call is
// counted (Stats) and, when call hooks are set, timed for them; every call
// on a lease row that found the row existing is noted in seen.
type instrumentedStore struct {
	leases.Store
	mem  leases.Membership
	h    *hooks
	s    *groupStats
	seen *existence
}

// existence is when each lease row was last found to exist by a call of
// this instance (any call on the row that succeeded, a read or a write,
// or a write whose condition failed: a conflict; whatever code path made
// it): the return of that call, on mono().
//
// A row seen missing by two reads close together is taken as missing in
// between (streamState.setRow), which a call that found it existing since
// the first of them disproves: the row was recreated meanwhile, perhaps by
// a member that delivers it now, and a read finding it missing again soon
// after (deleted again) must date its absence from then, not from before.
// Not every call that finds a row existing goes on to record it in the
// stream's rows (releaseOrphan's re-read after a conflict, recheckReleased,
// vanishedOrphan's CreateAs and Release did not: seed 409059 took a row 0.1 s
// after it was deleted under the live member that had recreated it, its
// absence dated from a sighting 14 s before; and releaseOrphan's Release
// that met the recreated row, a conflict: seed 407733), so the store notes
// them all.
type existence struct {
	mu sync.Mutex
	at map[leases.Key]int64
	// resetAt (on mono()) is when the last header read that showed
	// another member's recreation of a vanished row returned: a row found
	// missing by a read sent before then may have been recreated (and
	// deleted again) since, unseen by this instance, so that read starts
	// no wait that a later one may join (see streamState.setRow).
	// By bucket (leases.RecreatedBucket) when more than one row of the
	// bucket was recreated between two header reads, else by key
	// (keyReset, under mu).
	resetAt  [leases.RecreatedBuckets]atomic.Int64
	keyReset map[leases.Key]int64
	// checkedAt (on mono()) is when the last header read that was
	// applied was sent: a read of a missing row that returned before then
	// is known to precede no recreation that header did not show (see
	// rowState.missingFor).
	checkedAt atomic.Int64
}

func newExistence() *existence {
	e := &existence{at: map[leases.Key]int64{}, keyReset: map[leases.Key]int64{}}
	for i := range e.resetAt {
		e.resetAt[i].Store(math.MinInt64) // none yet (mono() is negative in a synctest bubble)
	}
	e.checkedAt.Store(math.MinInt64)
	return e
}

// note records that a call on the row of key that returned err found the
// row existing if err is nil or a conflict. A conflict says the row exists
// (leases.ErrConflict; a write on a missing row is ErrNotFound), and were
// it ever said of a missing row, it would only make this instance wait
// longer before it recreates the row.
func (e *existence) note(key leases.Key, err error) {
	if err != nil && !errors.Is(err, leases.ErrConflict) {
		return
	}
	now := mono()
	e.mu.Lock()
	e.at[key] = now
	e.mu.Unlock()
}

// reset returns when this instance last learnt of another member's
// recreation of the row of key (see resetAt; math.MinInt64 for none).
func (e *existence) reset(key leases.Key) int64 {
	at := e.resetAt[leases.RecreatedBucket(key)].Load()
	e.mu.Lock()
	defer e.mu.Unlock()
	if k, ok := e.keyReset[key]; ok && k > at {
		return k
	}
	return at
}

// resetKey records that another member recreated the row of key, as a
// header read that returned at ret showed.
func (e *existence) resetKey(key leases.Key, ret int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.keyReset[key] = ret
}

// last returns when a call last found the row of key existing, and
// whether one ever did.
func (e *existence) last(key leases.Key) (int64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.at[key]
	return at, ok
}

// forget drops what is noted of the rows of stream (a stream removed).
func (e *existence) forget(stream string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.at {
		if k.Stream == stream {
			delete(e.at, k)
		}
	}
	for k := range e.keyReset {
		if k.Stream == stream {
			delete(e.keyReset, k)
		}
	}
}

var (
	_ leases.Store      = (*instrumentedStore)(nil)
	_ leases.Membership = (*instrumentedStore)(nil)
)

func newInstrumentedStore(s leases.Store, mem leases.Membership, h *hooks, stats *groupStats) *instrumentedStore {
	return &instrumentedStore{Store: s, mem: mem, h: h, s: stats, seen: newExistence()}
}

// call counts one call in n and times it for the hooks.
func call[T any](s *instrumentedStore, n *atomic.Int64, op string, fn func() (T, error)) (T, error) {
	n.Add(1)
	if len(s.h.call) == 0 {
		return fn()
	}
	start := time.Now()
	v, err := fn()
	s.h.onCall("dynamodb", op, start, err)
	return v, err
}

func (s *instrumentedStore) Get(ctx context.Context, key leases.Key) (leases.Lease, error) {
	l, err := call(s, &s.s.reads, "Get", func() (leases.Lease, error) { return s.Store.Get(ctx, key) })
	s.seen.note(key, err)
	return l, err
}

func (s *instrumentedStore) Create(ctx context.Context, key leases.Key) (leases.Lease, error) {
	l, err := call(s, &s.s.writes, "Create", func() (leases.Lease, error) { return s.Store.Create(ctx, key) })
	s.seen.note(key, err)
	return l, err
}

func (s *instrumentedStore) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	t, err := call(s, &s.s.writes, "Checkpoint", func() (leases.Lease, error) { return s.Store.Checkpoint(ctx, l, cp) })
	s.seen.note(l.Key, err)
	return t, err
}

func (s *instrumentedStore) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	t, err := call(s, &s.s.writes, "Release", func() (leases.Lease, error) { return s.Store.Release(ctx, l, cp) })
	s.seen.note(l.Key, err)
	return t, err
}

func (s *instrumentedStore) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	t, err := call(s, &s.s.writes, "Rewind", func() (leases.Lease, error) { return s.Store.Rewind(ctx, l, cp) })
	s.seen.note(l.Key, err)
	return t, err
}

func (s *instrumentedStore) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	t, err := call(s, &s.s.writes, "ApplyRewind", func() (leases.Lease, error) { return s.Store.ApplyRewind(ctx, l) })
	s.seen.note(l.Key, err)
	return t, err
}

func (s *instrumentedStore) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	return call(s, &s.s.heartbeats, "Heartbeat", func() ([]leases.Member, error) { return s.mem.Heartbeat(ctx, row, m) })
}

func (s *instrumentedStore) Members(ctx context.Context, row int) ([]leases.Member, error) {
	return call(s, &s.s.memberReads, "Members", func() ([]leases.Member, error) { return s.mem.Members(ctx, row) })
}

func (s *instrumentedStore) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	return call(s, &s.s.writes, "ReplaceMember", func() ([]leases.Member, error) { return s.mem.ReplaceMember(ctx, row, seen, next) })
}

func (s *instrumentedStore) TakeAs(ctx context.Context, l leases.Lease, owner, inc string) (leases.Lease, error) {
	t, err := call(s, &s.s.writes, "TakeAs", func() (leases.Lease, error) { return s.mem.TakeAs(ctx, l, owner, inc) })
	s.seen.note(l.Key, err)
	return t, err
}

func (s *instrumentedStore) CreateAs(ctx context.Context, key leases.Key, owner, inc string, cp leases.Checkpoint, rewind string) (leases.Lease, error) {
	t, err := call(s, &s.s.writes, "CreateAs", func() (leases.Lease, error) { return s.mem.CreateAs(ctx, key, owner, inc, cp, rewind) })
	s.seen.note(key, err)
	return t, err
}

func (s *instrumentedStore) LastRewind(ctx context.Context, key leases.Key) (leases.RewindRecord, error) {
	return call(s, &s.s.reads, "LastRewind", func() (leases.RewindRecord, error) { return s.mem.LastRewind(ctx, key) })
}

func (s *instrumentedStore) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	return call(s, &s.s.writes, "Join", func() ([]leases.Member, error) { return s.mem.Join(ctx, row, m) })
}

func (s *instrumentedStore) Header(ctx context.Context) (leases.MemberHeader, error) {
	return call(s, &s.s.memberReads, "Header", func() (leases.MemberHeader, error) { return s.mem.Header(ctx) })
}

func (s *instrumentedStore) BumpRow(ctx context.Context, row int) error {
	_, err := call(s, &s.s.writes, "BumpRow", func() (struct{}, error) { return struct{}{}, s.mem.BumpRow(ctx, row) })
	return err
}

func (s *instrumentedStore) ReportVanished(ctx context.Context) error {
	_, err := call(s, &s.s.writes, "ReportVanished", func() (struct{}, error) { return struct{}{}, s.mem.ReportVanished(ctx) })
	return err
}

func (s *instrumentedStore) ReportRecreated(ctx context.Context, key leases.Key) error {
	_, err := call(s, &s.s.writes, "ReportRecreated", func() (struct{}, error) { return struct{}{}, s.mem.ReportRecreated(ctx, key) })
	return err
}
