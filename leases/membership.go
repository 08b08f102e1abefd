package leases

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kinesislease/kinesislease/leases/driver"
)

// MemberHeader is the membership header: the roster version of each row
// that ever had one (row -> version; a row absent has version 0), and a
// counter bumped by a member that found a lease row missing, so that every
// holder re-reads the rows it holds (ReportVanished), and when the table
// was born.
type MemberHeader struct {
	Rows     map[int]int64
	Vanished int64
	// Born is when the table was created, in Unix milliseconds on the
	// creator's clock, as its creator recorded it (dynamo.CreateTable and
	// `kinesislease init` record the table's CreationDateTime); 0 when
	// nobody did (a table created by other tools). A store that never had
	// an earlier table under its name (a memory store from memory.New)
	// reports BornNoPredecessor. Only the table's creator writes it, and it
	// goes with the table: a header that shows it is a header of that table.
	//
	// Members use it to start a new table's streams at once: a holder of
	// an earlier table of the name lost it when it was deleted, before
	// Born, and stops delivering at its fence, a timeout after its last
	// heartbeat at most, so once Born is older than that (with a margin
	// for clocks) no row of the table can be read beside such a holder.
	Born int64
}

// BornNoPredecessor is MemberHeader.Born of a store that never had an
// earlier table under its name: no holder of an earlier table can exist.
const BornNoPredecessor int64 = 1

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
	// Ended counts the shards the member read to their end (SHARD_END),
	// or found at their end when it came to take them: when it changes,
	// the lister of its streams lists their shards again (see Listing),
	// and the others read the rows of the open parents it held or was to
	// hold, so that the children of a split or merge start without
	// waiting for the next periodic ListShards, and without every member
	// polling every open parent.
	Ended int64
	// Notice is bumped by anyone who wants the member to look at its held
	// rows again at once (an operator's rewind request). The member
	// compares it as an opaque value.
	Notice int64
	// Held is how many leases the member held at its last heartbeat
	// (counting rows it lost at a fence and will take again or release). A
	// member that finds every row of a stream missing takes the stream as
	// new (and creates its rows at once) only while no member holds any.
	Held int64
	// Streams is a digest of the streams the member subscribes, compared
	// as an opaque value: each member plans every stream it reads over the
	// live members whose digest equals its own (an empty one counts as
	// equal), so that while instances subscribe different streams (a
	// subscription added or removed at runtime, a rollout) a shard is never
	// planned to a member that does not read its stream.
	Streams string
	// Listing is what the member publishes of the streams it lists for
	// the members that read the same streams (it is their lister): a
	// digest of each one's shard set as its last ListShards found it,
	// compared as an opaque value. The others list a stream again only
	// when the digest differs from their own listing's, so that ListShards
	// calls do not grow with the fleet. Empty when it lists none.
	Listing string
	// Proof is the member's proof bound: how long after its last write of
	// a lease row that landed it may go on delivering the row's shard (its
	// checkpoint interval and timeout). Whoever recreates a vanished row
	// waits the longest a member publishes before it reads the row, so
	// that instances with different settings (a rolling change) never read
	// a shard at once. Stored to the millisecond; zero when unknown.
	Proof time.Duration
	// Young is set while the member's entry has stood in the table, without
	// a break, for less than the member's timeout: a join writes it, and
	// the member's first heartbeat a timeout later clears it. A member that
	// finds its entry gone (removed, or the table recreated empty) writes it
	// again young, having marked the streams it holds rows of (see
	// MarkStream); a heartbeat never lands on an entry that is gone. So an
	// entry read in a table without Young shows that the table was not
	// recreated for a timeout before it was written: a member finding a
	// stream unmarked there knows that no lease of it can be held from a
	// table recreated since.
	Young bool
	// Capacity is the member's weight in the plan, relative to the
	// others, in thousandths (kinesislease.WithCapacity): 1000 for a
	// member of weight 1, 2000 for one of weight 2. Zero: unpublished,
	// counted as 1000.
	Capacity int64
	// MaxLeases is the most leases the member will hold
	// (kinesislease.WithMaxLeases); zero: no cap.
	MaxLeases int64
	// Load is the member's total load: the throughput of the shards it
	// holds, in bytes per second, to two significant digits, as its
	// workers measure it; zero when it holds nothing busy.
	Load int64
	// Hot names the member's hot shards, at most a few, with their loads:
	// those of what it holds well above the mean of its shards. It is
	// written and read by the consumer (internal/balance) and opaque to a
	// store, which keeps it as given: space-separated words of printable
	// ASCII, at most MaxHot bytes. Empty when none is hot.
	Hot string
	// Utilization is the member's own utilization of its capacity
	// (kinesislease.WithUtilization), in thousandths, to two significant
	// digits: 430 for 0.43, 1200 for 1.2. Zero: unpublished; a member that
	// publishes one publishes at least 1.
	Utilization int64
}

