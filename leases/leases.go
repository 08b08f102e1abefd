// Package leases defines the shard lease: who holds a shard of a Kinesis
// stream, and how far its records have been processed.
//
// A Store keeps one row per shard, keyed by [Key] (`stream:shard`). Every row
// carries a counter (lease_counter) that each successful write bumps by one.
// Every write names the counter its writer last saw, and a holder's writes
// also name the owner; a write whose condition no longer holds fails with
// [ErrConflict] and changes nothing. On this rule the consumer builds its
// guarantees:
//
//  1. Two owners never both hold a shard: a takeover is conditional on the
//     counter the taker read, so it races with every write of the holder and
//     at most one of them lands; and a holder that can no longer show takers
//     it is alive stops delivering records before a taker may act (point 3).
//  2. A checkpoint lands only while its writer holds the lease.
//  3. A taker never needs synchronised clocks. It treats a lease held by
//     another owner as dead once it has seen the holder's renewals stop: the
//     pair (Owner, ExpiresAt) that [Store.Renew] writes, compared as opaque
//     values and never against a clock, unchanged for a whole lease duration
//     on the taker's own monotonic clock, counted from when the read that
//     first showed the pair returned. The holder counts its lease from when
//     it sent the write (its Take or a Renew) that wrote the pair, and stops
//     delivering a safety margin before a lease duration has passed, so it
//     has stopped before any taker may act.
//
// The counter is not the sign of life: other writers bump it too. A
// RequestHandoff by an instance that wants the lease, or a Rewind by an
// operator, writes the row without its holder; a requester asking a dead
// holder for its lease would, if the counter counted, keep that lease alive
// forever. So those writes leave Owner and ExpiresAt as they are, and a taker
// ignores them, while the takeover itself is still conditional on the counter
// the taker read: it fails if anything at all was written since. The holder
// mirrors the takers: only a Renew that changed ExpiresAt extends how long it
// may deliver. A Checkpoint does not, nor does a Renew that returned the
// ExpiresAt the holder already had, since takers cannot tell such a write from
// none. Hence every Renew must write an ExpiresAt later than the one it
// replaces (see "Writing a Store").
//
// Beyond that, ExpiresAt is the holder's wall-clock estimate of when its lease
// ends, for people and tools.
//
// The interface needs nothing but single-row reads and conditional single-row
// writes (DynamoDB's GetItem and UpdateItem); the shard list comes from
// Kinesis, never from listing the store.
//
// Implementations live in the sub-packages memory (tests, one process) and
// dynamo (DynamoDB).
//
// # Writing a Store
//
// A Store for another database must give the guarantees above with the same
// primitives:
//
//   - Reads are single-row and strongly consistent: Get returns the row as
//     last written by anyone, never an older version. Writes are conditional
//     single-row writes, each condition checked and the change applied
//     atomically: Create only if the row is absent; every other write only
//     if the row's counter equals l.Counter and, for a write on a held row
//     (Renew, Checkpoint, Release and ApplyRewind by its holder,
//     RequestHandoff and a Rewind of a held row by others), its owner is the
//     non-empty l.Owner; a Rewind of a free row also requires it still free.
//     No write but Create creates a row. No scans, listings or multi-row
//     transactions.
//   - Every successful write sets Counter to l.Counter+1 (Create: 1), writes
//     a new Token that no other write of any writer produces (a random one),
//     and returns the row as now stored. A write changes only the fields its
//     method names and keeps the others.
//   - Only Take, Renew and Release change Owner or ExpiresAt. Renew writes
//     an ExpiresAt at least a millisecond later than l.ExpiresAt: now+ttl,
//     or l.ExpiresAt plus a millisecond when the store's clock did not move
//     far enough (it stood still or stepped back, or two renewals fell in
//     one millisecond). A Renew that repeated ExpiresAt would look like no
//     renewal at all, and one that went back to an earlier value could
//     repeat a pair a taker saw before. ExpiresAt is kept to at least
//     millisecond precision; a free row's is zero. (Take writes now+ttl
//     afresh, so one assumption about clocks is left: a holder's wall clock
//     does not stand still across its Release of a lease and its Take of the
//     same lease, which could write a pair again.)
//   - Errors are mapped, the native error kept wrapped (errors.As finds it):
//     a failed condition is a [*ConflictError] (matching ErrConflict), a
//     missing row matches ErrNotFound, and what no retry can cure (a missing
//     table, a wrong key schema, denied access) matches ErrMisconfigured
//     with a message naming the resource and what to do. A context that is
//     done makes a call return an error matching the context's error
//     (errors.Is(err, ctx.Err())); one done on entry writes nothing.
//   - A Store does not retry: not conflicts (its caller re-reads the row and
//     decides), and not other failures beyond what its client library does
//     for transient errors. If that library may resend a write whose answer
//     was lost, the resent write fails its condition (the first attempt
//     moved the counter): the Store then reads the row and, finding its own
//     Token, returns that row as a success.
//   - Arguments are validated before anything is sent, with errors that do
//     not match ErrConflict: [Key.Validate] for every key ([ValidateLeaseKey]
//     in a Store that implements [Membership], whose rows share the table),
//     [ValidateOwner]
//     for Take's owner and RequestHandoff's to, [ValidateTTL] for lease
//     durations, a non-empty Sequence for Checkpoint and Rewind.
//   - Every method is safe for concurrent use, by goroutines and by
//     processes sharing the database.
//   - Optionally, a Store implements [Checker], so that a service refuses to
//     start on a configuration that cannot work instead of failing at its
//     first lease.
//   - A Store for the membership protocol implements [Membership]: its
//     membership rows live beside the lease rows (keys [MemberKey], which
//     no lease key may name), each entry written by a conditional write of
//     that one entry.
//
// Then run the conformance suite, leasestest.Run, from a test of the
// Store's package; it also checks Checker and Membership when the Store
// implements them. The Stores of this module pass it.
package leases

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors returned (wrapped) by every Store. Match them with errors.Is.
var (
	// ErrNotFound: the row does not exist.
	ErrNotFound = errors.New("leases: lease not found")

	// ErrConflict: the write's condition did not hold (the row exists on
	// Create; on other writes the counter moved on or the writer is not the
	// owner). Nothing was written. Re-read the row to learn its state.
	ErrConflict = errors.New("leases: lease changed concurrently")

	// ErrMisconfigured: the store cannot work as configured (a missing table,
	// a table with the wrong key, access denied, a legacy row that needs an
	// operator's decision). Retrying does not help; the error's message says
	// what to do.
	ErrMisconfigured = errors.New("leases: store misconfigured")
)

