// Package dynamo is the DynamoDB leases.Store: one table, string partition
// key lease_key, one row per shard keyed "stream:shard".
//
// The store calls two DynamoDB operations and no others: GetItem (strongly
// consistent) and UpdateItem with a ConditionExpression. Rows are created by a
// conditional UpdateItem (attribute_not_exists(lease_key)), so the service's
// credentials need only dynamodb:GetItem and dynamodb:UpdateItem on the table.
//
// Row attributes: lease_key, owner (absent when free), incarnation (the
// holder's, written by TakeAs; absent when free), checkpoint, sub_sequence,
// lease_counter, rewind_to and rewind_to_sub (an operator's pending rewind),
// write_token. A holder write (Checkpoint, Release, ApplyRewind, a Rewind of
// a held row) is conditional on lease_counter, write_token, owner and, when
// the lease names one, incarnation:
//
//	lease_counter = :expected_counter AND write_token = :expected_token AND #owner = :expected_owner AND incarnation = :expected_inc
//
// Every other write but a creation is conditional on lease_counter and
// write_token: a row deleted and created again restarts its counter, never
// its token, so a write applied late can never land on the new row.
//
// # Membership rows
//
// Store implements leases.Membership. Membership row i is the item whose
// lease_key is driver.MemberKey(i) ("#members:0", "#members:1", …), the
// header is driver.MemberHeaderKey ("#members"); no lease key can name
// them (every lease method refuses one). Besides lease_key a row holds n,
// its entry count (at most driver.RowCapacity), and one top-level attribute
// per member, named "m_" followed by the owner id (always sent through
// ExpressionAttributeNames), whose value is a map:
//
//	i  S     incarnation
//	h  N     heartbeat
//	l  BOOL  leaving (absent when false)
//	n  N     notice (absent when 0)
//	e  N     shards the member ended (absent when 0)
//	k  N     leases the member holds (absent when 0)
//	s  S     digest of the streams the member subscribes (absent when empty)
//	d  S     digests of the shard sets of the streams the member lists for
//	         the fleet (absent when empty; 17 bytes a stream, at most 4)
//
// An entry of a 64-byte owner id is about 116 bytes (the lister of a
// stream's about 20 more): a full row of 8 stays under 1 KB, so a
// heartbeat costs one write unit. Each write names one
// entry:
//
//   - Join: SET #m = :entry ADD n 1, condition attribute_not_exists(#m) AND
//     (attribute_not_exists(n) OR n < 8); a resent join whose answer was
//     lost finds its own entry and succeeds;
//   - Heartbeat: SET #m = :entry, condition #m.i = :inc AND the notice is
//     the member's AND (unless the heartbeat says leaving) the entry is not
//     leaving; a missing entry fails it;
//   - ReplaceMember: SET #m = :next, or REMOVE #m ADD n -1, condition
//     #m.i = :inc AND #m.h = :hb; an entry already equal to next (or absent,
//     for a removal) counts as replaced;
//   - Members: a strongly consistent GetItem of the row;
//   - Header: a strongly consistent GetItem of the header (attributes
//     r<row> and vanished); BumpRow and ReportVanished: ADD r<row> 1, ADD
//     vanished 1, conditional only on the item not being a lease row.
//
// Every write returns the whole row (ReturnValues ALL_NEW) and, when its
// condition fails, the row as found (ALL_OLD), so a conflict carries the
// entry without another read.
//
// Store implements leases.Checker: Check reads one row that is never written,
// so that a service started on a missing table, a table with another key, or
// with credentials that may not read it, fails at once with an error naming
// the table.
//
// The store does not retry conflicts. The AWS SDK retries transient errors;
// when a retried write fails its condition because the first attempt had in
// fact landed (its answer was lost), the store recognises its own write by the
// write_token carried by every write and returns success.
//
// # Creating the table
//
// CreateTable creates the table (string partition key lease_key, on-demand
// billing), optionally with point-in-time recovery and tags, waits until it
// is ACTIVE, and checks the key schema of a table that exists already. It
// is for deploy time or an operator (the kinesislease command's init): it
// calls CreateTable, DescribeTable and, with its options,
// UpdateContinuousBackups and TagResource, none of which the Store calls or
// a running service needs.
//
// # Mapping
//
// Items are mapped to attributes, and the update expressions written, by
// hand rather than with the SDK's attributevalue and expression packages.
// Both were tried: the store came out longer (1,330 lines against 1,302),
// its lease-row writes cost about five times the CPU (BenchmarkStoreCPU: a
// Checkpoint's own work 23 µs and 207 allocations with the expression
// builder, against 4 to 10 µs and 40 by hand), the membership writes could
// not use the builder at all (an entry's attribute name holds the owner id,
// free text that the builder reads as a document path: "[0]" as a list
// index), and reading the header needs errors that name the attribute. The
// requests on the wire were the same either way.
package dynamo

