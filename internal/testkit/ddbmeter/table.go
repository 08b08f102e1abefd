package ddbmeter

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// KeyAttr is the table's partition key, a string (leases/dynamo's).
const KeyAttr = "lease_key"

// Units are capacity units consumed, and the calls that consumed them.
type Units struct {
	RCU, WCU float64
	// Reads and Writes count the calls billed; FailedWrites the writes
	// whose condition failed (billed all the same).
	Reads, Writes, FailedWrites int64
	// Throttled counts the calls refused because their item was hot
	// (reads and writes; DynamoDB bills none of them).
	Throttled int64
}

func (u *Units) add(v Units) {
	u.RCU += v.RCU
	u.WCU += v.WCU
	u.Reads += v.Reads
	u.Writes += v.Writes
	u.FailedWrites += v.FailedWrites
	u.Throttled += v.Throttled
}

// Add returns u + v.
func (u Units) Add(v Units) Units {
	u.add(v)
	return u
}

// Sub returns u - v (what was consumed between two snapshots).
func (u Units) Sub(v Units) Units {
	return Units{RCU: u.RCU - v.RCU, WCU: u.WCU - v.WCU, Reads: u.Reads - v.Reads, Writes: u.Writes - v.Writes,
		FailedWrites: u.FailedWrites - v.FailedWrites, Throttled: u.Throttled - v.Throttled}
}

// Table is an in-memory DynamoDB table keyed by KeyAttr (a string) that
// bills every call and throttles hot items (see the package
// documentation). Client returns the views callers use; every view shares
// the items. It is safe for concurrent use.
type Table struct {
	mu sync.Mutex
	// items are never modified once stored (an update stores a new map),
	// so that answers can share them; sizes holds their sizes.
	items    map[string]map[string]types.AttributeValue
	sizes    map[string]int
	updates  map[string]*updateExpr
	conds    map[string]*condExpr
	byClient map[int]*Units
	byKey    map[string]*Units
	// kind, if set, classifies keys; byClientKind bills by client and kind.
	kind         func(key string) string
	kinds        map[string]string // key -> kind, cached
	byClientKind map[int]map[string]*Units
	// meters throttle each item and track its peaks (throttle.go).
	meters      map[string]*meter
	unthrottled bool          // NoThrottling
	provisioned bool          // Provisioned
	requests    atomic.Uint64 // the last request id given (requestID)
}

// NewTable returns an empty table; it throttles hot items unless opts
// include NoThrottling.
func NewTable(opts ...Option) *Table {
	t := &Table{
		items: map[string]map[string]types.AttributeValue{}, sizes: map[string]int{},
		updates: map[string]*updateExpr{}, conds: map[string]*condExpr{},
		byClient: map[int]*Units{}, byKey: map[string]*Units{}, meters: map[string]*meter{},
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Classify makes the bill break each client's units down by the kind of
// item (kind(key), for example a membership row or a lease row) too (see
// Bill.ByClientKind). Call it before the table is used.
func (t *Table) Classify(kind func(key string) string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.kind, t.kinds, t.byClientKind = kind, map[string]string{}, map[int]map[string]*Units{}
}

// Client returns a view of the table whose calls are billed to id.
func (t *Table) Client(id int) *Client { return &Client{t: t, id: id} }

// Bill is a snapshot of what the table's calls consumed so far: by client
// id, by item key and, if the table classifies keys (Classify), by client
// and kind of item; and each item's peak second since the table's creation
// or its last ResetPeaks.
type Bill struct {
	ByClient     map[int]Units
	ByKey        map[string]Units
	ByClientKind map[int]map[string]Units
	Peaks        map[string]Peak
}

// Bill returns what the calls consumed so far.
func (t *Table) Bill() Bill {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := Bill{ByClient: make(map[int]Units, len(t.byClient)), ByKey: make(map[string]Units, len(t.byKey))}
	for id, u := range t.byClient {
		b.ByClient[id] = *u
	}
	for k, u := range t.byKey {
		b.ByKey[k] = *u
	}
	b.Peaks = make(map[string]Peak, len(t.meters))
	for k, m := range t.meters {
		if m.peak != (Peak{}) {
			b.Peaks[k] = m.peak
		}
	}
	if t.byClientKind != nil {
		b.ByClientKind = make(map[int]map[string]Units, len(t.byClientKind))
		for id, m := range t.byClientKind {
			c := make(map[string]Units, len(m))
			for k, u := range m {
				c[k] = *u
			}
			b.ByClientKind[id] = c
		}
	}
	return b
}

// Item returns a copy of the item with key key, nil if there is none.
func (t *Table) Item(key string) map[string]types.AttributeValue {
	t.mu.Lock()
	defer t.mu.Unlock()
	return cloneItem(t.items[key])
}

// Keys returns the keys of every item, in no order.
func (t *Table) Keys() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Keys(t.items))
}

