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
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
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
	attrCount      = "n" // N: a membership row's entry count
	// The membership header: r<row> (N) per row, the roster version, and
	// vanished (N).
	headerRowPrefix = "r"
	attrVanished    = "vanished"
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

// Rewind implements leases.Store.
func (s *Store) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if err := s.begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	if cp.Sequence == "" {
		return leases.Lease{}, fmt.Errorf("dynamo: rewind %s: empty sequence number", l.Key)
	}
	// The record first: a rewind on the row without its record could be
	// skipped by a row recreated from a copy read before it. If the row's
	// write then fails, the record is put back as it was (best effort: a
	// record left naming a rewind no row carries only makes a row deleted
	// later come back at its position).
	prev, err := s.LastRewind(ctx, l.Key)
	if err != nil {
		return leases.Lease{}, err
	}
	id := driver.NewRewindID(time.Now())
	if err := s.recordRewind(ctx, l.Key, id, cp); err != nil {
		return leases.Lease{}, err
	}
	rw := &types.AttributeValueMemberS{Value: id}
	var row leases.Lease
	if l.Owner == "" {
		// A request left pending by an earlier holder is superseded.
		u := update{set: map[string]types.AttributeValue{attrRewindID: rw}, remove: []string{attrRewindTo, attrRewindSub}, freeOnly: true, token: l.Token}
		u.setCheckpoint(cp)
		row, err = s.write(ctx, "Rewind", l.Key, l.Counter, u)
	} else {
		u := update{set: map[string]types.AttributeValue{
			attrRewindTo:  &types.AttributeValueMemberS{Value: cp.Sequence},
			attrRewindSub: numAttr(cp.SubSequence),
			attrRewindID:  rw,
		}}
		row, err = s.holderWrite(ctx, "Rewind", l, u)
	}
	if err != nil {
		s.restoreRewind(context.WithoutCancel(ctx), l.Key, id, prev)
	}
	return row, err
}

// restoreRewind puts key's rewind record back to prev (none: no record), if
// it still names the rewind id that failed on its row.
func (s *Store) restoreRewind(ctx context.Context, key leases.Key, id string, prev leases.RewindRecord) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rk := rewindPrefix + key.String()
	in := &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      keyAttr(rk),
		UpdateExpression:         aws.String("REMOVE #id, #to, #sub, #at"),
		ConditionExpression:      aws.String("#id = :failed"),
		ExpressionAttributeNames: map[string]string{"#id": attrRewindID, "#to": attrRewindTo, "#sub": attrRewindSub, "#at": attrRewoundAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":failed": &types.AttributeValueMemberS{Value: id},
		},
	}
	if prev.ID != "" {
		in.UpdateExpression = aws.String("SET #id = :id, #to = :to, #sub = :sub")
		in.ExpressionAttributeNames = map[string]string{"#id": attrRewindID, "#to": attrRewindTo, "#sub": attrRewindSub}
		in.ExpressionAttributeValues[":id"] = &types.AttributeValueMemberS{Value: prev.ID}
		in.ExpressionAttributeValues[":to"] = &types.AttributeValueMemberS{Value: prev.To.Sequence}
		in.ExpressionAttributeValues[":sub"] = numAttr(prev.To.SubSequence)
	}
	_, _ = s.client.UpdateItem(ctx, in)
}

// recordRewind writes the rewind record of key (LastRewind): one UpdateItem,
// conditional only on the item not being a lease or membership row.
func (s *Store) recordRewind(ctx context.Context, key leases.Key, id string, cp leases.Checkpoint) error {
	rk := rewindPrefix + key.String()
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 keyAttr(rk),
		UpdateExpression:    aws.String("SET #id = :id, #to = :to, #sub = :sub, #at = :at"),
		ConditionExpression: aws.String("attribute_not_exists(#c)"),
		ExpressionAttributeNames: map[string]string{
			"#id": attrRewindID, "#to": attrRewindTo, "#sub": attrRewindSub, "#at": attrRewoundAt, "#c": attrCounter,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":id":  &types.AttributeValueMemberS{Value: id},
			":to":  &types.AttributeValueMemberS{Value: cp.Sequence},
			":sub": numAttr(cp.SubSequence),
			":at":  numAttr(time.Now().UnixMilli()),
		},
	})
	if err != nil {
		return s.mapErr("UpdateItem", rk, err)
	}
	return nil
}