import (
	"context"
	"fmt"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/leases"
)

// Attribute names of a row.
const (
	attrKey         = "lease_key"
	attrOwner       = "owner" // a DynamoDB reserved word: always written as #owner
	attrCheckpoint  = "checkpoint"
	attrSubSequence = "sub_sequence"
	attrCounter     = "lease_counter"
	attrToken       = "write_token"
	attrRecovered   = "recovered"
	attrRewindTo    = "rewind_to"     // a checkpoint asked for by an operator
	attrRewindSub   = "rewind_to_sub" // its sub-sequence
	attrIncarnation = "incarnation"   // the holder's incarnation (TakeAs)
	attrRewindID    = "rewind_id"     // the last operator's rewind written on the row (Lease.Rewind)
	attrBytesPerS   = "bytes_per_s"   // N: the holder's measured throughput (Lease.Throughput), absent when 0
	attrRecordsPerS = "records_per_s" // N: its records per second, absent when 0
)

// rewindPrefix starts the key of a shard's rewind record (LastRewind):
// "#rewind:" and the lease row's key. No lease key starts with '#'.
const rewindPrefix = "#rewind:"

// markPrefix starts the key of a stream's mark (MarkStream): "#stream:"
// and the stream. No lease key starts with '#'.
const markPrefix = "#stream:"

// takenPrefix starts the key of a row's taken mark (MarkTaken): "#taken:"
// and the lease row's key.
const takenPrefix = "#taken:"

// attrMark is a stream mark's or a taken mark's token (S).
const attrMark = "mark"

// attrSince is a stream mark's Since (N: Unix milliseconds), written once
// with its first token; absent on a mark written by a version before it.
const attrSince = "since"

// Attributes of a rewind record, beside rewind_id, rewind_to and
// rewind_to_sub.
const attrRewoundAt = "rewound_at" // N: Unix milliseconds, for operators reading the table

// Membership rows: one attribute per member, memberPrefix + owner id, a map
// of these keys.
const (
	memberPrefix   = "m_"
	entryInc       = "i" // S: incarnation
	entryHeartbeat = "h" // N: heartbeat
	entryLeaving   = "l" // BOOL: leaving, absent when false
	entryNotice    = "n" // N: notice, absent when 0
	entryEnded     = "e" // N: shards ended by the member, absent when 0
	entryHeld      = "k" // N: leases the member holds, absent when 0
	entryStreams   = "s" // S: digest of the member's streams, absent when empty
	entryListing   = "d" // S: digests of the shard sets the member lists for the fleet, absent when empty
	entryProof     = "p" // N: the member's proof bound in milliseconds, absent when 0
	entryYoung     = "y" // BOOL: the entry is younger than its member's timeout, absent when false
	entryCapacity  = "c" // N: the member's capacity in thousandths, absent when 0
	entryMaxLeases = "x" // N: the member's own cap on leases, absent when 0
	entryLoad      = "b" // N: the member's load in bytes per second, absent when 0
	entryHot       = "o" // S: the member's hot shards (leases.Member.Hot), absent when empty
	entryUtil      = "u" // N: the member's utilization in thousandths, absent when 0
	attrCount      = "n" // N: a membership row's entry count
	// The membership header: r<row> (N) per row, the roster version,
	// vanished (N), and born (N, Unix ms; CreateTable).
	headerRowPrefix = "r"
	attrVanished    = "vanished"
	attrBorn        = "born"
)