// MaxHot is the longest Member.Hot a store must keep, in bytes.
const MaxHot = 128

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
	// Join writes m as a new entry in membership row row, if the row has
	// no entry for m.Owner and fewer than [driver.RowCapacity] entries. It returns
	// the row's entries after the write. An entry already there makes it
	// fail with a *MemberConflictError carrying that entry (an attempt of
	// this same call whose answer was lost left exactly m: then it
	// succeeds); a full row fails with a *MemberConflictError whose Full is
	// set. Nothing is written on failure.
	Join(ctx context.Context, row int, m Member) ([]Member, error)

	// Heartbeat writes m as owner m.Owner's entry in membership row row, if
	// its entry there has m.Incarnation and m.Notice, a Heartbeat lower than
	// m.Heartbeat, and is not marked Leaving (unless m is too). It returns
	// the row's entries after the write. A heartbeat only moves forward: a
	// request applied late (after its caller gave up, and after later
	// heartbeats landed) never puts back a value a taker timed. An entry
	// that already equals m (an attempt of this same call whose answer was
	// lost) counts as written: it succeeds. An entry of another incarnation, with another Notice (someone
	// bumped it), marked Leaving (someone found the incarnation dead: it may
	// never come back), or no entry at all (removed, or the table recreated:
	// Join again) makes it fail with a *MemberConflictError carrying the
	// entry found (zero if none); nothing is written.
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

	// Header reads the membership header with a strongly consistent read
	// (a zero MemberHeader when there is none yet).
	Header(ctx context.Context) (MemberHeader, error)

	// BumpRow adds one to row's roster version in the header (creating the
	// header if needed). The increments commute: it needs no condition.
	BumpRow(ctx context.Context, row int) error

	// ReportVanished adds one to the header's Vanished counter.
	ReportVanished(ctx context.Context) error

	// TakeAs is the take of the membership protocol: owner's incarnation
	// becomes the holder of l.Key if the row still is l: its counter equals
	// l.Counter and its token l.Token. (With no token, as for a Lease not
	// read from a Store, its holder, owner and incarnation or none, must be
	// l's: the counter restarts at 1 when a vanished row is recreated, so a
	// counter alone could match a different row.) Incarnation is written beside Owner; a
	// pending RewindTo is kept, and so is the checkpoint unless l.Checkpoint
	// differs and is not zero: then it becomes l.Checkpoint, in the same
	// write (a taker that knows where the shard was read to, on a row
	// recreated without it, writes it as it takes the row), and with it
	// l.Rewind when that is not empty: the operator's rewind the written
	// checkpoint follows. Like every write it
	// bumps Counter and writes a new Token. Release clears Incarnation.
	TakeAs(ctx context.Context, l Lease, owner, incarnation string) (Lease, error)

	// CreateAs creates the row of key, only if no row exists, held by
	// owner's incarnation with checkpoint cp (none when cp is zero), in one
	// write: Counter 1 and a new Token, like Create. It fails with
	// ErrConflict if the row exists.
	//
	// With owner and incarnation both empty it creates the row free and
	// recovered: Lease.Recovered is the creation's Token. Whoever finds a
	// row vanished (a row deleted, a table recreated empty) recreates it
	// so, from the best checkpoint it knows: its holder then takes it back
	// at once with TakeAs, anyone else only after the recovery wait. (The
	// consumer uses only this form.)
	//
	// rewind is the row's Rewind id (see Lease.Rewind): the one of the copy
	// of the row the checkpoint comes from, or LastRewind's ID when the row
	// is recreated at that rewind's checkpoint.
	CreateAs(ctx context.Context, key Key, owner, incarnation string, cp Checkpoint, rewind string) (Lease, error)

	// LastRewind reads the record of the last operator's rewind of key's
	// shard (see Store.Rewind) with a strongly consistent read: the zero
	// RewindRecord when the shard was never rewound (or the table was
	// recreated since). A row deleted and recreated comes back from a
	// checkpoint read after that rewind (a copy of the row whose Rewind is
	// the record's ID), or else at the record's checkpoint: never from a
	// copy read before an operator's rewind, which would skip the records
	// the rewind asked to replay.
	LastRewind(ctx context.Context, key Key) (RewindRecord, error)

	// MarkStream marks stream as one whose lease rows the table holds, or
	// is about to: an item apart from its rows, which outlives their
	// deletion. It writes m as the mark only if the stream has no mark
	// yet, and returns the mark as stored: m when this call (or an attempt
	// of it whose answer was lost) made it, another's otherwise. The
	// consumer marks a stream before it creates or takes any row of it, so
	// that a member that finds a row missing in a stream without a mark,
	// in a table not recreated for longer than a timeout (see
	// Member.Young), knows the stream new: no row of it exists or is held,
	// and its rows may be created and read at once. The first to mark a
	// new stream creates its rows.
	//
	// A mark, once stored, never changes: a later call returns it as
	// stored, whatever its token and Since (a zero Since writes none). So
	// every member that marks or reads the stream learns the same Since:
	// the first marker's.
	MarkStream(ctx context.Context, stream string, m Mark) (Mark, error)

	// StreamMark reads stream's mark (MarkStream) with a strongly
	// consistent read: the zero Mark when the stream has none.
	StreamMark(ctx context.Context, stream string) (Mark, error)

	// MarkTaken marks the row of key as taken once: an item apart from the
	// row, which outlives its deletion. Like MarkStream, it writes token
	// only if the mark has none yet, and returns the mark's token as
	// stored: token when this call (or an attempt of it whose answer was
	// lost) made it, another's otherwise. The consumer marks a row before
	// its first take of a row as Create made it (Counter 1, free, not
	// recovered): a Create that DynamoDB applies late, after the row was
	// taken and then deleted, makes a row that looks new although its last
	// holder may still deliver, and the mark, found already made by
	// another, tells it apart (it is then taken only after the recovery
	// wait, as a recovered row). A table recreated loses its marks with
	// its rows.
	MarkTaken(ctx context.Context, key Key, token string) (string, error)
}

