package sim

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/leases"
)

// Decision is what happens to one store call.
type Decision struct {
	// Delay is slept before the call reaches the store (the request's trip).
	// If the caller's context ends first, the call fails with its error and
	// changes nothing.
	Delay time.Duration
	// Err, if set, is returned after Delay instead of calling the store:
	// the write does not happen.
	Err error
	// LoseResponse applies the write, then throws its answer away: after
	// ResponseDelay the caller gets Lost (or, if Lost is nil, a
	// *ResponseLostError) although the row changed.
	LoseResponse bool
	Lost         error
	// ResponseDelay is slept after the store answered, before the caller
	// sees the answer (the response's trip). If the caller's context ends
	// first it gets the context's error, although the write happened.
	ResponseDelay time.Duration
	// Late, if positive, makes a write land late: its request is held up
	// in the network (a connection retransmitting) and reaches the store
	// Late after the call started (capped at MaxLate), applied on a
	// goroutine of its own whatever became of the caller meanwhile: its
	// context cancelled or past its deadline, the call retried, the caller
	// fenced, its process paused, stopped or dead. DynamoDB applies such a
	// request: its signature stays valid for minutes. The hooks see the
	// write when it lands (Late, then Apply or ApplyMembers).
	//
	// The caller gets what a client gets for a request never answered: it
	// waits until its context ends (and gets the context's error) or, if
	// Delay is positive, for Delay at most (its client's own timeout),
	// then gets Lost, or a *ResponseLostError with Late set if Lost is
	// nil. It never gets an answer, even if the write lands while it
	// waits: Err, LoseResponse and ResponseDelay are ignored.
	//
	// Only writes land late. On a read (Get, Members, Header, LastRewind)
	// Late is added to Delay: a late read is a slow one.
	Late time.Duration
}

// MaxLate caps Decision.Late: a late write lands at most this long after
// its call started.
//
// In a testing/synctest bubble a late write waits on the bubble's virtual
// clock, and a bubble whose test function returns while one is still
// pending panics (synctest: "main bubble goroutine has exited but blocked
// goroutines remain"): its clock stops once the function returns. So a
// test ends only once its late writes have landed (FaultStore.WaitLate,
// or a sleep of MaxLate: the simulations' worlds end with a minute of
// virtual time, checkLeftovers, longer than any late write of their plans)
// or after dropping the pending ones (FaultStore.DropLate: they never
// land). Outside a bubble a pending write simply lands later, on real
// time.
const MaxLate = time.Minute

// StoreHooks lets a test disturb and watch the calls of one FaultStore
// (one process's view of the shared table). Every hook may be nil.
type StoreHooks struct {
	// Decide is asked once at the start of every call; op is the Store or
	// Membership method's name, key the lease row's (MemberRowKey for a
	// membership row).
	Decide func(op string, key leases.Key) Decision
	// Stall blocks while the caller's process is stalled (a GC pause). It is
	// called when a call starts, before it reaches the store and before its
	// answer is returned, so a pause can catch a call at any of these points.
	Stall func()
	// Dead reports whether the caller's process is dead. A dead process's
	// calls never reach the store, and answers to calls it made before it
	// died are lost.
	Dead func() bool
	// Apply runs do, the call to the inner store, and returns its result. A
	// test uses it to serialize writes with its own bookkeeping (for example
	// to record every write that landed, whatever its caller later sees).
	// Nil calls do.
	Apply func(op string, l leases.Lease, do func() (leases.Lease, error)) (leases.Lease, error)
	// ApplyMembers is Apply for the calls on membership rows (Heartbeat,
	// Members, ReplaceMember; TakeAs writes a lease row and goes through
	// Apply): it runs do and returns its result. Nil calls do.
	ApplyMembers func(op string, row int, do func() ([]leases.Member, error)) ([]leases.Member, error)
	// Late is called on a late write's own goroutine as the write is about
	// to reach the store (Decision.Late), just before Apply or
	// ApplyMembers: op and key as Decide saw them, sent when the call
	// started. It may be nil.
	Late func(op string, key leases.Key, sent time.Time)
}

// FaultStore is one process's view of a shared leases.Store: it delays
// calls, fails them before they reach the store, loses the answers of
// writes that landed, lets writes land late (after their caller gave up,
// see Decision.Late), stalls while its process is paused and stops once its
// process is dead, as the hooks decide.
//
// It implements leases.Membership too, with the same fault kinds on the
// membership rows (the hooks see those calls under MemberRowKey); with an
// inner store that does not implement it, those calls fail with an error
// matching leases.ErrMisconfigured.
//
// Methods of leases.Store it does not know yet reach the inner store
// untouched (through the embedded interface); a test that records writes
// sees the gap in the row's counter.
type FaultStore struct {
	leases.Store
	hooks StoreHooks
	late  sync.WaitGroup // the late writes not landed yet

	dropMu sync.Mutex
	// drop is closed by DropLate. It is made by the first late write after
	// the last DropLate, on the caller's goroutine: in a synctest bubble,
	// a channel of the bubble, so that waiting on it is durably blocking.
	drop chan struct{}
}