// LastRewind implements leases.Membership: one strongly consistent GetItem
// of the shard's rewind record.
func (s *Store) LastRewind(ctx context.Context, key leases.Key) (leases.RewindRecord, error) {
	if err := s.begin(ctx, key); err != nil {
		return leases.RewindRecord{}, err
	}
	rk := rewindPrefix + key.String()
	item, err := s.getItem(ctx, rk)
	if err != nil || item == nil || str(item, attrRewindID) == "" {
		return leases.RewindRecord{}, err // none (or one put back to none: restoreRewind)
	}
	r := leases.RewindRecord{ID: str(item, attrRewindID), To: leases.Checkpoint{Sequence: str(item, attrRewindTo)}}
	if r.To.SubSequence, err = num(item, attrRewindSub); err != nil || r.ID == "" || r.To.Sequence == "" {
		return leases.RewindRecord{}, fmt.Errorf("dynamo: table %q: rewind record %s: want rewind_id, rewind_to and a numeric rewind_to_sub", s.table, rk)
	}
	return r, nil
}

// MarkStream implements leases.Membership: one UpdateItem that sets the
// mark's token, conditional on the mark having none (or this one: a resent
// call) and on the item not being a lease or membership row; when another
// token is there, one strongly consistent GetItem returns it.
func (s *Store) MarkStream(ctx context.Context, stream, token string) (string, error) {
	if err := s.beginMark(ctx, stream, token, true); err != nil {
		return "", err
	}
	return s.markOnce(ctx, markPrefix+stream, token)
}

// markKind names the mark item mk holds, for errors.
func markKind(mk string) string {
	if strings.HasPrefix(mk, takenPrefix) {
		return "taken mark"
	}
	return "stream mark"
}

// markOnce writes token as the mark of item mk unless it holds another
// (MarkStream, MarkTaken), and returns the token it holds.
func (s *Store) markOnce(ctx context.Context, mk, token string) (string, error) {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      keyAttr(mk),
		UpdateExpression:         aws.String("SET #mk = :tok"),
		ConditionExpression:      aws.String("attribute_not_exists(#c) AND (attribute_not_exists(#mk) OR #mk = :tok)"),
		ExpressionAttributeNames: map[string]string{"#mk": attrMark, "#c": attrCounter},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":tok": &types.AttributeValueMemberS{Value: token},
		},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return token, nil
	case !errors.As(err, &ccf):
		return "", s.mapErr("UpdateItem", mk, err)
	}
	item, err := s.getItem(ctx, mk)
	cur := str(item, attrMark)
	if err == nil && cur == "" {
		err = fmt.Errorf("dynamo: table %q: %s %s: the write met another token, which the read then did not find", s.table, markKind(mk), mk)
	}
	return cur, err
}

// MarkTaken implements leases.Membership as MarkStream does, on the item
// "#taken:" and the row's key: one UpdateItem, and one strongly consistent
// GetItem when another token is there.
func (s *Store) MarkTaken(ctx context.Context, key leases.Key, token string) (string, error) {
	if err := s.begin(ctx, key); err != nil {
		return "", err
	}
	if err := leases.ValidateTakenMark(key, token); err != nil {
		return "", err
	}
	return s.markOnce(ctx, takenPrefix+key.String(), token)
}

// StreamMark implements leases.Membership: one strongly consistent GetItem.
func (s *Store) StreamMark(ctx context.Context, stream string) (string, error) {
	if err := s.beginMark(ctx, stream, "", false); err != nil {
		return "", err
	}
	item, err := s.getItem(ctx, markPrefix+stream)
	if err != nil {
		return "", err
	}
	return str(item, attrMark), nil
}

// beginMark is begin for a stream's mark.
func (s *Store) beginMark(ctx context.Context, stream, token string, write bool) error {
	if s.err != nil {
		return s.err
	}
	if err := leases.ValidateMark(stream, token, write); err != nil {
		return err
	}
	return ctx.Err()
}

// ApplyRewind implements leases.Store.
func (s *Store) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	if err := s.begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	if l.RewindTo.Sequence == "" {
		return leases.Lease{}, &leases.ConflictError{Op: "ApplyRewind", Key: l.Key, ExpectedCounter: l.Counter, ExpectedOwner: l.Owner, ExpectedIncarnation: l.Incarnation}
	}
	// The counter condition guarantees rewind_to is still the one l holds.
	u := update{set: map[string]types.AttributeValue{}, remove: []string{attrRewindTo, attrRewindSub}}
	u.setCheckpoint(l.RewindTo)
	return s.holderWrite(ctx, "ApplyRewind", l, u)
}

// holderWrite is a write of l's holder: conditional on its owner and, when l
// names one, its incarnation.
func (s *Store) holderWrite(ctx context.Context, op string, l leases.Lease, u update) (leases.Lease, error) {
	if l.Owner == "" {
		// A free lease has no holder to write as: the condition cannot hold.
		return leases.Lease{}, &leases.ConflictError{Op: op, Key: l.Key, ExpectedCounter: l.Counter}
	}
	u.owner, u.incarnation, u.token = l.Owner, l.Incarnation, l.Token
	if l.Recovered != "" {
		// The holder's copy decides (see leases.Lease.Recovered).
		u.set[attrRecovered] = &types.AttributeValueMemberS{Value: l.Recovered}
	} else {
		u.remove = append(u.remove, attrRecovered)
	}
	return s.write(ctx, op, l.Key, l.Counter, u)
}

