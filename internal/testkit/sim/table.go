package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// Table is an in-memory lease table that a simulation's processes share
// (each through its own FaultStore), with the faults an operator or an
// accident brings to a real table: a row deleted (DeleteRow), the whole table
// recreated empty, every lease row and membership row gone at once (Drop),
// and the table missing for a while (SetMissing), when every call fails
// as DynamoDB's do on a missing table: with an error matching
// leases.ErrMisconfigured.
//
// Each lease row lives in a memory.Store of its own and the membership rows
// in another, so a row behaves exactly as the memory store's, and deleting it
// replaces its store with an empty one.
//
// Table implements the methods of leases.Store and leases.Membership that
// the membership protocol uses; any other method of leases.Store panics (the
// embedded interface is nil), so that a simulation never runs code it does
// not check.
type Table struct {
	leases.Store // nil: see the type's documentation

	mu      sync.Mutex
	rows    map[leases.Key]*memory.Store
	members *memory.Store
	missing bool
}

var (
	_ leases.Store      = (*Table)(nil)
	_ leases.Membership = (*Table)(nil)
)

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{rows: map[leases.Key]*memory.Store{}, members: memory.New()}
}

// ErrTableMissing is matched (errors.Is) by the error of every call while the
// table is missing; that error matches leases.ErrMisconfigured too, as the
// DynamoDB store's error for a missing table does.
var ErrTableMissing = errors.New("sim: the lease table does not exist (ResourceNotFoundException)")

type tableMissingError struct{ op string }

func (e *tableMissingError) Error() string {
	return fmt.Sprintf("sim: %s: %v: %v", e.op, ErrTableMissing, leases.ErrMisconfigured)
}

func (e *tableMissingError) Is(target error) bool {
	return target == ErrTableMissing || target == leases.ErrMisconfigured
}

// row returns the store of key's row, or an error while the table is missing.
func (t *Table) row(op string, key leases.Key) (*memory.Store, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.missing {
		return nil, &tableMissingError{op: op}
	}
	s := t.rows[key]
	if s == nil {
		s = memory.New()
		t.rows[key] = s
	}
	return s, nil
}

func (t *Table) membership(op string) (*memory.Store, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.missing {
		return nil, &tableMissingError{op: op}
	}
	return t.members, nil
}

// DeleteRow deletes key's row (as DeleteItem does) and reports whether it
// existed; the next Create creates it afresh, with counter 1 and no
// checkpoint. It does nothing while the table is missing.
func (t *Table) DeleteRow(key leases.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.rows[key]
	if s == nil || t.missing {
		return false
	}
	return s.Delete(key) // the row alone: its rewind record (LastRewind) is another item
}

// Drop empties the table: every lease row and every membership row is gone
// at once, as when the table is deleted and created again.
func (t *Table) Drop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows = map[leases.Key]*memory.Store{}
	t.members = recreated()
}

// recreated returns the membership of a table created again: born now,
// not BornNoPredecessor (memory.New's), since holders of the table as it
// was may deliver on until their fences.
func recreated() *memory.Store {
	s := memory.New()
	s.Clear()
	return s
}

// SetMissing makes the table missing (every call fails with an error
// matching ErrTableMissing and leases.ErrMisconfigured), or back; a table
// comes back empty (see Drop).
func (t *Table) SetMissing(missing bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.missing && !missing {
		t.rows = map[leases.Key]*memory.Store{}
		t.members = recreated()
	}
	t.missing = missing
}

// Missing reports whether the table is missing.
func (t *Table) Missing() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.missing
}

// Get implements leases.Store.
func (t *Table) Get(ctx context.Context, key leases.Key) (leases.Lease, error) {
	s, err := t.row("Get", key)
	if err != nil {
		return leases.Lease{}, err
	}
	return s.Get(ctx, key)
}

// Create implements leases.Store.
func (t *Table) Create(ctx context.Context, key leases.Key) (leases.Lease, error) {
	s, err := t.row("Create", key)
	if err != nil {
		return leases.Lease{}, err
	}
	return s.Create(ctx, key)
}

// Checkpoint implements leases.Store.
func (t *Table) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	s, err := t.row("Checkpoint", l.Key)
	if err != nil {
		return leases.Lease{}, err
	}
	return s.Checkpoint(ctx, l, cp)
}