// NewFaultStore returns a view of inner disturbed by hooks.
func NewFaultStore(inner leases.Store, hooks StoreHooks) *FaultStore {
	return &FaultStore{Store: inner, hooks: hooks}
}

var (
	_ leases.Store      = (*FaultStore)(nil)
	_ leases.Membership = (*FaultStore)(nil)
)

// WaitLate waits until every late write of s (Decision.Late) has landed
// (or was dropped).
func (s *FaultStore) WaitLate() { s.late.Wait() }

// DropLate drops every late write of s still pending: it never lands. It
// returns once their goroutines have ended.
func (s *FaultStore) DropLate() {
	s.dropMu.Lock()
	if s.drop != nil {
		close(s.drop)
		s.drop = nil
	}
	s.dropMu.Unlock()
	s.late.Wait()
}

// dropped returns the channel DropLate closes, making it if need be.
func (s *FaultStore) dropped() <-chan struct{} {
	s.dropMu.Lock()
	defer s.dropMu.Unlock()
	if s.drop == nil {
		s.drop = make(chan struct{})
	}
	return s.drop
}

// MemberRowKey is the key under which the hooks see the calls on membership
// row row (Heartbeat, Members, ReplaceMember): "#members" and the row, whose
// text form is driver.MemberKey(row).
func MemberRowKey(row int) leases.Key {
	return leases.Key{Stream: "#members", Shard: strconv.Itoa(row)}
}

func (s *FaultStore) stall() {
	if s.hooks.Stall != nil {
		s.hooks.Stall()
	}
}

func (s *FaultStore) dead() bool { return s.hooks.Dead != nil && s.hooks.Dead() }

// call runs one store call through the hooks; do makes it under the
// context it is given (the caller's, or for a late write one that does not
// end).
func (s *FaultStore) call(ctx context.Context, op string, l leases.Lease, do func(context.Context) (leases.Lease, error)) (leases.Lease, error) {
	apply := do
	if s.hooks.Apply != nil {
		apply = func(ctx context.Context) (leases.Lease, error) {
			return s.hooks.Apply(op, l, func() (leases.Lease, error) { return do(ctx) })
		}
	}
	return faultCall(ctx, s, op, l.Key, apply)
}

// isRead reports whether op only reads (never lands late).
func isRead(op string) bool {
	switch op {
	case "Get", "Members", "Header", "LastRewind", "StreamMark":
		return true
	}
	return false
}

// faultCall runs one call on the item of key through the hooks: delays,
// failures before the write, answers lost after the write (apply makes
// it, under the context it is given), writes landing late, stalls and
// death.
func faultCall[T any](ctx context.Context, s *FaultStore, op string, key leases.Key, apply func(context.Context) (T, error)) (T, error) {
	var zero T
	s.stall()
	if s.dead() {
		return zero, &InjectedError{Op: op, Key: key, Msg: "process is dead"}
	}
	sent := time.Now()
	var d Decision
	if s.hooks.Decide != nil {
		d = s.hooks.Decide(op, key)
	}
	if d.Late > 0 && isRead(op) {
		d.Delay, d.Late = d.Delay+d.Late, 0
	}
	if d.Late > 0 {
		return lateCall(ctx, s, op, key, sent, d, apply)
	}
	if err := backoff.Sleep(ctx, d.Delay); err != nil {
		return zero, err
	}
	s.stall()
	if s.dead() {
		return zero, &InjectedError{Op: op, Key: key, Msg: "process is dead"}
	}
	if d.Err != nil {
		return zero, d.Err
	}
	got, err := apply(ctx)
	werr := backoff.Sleep(ctx, d.ResponseDelay)
	s.stall()
	switch {
	case s.dead():
		return zero, &ResponseLostError{Op: op, Key: key}
	case d.LoseResponse:
		if d.Lost != nil {
			return zero, d.Lost
		}
		return zero, &ResponseLostError{Op: op, Key: key}
	case werr != nil:
		return zero, werr
	}
	return got, err
}