// charge bills u to client id and item key; t.mu is held.
func (t *Table) charge(id int, key string, u Units) {
	c := t.byClient[id]
	if c == nil {
		c = &Units{}
		t.byClient[id] = c
	}
	c.add(u)
	k := t.byKey[key]
	if k == nil {
		k = &Units{}
		t.byKey[key] = k
	}
	k.add(u)
	if t.kind == nil {
		return
	}
	kind, ok := t.kinds[key]
	if !ok {
		kind = t.kind(key)
		t.kinds[key] = kind
	}
	m := t.byClientKind[id]
	if m == nil {
		m = map[string]*Units{}
		t.byClientKind[id] = m
	}
	ck := m[kind]
	if ck == nil {
		ck = &Units{}
		m[kind] = ck
	}
	ck.add(u)
}

// Client is one caller's view of a Table: a dynamo.Client.
type Client struct {
	t  *Table
	id int
}

func validation(format string, args ...any) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: fmt.Sprintf(format, args...)}
}

func keyOf(key map[string]types.AttributeValue) (string, error) {
	if len(key) != 1 {
		return "", validation("The provided key element does not match the schema")
	}
	s, ok := key[KeyAttr].(*types.AttributeValueMemberS)
	if !ok || s.Value == "" {
		return "", validation("The provided key element does not match the schema")
	}
	return s.Value, nil
}

// lock checks a call on the item of key k and locks the table (the caller
// unlocks it): the table and the item's key.
func (c *Client) lock(ctx context.Context, k map[string]types.AttributeValue) (*Table, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	key, err := keyOf(k)
	if err != nil {
		return nil, "", err
	}
	c.t.mu.Lock()
	return c.t, key, nil
}

// GetItem implements dynamo.Client: the item (nil if none), billed
// ceil(size / 4 KB) read units, at least one; half for an eventually
// consistent read. A read the item's read bucket has not the units for is
// throttled (see the package documentation): not billed, counted, and
// answered with the error DynamoDB's client would return. The answer's
// item is the table's own: the caller must not modify it (the DynamoDB
// store does not).
func (c *Client) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	t, key, err := c.lock(ctx, in.Key)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	units := float64(ReadUnits(t.sizes[key]))
	if !aws.ToBool(in.ConsistentRead) {
		units /= 2
	}
	u := Units{RCU: units, Reads: 1}
	if !t.admit(c.id, key, time.Now(), u) {
		return nil, t.throttled("GetItem", aws.ToString(in.TableName), false)
	}
	t.charge(c.id, key, u)
	return &dynamodb.GetItemOutput{Item: t.items[key]}, nil
}

