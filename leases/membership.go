package leases

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MemberRows is the number of membership rows of a lease table. It is fixed
// (never derived from the fleet size): every instance of every version
// sharing a table must agree on it.
const MemberRows = 2

// memberPrefix starts the key of every membership row.
const memberPrefix = "#members:"

// MemberKey returns the key of membership row i (0 <= i < MemberRows), as a
// Store writes it: "#members:i".
func MemberKey(i int) string { return memberPrefix + strconv.Itoa(i) }

// IsMemberKey reports whether key (a row's key as text) is a membership row's.
func IsMemberKey(key string) bool { return strings.HasPrefix(key, memberPrefix) }

// MemberRow returns the membership row of owner: a hash of the owner id, so
// that every incarnation of an owner heartbeats in the same row.
func MemberRow(owner string) int {
	var h uint32 = 2166136261 // FNV-1a
	for i := 0; i < len(owner); i++ {
		h ^= uint32(owner[i])
		h *= 16777619
	}
	return int(h % MemberRows)
}

// Member is one instance's entry in a membership row.
type Member struct {
	// Owner is the instance's owner id (unique in the fleet).
	Owner string
	// Incarnation identifies one process of the owner: a new process (a
	// restart) has a new one.
	Incarnation string
	// Heartbeat is advanced by every heartbeat of the incarnation. Takers
	// watch it as an opaque value: unchanged for a whole timeout on their
	// own clock means the incarnation is dead.
	Heartbeat int64
	// Leaving is set by an incarnation that is shutting down cleanly: it
	// holds no lease any more (or is releasing its last ones), and the next
	// incarnation of its owner may replace its entry at once.
	Leaving bool
	// Ended counts the shards the member read to their end (SHARD_END):
	// when it changes, the others list the streams' shards again, so that
	// the children of a split or merge start without waiting for the next
	// periodic ListShards.
	Ended int64
	// Notice is bumped by anyone who wants the member to look at its held
	// rows again at once (an operator's rewind request). The member
	// compares it as an opaque value.
	Notice int64
}

// Membership is the part of a Store that keeps membership rows and takes
// leases for an incarnation. The consumer needs it: every Store it runs on
// implements it (both stores of this module do), and leasestest checks it.
//
// Membership rows hold an entry per member. Every write is conditional on the
// entry the writer knows, and returns the whole row after the write (the
// writer learns its row-mates for free). Every method returns the row's
// entries sorted by Owner, in a slice the caller owns; nil for a row without
// entries. A write changes only the entry it names. Arguments are validated
// (ValidateMemberRow, ValidateMember, ValidateReplaceMember) before anything
// is sent, with errors that do not match ErrConflict; errors are mapped as
// for Store methods, and a context that is done on entry writes nothing.
type Membership interface {
	// Heartbeat writes m as owner m.Owner's entry in membership row row, if
	// the row has no entry for m.Owner, or its entry has m.Incarnation and
	// m.Notice and is not marked Leaving (unless m is too). It returns the
	// row's entries after the write. An entry of another incarnation, with
	// another Notice (someone bumped it), or marked Leaving (someone found
	// the incarnation dead: it may never come back) makes it fail with a
	// *MemberConflictError (matching ErrConflict) carrying that entry;
	// nothing is written.
	Heartbeat(ctx context.Context, row int, m Member) ([]Member, error)

	// Members reads membership row row with a strongly consistent read and
	// returns its entries (none for a row that does not exist yet).
	Members(ctx context.Context, row int) ([]Member, error)

	// ReplaceMember replaces the entry of seen.Owner in row row with next,
	// or removes it when next.Owner is empty, if the entry is still seen
	// (its Incarnation and Heartbeat). A new incarnation takes over its
	// owner's stale entry this way; anyone removes an entry seen stale for
	// several timeouts; a requester bumps the entry's Notice. It fails with
	// a *MemberConflictError when the entry changed (or is gone). If
	// next.Owner is not empty it must be seen.Owner.
	//
	// An entry that already equals next (or is already absent, for a
	// removal) counts as replaced: the call succeeds and writes nothing.
	// That is how a store recognises its own write whose answer was lost and
	// whose resent copy then failed the condition; a write of another that
	// left the same entry has the same effect for the caller.
	ReplaceMember(ctx context.Context, row int, seen, next Member) ([]Member, error)

	// TakeAs makes owner's incarnation the holder of l.Key, whoever holds
	// it now, if the row's counter still equals l.Counter. The caller
	// decides whether the lease may be taken: it is free, its holder's
	// incarnation is dead or leaving (see the package documentation), it
	// names the caller's own incarnation, or it is a row of the per-row
	// renewal protocol that stood still long enough. The counter condition
	// makes the take fail if anything was written since the caller's read.
	// Owner and Incarnation are written; the checkpoint and a pending
	// RewindTo are kept; attributes left by the per-row renewal protocol
	// (an expiry, a handoff request) are removed. Like every write it bumps
	// Counter and writes a new Token.
	TakeAs(ctx context.Context, l Lease, owner, incarnation string) (Lease, error)

	// CreateAs creates the row of key, only if no row exists, held by
	// owner's incarnation with checkpoint cp (none when cp is zero), in one
	// write: Counter 1 and a new Token, like Create. It fails with
	// ErrConflict if the row exists. The holder of a row that vanished (a
	// row deleted, a table recreated empty) recreates it this way from the
	// checkpoint it knows, so that no one can take the row in between with
	// no checkpoint and read from the start position.
	CreateAs(ctx context.Context, key Key, owner, incarnation string, cp Checkpoint) (Lease, error)
}