// lateCall runs a write that lands late (see Decision.Late): apply on a
// goroutine of its own d.Late after sent, under a context that does not
// end, while the caller waits for an answer that never comes.
func lateCall[T any](ctx context.Context, s *FaultStore, op string, key leases.Key, sent time.Time, d Decision, apply func(context.Context) (T, error)) (T, error) {
	var zero T
	lctx := context.WithoutCancel(ctx)
	at := sent.Add(min(d.Late, MaxLate))
	drop := s.dropped()
	s.late.Go(func() {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-t.C:
		case <-drop:
			return
		}
		if s.hooks.Late != nil {
			s.hooks.Late(op, key, sent)
		}
		apply(lctx) //nolint:errcheck // nobody waits for the answer
	})
	var err error
	if d.Delay > 0 {
		err = backoff.Sleep(ctx, d.Delay)
	} else {
		<-ctx.Done()
		err = ctx.Err()
	}
	s.stall()
	switch {
	case err != nil:
		return zero, err
	case d.Lost != nil:
		return zero, d.Lost
	}
	return zero, &ResponseLostError{Op: op, Key: key, Late: true}
}

// Get implements leases.Store.
func (s *FaultStore) Get(ctx context.Context, key leases.Key) (leases.Lease, error) {
	return s.call(ctx, "Get", leases.Lease{Key: key}, func(ctx context.Context) (leases.Lease, error) { return s.Store.Get(ctx, key) })
}

// Create implements leases.Store.
func (s *FaultStore) Create(ctx context.Context, key leases.Key) (leases.Lease, error) {
	return s.call(ctx, "Create", leases.Lease{Key: key}, func(ctx context.Context) (leases.Lease, error) { return s.Store.Create(ctx, key) })
}

// Checkpoint implements leases.Store.
func (s *FaultStore) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return s.call(ctx, "Checkpoint", l, func(ctx context.Context) (leases.Lease, error) { return s.Store.Checkpoint(ctx, l, cp) })
}

// Release implements leases.Store.
func (s *FaultStore) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return s.call(ctx, "Release", l, func(ctx context.Context) (leases.Lease, error) { return s.Store.Release(ctx, l, cp) })
}

// Rewind implements leases.Store.
func (s *FaultStore) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	return s.call(ctx, "Rewind", l, func(ctx context.Context) (leases.Lease, error) { return s.Store.Rewind(ctx, l, cp) })
}

// ApplyRewind implements leases.Store.
func (s *FaultStore) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	return s.call(ctx, "ApplyRewind", l, func(ctx context.Context) (leases.Lease, error) { return s.Store.ApplyRewind(ctx, l) })
}

// membership returns the inner store's membership rows, or an error
// matching leases.ErrMisconfigured when the inner store has none.
func (s *FaultStore) membership() (leases.Membership, error) {
	m, ok := s.Store.(leases.Membership)
	if !ok {
		return nil, fmt.Errorf("sim: %T does not implement leases.Membership: %w", s.Store, leases.ErrMisconfigured)
	}
	return m, nil
}

// callMembers runs one call on membership row row through the hooks, with
// the fault kinds of call; do makes it under the context it is given.
func (s *FaultStore) callMembers(ctx context.Context, op string, row int, do func(context.Context) ([]leases.Member, error)) ([]leases.Member, error) {
	apply := do
	if s.hooks.ApplyMembers != nil {
		apply = func(ctx context.Context) ([]leases.Member, error) {
			return s.hooks.ApplyMembers(op, row, func() ([]leases.Member, error) { return do(ctx) })
		}
	}
	return faultCall(ctx, s, op, MemberRowKey(row), apply)
}

// Heartbeat implements leases.Membership.
func (s *FaultStore) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	mem, err := s.membership()
	if err != nil {
		return nil, err
	}
	return s.callMembers(ctx, "Heartbeat", row, func(ctx context.Context) ([]leases.Member, error) { return mem.Heartbeat(ctx, row, m) })
}

// Members implements leases.Membership.
func (s *FaultStore) Members(ctx context.Context, row int) ([]leases.Member, error) {
	mem, err := s.membership()
	if err != nil {
		return nil, err
	}
	return s.callMembers(ctx, "Members", row, func(ctx context.Context) ([]leases.Member, error) { return mem.Members(ctx, row) })
}

// ReplaceMember implements leases.Membership.
func (s *FaultStore) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	mem, err := s.membership()
	if err != nil {
		return nil, err
	}
	return s.callMembers(ctx, "ReplaceMember", row, func(ctx context.Context) ([]leases.Member, error) { return mem.ReplaceMember(ctx, row, seen, next) })
}

// TakeAs implements leases.Membership. It writes a lease row: the hooks see
// it like the other lease-row writes (Decide with the row's key, Apply).
func (s *FaultStore) TakeAs(ctx context.Context, l leases.Lease, owner, incarnation string) (leases.Lease, error) {
	mem, err := s.membership()
	if err != nil {
		return leases.Lease{}, err
	}
	return s.call(ctx, "TakeAs", l, func(ctx context.Context) (leases.Lease, error) { return mem.TakeAs(ctx, l, owner, incarnation) })
}