// UpdateItem implements dynamo.Client: the condition checked against the
// item as it is, the update applied to a copy, billed ceil(max(size
// before, size after) / 1 KB) write units, at least one, whether the
// condition held or not. A write the item's write bucket has not those
// units for is throttled (see the package documentation): neither applied
// nor billed, counted, and answered with the error DynamoDB's client would
// return, whether its condition held or not. Items in the answer (ALL_NEW,
// ALL_OLD) are the table's own: the caller must not modify them.
func (c *Client) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	t, key, err := c.lock(ctx, in.Key)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	u, cnd, err := t.parse(in)
	if err != nil {
		return nil, err
	}
	e := env{names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues}

	old := t.items[key]
	view := old
	if view == nil {
		view = map[string]types.AttributeValue{}
	}
	ok := true
	if cnd != nil {
		if ok, err = cnd.c.eval(view, e); err != nil {
			return nil, validation("%v", err)
		}
	}
	next := maps.Clone(view) // set and remove copy what they change below it
	next[KeyAttr] = &types.AttributeValueMemberS{Value: key}
	if err := u.apply(next, e); err != nil {
		return nil, validation("%v", err)
	}
	if _, ok := next[KeyAttr].(*types.AttributeValueMemberS); !ok {
		return nil, validation("Cannot update attribute %s. This attribute is part of the key", KeyAttr)
	}
	size := Size(next)
	units := Units{WCU: float64(WriteUnits(max(t.sizes[key], size))), Writes: 1}
	if !t.admit(c.id, key, time.Now(), units) {
		return nil, t.throttled("UpdateItem", aws.ToString(in.TableName), true)
	}
	if !ok {
		units.FailedWrites = 1
		t.charge(c.id, key, units)
		ccf := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
		if in.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
			ccf.Item = old
		}
		return nil, ccf
	}
	t.charge(c.id, key, units)
	t.items[key], t.sizes[key] = next, size
	out := &dynamodb.UpdateItemOutput{}
	switch in.ReturnValues {
	case types.ReturnValueAllNew:
		out.Attributes = next
	case types.ReturnValueAllOld:
		out.Attributes = old
	case types.ReturnValueNone, "":
	default:
		return nil, validation("ReturnValues %s is not supported here", in.ReturnValues)
	}
	return out, nil
}

// parse returns the parsed expressions of in (cached by their text), after
// checking that the placeholders used and given match; t.mu is held.
func (t *Table) parse(in *dynamodb.UpdateItemInput) (*updateExpr, *condExpr, error) {
	src := aws.ToString(in.UpdateExpression)
	if src == "" {
		return nil, nil, validation("no UpdateExpression: this table supports update expressions only")
	}
	u := t.updates[src]
	if u == nil {
		var err error
		if u, err = parseUpdate(src); err != nil {
			return nil, nil, validation("Invalid UpdateExpression %q: %v", src, err)
		}
		t.updates[src] = u
	}
	var c *condExpr
	if s := aws.ToString(in.ConditionExpression); s != "" {
		if c = t.conds[s]; c == nil {
			var err error
			if c, err = parseCondition(s); err != nil {
				return nil, nil, validation("Invalid ConditionExpression %q: %v", s, err)
			}
			t.conds[s] = c
		}
	}
	usedNames := func(n string) bool { return u.names[n] || (c != nil && c.names[n]) }
	usedValues := func(v string) bool { return u.values[v] || (c != nil && c.values[v]) }
	for n := range in.ExpressionAttributeNames {
		if !usedNames(n) {
			return nil, nil, validation("Value provided in ExpressionAttributeNames unused in expressions: keys: {%s}", n)
		}
	}
	for v := range in.ExpressionAttributeValues {
		if !usedValues(v) {
			return nil, nil, validation("Value provided in ExpressionAttributeValues unused in expressions: keys: {%s}", v)
		}
	}
	check := func(names, values map[string]bool) error {
		for n := range names {
			if _, ok := in.ExpressionAttributeNames[n]; !ok {
				return validation("An expression attribute name used in the document path is not defined; attribute name: %s", n)
			}
		}
		for v := range values {
			if _, ok := in.ExpressionAttributeValues[v]; !ok {
				return validation("An expression attribute value used in expression is not defined; attribute value: %s", v)
			}
		}
		return nil
	}
	if err := check(u.names, u.values); err != nil {
		return nil, nil, err
	}
	if c != nil {
		if err := check(c.names, c.values); err != nil {
			return nil, nil, err
		}
	}
	return u, c, nil
}