// Client is the part of *dynamodb.Client the store uses.
type Client interface {
	// GetItem reads one row; the store always asks for a strongly
	// consistent read.
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	// UpdateItem writes one row; the store always sends a
	// ConditionExpression.
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ Client = (*dynamodb.Client)(nil)

// Store is the DynamoDB leases.Store. It is safe for concurrent use.
type Store struct {
	client       Client
	table        string
	region       string
	legacyStream string
	clientOpts   []func(*dynamodb.Options)
	err          error // set by New for a configuration that cannot work
}

var (
	_ leases.Store      = (*Store)(nil)
	_ leases.Checker    = (*Store)(nil)
	_ leases.Membership = (*Store)(nil)
)

// Option configures a Store.
type Option interface{ apply(*Store) }

type optionFunc func(*Store)

func (f optionFunc) apply(s *Store) { f(s) }

// WithDynamoDBClient makes the store call c instead of a client built from the
// aws.Config given to New.
func WithDynamoDBClient(c Client) Option { return optionFunc(func(s *Store) { s.client = c }) }

// WithDynamoDBOptions adjusts the DynamoDB client New builds (an endpoint, a
// retryer, middleware). It has no effect with WithDynamoDBClient.
func WithDynamoDBOptions(fns ...func(*dynamodb.Options)) Option {
	return optionFunc(func(s *Store) { s.clientOpts = append(s.clientOpts, fns...) })
}

// LegacyStream names the one stream whose checkpoints an earlier format kept
// in rows keyed by the bare shard id.
//
// When a row "stream:shard" is created for that stream and a bare row
// "shard" holds a checkpoint, the checkpoint is copied into the new row (the
// bare row is left as it is; the store cannot delete). Bare rows are ignored
// for every other stream.
//
// Without LegacyStream, creating a row for a shard whose bare row holds a
// checkpoint fails with a *LegacyRowError (matching leases.ErrMisconfigured)
// until the operator names the stream or deletes the bare row: the store
// cannot know which stream the bare row belonged to, and starting from the
// subscription's start position would replay or skip records silently.
func LegacyStream(name string) Option {
	return optionFunc(func(s *Store) { s.legacyStream = name })
}

var tableName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// New returns a Store on table, calling DynamoDB with a client built from
// cfg. A table name that DynamoDB cannot accept makes every call fail with an
// error naming it (see Check).
func New(cfg aws.Config, table string, opts ...Option) *Store {
	s := &Store{table: table, region: cfg.Region}
	for _, o := range opts {
		o.apply(s)
	}
	if !tableName.MatchString(table) {
		s.err = fmt.Errorf("dynamo: table name %q: want 3 to 255 of a-z, A-Z, 0-9, '_', '-', '.': %w", table, leases.ErrMisconfigured)
	}
	if s.client == nil {
		s.client = dynamodb.NewFromConfig(cfg, s.clientOpts...)
	}
	return s
}

// Table returns the table's name.
func (s *Store) Table() string { return s.table }

// checkKey is the key of the row Check reads. It is never written.
const checkKey = "kinesislease:check"

// Check implements leases.Checker. It reads one row (key
// "kinesislease:check", never written) to find out, before consuming, whether
// the table exists, has the right key and can be read with these credentials,
// so it needs only dynamodb:GetItem. Its error names the table and what to
// do, and matches leases.ErrMisconfigured for a configuration that cannot
// work (an invalid table name, a missing table, another key schema, denied
// access). With a context that is done it returns the context's error and
// sends nothing.
func (s *Store) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.err != nil {
		return s.err
	}
	_, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            keyAttr(checkKey),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return s.mapErr("GetItem", checkKey, err)
	}
	return nil
}

// Get implements leases.Store.
func (s *Store) Get(ctx context.Context, key leases.Key) (leases.Lease, error) {
	if err := s.begin(ctx, key); err != nil {
		return leases.Lease{}, err
	}
	item, err := s.getItem(ctx, key.String())
	if err != nil {
		return leases.Lease{}, err
	}
	if item == nil {
		return leases.Lease{}, fmt.Errorf("dynamo: table %q: get %s: %w", s.table, key, leases.ErrNotFound)
	}
	return s.decode(key, item)
}

