// Package leases defines the shard lease (who holds a shard of a Kinesis
// stream, and how far its records have been processed) and the membership
// protocol that keeps leases held: the contract every Store gives and the
// consumer builds on.
//
// # Rows
//
// A Store keeps one lease row per shard, keyed by [Key] (`stream:shard`),
// and, beside them in the same table, membership rows (keys
// [driver.MemberKey]), one membership header ([driver.MemberHeaderKey]) and
// a rewind record per shard an operator rewound (rule 8). Those keys start
// with '#': no stream name contains one and no ARN starts with one, so they
// never collide with a lease key.
//
// Every lease row carries a counter (lease_counter) that each successful
// write bumps by one, and a write token (a random value each write makes
// anew). Every write names the counter and the token its writer last saw,
// so that it lands only on that version of the row: a write that the
// database applies late (after its caller gave up, the row deleted and
// created again meanwhile, its counter restarted) never matches the new
// row's token. A holder's
// writes (Checkpoint, Release, ApplyRewind, and a Rewind of a held row)
// also name the owner and, when the lease names one, the incarnation. A
// write whose condition no longer holds fails with a [*ConflictError]
// (matching [ErrConflict]) and changes nothing.
//
// # Membership
//
// Each instance of a service heartbeats in one membership row: it joins
// ([Membership.Join]) a row with fewer than [driver.RowCapacity] entries
// (the consumer: one of a few rows drawn from its owner id, so that a
// restarted process finds its predecessor's entry without reading every
// row) and stays there for its incarnation's life. Its [Member] entry names
// its owner id, its incarnation (one per process: a restart is a new
// incarnation; the incarnation names the row, see [driver.IncarnationRow])
// and a heartbeat value it advances on every heartbeat. A lease row names its
// holder's owner and incarnation ([Membership.TakeAs]) and stays held while
// that incarnation's heartbeat advances. No lease row is renewed: upkeep
// costs one write per instance per heartbeat, whatever the number of shards
// or members, and no item is written by more than driver.RowCapacity members.
//
// Members watch each other in rows: the members of a row see each other's
// heartbeats in the answer to their own, and each reads one more row a
// round, the next one with entries, so every row is watched by its own
// members and by those of the row before it. The header carries a roster
// version per row ([Membership.BumpRow] after every join, departure, death
// mark or removal): every member reads the header once a round (one small
// item) and re-reads only the rows whose roster changed, so that it knows
// every member of the fleet without reading every row.
//
// On these rules the consumer builds its guarantees:
//
//  1. Two owners never both hold a shard: a takeover (TakeAs) is
//     conditional on the version of the row the taker read (its counter
//     and token: the counter restarts at 1 on a recreated row, so it alone
//     could match another row), so it races with every write of the holder
//     and at most one of them lands; and a holder that
//     can no longer show takers it is alive stops delivering records before
//     a taker may act (point 3).
//  2. A checkpoint lands only while its writer holds the lease: the
//     holder's writes are conditional on its owner and incarnation, so
//     neither another owner nor another process with the same owner id
//     (an earlier incarnation, or a duplicate) can write it.
//  3. A taker never needs synchronised clocks. It treats an incarnation as
//     dead once it has seen that incarnation's heartbeat, compared as an
//     opaque value and never against a clock, unchanged for a whole timeout
//     on its own monotonic clock: from when the read that first showed the
//     value returned to when a later read that still showed it was sent.
//     The holder counts from when it sent its last successful heartbeat, and
//     stops delivering (its fence) a safety margin before a timeout has
//     passed, so it has stopped before any taker may act. A holder whose
//     fence passed has lost every lease: it delivers again only after
//     taking each row afresh, as a new incarnation.
//  4. The counter is not the sign of life; the heartbeat is. Others bump
//     the counter too (an operator's Rewind of a held row), and such writes
//     leave Owner and Incarnation as they are; a takeover is still
//     conditional on the counter the taker read, so it fails if anything at
//     all was written since.
//  5. A released lease (Owner empty) can be taken at once, and so can the
//     leases of an incarnation whose entry is marked Leaving (it shut down,
//     or another member found it dead: it never comes back).
//  6. Two processes with one owner id are told apart by their incarnations:
//     a Heartbeat is conditional on the entry's incarnation, so only one of
//     them heartbeats, and only its leases are held.
//  7. Only Create and CreateAs create a lease row. A row that vanished is
//     recreated free and marked recovered ([Lease.Recovered]: CreateAs with
//     no owner) by whoever finds it missing, from the best checkpoint it
//     knows; its last holder, which may still deliver from the copy that
//     vanished, takes it back at once, and nobody else delivers from a
//     recovered row before the proof bound has passed since a read that
//     returned it. Any write since the creation changes the row's token
//     but keeps that mark, and a row deleted and recreated again has a new
//     one, so the wait is always on the recreation a reader saw.
//  8. An operator's rewind outlives a deleted row: Rewind records it apart
//     from the row (a rewind record, read with [Membership.LastRewind]) and
//     writes its id on the row ([Lease.Rewind]), which every other write
//     keeps. Whoever recreates a row reads the record first: a copy of the
//     row that does not carry the record's id was read before the rewind,
//     and the row comes back at the rewind's checkpoint instead, so that
//     the records the operator asked to replay are never skipped. The
//     records go with the table when it is recreated.
//
// The interface needs nothing but single-row reads and conditional
// single-row writes (DynamoDB's GetItem and UpdateItem); the shard list
// comes from Kinesis, never from listing the store.
//
// Implementations live in the sub-packages memory (tests, one process) and
// dynamo (DynamoDB).
//
// # Writing a Store
//
// A Store for another database must give the guarantees above with the same
// primitives:
//
//   - It implements [Store] and [Membership]; the consumer refuses a Store
//     without Membership.
//   - Reads are single-row and strongly consistent: Get and Members return
//     the row as last written by anyone, never an older version. Writes are
//     conditional single-row writes, each condition checked and the change
//     applied atomically: Create only if the row is absent; every other
//     lease write only if the row's counter equals l.Counter, its token
//     equals l.Token (when l.Token is not empty) and, for a
//     holder write (Checkpoint, Release, ApplyRewind, and a Rewind of a held
//     row), its owner is the non-empty l.Owner and, when l.Incarnation is
//     not empty, its incarnation is l.Incarnation; a Rewind of a free row
//     also requires it still free. No write but Create creates a lease row.
//     No scans, listings or multi-row transactions.
//   - Every successful lease write sets Counter to l.Counter+1 (Create: 1),
//     writes a new Token that no other write of any writer produces (a
//     random one), and returns the row as now stored. A write changes only
//     the fields its method names and keeps the others. Only TakeAs and
//     Release change Owner and Incarnation.
//   - Membership writes name one entry of one row and change nothing else
//     in it but the row's entry count (members of one row never overwrite
//     each other); their conditions are documented on [Membership]. A row
//     never holds more than driver.RowCapacity entries. Header bumps are
//     unconditional increments.
//   - Rewind gives the row a new Rewind id ([driver.NewRewindID]) and,
//     before its row write, records the rewind (id and checkpoint) apart
//     from the row, in an item of its own that a deletion of the row leaves
//     in place; LastRewind reads it. Create starts a row at its shard's
//     record, if any; CreateAs writes the Rewind id it is given; every other
//     write keeps the row's.
//   - Errors are mapped, the native error kept wrapped (errors.As finds it):
//     a failed condition is a [*ConflictError] (a [*MemberConflictError] for
//     a membership write), both matching ErrConflict; a missing row matches
//     ErrNotFound; and what no retry can cure (a missing table, a wrong key
//     schema, denied access) matches ErrMisconfigured with a message naming
//     the resource and what to do. A context that is done makes a call
//     return an error matching the context's error (errors.Is(err,
//     ctx.Err())); one done on entry writes nothing.
//   - A Store does not retry: not conflicts (its caller re-reads the row and
//     decides), and not other failures beyond what its client library does
//     for transient errors. If that library may resend a write whose answer
//     was lost, the resent write fails its condition (the first attempt
//     moved the counter): the Store then reads the row and, finding its own
//     Token, returns that row as a success.
//   - Arguments are validated before anything is sent, with errors that do
//     not match ErrConflict: [ValidateLeaseKey] for every lease key,
//     [ValidateMember] for TakeAs's owner and incarnation and for entries,
//     [ValidateMemberRow] and [ValidateReplaceMember] for membership calls,
//     a non-empty Sequence for Checkpoint and Rewind.
//   - Every method is safe for concurrent use, by goroutines and by
//     processes sharing the database.
//   - Optionally, a Store implements [Checker], so that a service refuses to
//     start on a configuration that cannot work instead of failing at its
//     first lease.
//
// Package leases/driver holds what only a Store needs beyond this
// contract: the keys of the membership rows and header, the row capacity,
// and the forms of incarnations and rewind ids.
//
// Then run the conformance suite, leasestest.Run, from a test of the
// Store's package; it also checks Checker when the Store implements it. The
// Stores of this module pass it.
package leases

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/kltype"
)