// update is the SET and REMOVE parts of an UpdateExpression, and the
// conditions beyond the counter.
type update struct {
	set      map[string]types.AttributeValue // attribute (or #name) -> value
	remove   []string
	freeOnly bool // the row must have no owner
	// owner, if set, must hold the row (a holder write), and incarnation,
	// if set too, must be the row's.
	owner, incarnation string
	// token, if set, must be the row's write_token: the version its writer
	// read. A row deleted and recreated has a new token, so that a late
	// copy of a write (applied after its caller gave up) can never land on
	// the recreated row, whose counter restarted.
	token string
	// exact: the row's holder must be exactly owner and incarnation, an
	// empty one meaning none (TakeAs without a token: a recreated row
	// restarts its counter, so the counter alone could match another row).
	exact bool
	// recovered: the row is created recovered, marked with the write's own
	// token (see leases.Lease.Recovered).
	recovered bool
}

func (u *update) setCheckpoint(cp leases.Checkpoint) {
	u.set[attrCheckpoint] = &types.AttributeValueMemberS{Value: cp.Sequence}
	u.set[attrSubSequence] = numAttr(cp.SubSequence)
}

// write makes one conditional UpdateItem: on a row that does not exist when
// counter is 0 (Create), else on the row at counter, held by u.owner (and
// u.incarnation) unless u.owner is empty. It bumps the counter and writes a
// new token.
func (s *Store) write(ctx context.Context, op string, key leases.Key, counter int64, u update) (leases.Lease, error) {
	tok := rand.Text()
	u.set[attrCounter] = numAttr(counter + 1)
	u.set[attrToken] = &types.AttributeValueMemberS{Value: tok}
	if u.recovered {
		u.set[attrRecovered] = &types.AttributeValueMemberS{Value: tok}
	}

	names := map[string]string{}
	values := map[string]types.AttributeValue{}
	var sets []string
	for attr, v := range u.set {
		placeholder := ":" + strings.TrimPrefix(attr, "#")
		sets = append(sets, attr+" = "+placeholder)
		values[placeholder] = v
		if attr == "#owner" {
			names["#owner"] = attrOwner
		}
	}
	expr := "SET " + strings.Join(sets, ", ")
	if len(u.remove) > 0 {
		expr += " REMOVE " + strings.Join(u.remove, ", ")
		for _, attr := range u.remove {
			if attr == "#owner" {
				names["#owner"] = attrOwner
			}
		}
	}
	var cond string
	if counter == 0 {
		cond = "attribute_not_exists(" + attrKey + ")"
	} else {
		cond = attrCounter + " = :expected_counter"
		values[":expected_counter"] = numAttr(counter)
		if u.token != "" {
			cond += " AND " + attrToken + " = :expected_token"
			values[":expected_token"] = &types.AttributeValueMemberS{Value: u.token}
		}
		switch {
		case u.exact && u.token == "":
			names["#owner"] = attrOwner
			if u.owner == "" {
				cond += " AND attribute_exists(" + attrKey + ") AND attribute_not_exists(#owner)"
			} else {
				cond += " AND #owner = :expected_owner"
				values[":expected_owner"] = &types.AttributeValueMemberS{Value: u.owner}
			}
			if u.incarnation == "" {
				cond += " AND attribute_not_exists(" + attrIncarnation + ")"
			} else {
				cond += " AND " + attrIncarnation + " = :expected_inc"
				values[":expected_inc"] = &types.AttributeValueMemberS{Value: u.incarnation}
			}
		case u.owner != "" && !u.exact:
			cond += " AND #owner = :expected_owner"
			names["#owner"] = attrOwner
			values[":expected_owner"] = &types.AttributeValueMemberS{Value: u.owner}
			if u.incarnation != "" {
				cond += " AND " + attrIncarnation + " = :expected_inc"
				values[":expected_inc"] = &types.AttributeValueMemberS{Value: u.incarnation}
			}
		default:
			// Never create a row by writing to a missing one.
			cond += " AND attribute_exists(" + attrKey + ")"
		}
		if u.freeOnly {
			cond += " AND attribute_not_exists(#owner)"
			names["#owner"] = attrOwner
		}
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 keyAttr(key.String()),
		UpdateExpression:                    aws.String(expr),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if len(names) > 0 {
		in.ExpressionAttributeNames = names
	}
	out, err := s.client.UpdateItem(ctx, in)
	if err == nil {
		return s.decode(key, out.Attributes)
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return leases.Lease{}, s.mapErr("UpdateItem", key.String(), err)
	}
	current := ccf.Item
	if current == nil {
		// The row does not exist, or DynamoDB did not return it.
		var gerr error
		if current, gerr = s.getItem(ctx, key.String()); gerr != nil {
			return leases.Lease{}, gerr
		}
		if current == nil && counter != 0 {
			return leases.Lease{}, fmt.Errorf("dynamo: table %q: %s %s: %w", s.table, op, key, leases.ErrNotFound)
		}
	}
	if current != nil && str(current, attrToken) == tok {
		// Our write landed on an earlier attempt whose answer was lost; the
		// SDK's retry then failed the condition our own write had changed.
		return s.decode(key, current)
	}
	return leases.Lease{}, &leases.ConflictError{Op: op, Key: key, ExpectedCounter: counter, ExpectedOwner: u.owner, ExpectedIncarnation: u.incarnation, Err: err}
}

func (s *Store) begin(ctx context.Context, key leases.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.err != nil {
		return s.err
	}
	return leases.ValidateLeaseKey(key)
}

// decode turns an item into a Lease.
func (s *Store) decode(key leases.Key, item map[string]types.AttributeValue) (leases.Lease, error) {
	l := leases.Lease{
		Key:         key,
		Owner:       str(item, attrOwner),
		Incarnation: str(item, attrIncarnation),
		Checkpoint:  leases.Checkpoint{Sequence: str(item, attrCheckpoint)},
		RewindTo:    leases.Checkpoint{Sequence: str(item, attrRewindTo)},
		Rewind:      str(item, attrRewindID),
		Token:       str(item, attrToken),
		Recovered:   str(item, attrRecovered),
	}
	var err error
	if l.Counter, err = num(item, attrCounter); err == nil {
		if l.Checkpoint.SubSequence, err = num(item, attrSubSequence); err == nil {
			l.RewindTo.SubSequence, err = num(item, attrRewindSub)
		}
	}
	if err != nil {
		return leases.Lease{}, fmt.Errorf("dynamo: table %q: row %s: %w", s.table, key, err)
	}
	return l, nil
}

// mapErr names the table in err and maps errors that no retry can cure onto
// leases.ErrMisconfigured, keeping the SDK error wrapped.
func (s *Store) mapErr(op, key string, err error) error {
	var (
		notFound *types.ResourceNotFoundException
		apiErr   smithy.APIError
	)
	switch {
	case errors.As(err, &notFound):
		return fmt.Errorf("dynamo: table %q not found in region %q: create it with a string partition key %s and on-demand billing "+
			"(kinesislease init --table %s, or aws dynamodb create-table --table-name %s --attribute-definitions AttributeName=%s,AttributeType=S "+
			"--key-schema AttributeName=%s,KeyType=HASH --billing-mode PAY_PER_REQUEST), or name the right table: %w: %w",
			s.table, s.region, attrKey, s.table, s.table, attrKey, attrKey, leases.ErrMisconfigured, err)
	case errors.As(err, &apiErr) && apiErr.ErrorCode() == "ValidationException" && wrongKey(apiErr.ErrorMessage()):
		return fmt.Errorf("dynamo: table %q: its key is not the string partition key %s alone: "+
			"use a table created with --key-schema AttributeName=%s,KeyType=HASH (type S): %w: %w",
			s.table, attrKey, attrKey, leases.ErrMisconfigured, err)
	case denied(err):
		return fmt.Errorf("dynamo: table %q: access denied to %s: the credentials need dynamodb:GetItem and dynamodb:UpdateItem on the table: %w: %w",
			s.table, op, leases.ErrMisconfigured, err)
	}
	return fmt.Errorf("dynamo: table %q: %s %q: %w", s.table, op, key, err)
}

// denied reports whether err says the credentials may not call DynamoDB as
// asked, or are not valid at all.
func denied(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode() {
	case "AccessDeniedException", "AccessDenied", "UnrecognizedClientException", "InvalidSignatureException",
		"MissingAuthenticationTokenException", "ExpiredTokenException", "InvalidClientTokenId", "KMSAccessDeniedException":
		return true
	}
	return false
}

// wrongKey reports whether a ValidationException's message says the key we
// sent is not the table's: DynamoDB says "The provided key element does not
// match the schema"; DynamoDB Local, when the table's key has another name,
// "One of the required keys was not given a value".
func wrongKey(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "key element does not match the schema") ||
		strings.Contains(msg, "required keys was not given a value")
}

func keyAttr(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberS{Value: key}}
}

func numAttr(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func str(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func num(item map[string]types.AttributeValue, name string) (int64, error) {
	switch v := item[name].(type) {
	case nil:
		return 0, nil
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("attribute %s: %w", name, err)
		}
		return n, nil
	default:
		return 0, fmt.Errorf("attribute %s: type %T, want a number", name, v)
	}
}
