// Package leases defines the shard lease: who holds a shard of a Kinesis
// stream, until when, and how far its records have been processed.
//
// A Store keeps one row per shard, keyed by [Key] (`stream:shard`). Every row
// carries a counter (lease_counter) that each successful write bumps by one.
// Every write names the counter its writer last saw, and a holder's writes
// also name the owner; a write whose condition no longer holds fails with
// [ErrConflict] and changes nothing. This one rule gives the guarantees the
// consumer relies on:
//
//  1. Two owners never both hold a shard: a takeover and a renewal race on the
//     same counter and exactly one of them lands.
//  2. A checkpoint lands only while its writer holds the lease.
//  3. A taker never needs synchronised clocks: it treats a lease held by
//     someone else as expired once it has seen the counter unchanged for a
//     whole lease duration on its own monotonic clock. ExpiresAt is written
//     for humans and tools only.
//
// The interface needs nothing but single-row reads and conditional single-row
// writes (DynamoDB's GetItem and UpdateItem); the shard list comes from
// Kinesis, never from listing the store.
//
// Implementations live in the sub-packages memory (tests, one process) and
// dynamo (DynamoDB). Every implementation must pass the conformance suite in
// leasestest.
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
	Key Key
	// Owner holds the lease; empty when the lease is free.
	Owner string
	// Counter is bumped by every successful write (lease_counter). Every
	// write is conditional on it.
	Counter int64
	// ExpiresAt is the holder's own estimate of when its lease ends, for
	// people and tools. Never compare it across machines to decide a
	// takeover.
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
// ErrConflict, ErrNotFound, ErrMisconfigured, or the context's error.
//
// Stores do not retry conflicts; they map their native errors onto the
// sentinels and keep the native error wrapped.
type Store interface {
	// Get reads the row of key with a strongly consistent read. It returns
	// ErrNotFound when there is none.
	Get(ctx context.Context, key Key) (Lease, error)

	// Create creates a free row for key with Counter 1 and no checkpoint,
	// only if no row exists; otherwise ErrConflict.
	Create(ctx context.Context, key Key) (Lease, error)

	// Take makes owner the holder of l.Key, whoever holds it now, if the
	// row's counter still equals l.Counter. The caller decides whether the
	// lease may be taken (free, or its counter seen unchanged for a whole
	// lease duration). ExpiresAt becomes now+ttl; HandoffTo is cleared; the
	// checkpoint is kept.
	Take(ctx context.Context, l Lease, owner string, ttl time.Duration) (Lease, error)

	// Renew extends the lease if l.Owner still holds it at counter
	// l.Counter: ExpiresAt becomes now+ttl. HandoffTo is kept.
	Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)

	// Checkpoint records cp if l.Owner still holds the lease at counter
	// l.Counter. cp must not be zero.
	Checkpoint(ctx context.Context, l Lease, cp Checkpoint) (Lease, error)

	// Release frees the lease (Owner and HandoffTo become empty) if l.Owner
	// still holds it at counter l.Counter, writing cp as the final
	// checkpoint in the same write unless cp is zero, in which case the
	// checkpoint is kept.
	Release(ctx context.Context, l Lease, cp Checkpoint) (Lease, error)

	// RequestHandoff asks the holder of a lease to hand it over to to: it sets
	// HandoffTo if the row is still held by l.Owner at counter l.Counter.
	// The holder learns of it at its next renewal, which conflicts.
	RequestHandoff(ctx context.Context, l Lease, to string) (Lease, error)

	// Rewind moves a shard's checkpoint to cp (an operator replaying or
	// skipping records). If l is free (l.Owner empty) and the row is still
	// free at counter l.Counter, the checkpoint becomes cp at once (and a
	// request an earlier holder left pending is dropped). If l is
	// held and the row is still held by l.Owner at l.Counter, RewindTo
	// becomes cp: the holder applies it (ApplyRewind) after its next
	// renewal, so no two readers ever read the shard. cp must not be zero.
	Rewind(ctx context.Context, l Lease, cp Checkpoint) (Lease, error)

	// ApplyRewind is the holder's answer to a rewind request: if l.Owner
	// still holds the lease at counter l.Counter and RewindTo is set, the
	// checkpoint becomes RewindTo and RewindTo is cleared.
	ApplyRewind(ctx context.Context, l Lease) (Lease, error)
}

// Checker is an optional interface of a Store: Check tells whether the
// store can work as configured (its table exists with the right key, the
// credentials may read and write it) before the service takes any lease.
// kinesislease.Service.Run calls it once at start and returns its error; a
// Store that cannot tell returns nil. Its errors must match
// ErrMisconfigured for a configuration no retry can cure, and name what is
// wrong and what to do.
type Checker interface {
	Check(ctx context.Context) error
}

// ConflictError is the error Stores return for a write whose condition did
// not hold. It matches ErrConflict. Current, when known, is the row as read
// after the failed write.
type ConflictError struct {
	Op  string // the Store method, e.g. "Renew"
	Key Key
	// Expected is the counter (and, for a holder's write, owner) the write
	// was conditional on.
	ExpectedCounter int64
	ExpectedOwner   string
	Err             error // the store's native error, if any
}

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