func (s *Store) getItem(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            keyAttr(key),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, s.mapErr("GetItem", key, err)
	}
	return out.Item, nil
}

// Create implements leases.Store. See LegacyStream for rows of the earlier
// format.
func (s *Store) Create(ctx context.Context, key leases.Key) (leases.Lease, error) {
	if err := s.begin(ctx, key); err != nil {
		return leases.Lease{}, err
	}
	cp, err := s.legacyCheckpoint(ctx, key)
	if err != nil {
		return leases.Lease{}, err
	}
	u := update{set: map[string]types.AttributeValue{}}
	if cp.IsZero() {
		// A row deleted after an operator's rewind comes back at the
		// rewind's position, carrying its id (see leases.Store.Create).
		rec, err := s.LastRewind(ctx, key)
		if err != nil {
			return leases.Lease{}, err
		}
		if rec.ID != "" {
			cp = rec.To
			u.set[attrRewindID] = &types.AttributeValueMemberS{Value: rec.ID}
		}
	}
	if !cp.IsZero() {
		u.setCheckpoint(cp)
	}
	return s.write(ctx, "Create", key, 0, u)
}

// legacyCheckpoint returns the checkpoint to start key's new row with: the
// bare row's, for the legacy stream.
func (s *Store) legacyCheckpoint(ctx context.Context, key leases.Key) (leases.Checkpoint, error) {
	if s.legacyStream != "" && s.legacyStream != key.Stream {
		return leases.Checkpoint{}, nil
	}
	item, err := s.getItem(ctx, key.Shard)
	if err != nil || item == nil {
		return leases.Checkpoint{}, err
	}
	cp := leases.Checkpoint{Sequence: str(item, attrCheckpoint)}
	if cp.Sequence == "" {
		return leases.Checkpoint{}, nil
	}
	if cp.SubSequence, err = num(item, attrSubSequence); err != nil {
		return leases.Checkpoint{}, fmt.Errorf("dynamo: table %q: legacy row %q: %w", s.table, key.Shard, err)
	}
	if s.legacyStream == "" {
		return leases.Checkpoint{}, &LegacyRowError{Table: s.table, Shard: key.Shard, Stream: key.Stream, Checkpoint: cp}
	}
	return cp, nil
}

// LegacyRowError refuses to start a shard whose checkpoint may live in a row
// of the earlier format (keyed by the bare shard id) while no LegacyStream is
// named. It matches leases.ErrMisconfigured.
type LegacyRowError struct {
	Table  string // the table holding the legacy row
	Shard  string // the shard id: the legacy row's key
	Stream string // the stream whose row was to be created
	// Checkpoint is the legacy row's checkpoint.
	Checkpoint leases.Checkpoint
}

// Error names the table, the legacy row and the stream, and says the two
// ways out: naming the legacy stream or deleting the row.
func (e *LegacyRowError) Error() string {
	return fmt.Sprintf("dynamo: table %q holds a legacy row %q (checkpoint %s) for shard %s, and stream %q may be the one it belongs to: "+
		"name the stream the legacy rows belong to with dynamo.LegacyStream(%q) to resume from it, or delete the row %q to start from the subscription's start position",
		e.Table, e.Shard, e.Checkpoint, e.Shard, e.Stream, e.Stream, e.Shard)
}

// Is makes errors.Is(err, leases.ErrMisconfigured) true.
func (e *LegacyRowError) Is(target error) bool { return target == leases.ErrMisconfigured }

// Checkpoint implements leases.Store.
func (s *Store) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if err := s.begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	if cp.Sequence == "" {
		return leases.Lease{}, fmt.Errorf("dynamo: checkpoint %s: empty sequence number", l.Key)
	}
	u := update{set: map[string]types.AttributeValue{}}
	u.setCheckpoint(cp)
	return s.holderWrite(ctx, "Checkpoint", l, u)
}

// Release implements leases.Store.
func (s *Store) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if err := s.begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	u := update{set: map[string]types.AttributeValue{}, remove: []string{"#owner", attrIncarnation}}
	if !cp.IsZero() {
		u.setCheckpoint(cp)
	}
	return s.holderWrite(ctx, "Release", l, u)
}