// ShardEnd is the checkpoint of a shard whose every record has been
// processed: the shard was closed by a split or merge and read to its end.
// Children of a shard start only after every parent reached ShardEnd.
const ShardEnd = "SHARD_END"

// Positions a checkpoint can hold instead of a sequence number, written by a
// rewind (an operator replaying or skipping records); the reader starts from
// them and the next checkpoint replaces them.
const (
	// RewindTrimHorizon: nothing of the shard is done; read from its oldest record.
	RewindTrimHorizon = "TRIM_HORIZON"
	// RewindLatest: skip what the shard holds; read records put after the rewind
	// is applied.
	RewindLatest = "LATEST"
	// AtSequencePrefix + a sequence number: every record before it is done;
	// read from it (included).
	AtSequencePrefix = "AT_SEQUENCE_NUMBER:"
	// AtTimestampPrefix + unix milliseconds: read from the first record that
	// arrived at or after that time.
	AtTimestampPrefix = "AT_TIMESTAMP:"
)

// RewindAtSequence returns the checkpoint that replays from record seq included.
func RewindAtSequence(seq string) Checkpoint { return Checkpoint{Sequence: AtSequencePrefix + seq} }

// RewindAtTimestamp returns the checkpoint that replays from the first record that
// arrived at or after t.
func RewindAtTimestamp(t time.Time) Checkpoint {
	return Checkpoint{Sequence: fmt.Sprintf("%s%d", AtTimestampPrefix, t.UnixMilli())}
}

// Key names one row: a shard of a stream.
//
// Its text form is "stream:shard". The stream may be a name or an ARN (which
// contains colons): the text form is split on its last colon, since a shard
// id never contains one.
type Key struct {
	Stream string // stream name or ARN
	Shard  string // shard id, e.g. shardId-000000000000
}

// NewKey validates stream and shard and returns their Key.
func NewKey(stream, shard string) (Key, error) {
	k := Key{Stream: stream, Shard: shard}
	return k, k.Validate()
}

// ParseKey parses "stream:shard", splitting on the last colon.
func ParseKey(s string) (Key, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Key{}, fmt.Errorf("leases: key %q: want stream:shard", s)
	}
	return NewKey(s[:i], s[i+1:])
}

// String returns "stream:shard", the row's key in a Store.
func (k Key) String() string { return k.Stream + ":" + k.Shard }

// Validate reports whether k can name a row: a non-empty stream without
// control characters, and a non-empty shard id without a colon.
func (k Key) Validate() error {
	switch {
	case k.Stream == "":
		return fmt.Errorf("leases: key %q: empty stream", k.String())
	case k.Shard == "":
		return fmt.Errorf("leases: key %q: empty shard id", k.String())
	case strings.ContainsRune(k.Shard, ':'):
		return fmt.Errorf("leases: key %q: shard id %q contains a colon", k.String(), k.Shard)
	case len(k.Shard) > 128:
		return fmt.Errorf("leases: key %q: shard id longer than 128 bytes", k.String())
	case len(k.Stream) > 2048:
		return fmt.Errorf("leases: key: stream longer than 2048 bytes")
	}
	for _, r := range k.String() {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("leases: key %q: control character", k.String())
		}
	}
	return nil
}

