// Package memory is an in-memory leases.Store for tests and for a service
// that runs as a single instance.
//
// Its rows live in one process and vanish with it: several instances of a
// service cannot share it, and checkpoints do not survive a restart. Use the
// dynamo store for anything else.
//
// Store implements leases.Membership: its membership rows (one map of
// entries by owner per row, absent until the first join) and its header
// (a version per row and the vanished counter) are kept beside the lease
// rows, under the same lock, and no lease key can name them.
package memory

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// Store is an in-memory leases.Store. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	rows     map[leases.Key]leases.Lease
	members  map[int]map[string]leases.Member // membership row -> owner -> entry
	header   map[int]int64                    // membership row -> roster version
	vanished int64
	born     int64                              // MemberHeader.Born
	rewinds  map[leases.Key]leases.RewindRecord // the last operator's rewind of each shard
	marks    map[string]leases.Mark             // stream -> its mark (MarkStream)
	taken    map[leases.Key]string              // row -> its taken mark's token (MarkTaken)
}

var (
	_ leases.Store      = (*Store)(nil)
	_ leases.Checker    = (*Store)(nil)
	_ leases.Membership = (*Store)(nil)
)

// New returns an empty Store: a table that never had an earlier one, so
// members start its streams at once (leases.BornNoPredecessor; Clear makes
// it a recreated table).
func New() *Store {
	return &Store{born: leases.BornNoPredecessor, rows: make(map[leases.Key]leases.Lease), members: make(map[int]map[string]leases.Member), header: make(map[int]int64), rewinds: make(map[leases.Key]leases.RewindRecord), marks: make(map[string]leases.Mark), taken: make(map[leases.Key]string)}
}

// Check implements leases.Checker. A memory store has nothing to
// misconfigure: Check always returns nil, whatever ctx.
func (s *Store) Check(context.Context) error { return nil }