// Sentinel errors returned (wrapped) by every Store. Match them with errors.Is.
var (
	// ErrNotFound: the row does not exist.
	ErrNotFound = errors.New("leases: lease not found")

	// ErrConflict: the write's condition did not hold (the row exists on
	// Create; on other writes the counter moved on, or the writer is not
	// the holder: another owner or another incarnation). Nothing was
	// written. Re-read the row to learn its state.
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

// Checkpoint is how far a shard has been processed (see kltype.Checkpoint).
// It is named here too so that a store needs only this package.
type Checkpoint = kltype.Checkpoint

// Lease is one row as last read or written.
type Lease struct {
	// Key names the row.
	Key Key
	// Owner holds the lease; empty when the lease is free.
	Owner string
	// Incarnation is the holder's incarnation (see Membership.TakeAs):
	// holder writes are conditional on it. Empty for a free lease (Release
	// clears it).
	Incarnation string
	// Counter is bumped by every successful write (lease_counter). Every
	// write is conditional on it.
	Counter int64
	// Checkpoint is how far the shard has been processed.
	Checkpoint Checkpoint
	// RewindTo, when not zero, is a checkpoint an operator asked the holder
	// to move to (see Store.Rewind). The holder stops delivering, applies it
	// with ApplyRewind and reads on from there.
	RewindTo Checkpoint
	// Rewind is the id of the last operator's rewind written on the row
	// (Store.Rewind writes a new one, beside the checkpoint or RewindTo);
	// every other write keeps it, and CreateAs writes the one it is given.
	// A copy of the row whose Rewind is the shard's LastRewind was read
	// after that rewind (see Membership.LastRewind). Empty for a row never
	// rewound.
	Rewind string
	// Token identifies the write that produced this version of the row. A
	// writer whose answer was lost recognises its own write by it.
	Token string
	// Recovered is set on a row recreated free after it vanished
	// (Membership.CreateAs with no owner): the Token of that creation. The
	// row's last holder may still be delivering from the copy that
	// vanished, until the proof bound after its last write that landed, so
	// nobody but that holder delivers from a recovered row before the
	// proof bound has passed since a read that returned it. TakeAs and a
	// Rewind of a free row keep it; the holder writes (Checkpoint, Release,
	// ApplyRewind, and a Rewind of a held row, whose callers pass the row
	// as read) write l.Recovered as given: a holder that waited the bound
	// clears it, one that did not keeps it for the next holder. Empty
	// otherwise.
	Recovered string
	// Throughput is the shard's throughput as its holder last measured it
	// (a decayed average), so that a reader of the row knows its load and
	// a new holder starts from it. The holder writes (Checkpoint, Release,
	// ApplyRewind, and a Rewind of a held row, whose callers pass the row
	// as read) write l.Throughput as given; the other writes keep it.
	Throughput Throughput
}

// Throughput is a shard's rate of records, as its holder measures it.
type Throughput struct {
	BytesPerSecond   int64
	RecordsPerSecond int64
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
// A lease is taken with Membership.TakeAs, which every Store the consumer
// uses implements too. The holder's writes (Checkpoint, Release,
// ApplyRewind, and Rewind of a held row) are conditional on l.Counter, on
// l.Owner and, when l.Incarnation is not empty, on l.Incarnation: a row at
// another counter, with another owner or another incarnation fails with a
// *ConflictError and is left as it is.
//
// Stores do not retry conflicts; they map their native errors onto the
// sentinels and keep the native error wrapped. The package documentation
// ("Writing a Store") lists what an implementation must guarantee.
type Store interface {
	// Get reads the row of key with a strongly consistent read. It returns
	// ErrNotFound when there is none.
	Get(ctx context.Context, key Key) (Lease, error)

	// Create creates a free row for key with Counter 1 and no checkpoint,
	// only if no row exists; otherwise ErrConflict. A Store that implements
	// Membership creates the row of a shard that has a rewind record
	// (LastRewind) at the record's checkpoint instead, with its Rewind id:
	// a row deleted after an operator's rewind comes back where the
	// operator last asked, not at the subscription's start position.
	Create(ctx context.Context, key Key) (Lease, error)

	// Checkpoint records cp if the row is still held by l.Owner (and
	// l.Incarnation, when set) at counter l.Counter. cp must not be zero.
	// Owner, Incarnation and a pending RewindTo are kept.
	Checkpoint(ctx context.Context, l Lease, cp Checkpoint) (Lease, error)

	// Release frees the lease (Owner and Incarnation become empty) if the
	// row is still held by l.Owner (and l.Incarnation, when set) at counter
	// l.Counter, writing cp as the final checkpoint in the same write unless
	// cp is zero, in which case the checkpoint is kept. A pending RewindTo
	// is kept for the next holder.
	Release(ctx context.Context, l Lease, cp Checkpoint) (Lease, error)

	// Rewind moves a shard's checkpoint to cp (an operator replaying or
	// skipping records). If l is free (l.Owner empty) and the row is still
	// free at counter l.Counter, the checkpoint becomes cp at once (and a
	// request an earlier holder left pending is dropped). If l is held and
	// the row is still held by l.Owner (and l.Incarnation, when set) at
	// l.Counter, RewindTo becomes cp: the holder applies it with
	// ApplyRewind once it reads the request (the consumer re-reads its held
	// rows when its membership entry's Notice is bumped, and periodically),
	// so no two readers ever read the shard. cp must not be zero. Owner and
	// Incarnation are kept either way. The write gives the row a new Rewind
	// id. A Store that implements Membership first records the rewind (its
	// id and cp) apart from the row, for LastRewind, so that the record
	// outlives the row if the row is deleted; if that fails, nothing is
	// written. (A record whose row write then failed only makes a row
	// deleted later come back at cp: records replayed, never skipped.)
	Rewind(ctx context.Context, l Lease, cp Checkpoint) (Lease, error)

	// ApplyRewind is the holder's answer to a rewind request: if the row is
	// still held by l.Owner (and l.Incarnation, when set) at counter
	// l.Counter and RewindTo is set, the checkpoint becomes RewindTo and
	// RewindTo is cleared. Owner and Incarnation are kept.
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

// ConflictError is the error Stores return for a lease write whose
// condition did not hold. It matches ErrConflict.
type ConflictError struct {
	Op  string // the Store method, e.g. "Checkpoint"
	Key Key    // the row written
	// ExpectedCounter is the counter the write was conditional on.
	ExpectedCounter int64
	// ExpectedOwner is the owner the write was conditional on, for a holder
	// write; empty for the others (Create, TakeAs, a Rewind of a free row).
	ExpectedOwner string
	// ExpectedIncarnation is the incarnation a holder write was conditional
	// on; empty when it was conditional on the owner alone.
	ExpectedIncarnation string
	Err                 error // the store's native error, if any
}

// Error names the method, the row and the condition that did not hold.
func (e *ConflictError) Error() string {
	msg := fmt.Sprintf("leases: %s %s: lease changed concurrently (expected counter %d", e.Op, e.Key, e.ExpectedCounter)
	if e.ExpectedOwner != "" {
		msg += fmt.Sprintf(", owner %q", e.ExpectedOwner)
	}
	if e.ExpectedIncarnation != "" {
		msg += fmt.Sprintf(", incarnation %q", e.ExpectedIncarnation)
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