// Checkpoint is how far a shard has been processed: every record before
// Sequence is done, and so is Sequence itself unless SubSequence says only
// part of it is.
type Checkpoint struct {
	// Sequence is a Kinesis sequence number, or ShardEnd. Empty means no
	// checkpoint yet: the reader starts where the subscription says.
	Sequence string
	// SubSequence is, for a KPL aggregate processed in part, how many of its
	// user records are done (the next one to process has this index); 0
	// when the record Sequence is done entirely.
	SubSequence int64
}

// IsZero reports whether c is "no checkpoint".
func (c Checkpoint) IsZero() bool { return c.Sequence == "" && c.SubSequence == 0 }

// String returns the sequence number, with "/sub" when SubSequence is set.
func (c Checkpoint) String() string {
	if c.SubSequence != 0 {
		return fmt.Sprintf("%s/%d", c.Sequence, c.SubSequence)
	}
	return c.Sequence
}

// Lease is one row as last read or written.
type Lease struct {
	// Key names the row.
	Key Key
	// Owner holds the lease; empty when the lease is free.
	Owner string
	// Incarnation is the holder's incarnation (see Membership.TakeAs);
	// empty for a lease taken with Take (the per-row renewal protocol) and
	// for a free lease. Release clears it.
	Incarnation string
	// Counter is bumped by every successful write (lease_counter). Every
	// write is conditional on it.
	Counter int64
	// ExpiresAt is the holder's wall-clock estimate of when its lease ends
	// (about the store's clock at the Take or Renew plus the lease
	// duration), for people and tools; zero when the lease is free. Never
	// compare it with a clock to decide a takeover. Takers compare it as an opaque value
	// instead: with Owner it is the holder's sign of life, which every Renew
	// moves (later, at millisecond precision) and which Checkpoint,
	// RequestHandoff, Rewind and ApplyRewind leave as it is. See the package
	// documentation.
	ExpiresAt time.Time
	// Checkpoint is how far the shard has been processed.
	Checkpoint Checkpoint
	// HandoffTo names an owner that asked the holder to hand the lease over
	// (a planned move). The holder finishes in-flight work, checkpoints and
	// releases; the requester then takes the free lease.
	HandoffTo string
	// RewindTo, when not zero, is a checkpoint an operator asked the holder
	// to move to (see Store.Rewind). The holder stops delivering, applies it
	// with ApplyRewind and reads on from there.
	RewindTo Checkpoint
	// Token identifies the write that produced this version of the row. A
	// writer whose answer was lost recognises its own write by it.
	Token string
}

// Held reports whether someone holds the lease.
func (l Lease) Held() bool { return l.Owner != "" }

