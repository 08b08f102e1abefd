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
// the lease names one, incarnation (every name and value is sent through
// ExpressionAttributeNames and ExpressionAttributeValues):
//
//	lease_counter = :counter AND write_token = :token AND owner = :owner AND incarnation = :incarnation
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
//	p  N     the member's proof bound in milliseconds (absent when 0)
//	y  BOOL  young: the entry has stood for less than the member's
//	         timeout (absent when false)
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
// # Mapping
//
// Items are read, and membership entries written, with the SDK's
// attributevalue package (struct tags name the attributes), and the writes
// of lease rows, rewind records, marks and the header are built with its
// expression package. Two parts are written by hand: the expressions of the
// membership writes (Join, Heartbeat, ReplaceMember), whose attribute name
// holds the owner id, free text that the expression package would read as
// a document path ('[0]' as a list index: TestOwnerIDAsIs), and the
// reading of the header, whose attribute names carry the row numbers
// (TestHeaderMalformed: an error names the attribute).
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
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// Attribute names of a row.
const (
	attrKey         = "lease_key"
	attrOwner       = "owner" // a DynamoDB reserved word: always named through a placeholder
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

// row is a lease row, or a rewind record (rewind_id, rewind_to and
// rewind_to_sub), as the store reads it. Its tags are the attribute names
// above.
type row struct {
	Owner       string `dynamodbav:"owner"`
	Incarnation string `dynamodbav:"incarnation"`
	Checkpoint  string `dynamodbav:"checkpoint"`
	SubSequence int64  `dynamodbav:"sub_sequence"`
	Counter     int64  `dynamodbav:"lease_counter"`
	Token       string `dynamodbav:"write_token"`
	Recovered   string `dynamodbav:"recovered"`
	RewindTo    string `dynamodbav:"rewind_to"`
	RewindSub   int64  `dynamodbav:"rewind_to_sub"`
	RewindID    string `dynamodbav:"rewind_id"`
}

// bareRow is what the store reads of a row of the earlier format (keyed by
// the bare shard id): its checkpoint, and nothing else.
type bareRow struct {
	Checkpoint  string `dynamodbav:"checkpoint"`
	SubSequence int64  `dynamodbav:"sub_sequence"`
}

// mark is a stream's mark or a row's taken mark (MarkStream, MarkTaken).
type mark struct {
	Token string `dynamodbav:"mark"`
}

// Membership rows: one attribute per member, memberPrefix + owner id, a map
// (see entry); the conditions of the membership writes name these of its
// keys.
const (
	memberPrefix   = "m_"
	entryInc       = "i" // S: incarnation
	entryHeartbeat = "h" // N: heartbeat
	entryLeaving   = "l" // BOOL: leaving, absent when false
	entryNotice    = "n" // N: notice, absent when 0
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
	var u update
	if cp.IsZero() {
		// A row deleted after an operator's rewind comes back at the
		// rewind's position, carrying its id (see leases.Store.Create).
		rec, err := s.LastRewind(ctx, key)
		if err != nil {
			return leases.Lease{}, err
		}
		if rec.ID != "" {
			cp = rec.To
			u.set(attrRewindID, rec.ID)
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
	var bare bareRow
	if err := attributevalue.UnmarshalMap(item, &bare); err != nil {
		return leases.Checkpoint{}, fmt.Errorf("dynamo: table %q: legacy row %q: %w", s.table, key.Shard, err)
	}
	cp := leases.Checkpoint{Sequence: bare.Checkpoint, SubSequence: bare.SubSequence}
	if cp.Sequence == "" {
		return leases.Checkpoint{}, nil
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
	var u update
	u.setCheckpoint(cp)
	return s.holderWrite(ctx, "Checkpoint", l, u)
}

// Release implements leases.Store.
func (s *Store) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	if err := s.begin(ctx, l.Key); err != nil {
		return leases.Lease{}, err
	}
	var u update
	u.remove(attrOwner, attrIncarnation)
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
	var u update
	u.set(attrRewindID, id)
	var rewound leases.Lease
	if l.Owner == "" {
		// A request left pending by an earlier holder is superseded.
		u.freeOnly, u.token = true, l.Token
		u.remove(attrRewindTo, attrRewindSub)
		u.setCheckpoint(cp)
		rewound, err = s.write(ctx, "Rewind", l.Key, l.Counter, u)
	} else {
		u.set(attrRewindTo, cp.Sequence)
		u.set(attrRewindSub, cp.SubSequence)
		rewound, err = s.holderWrite(ctx, "Rewind", l, u)
	}
	if err != nil {
		s.restoreRewind(context.WithoutCancel(ctx), l.Key, id, prev)
	}
	return rewound, err
}

// restoreRewind puts key's rewind record back to prev (none: no record), if
// it still names the rewind id that failed on its row.
func (s *Store) restoreRewind(ctx context.Context, key leases.Key, failed string, prev leases.RewindRecord) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id, to, sub := expression.Name(attrRewindID), expression.Name(attrRewindTo), expression.Name(attrRewindSub)
	var upd expression.UpdateBuilder
	if prev.ID == "" {
		upd = expression.Remove(id).Remove(to).Remove(sub).Remove(expression.Name(attrRewoundAt))
	} else {
		upd = expression.Set(id, expression.Value(prev.ID)).Set(to, expression.Value(prev.To.Sequence)).Set(sub, expression.Value(prev.To.SubSequence))
	}
	_, _ = s.updateItem(ctx, rewindPrefix+key.String(), upd, id.Equal(expression.Value(failed)), false)
}

// recordRewind writes the rewind record of key (LastRewind): one UpdateItem,
// conditional only on the item not being a lease or membership row.
func (s *Store) recordRewind(ctx context.Context, key leases.Key, id string, cp leases.Checkpoint) error {
	rk := rewindPrefix + key.String()
	upd := expression.Set(expression.Name(attrRewindID), expression.Value(id)).
		Set(expression.Name(attrRewindTo), expression.Value(cp.Sequence)).
		Set(expression.Name(attrRewindSub), expression.Value(cp.SubSequence)).
		Set(expression.Name(attrRewoundAt), expression.Value(time.Now().UnixMilli()))
	if _, err := s.updateItem(ctx, rk, upd, expression.AttributeNotExists(expression.Name(attrCounter)), false); err != nil {
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
	if err != nil {
		return leases.RewindRecord{}, err
	}
	var r row
	err = attributevalue.UnmarshalMap(item, &r)
	if err == nil && r.RewindID == "" {
		return leases.RewindRecord{}, nil // none (or one put back to none: restoreRewind)
	}
	if err != nil || r.RewindTo == "" {
		return leases.RewindRecord{}, fmt.Errorf("dynamo: table %q: rewind record %s: want rewind_id, rewind_to and a numeric rewind_to_sub", s.table, rk)
	}
	return leases.RewindRecord{ID: r.RewindID, To: leases.Checkpoint{Sequence: r.RewindTo, SubSequence: r.RewindSub}}, nil
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
	m := expression.Name(attrMark)
	cond := expression.AttributeNotExists(expression.Name(attrCounter)).
		And(expression.AttributeNotExists(m).Or(m.Equal(expression.Value(token))))
	_, err := s.updateItem(ctx, mk, expression.Set(m, expression.Value(token)), cond, false)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return token, nil
	case !errors.As(err, &ccf):
		return "", s.mapErr("UpdateItem", mk, err)
	}
	cur, err := s.readMark(ctx, mk)
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
	return s.readMark(ctx, markPrefix+stream)
}

// readMark reads the token of the mark item mk with a strongly consistent
// read: "" when it has none.
func (s *Store) readMark(ctx context.Context, mk string) (string, error) {
	item, err := s.getItem(ctx, mk)
	if err != nil {
		return "", err
	}
	var m mark
	if err := attributevalue.UnmarshalMap(item, &m); err != nil {
		return "", fmt.Errorf("dynamo: table %q: %s %s: %w", s.table, markKind(mk), mk, err)
	}
	return m.Token, nil
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
	var u update
	u.remove(attrRewindTo, attrRewindSub)
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
		u.set(attrRecovered, l.Recovered)
	} else {
		u.remove(attrRecovered)
	}
	return s.write(ctx, op, l.Key, l.Counter, u)
}

// update is what a lease-row write sets and removes, and its conditions
// beyond the counter.
type update struct {
	expr     expression.UpdateBuilder
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

// set sets attribute attr to v, marshalled by attributevalue (a string is
// S, an integer N).
func (u *update) set(attr string, v any) {
	u.expr = u.expr.Set(expression.Name(attr), expression.Value(v))
}

// remove removes the attributes attrs.
func (u *update) remove(attrs ...string) {
	for _, attr := range attrs {
		u.expr = u.expr.Remove(expression.Name(attr))
	}
}

func (u *update) setCheckpoint(cp leases.Checkpoint) {
	u.set(attrCheckpoint, cp.Sequence)
	u.set(attrSubSequence, cp.SubSequence)
}

// condition is the condition of a lease-row write: the row does not exist
// when counter is 0 (Create), else it is at counter (and u.token), held by
// u.owner (and u.incarnation) unless u.owner is empty.
func (u *update) condition(counter int64) expression.ConditionBuilder {
	key, owner, inc := expression.Name(attrKey), expression.Name(attrOwner), expression.Name(attrIncarnation)
	if counter == 0 {
		return expression.AttributeNotExists(key)
	}
	cond := expression.Name(attrCounter).Equal(expression.Value(counter))
	if u.token != "" {
		cond = cond.And(expression.Name(attrToken).Equal(expression.Value(u.token)))
	}
	switch {
	case u.exact && u.token == "":
		if u.owner == "" {
			cond = cond.And(expression.AttributeExists(key), expression.AttributeNotExists(owner))
		} else {
			cond = cond.And(owner.Equal(expression.Value(u.owner)))
		}
		if u.incarnation == "" {
			cond = cond.And(expression.AttributeNotExists(inc))
		} else {
			cond = cond.And(inc.Equal(expression.Value(u.incarnation)))
		}
	case u.owner != "" && !u.exact:
		cond = cond.And(owner.Equal(expression.Value(u.owner)))
		if u.incarnation != "" {
			cond = cond.And(inc.Equal(expression.Value(u.incarnation)))
		}
	default:
		// Never create a row by writing to a missing one.
		cond = cond.And(expression.AttributeExists(key))
	}
	if u.freeOnly {
		cond = cond.And(expression.AttributeNotExists(owner))
	}
	return cond
}

// write makes one conditional UpdateItem of a lease row (see
// update.condition). It bumps the counter and writes a new token.
func (s *Store) write(ctx context.Context, op string, key leases.Key, counter int64, u update) (leases.Lease, error) {
	tok := rand.Text()
	u.set(attrCounter, counter+1)
	u.set(attrToken, tok)
	if u.recovered {
		u.set(attrRecovered, tok)
	}
	out, err := s.updateItem(ctx, key.String(), u.expr, u.condition(counter), true)
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
	if t, ok := current[attrToken].(*types.AttributeValueMemberS); ok && t.Value == tok {
		// Our write landed on an earlier attempt whose answer was lost; the
		// SDK's retry then failed the condition our own write had changed.
		return s.decode(key, current)
	}
	return leases.Lease{}, &leases.ConflictError{Op: op, Key: key, ExpectedCounter: counter, ExpectedOwner: u.owner, ExpectedIncarnation: u.incarnation, Err: err}
}

// updateItem makes one UpdateItem of item key: upd, if cond holds. With
// returnItems it asks for the item as written (ALL_NEW) and, when cond
// fails, as found (ALL_OLD, in the *types.ConditionalCheckFailedException).
// DynamoDB's errors are returned as they are, for the caller to map.
func (s *Store) updateItem(ctx context.Context, key string, upd expression.UpdateBuilder, cond expression.ConditionBuilder, returnItems bool) (*dynamodb.UpdateItemOutput, error) {
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("building the expression: %w", err) // the caller names the table
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       keyAttr(key),
		UpdateExpression:          expr.Update(),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}
	if returnItems {
		in.ReturnValues = types.ReturnValueAllNew
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return s.client.UpdateItem(ctx, in)
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
	var r row
	if err := attributevalue.UnmarshalMap(item, &r); err != nil {
		return leases.Lease{}, fmt.Errorf("dynamo: table %q: row %s: %w", s.table, key, err)
	}
	return leases.Lease{
		Key:         key,
		Owner:       r.Owner,
		Incarnation: r.Incarnation,
		Counter:     r.Counter,
		Checkpoint:  leases.Checkpoint{Sequence: r.Checkpoint, SubSequence: r.SubSequence},
		RewindTo:    leases.Checkpoint{Sequence: r.RewindTo, SubSequence: r.RewindSub},
		Rewind:      r.RewindID,
		Token:       r.Token,
		Recovered:   r.Recovered,
	}, nil
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
			"(aws dynamodb create-table --table-name %s --attribute-definitions AttributeName=%s,AttributeType=S "+
			"--key-schema AttributeName=%s,KeyType=HASH --billing-mode PAY_PER_REQUEST), or name the right table: %w: %w",
			s.table, s.region, attrKey, s.table, attrKey, attrKey, leases.ErrMisconfigured, err)
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