// Release implements leases.Store.
func (t *Table) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	s, err := t.row("Release", l.Key)
	if err != nil {
		return leases.Lease{}, err
	}
	return s.Release(ctx, l, cp)
}

// Rewind implements leases.Store.
func (t *Table) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	s, err := t.row("Rewind", l.Key)
	if err != nil {
		return leases.Lease{}, err
	}
	return s.Rewind(ctx, l, cp)
}

// ApplyRewind implements leases.Store.
func (t *Table) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	s, err := t.row("ApplyRewind", l.Key)
	if err != nil {
		return leases.Lease{}, err
	}
	return s.ApplyRewind(ctx, l)
}

// TakeAs implements leases.Membership.
func (t *Table) TakeAs(ctx context.Context, l leases.Lease, owner, incarnation string) (leases.Lease, error) {
	s, err := t.row("TakeAs", l.Key)
	if err != nil {
		return leases.Lease{}, err
	}
	return s.TakeAs(ctx, l, owner, incarnation)
}

// Heartbeat implements leases.Membership.
func (t *Table) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	s, err := t.membership("Heartbeat")
	if err != nil {
		return nil, err
	}
	return s.Heartbeat(ctx, row, m)
}

// Members implements leases.Membership.
func (t *Table) Members(ctx context.Context, row int) ([]leases.Member, error) {
	s, err := t.membership("Members")
	if err != nil {
		return nil, err
	}
	return s.Members(ctx, row)
}

// ReplaceMember implements leases.Membership.
func (t *Table) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	s, err := t.membership("ReplaceMember")
	if err != nil {
		return nil, err
	}
	return s.ReplaceMember(ctx, row, seen, next)
}

// CreateAs implements leases.Membership.
func (t *Table) CreateAs(ctx context.Context, key leases.Key, owner, incarnation string, cp leases.Checkpoint, rewind string) (leases.Lease, error) {
	s, err := t.row("CreateAs", key)
	if err != nil {
		return leases.Lease{}, err
	}
	return s.CreateAs(ctx, key, owner, incarnation, cp, rewind)
}

// LastRewind implements leases.Membership.
func (t *Table) LastRewind(ctx context.Context, key leases.Key) (leases.RewindRecord, error) {
	s, err := t.row("LastRewind", key)
	if err != nil {
		return leases.RewindRecord{}, err
	}
	return s.LastRewind(ctx, key)
}

// MarkStream implements leases.Membership. Marks are kept with the
// membership rows: Drop removes them, DeleteRow does not.
func (t *Table) MarkStream(ctx context.Context, stream string, m leases.Mark) (leases.Mark, error) {
	s, err := t.membership("MarkStream")
	if err != nil {
		return leases.Mark{}, err
	}
	return s.MarkStream(ctx, stream, m)
}

// MarkTaken implements leases.Membership. Taken marks are kept with the
// membership rows: Drop removes them, DeleteRow does not.
func (t *Table) MarkTaken(ctx context.Context, key leases.Key, token string) (string, error) {
	s, err := t.membership("MarkTaken")
	if err != nil {
		return "", err
	}
	return s.MarkTaken(ctx, key, token)
}

// StreamMark implements leases.Membership.
func (t *Table) StreamMark(ctx context.Context, stream string) (leases.Mark, error) {
	s, err := t.membership("StreamMark")
	if err != nil {
		return leases.Mark{}, err
	}
	return s.StreamMark(ctx, stream)
}

// Join implements leases.Membership.
func (t *Table) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	s, err := t.membership("Join")
	if err != nil {
		return nil, err
	}
	return s.Join(ctx, row, m)
}

// Header implements leases.Membership.
func (t *Table) Header(ctx context.Context) (leases.MemberHeader, error) {
	s, err := t.membership("Header")
	if err != nil {
		return leases.MemberHeader{}, err
	}
	return s.Header(ctx)
}

// BumpRow implements leases.Membership.
func (t *Table) BumpRow(ctx context.Context, row int) error {
	s, err := t.membership("BumpRow")
	if err != nil {
		return err
	}
	return s.BumpRow(ctx, row)
}

// ReportVanished implements leases.Membership.
func (t *Table) ReportVanished(ctx context.Context) error {
	s, err := t.membership("ReportVanished")
	if err != nil {
		return err
	}
	return s.ReportVanished(ctx)
}