// Store keeps lease rows. All methods are safe for concurrent use. Every
// write method returns the row as written, with Counter bumped by one and a
// new Token; on failure it returns the zero Lease and an error matching
// ErrConflict, ErrNotFound, ErrMisconfigured, or the context's error (or a
// validation error for an invalid argument). A write changes only the fields
// its method names.
//
// Stores do not retry conflicts; they map their native errors onto the
// sentinels and keep the native error wrapped. The package documentation
// ("Writing a Store") lists what an implementation must guarantee.
type Store interface {
	// Get reads the row of key with a strongly consistent read. It returns
	// ErrNotFound when there is none.
	Get(ctx context.Context, key Key) (Lease, error)

	// Create creates a free row for key with Counter 1 and no checkpoint,
	// only if no row exists; otherwise ErrConflict.
	Create(ctx context.Context, key Key) (Lease, error)

	// Take makes owner the holder of l.Key, whoever holds it now, if the
	// row's counter still equals l.Counter. The caller decides whether the
	// lease may be taken: it is free, or the caller has seen its holder's
	// (Owner, ExpiresAt) unchanged for a whole lease duration (not its
	// counter, which requests bump too; see the package documentation). The
	// counter condition makes the take fail if anything was written since
	// the caller's read. ExpiresAt becomes now+ttl; HandoffTo is cleared; the
	// checkpoint and a pending RewindTo are kept.
	Take(ctx context.Context, l Lease, owner string, ttl time.Duration) (Lease, error)

	// Renew extends the lease if l.Owner still holds it at counter
	// l.Counter: ExpiresAt becomes now+ttl, or l.ExpiresAt plus a
	// millisecond if now+ttl is not at least that late, so that every
	// renewal writes an ExpiresAt later than the one before it (at
	// millisecond precision, whatever the store's clock does). Takers watch
	// for that change, and the holder counts its lease only from a renewal
	// that made it. HandoffTo and RewindTo are kept.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)

	// Checkpoint records cp if l.Owner still holds the lease at counter
	// l.Counter. cp must not be zero. Owner and ExpiresAt are kept: a
	// checkpoint is not a renewal.
	Checkpoint(ctx context.Context, l Lease, cp Checkpoint) (Lease, error)

	// Release frees the lease (Owner and HandoffTo become empty, ExpiresAt
	// zero) if l.Owner still holds it at counter l.Counter, writing cp as
	// the final checkpoint in the same write unless cp is zero, in which
	// case the checkpoint is kept. A pending RewindTo is kept for the next
	// holder.
	Release(ctx context.Context, l Lease, cp Checkpoint) (Lease, error)

	// RequestHandoff asks the holder of a lease to hand it over to to: it sets
	// HandoffTo if the row is still held by l.Owner at counter l.Counter.
	// The holder learns of it at its next renewal, which conflicts. Owner and
	// ExpiresAt are kept: a request is no sign of the holder's life.
	RequestHandoff(ctx context.Context, l Lease, to string) (Lease, error)

	// Rewind moves a shard's checkpoint to cp (an operator replaying or
	// skipping records). If l is free (l.Owner empty) and the row is still
	// free at counter l.Counter, the checkpoint becomes cp at once (and a
	// request an earlier holder left pending is dropped). If l is
	// held and the row is still held by l.Owner at l.Counter, RewindTo
	// becomes cp: the holder applies it (ApplyRewind) after its next
	// renewal, so no two readers ever read the shard. cp must not be zero.
	// Owner and ExpiresAt are kept either way.
	Rewind(ctx context.Context, l Lease, cp Checkpoint) (Lease, error)

	// ApplyRewind is the holder's answer to a rewind request: if l.Owner
	// still holds the lease at counter l.Counter and RewindTo is set, the
	// checkpoint becomes RewindTo and RewindTo is cleared. Owner and
	// ExpiresAt are kept.
	ApplyRewind(ctx context.Context, l Lease) (Lease, error)
}

// Checker is an optional interface of a Store: Check tells whether the
// store can work as configured (its table exists with the right key, the
// credentials may read and write it) before the service takes any lease.
// kinesislease.Service.Run calls it once at start, before it lists any
// shard, and returns its error as it is; a Store that cannot tell returns
// nil.
//
// An implementation of Check:
//   - returns nil on a store that works, so Run goes on;
//   - returns an error matching ErrMisconfigured for a configuration no retry
//     can cure, naming the resource (the table), what is wrong and what to
//     do, with the native error wrapped; other failures (the database cannot
//     be reached) are returned wrapped too, not matching ErrMisconfigured;
//   - writes nothing, and needs no permission beyond those the Store's other
//     methods need (the dynamo Store reads one row that is never written);
//   - honours ctx like every Store method: with a context that is done it
//     returns promptly, either an error matching the context's error or, if
//     it has nothing to wait for (no I/O), nil. It never reports a done
//     context as ErrMisconfigured: a service stopped while starting is not
//     misconfigured.
//
// leasestest.Run checks these for a Store that implements Checker.
type Checker interface {
	// Check reports whether the store can work as configured.
	Check(ctx context.Context) error
}

// ConflictError is the error Stores return for a write whose condition did
// not hold. It matches ErrConflict. Current, when known, is the row as read
// after the failed write.
type ConflictError struct {
	Op  string // the Store method, e.g. "Renew"
	Key Key    // the row written
	// ExpectedCounter is the counter the write was conditional on.
	ExpectedCounter int64
	// ExpectedOwner is the owner the write was conditional on, for a write
	// on a held row; empty for the others (Create, Take, a Rewind of a free
	// row).
	ExpectedOwner string
	Err           error // the store's native error, if any
}

// Error names the method, the row and the condition that did not hold.
func (e *ConflictError) Error() string {
	msg := fmt.Sprintf("leases: %s %s: lease changed concurrently (expected counter %d", e.Op, e.Key, e.ExpectedCounter)
	if e.ExpectedOwner != "" {
		msg += fmt.Sprintf(", owner %q", e.ExpectedOwner)
	}
	msg += ")"
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Unwrap returns the store's native error.
func (e *ConflictError) Unwrap() error { return e.Err }

// ValidateOwner reports whether owner can hold a lease: non-empty, at most
// 256 bytes. Stores call it before writing an owner.
func ValidateOwner(owner string) error {
	if owner == "" {
		return errors.New("leases: empty owner")
	}
	if len(owner) > 256 {
		return fmt.Errorf("leases: owner %.32q…: longer than 256 bytes", owner)
	}
	return nil
}

// ValidateTTL reports whether ttl can be a lease duration.
func ValidateTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("leases: lease duration %v: must be positive", ttl)
	}
	return nil
}