// CreateAs implements leases.Membership.
func (s *FaultStore) CreateAs(ctx context.Context, key leases.Key, owner, incarnation string, cp leases.Checkpoint, rewind string) (leases.Lease, error) {
	mem, err := s.membership()
	if err != nil {
		return leases.Lease{}, err
	}
	return s.call(ctx, "CreateAs", leases.Lease{Key: key}, func(ctx context.Context) (leases.Lease, error) {
		return mem.CreateAs(ctx, key, owner, incarnation, cp, rewind)
	})
}

// Join implements leases.Membership.
func (s *FaultStore) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	mem, err := s.membership()
	if err != nil {
		return nil, err
	}
	return s.callMembers(ctx, "Join", row, func(ctx context.Context) ([]leases.Member, error) { return mem.Join(ctx, row, m) })
}

// headerRow is the row number the hooks see header calls under (-1).
const headerRow = -1

// LastRewind implements leases.Membership.
func (s *FaultStore) LastRewind(ctx context.Context, key leases.Key) (leases.RewindRecord, error) {
	mem, err := s.membership()
	if err != nil {
		return leases.RewindRecord{}, err
	}
	return faultCall(ctx, s, "LastRewind", key, func(ctx context.Context) (leases.RewindRecord, error) { return mem.LastRewind(ctx, key) })
}

// MarkKey is the key the hooks see a stream's mark under (MarkStream,
// StreamMark): "#stream" and the stream.
func MarkKey(stream string) leases.Key { return leases.Key{Stream: "#stream", Shard: stream} }

// MarkStream implements leases.Membership; the hooks see it as a call on
// MarkKey(stream). It may land late like any write.
func (s *FaultStore) MarkStream(ctx context.Context, stream string, m leases.Mark) (leases.Mark, error) {
	mem, err := s.membership()
	if err != nil {
		return leases.Mark{}, err
	}
	return faultCall(ctx, s, "MarkStream", MarkKey(stream), func(ctx context.Context) (leases.Mark, error) { return mem.MarkStream(ctx, stream, m) })
}

// MarkTaken implements leases.Membership; the hooks see it as a write of
// key's row (a row's taken mark is deleted with the table, not with the
// row). It may land late like any write.
func (s *FaultStore) MarkTaken(ctx context.Context, key leases.Key, token string) (string, error) {
	mem, err := s.membership()
	if err != nil {
		return "", err
	}
	return faultCall(ctx, s, "MarkTaken", key, func(ctx context.Context) (string, error) { return mem.MarkTaken(ctx, key, token) })
}

// StreamMark implements leases.Membership; the hooks see it as a call on
// MarkKey(stream).
func (s *FaultStore) StreamMark(ctx context.Context, stream string) (leases.Mark, error) {
	mem, err := s.membership()
	if err != nil {
		return leases.Mark{}, err
	}
	return faultCall(ctx, s, "StreamMark", MarkKey(stream), func(ctx context.Context) (leases.Mark, error) { return mem.StreamMark(ctx, stream) })
}

// Header implements leases.Membership; the hooks see it as a call on
// MemberRowKey(-1).
func (s *FaultStore) Header(ctx context.Context) (leases.MemberHeader, error) {
	mem, err := s.membership()
	if err != nil {
		return leases.MemberHeader{}, err
	}
	var h leases.MemberHeader
	_, err = s.callMembers(ctx, "Header", headerRow, func(ctx context.Context) ([]leases.Member, error) {
		var err error
		h, err = mem.Header(ctx)
		return nil, err
	})
	return h, err
}

// BumpRow implements leases.Membership; the hooks see it as a call on
// MemberRowKey(-1).
func (s *FaultStore) BumpRow(ctx context.Context, row int) error {
	mem, err := s.membership()
	if err != nil {
		return err
	}
	_, err = s.callMembers(ctx, "BumpRow", headerRow, func(ctx context.Context) ([]leases.Member, error) { return nil, mem.BumpRow(ctx, row) })
	return err
}

// ReportVanished implements leases.Membership; the hooks see it as a call
// on MemberRowKey(-1).
func (s *FaultStore) ReportVanished(ctx context.Context) error {
	mem, err := s.membership()
	if err != nil {
		return err
	}
	_, err = s.callMembers(ctx, "ReportVanished", headerRow, func(ctx context.Context) ([]leases.Member, error) { return nil, mem.ReportVanished(ctx) })
	return err
}