// Get implements leases.Store.
func (s *Store) Get(ctx context.Context, key leases.Key) (leases.Lease, error) {
	if err := begin(ctx, key); err != nil {
		return leases.Lease{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.rows[key]
	if !ok {
		return leases.Lease{}, fmt.Errorf("memory: get %s: %w", key, leases.ErrNotFound)
	}
	return l, nil
}

// Create implements leases.Store.
func (s *Store) Create(ctx context.Context, key leases.Key) (leases.Lease, error) {
	if err := begin(ctx, key); err != nil {
		return leases.Lease{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.rows[key]; ok {
		return leases.Lease{}, &leases.ConflictError{Op: "Create", Key: key}
	}
	l := leases.Lease{Key: key, Counter: 1, Token: token()}
	if rec, ok := s.rewinds[key]; ok {
		l.Checkpoint, l.Rewind = rec.To, rec.ID // at the shard's last rewind (see leases.Store.Create)
	}
	s.rows[key] = l
	return l, nil
}

// Checkpoint implements leases.Store.
func (s *Store) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	if cp.Sequence == "" {
		return leases.Lease{}, fmt.Errorf("memory: checkpoint %s: empty sequence number", l.Key)
	}
	return s.write("Checkpoint", l, true, func(r *leases.Lease) error {
		r.Checkpoint = cp
		return nil
	})
}

// Release implements leases.Store.
func (s *Store) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	return s.write("Release", l, true, func(r *leases.Lease) error {
		r.Owner = ""
		r.Incarnation = ""
		if !cp.IsZero() {
			r.Checkpoint = cp
		}
		return nil
	})
}

// Rewind implements leases.Store.
func (s *Store) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	if cp.Sequence == "" {
		return leases.Lease{}, fmt.Errorf("memory: rewind %s: empty sequence number", l.Key)
	}
	id := driver.NewRewindID(time.Now())
	record := func(r *leases.Lease) {
		r.Rewind = id
		s.rewinds[l.Key] = leases.RewindRecord{ID: id, To: cp} // under mu, with the row's write
	}
	if l.Owner == "" {
		return s.write("Rewind", l, false, func(r *leases.Lease) error {
			if r.Owner != "" {
				return errFree
			}
			r.Checkpoint = cp
			r.RewindTo = leases.Checkpoint{} // a request left pending by an earlier holder is superseded
			record(r)
			return nil
		})
	}
	return s.write("Rewind", l, true, func(r *leases.Lease) error {
		r.RewindTo = cp
		record(r)
		return nil
	})
}

// LastRewind implements leases.Membership.
func (s *Store) LastRewind(ctx context.Context, key leases.Key) (leases.RewindRecord, error) {
	if err := begin(ctx, key); err != nil {
		return leases.RewindRecord{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rewinds[key], nil
}

// MarkStream implements leases.Membership. Since is kept to the
// millisecond, as the DynamoDB store keeps it.
func (s *Store) MarkStream(ctx context.Context, stream string, m leases.Mark) (leases.Mark, error) {
	if err := beginMark(ctx, stream, m, true); err != nil {
		return leases.Mark{}, err
	}
	if !m.Since.IsZero() {
		m.Since = time.UnixMilli(m.Since.UnixMilli())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.marks[stream]; ok {
		return cur, nil
	}
	s.marks[stream] = m
	return m, nil
}

// MarkTaken implements leases.Membership.
func (s *Store) MarkTaken(ctx context.Context, key leases.Key, token string) (string, error) {
	if err := begin(ctx, key); err != nil {
		return "", err
	}
	if err := leases.ValidateTakenMark(key, token); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.taken[key]; ok {
		return cur, nil
	}
	s.taken[key] = token
	return token, nil
}

// StreamMark implements leases.Membership.
func (s *Store) StreamMark(ctx context.Context, stream string) (leases.Mark, error) {
	if err := beginMark(ctx, stream, leases.Mark{}, false); err != nil {
		return leases.Mark{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marks[stream], nil
}

// beginMark validates a mark's arguments (see leases.ValidateMark) and
// refuses a context that is done.
func beginMark(ctx context.Context, stream string, m leases.Mark, write bool) error {
	if err := leases.ValidateMark(stream, m, write); err != nil {
		return err
	}
	return ctx.Err()
}

// ApplyRewind implements leases.Store.
func (s *Store) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	return s.write("ApplyRewind", l, true, func(r *leases.Lease) error {
		if r.RewindTo.Sequence == "" {
			return errFree
		}
		r.Checkpoint, r.RewindTo = r.RewindTo, leases.Checkpoint{}
		return nil
	})
}

// errFree makes write report a conflict: the row is not in the state the
// write is conditional on.
var errFree = errors.New("condition")

// write applies change to the row of l.Key if its counter is l.Counter, its
// token l.Token (when that is not empty) and,
// when holder is set, its owner is the non-empty l.Owner and its incarnation
// is l.Incarnation, when that is not empty.
func (s *Store) write(op string, l leases.Lease, holder bool, change func(*leases.Lease) error) (leases.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[l.Key]
	if !ok {
		return leases.Lease{}, fmt.Errorf("memory: %s %s: %w", op, l.Key, leases.ErrNotFound)
	}
	conflict := &leases.ConflictError{Op: op, Key: l.Key, ExpectedCounter: l.Counter}
	if holder {
		conflict.ExpectedOwner, conflict.ExpectedIncarnation = l.Owner, l.Incarnation
		if l.Owner == "" || r.Owner != l.Owner || (l.Incarnation != "" && r.Incarnation != l.Incarnation) {
			return leases.Lease{}, conflict
		}
	}
	if r.Counter != l.Counter || (l.Token != "" && r.Token != l.Token) {
		// A token names one version of the row: a row deleted and created
		// again restarts its counter but never its token.
		return leases.Lease{}, conflict
	}
	if change(&r) != nil {
		return leases.Lease{}, conflict
	}
	if holder {
		r.Recovered = l.Recovered   // the holder's copy decides (see leases.Lease.Recovered)
		r.Throughput = l.Throughput // as measured by the holder (see leases.Lease.Throughput)
	}
	r.Counter++
	r.Token = token()
	s.rows[l.Key] = r
	return r, nil
}

func begin(ctx context.Context, key leases.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return leases.ValidateLeaseKey(key)
}

func token() string {
	return rand.Text()[:16]
}

// TakeAs implements leases.Membership.
func (s *Store) TakeAs(ctx context.Context, l leases.Lease, owner, incarnation string) (leases.Lease, error) {
	if err := begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	if err := leases.ValidateMember(leases.Member{Owner: owner, Incarnation: incarnation}); err != nil {
		return leases.Lease{}, err
	}
	return s.write("TakeAs", l, false, func(r *leases.Lease) error {
		if l.Token == "" && (r.Owner != l.Owner || r.Incarnation != l.Incarnation) {
			return leases.ErrConflict // another holder at the same counter: a recreated row
		}
		r.Owner = owner
		r.Incarnation = incarnation
		if !l.Checkpoint.IsZero() {
			r.Checkpoint = l.Checkpoint // see leases.Membership.TakeAs
			if l.Rewind != "" {
				r.Rewind = l.Rewind
			}
		}
		return nil
	})
}

// lockMembers checks a write of entry m on membership row row, and locks
// the store (the caller unlocks it): the row's entries.
func (s *Store) lockMembers(ctx context.Context, row int, m leases.Member) (map[string]leases.Member, error) {
	if err := beginMember(ctx, row); err != nil {
		return nil, err
	}
	if err := leases.ValidateMember(m); err != nil {
		return nil, err
	}
	s.mu.Lock()
	return s.members[row], nil
}

// Join implements leases.Membership.
func (s *Store) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	entries, err := s.lockMembers(ctx, row, m)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if cur, ok := entries[m.Owner]; ok {
		if cur == m {
			return sortedMembers(entries), nil // our own join, landed before
		}
		return nil, &leases.MemberConflictError{Op: "Join", Row: row, Owner: m.Owner, Current: cur}
	}
	if len(entries) >= driver.RowCapacity {
		return nil, &leases.MemberConflictError{Op: "Join", Row: row, Owner: m.Owner, Full: true}
	}
	if entries == nil {
		entries = make(map[string]leases.Member)
		s.members[row] = entries
	}
	entries[m.Owner] = m
	return sortedMembers(entries), nil
}

// Heartbeat implements leases.Membership.
func (s *Store) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	entries, err := s.lockMembers(ctx, row, m)
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	cur, ok := entries[m.Owner]
	if ok && cur == m {
		return sortedMembers(entries), nil // written already: a resent heartbeat
	}
	if !ok || cur.Incarnation != m.Incarnation || cur.Heartbeat >= m.Heartbeat || cur.Notice != m.Notice || (cur.Leaving && !m.Leaving) {
		return nil, &leases.MemberConflictError{Op: "Heartbeat", Row: row, Owner: m.Owner, Current: cur}
	}
	entries[m.Owner] = m
	return sortedMembers(entries), nil
}

// Header implements leases.Membership.
func (s *Store) Header(ctx context.Context) (leases.MemberHeader, error) {
	if err := ctx.Err(); err != nil {
		return leases.MemberHeader{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return leases.MemberHeader{Rows: maps.Clone(s.header), Vanished: s.vanished, Born: s.born}, nil
}

// BumpRow implements leases.Membership.
func (s *Store) BumpRow(ctx context.Context, row int) error {
	if err := beginMember(ctx, row); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header[row]++
	return nil
}

// ReportVanished implements leases.Membership.
func (s *Store) ReportVanished(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vanished++
	return nil
}

// Members implements leases.Membership.
func (s *Store) Members(ctx context.Context, row int) ([]leases.Member, error) {
	if err := beginMember(ctx, row); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedMembers(s.members[row]), nil
}

// ReplaceMember implements leases.Membership. An entry that already is next
// (absent, when next.Owner is empty) counts as replaced, as in every store.
func (s *Store) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	if err := beginMember(ctx, row); err != nil {
		return nil, err
	}
	if err := leases.ValidateReplaceMember(seen, next); err != nil {
		return nil, err
	}
	if next.Owner == "" {
		next = leases.Member{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	entries := s.members[row]
	cur, ok := entries[seen.Owner]
	switch {
	case ok && cur.Incarnation == seen.Incarnation && cur.Heartbeat == seen.Heartbeat:
		if next.Owner == "" {
			delete(entries, seen.Owner)
		} else {
			entries[seen.Owner] = next
		}
	case cur != next: // cur is the zero Member when absent, like an empty next
		return nil, &leases.MemberConflictError{Op: "ReplaceMember", Row: row, Owner: seen.Owner, Current: cur}
	}
	return sortedMembers(entries), nil
}

func beginMember(ctx context.Context, row int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return leases.ValidateMemberRow(row)
}

// sortedMembers returns a copy of entries sorted by owner; nil when there
// are none.
func sortedMembers(entries map[string]leases.Member) []leases.Member {
	if len(entries) == 0 {
		return nil
	}
	return slices.SortedFunc(maps.Values(entries), func(a, b leases.Member) int { return strings.Compare(a.Owner, b.Owner) })
}

// CreateAs implements leases.Membership.
func (s *Store) CreateAs(ctx context.Context, key leases.Key, owner, incarnation string, cp leases.Checkpoint, rewind string) (leases.Lease, error) {
	if err := begin(ctx, key); err != nil {
		return leases.Lease{}, err
	}
	free := owner == "" && incarnation == ""
	if !free {
		if err := leases.ValidateMember(leases.Member{Owner: owner, Incarnation: incarnation}); err != nil {
			return leases.Lease{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.rows[key]; ok {
		return leases.Lease{}, &leases.ConflictError{Op: "CreateAs", Key: key}
	}
	l := leases.Lease{Key: key, Owner: owner, Incarnation: incarnation, Checkpoint: cp, Rewind: rewind, Counter: 1, Token: token()}
	if free {
		l.Recovered = l.Token // recreated free after it vanished (see leases.Lease.Recovered)
	}
	s.rows[key] = l
	return l, nil
}

// Delete removes the row of key, as an operator deleting the item would:
// for tests of a row that vanishes under its holder. It reports whether
// the row existed.
func (s *Store) Delete(key leases.Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.rows[key]
	delete(s.rows, key)
	return ok
}

// Clear removes every lease row and membership row, as a table deleted and
// created again empty would: for tests of a fleet that outlives its table.
// The table is born anew (leases.MemberHeader.Born is now): a holder of the
// table as it was may deliver on until its fence.
func (s *Store) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.born = time.Now().UnixMilli()
	s.rows = make(map[leases.Key]leases.Lease)
	s.members = make(map[int]map[string]leases.Member)
	s.header = make(map[int]int64)
	s.vanished = 0
	s.rewinds = make(map[leases.Key]leases.RewindRecord)
	s.marks = make(map[string]leases.Mark)
	s.taken = make(map[leases.Key]string)
}