// MemberConflictError is the error of a membership write whose condition
// did not hold. It matches ErrConflict.
type MemberConflictError struct {
	// Op is the Membership method.
	Op string
	// Row is the membership row.
	Row int
	// Owner is the owner whose entry was written.
	Owner string
	// Current is the owner's entry as found (zero if there is none).
	Current Member
	// Err is the store's native error, if any.
	Err error
}

func (e *MemberConflictError) Error() string {
	msg := fmt.Sprintf("leases: %s %s: entry of %q changed concurrently", e.Op, MemberKey(e.Row), e.Owner)
	if e.Current.Owner != "" {
		msg += fmt.Sprintf(" (now incarnation %q, heartbeat %d, notice %d)", e.Current.Incarnation, e.Current.Heartbeat, e.Current.Notice)
	} else {
		msg += " (now absent)"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *MemberConflictError) Is(target error) bool { return target == ErrConflict }

// Unwrap returns the store's native error.
func (e *MemberConflictError) Unwrap() error { return e.Err }

// ValidateMember reports whether m can be written: a valid owner, an
// incarnation of 1 to 64 bytes.
func ValidateMember(m Member) error {
	if err := ValidateOwner(m.Owner); err != nil {
		return err
	}
	if m.Incarnation == "" || len(m.Incarnation) > 64 {
		return errors.New("leases: member incarnation: want 1 to 64 bytes")
	}
	return nil
}

// ValidateMemberRow reports whether row names a membership row.
func ValidateMemberRow(row int) error {
	if row < 0 || row >= MemberRows {
		return fmt.Errorf("leases: membership row %d: want 0 <= row < %d", row, MemberRows)
	}
	return nil
}

// ValidateReplaceMember reports whether ReplaceMember may be called with
// seen and next: seen passes ValidateMember, and next is either a removal
// (empty Owner) or passes ValidateMember with seen's Owner.
func ValidateReplaceMember(seen, next Member) error {
	if err := ValidateMember(seen); err != nil {
		return fmt.Errorf("leases: replace member: seen entry: %w", err)
	}
	if next.Owner == "" {
		return nil
	}
	if err := ValidateMember(next); err != nil {
		return fmt.Errorf("leases: replace member: next entry: %w", err)
	}
	if next.Owner != seen.Owner {
		return fmt.Errorf("leases: replace member: next entry of %q replaces the entry of %q: want the same owner", next.Owner, seen.Owner)
	}
	return nil
}

// ValidateLeaseKey reports whether k can name a lease row: k.Validate, and
// its text form is not a membership row's key (IsMemberKey). A Store that
// implements Membership calls it instead of k.Validate, so that no lease
// method reads or writes a membership row.
func ValidateLeaseKey(k Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	if IsMemberKey(k.String()) {
		return fmt.Errorf("leases: key %q: a membership row's key, not a lease's", k.String())
	}
	return nil
}