// Mark is a stream's mark (Membership.MarkStream).
type Mark struct {
	// Token is the first marker's token (the consumer writes its
	// incarnation): 1 to 64 bytes.
	Token string
	// Since is when the first marker's subscription to the stream began
	// (its Subscribe): the moment LATEST means for a shard of the stream
	// that has no checkpoint, the same on every member. Stored to the
	// millisecond (Unix milliseconds); zero when the mark carries none (it
	// was written without one, as versions before it did).
	Since time.Time
}

// RewindRecord is what a Store keeps of the last operator's rewind of a
// shard, apart from its row (see Membership.LastRewind).
type RewindRecord struct {
	// ID is the Rewind id the rewind wrote on the row.
	ID string
	// To is the checkpoint the operator asked for.
	To Checkpoint
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
	// Full: a Join found the row holding driver.RowCapacity entries already.
	Full bool
	// Err is the store's native error, if any.
	Err error
}

func (e *MemberConflictError) Error() string {
	msg := fmt.Sprintf("leases: %s %s: entry of %q changed concurrently", e.Op, driver.MemberKey(e.Row), e.Owner)
	if e.Full {
		msg = fmt.Sprintf("leases: %s %s: the row is full (%d entries)", e.Op, driver.MemberKey(e.Row), driver.RowCapacity)
	} else if e.Current.Owner != "" {
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
// incarnation of 1 to 64 bytes. (The engine's incarnations name their row,
// see driver.NewIncarnation; a store need not check that.)
func ValidateMember(m Member) error {
	if err := ValidateOwner(m.Owner); err != nil {
		return err
	}
	if m.Incarnation == "" || len(m.Incarnation) > 64 {
		return errors.New("leases: member incarnation: want 1 to 64 bytes")
	}
	if len(m.Hot) > MaxHot {
		return fmt.Errorf("leases: member hot shards: %d bytes, want at most %d", len(m.Hot), MaxHot)
	}
	for _, c := range []byte(m.Hot) {
		if c < ' ' || c > '~' {
			return fmt.Errorf("leases: member hot shards %q: want printable ASCII", m.Hot)
		}
	}
	if m.Capacity < 0 || m.MaxLeases < 0 || m.Load < 0 || m.Utilization < 0 {
		return errors.New("leases: member capacity, max leases, load and utilization: want zero or more")
	}
	return nil
}

// ValidateMemberRow reports whether row names a membership row.
func ValidateMemberRow(row int) error {
	if row < 0 || row >= driver.MaxMemberRows {
		return fmt.Errorf("leases: membership row %d: want 0 <= row < %d", row, driver.MaxMemberRows)
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

// ValidateMark reports whether MarkStream (write) or StreamMark may be
// called with stream and m: stream names a lease row's stream (see
// Key.Validate); a mark written has a token of 1 to 64 bytes, and a Since
// that is zero or after the Unix epoch.
func ValidateMark(stream string, m Mark, write bool) error {
	if err := (Key{Stream: stream, Shard: "mark"}).Validate(); err != nil {
		return fmt.Errorf("leases: stream mark: %w", err)
	}
	if !write {
		return nil
	}
	if m.Token == "" || len(m.Token) > 64 {
		return errors.New("leases: stream mark: token: want 1 to 64 bytes")
	}
	if !m.Since.IsZero() && m.Since.UnixMilli() <= 0 {
		return fmt.Errorf("leases: stream mark: since %v: want zero or after the Unix epoch", m.Since)
	}
	return nil
}

// ValidateTakenMark reports whether MarkTaken may be called with key and
// token: key can name a lease row (ValidateLeaseKey), and the token is 1
// to 64 bytes.
func ValidateTakenMark(key Key, token string) error {
	if err := ValidateLeaseKey(key); err != nil {
		return fmt.Errorf("leases: taken mark: %w", err)
	}
	if token == "" || len(token) > 64 {
		return errors.New("leases: taken mark: token: want 1 to 64 bytes")
	}
	return nil
}

// ValidateLeaseKey reports whether k can name a lease row: k.Validate, and
// its text form is not a membership row's key (driver.IsMemberKey). A Store that
// implements Membership calls it instead of k.Validate, so that no lease
// method reads or writes a membership row.
func ValidateLeaseKey(k Key) error {
	if err := k.Validate(); err != nil {
		return err
	}
	if driver.IsMemberKey(k.String()) {
		return fmt.Errorf("leases: key %q: a membership row's key, not a lease's", k.String())
	}
	return nil
}
