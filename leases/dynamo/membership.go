package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// TakeAs implements leases.Membership: one UpdateItem conditional on
// l.Counter and l.Token (with no token, on l's holder), with a new write_token by which a
// lost answer is recognised, writing l.Checkpoint when it is not zero (and l.Rewind with it, when not empty). It writes owner and incarnation.
func (s *Store) TakeAs(ctx context.Context, l leases.Lease, owner, incarnation string) (leases.Lease, error) {
	u, err := s.holderUpdate(ctx, l.Key, owner, incarnation)
	if err != nil {
		return leases.Lease{}, err
	}
	u.owner, u.incarnation, u.exact, u.token = l.Owner, l.Incarnation, true, l.Token
	if !l.Checkpoint.IsZero() {
		u.setCheckpoint(l.Checkpoint) // see leases.Membership.TakeAs
		if l.Rewind != "" {
			u.set[attrRewindID] = &types.AttributeValueMemberS{Value: l.Rewind}
		}
	}
	return s.write(ctx, "TakeAs", l.Key, l.Counter, u)
}

// holderUpdate checks a write naming owner and incarnation as the holder of
// row key, and returns the update that sets them.
func (s *Store) holderUpdate(ctx context.Context, key leases.Key, owner, incarnation string) (update, error) {
	if err := s.begin(ctx, key); err != nil {
		return update{}, err
	}
	if err := leases.ValidateMember(leases.Member{Owner: owner, Incarnation: incarnation}); err != nil {
		return update{}, err
	}
	return update{set: map[string]types.AttributeValue{
		"#owner":        &types.AttributeValueMemberS{Value: owner},
		attrIncarnation: &types.AttributeValueMemberS{Value: incarnation},
	}}, nil
}

// Join implements leases.Membership: one UpdateItem, SET of m's entry and
// ADD one to the row's entry count n, if the entry is absent and n is below
// driver.RowCapacity. A resent attempt (its answer lost) meets the entry it
// wrote and succeeds.
func (s *Store) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	if err := s.beginMember(ctx, row); err != nil {
		return nil, err
	}
	if err := leases.ValidateMember(m); err != nil {
		return nil, err
	}
	key := driver.MemberKey(row)
	names := map[string]string{"#m": memberPrefix + m.Owner, "#n": attrCount}
	values := map[string]types.AttributeValue{":entry": entryAttr(m), ":one": numAttr(1), ":cap": numAttr(driver.RowCapacity)}
	rows, conflict, err := s.updateMember(ctx, key, m.Owner, "SET #m = :entry ADD #n :one",
		"attribute_not_exists(#m) AND (attribute_not_exists(#n) OR #n < :cap)", names, values)
	if conflict != nil {
		if conflict.Current == m {
			return rows, nil // our own join, landed on an attempt whose answer was lost
		}
		conflict.Op, conflict.Row = "Join", row
		conflict.Full = conflict.Current.Owner == ""
		return nil, conflict
	}
	return rows, err
}

// Heartbeat implements leases.Membership: one UpdateItem, SET of m's entry
// if it exists with m.Incarnation and m.Notice. A resent attempt (its answer
// lost) meets the entry it wrote and succeeds again.
func (s *Store) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	if err := s.beginMember(ctx, row); err != nil {
		return nil, err
	}
	if err := leases.ValidateMember(m); err != nil {
		return nil, err
	}
	key := driver.MemberKey(row)
	names := map[string]string{"#m": memberPrefix + m.Owner, "#i": entryInc, "#n": entryNotice}
	values := map[string]types.AttributeValue{":entry": entryAttr(m), ":inc": &types.AttributeValueMemberS{Value: m.Incarnation}}
	// A notice someone bumped since the member last saw it makes the
	// heartbeat fail, so the member learns of it (the entry is in the error).
	notice := "attribute_not_exists(#m.#n)"
	if m.Notice != 0 {
		notice = "#m.#n = :n"
		values[":n"] = numAttr(m.Notice)
	}
	// An entry marked leaving (by a member that found it dead) stays so:
	// only a heartbeat that itself says leaving may write it.
	leaving := ""
	if !m.Leaving {
		leaving = " AND attribute_not_exists(#m.#l)"
		names["#l"] = entryLeaving
	}
	// Only forward: a heartbeat whose request was held up (applied after
	// its caller gave up) never puts back a value a taker has timed since.
	names["#h"] = entryHeartbeat
	values[":h"] = numAttr(m.Heartbeat)
	rows, conflict, err := s.updateMember(ctx, key, m.Owner, "SET #m = :entry",
		"#m.#i = :inc AND #m.#h < :h AND "+notice+leaving, names, values)
	if conflict != nil && conflict.Current == m {
		return rows, nil // our own write, landed by an attempt whose answer was lost
	}
	if conflict != nil {
		conflict.Op, conflict.Row = "Heartbeat", row
		return nil, conflict
	}
	return rows, err
}

// Header implements leases.Membership: one strongly consistent GetItem of
// the header item.
func (s *Store) Header(ctx context.Context) (leases.MemberHeader, error) {
	if err := ctx.Err(); err != nil {
		return leases.MemberHeader{}, err
	}
	if s.err != nil {
		return leases.MemberHeader{}, s.err
	}
	item, err := s.getItem(ctx, driver.MemberHeaderKey)
	if err != nil {
		return leases.MemberHeader{}, err
	}
	h := leases.MemberHeader{Rows: map[int]int64{}}
	for name, v := range item {
		switch {
		case name == attrVanished:
			if h.Vanished, err = num(item, attrVanished); err != nil {
				return leases.MemberHeader{}, fmt.Errorf("dynamo: table %q: row %s: %w", s.table, driver.MemberHeaderKey, err)
			}
		case name == attrBorn:
			if h.Born, err = num(item, attrBorn); err != nil {
				return leases.MemberHeader{}, fmt.Errorf("dynamo: table %q: row %s: %w", s.table, driver.MemberHeaderKey, err)
			}
		case strings.HasPrefix(name, headerRowPrefix):
			r, err := strconv.Atoi(name[len(headerRowPrefix):])
			n, ok := v.(*types.AttributeValueMemberN)
			if err != nil || !ok {
				return leases.MemberHeader{}, fmt.Errorf("dynamo: table %q: row %s: attribute %s: want a number named r<row>", s.table, driver.MemberHeaderKey, name)
			}
			if h.Rows[r], err = strconv.ParseInt(n.Value, 10, 64); err != nil {
				return leases.MemberHeader{}, fmt.Errorf("dynamo: table %q: row %s: attribute %s: %w", s.table, driver.MemberHeaderKey, name, err)
			}
		}
	}
	return h, nil
}

// BumpRow implements leases.Membership: one UpdateItem, ADD r<row> 1 on the
// header, conditional only on the item not being a lease row (no
// lease_counter): increments commute, and DynamoDB's ADD creates the item
// and the attribute when they are missing.
func (s *Store) BumpRow(ctx context.Context, row int) error {
	if err := s.beginMember(ctx, row); err != nil {
		return err
	}
	return s.bumpHeader(ctx, headerRowPrefix+strconv.Itoa(row))
}

// ReportVanished implements leases.Membership: ADD vanished 1 on the header.
func (s *Store) ReportVanished(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.err != nil {
		return s.err
	}
	return s.bumpHeader(ctx, attrVanished)
}

func (s *Store) bumpHeader(ctx context.Context, attr string) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 keyAttr(driver.MemberHeaderKey),
		UpdateExpression:    aws.String("ADD #a :one"),
		ConditionExpression: aws.String("attribute_not_exists(#c)"), // never a lease row

		ExpressionAttributeNames:  map[string]string{"#a": attr, "#c": attrCounter},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": numAttr(1)},
	})
	if err != nil {
		return s.mapErr("UpdateItem", driver.MemberHeaderKey, err)
	}
	return nil
}

// updateMember makes one conditional UpdateItem of owner's entry in the
// membership row key and returns the row after it. When the condition
// fails, it returns a *MemberConflictError (Op and Row for the caller to
// fill) with the entry found and, in rows, the row it was checked against.
func (s *Store) updateMember(ctx context.Context, key, owner, expr, cond string, names map[string]string, values map[string]types.AttributeValue) ([]leases.Member, *leases.MemberConflictError, error) {
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 keyAttr(key),
		UpdateExpression:                    aws.String(expr),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		rows, err := s.decodeMembers(key, out.Attributes)
		return rows, nil, err
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return nil, nil, s.mapErr("UpdateItem", key, err)
	}
	item, err2 := s.itemOnConflict(ctx, key, ccf)
	if err2 != nil {
		return nil, nil, err2
	}
	cur, err2 := s.entry(key, item, owner)
	if err2 != nil {
		return nil, nil, err2
	}
	rows, err2 := s.decodeMembers(key, item)
	if err2 != nil {
		return nil, nil, err2
	}
	return rows, &leases.MemberConflictError{Owner: owner, Current: cur, Err: err}, nil
}

// Members implements leases.Membership: one strongly consistent GetItem.
func (s *Store) Members(ctx context.Context, row int) ([]leases.Member, error) {
	if err := s.beginMember(ctx, row); err != nil {
		return nil, err
	}
	key := driver.MemberKey(row)
	item, err := s.getItem(ctx, key)
	if err != nil {
		return nil, err
	}
	return s.decodeMembers(key, item)
}

// ReplaceMember implements leases.Membership: one UpdateItem conditional on
// the seen entry's incarnation and heartbeat. When the condition fails and
// the entry already is next (absent, for a removal), an earlier attempt of
// this call whose answer was lost had landed: it succeeds.
func (s *Store) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	if err := s.beginMember(ctx, row); err != nil {
		return nil, err
	}
	if err := leases.ValidateReplaceMember(seen, next); err != nil {
		return nil, err
	}
	key := driver.MemberKey(row)
	values := map[string]types.AttributeValue{
		":inc": &types.AttributeValueMemberS{Value: seen.Incarnation},
		":hb":  numAttr(seen.Heartbeat),
	}
	names := map[string]string{"#m": memberPrefix + seen.Owner, "#i": entryInc, "#h": entryHeartbeat}
	expr := "REMOVE #m ADD #n :minus"
	if next.Owner == "" {
		next = leases.Member{}
		names["#n"] = attrCount
		values[":minus"] = numAttr(-1)
	} else {
		expr = "SET #m = :next"
		values[":next"] = entryAttr(next)
	}
	rows, conflict, err := s.updateMember(ctx, key, seen.Owner, expr, "#m.#i = :inc AND #m.#h = :hb", names, values)
	if conflict != nil {
		if conflict.Current == next {
			// Already replaced: our own write, landed on an attempt whose answer
			// was lost (the SDK's retry then failed the condition it changed).
			return rows, nil
		}
		conflict.Op, conflict.Row = "ReplaceMember", row
		return nil, conflict
	}
	return rows, err
}

func (s *Store) beginMember(ctx context.Context, row int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.err != nil {
		return s.err
	}
	return leases.ValidateMemberRow(row)
}

// itemOnConflict returns the row a failed condition was checked against:
// the one DynamoDB returned (ALL_OLD), or, when it returned none (the row
// does not exist), the row as read now.
func (s *Store) itemOnConflict(ctx context.Context, key string, ccf *types.ConditionalCheckFailedException) (map[string]types.AttributeValue, error) {
	if ccf.Item != nil {
		return ccf.Item, nil
	}
	return s.getItem(ctx, key)
}

// entryAttr is the map value of m's attribute; the owner is in the
// attribute's name.
func entryAttr(m leases.Member) types.AttributeValue {
	e := map[string]types.AttributeValue{
		entryInc:       &types.AttributeValueMemberS{Value: m.Incarnation},
		entryHeartbeat: numAttr(m.Heartbeat),
	}
	if m.Leaving {
		e[entryLeaving] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if m.Notice != 0 {
		e[entryNotice] = numAttr(m.Notice)
	}
	if m.Ended != 0 {
		e[entryEnded] = numAttr(m.Ended)
	}
	if m.Held != 0 {
		e[entryHeld] = numAttr(m.Held)
	}
	if m.Streams != "" {
		e[entryStreams] = &types.AttributeValueMemberS{Value: m.Streams}
	}
	if m.Listing != "" {
		e[entryListing] = &types.AttributeValueMemberS{Value: m.Listing}
	}
	if ms := m.Proof.Milliseconds(); ms != 0 {
		e[entryProof] = numAttr(ms)
	}
	if m.Young {
		e[entryYoung] = &types.AttributeValueMemberBOOL{Value: true}
	}
	for name, v := range map[string]int64{entryCapacity: m.Capacity, entryMaxLeases: m.MaxLeases, entryLoad: m.Load, entryUtil: m.Utilization} {
		if v != 0 {
			e[name] = numAttr(v)
		}
	}
	if m.Hot != "" {
		e[entryHot] = &types.AttributeValueMemberS{Value: m.Hot}
	}
	return &types.AttributeValueMemberM{Value: e}
}

// entry returns owner's entry in a membership row's item; the zero Member
// when it has none.
func (s *Store) entry(key string, item map[string]types.AttributeValue, owner string) (leases.Member, error) {
	v, ok := item[memberPrefix+owner]
	if !ok {
		return leases.Member{}, nil
	}
	m, err := decodeEntry(owner, v)
	if err != nil {
		return leases.Member{}, fmt.Errorf("dynamo: table %q: row %s: %w", s.table, key, err)
	}
	return m, nil
}

// decodeMembers returns the entries of a membership row's item, sorted by
// owner; nil when it has none.
func (s *Store) decodeMembers(key string, item map[string]types.AttributeValue) ([]leases.Member, error) {
	var ms []leases.Member
	for name, v := range item {
		owner, ok := strings.CutPrefix(name, memberPrefix)
		if !ok {
			continue
		}
		m, err := decodeEntry(owner, v)
		if err != nil {
			return nil, fmt.Errorf("dynamo: table %q: row %s: %w", s.table, key, err)
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b leases.Member) int { return strings.Compare(a.Owner, b.Owner) })
	return ms, nil
}

func decodeEntry(owner string, v types.AttributeValue) (leases.Member, error) {
	mv, ok := v.(*types.AttributeValueMemberM)
	if !ok {
		return leases.Member{}, fmt.Errorf("attribute %s%s: type %T, want a map", memberPrefix, owner, v)
	}
	m := leases.Member{Owner: owner, Incarnation: str(mv.Value, entryInc), Streams: str(mv.Value, entryStreams), Listing: str(mv.Value, entryListing), Hot: str(mv.Value, entryHot)}
	if m.Incarnation == "" {
		return leases.Member{}, fmt.Errorf("attribute %s%s: no incarnation (%s)", memberPrefix, owner, entryInc)
	}
	var err error
	if m.Heartbeat, err = num(mv.Value, entryHeartbeat); err != nil {
		return leases.Member{}, fmt.Errorf("attribute %s%s: %w", memberPrefix, owner, err)
	}
	if m.Notice, err = num(mv.Value, entryNotice); err != nil {
		return leases.Member{}, fmt.Errorf("attribute %s%s: %w", memberPrefix, owner, err)
	}
	if m.Held, err = num(mv.Value, entryHeld); err != nil {
		return leases.Member{}, fmt.Errorf("attribute %s%s: %w", memberPrefix, owner, err)
	}
	var proof int64
	if proof, err = num(mv.Value, entryProof); err != nil {
		return leases.Member{}, fmt.Errorf("attribute %s%s: %w", memberPrefix, owner, err)
	}
	m.Proof = time.Duration(proof) * time.Millisecond
	if m.Ended, err = num(mv.Value, entryEnded); err != nil {
		return leases.Member{}, fmt.Errorf("attribute %s%s: %w", memberPrefix, owner, err)
	}
	for name, to := range map[string]*int64{entryCapacity: &m.Capacity, entryMaxLeases: &m.MaxLeases, entryLoad: &m.Load, entryUtil: &m.Utilization} {
		if *to, err = num(mv.Value, name); err != nil {
			return leases.Member{}, fmt.Errorf("attribute %s%s: %w", memberPrefix, owner, err)
		}
	}
	for name, to := range map[string]*bool{entryLeaving: &m.Leaving, entryYoung: &m.Young} {
		switch v := mv.Value[name].(type) {
		case nil:
		case *types.AttributeValueMemberBOOL:
			*to = v.Value
		default:
			return leases.Member{}, fmt.Errorf("attribute %s%s: %s: type %T, want a boolean", memberPrefix, owner, name, v)
		}
	}
	return m, nil
}

// CreateAs implements leases.Membership: one UpdateItem conditional on
// attribute_not_exists(lease_key), writing owner, incarnation and the
// checkpoint, or, with neither, recovered (the write's own token). Unlike Create it does not consult a legacy bare row: it is
// the recreation of a row whose checkpoint the caller knows.
func (s *Store) CreateAs(ctx context.Context, key leases.Key, owner, incarnation string, cp leases.Checkpoint, rewind string) (leases.Lease, error) {
	var u update
	if owner == "" && incarnation == "" {
		// Free and recovered (see leases.Lease.Recovered).
		if err := s.begin(ctx, key); err != nil {
			return leases.Lease{}, err
		}
		u = update{set: map[string]types.AttributeValue{}, recovered: true}
	} else {
		var err error
		if u, err = s.holderUpdate(ctx, key, owner, incarnation); err != nil {
			return leases.Lease{}, err
		}
	}
	if !cp.IsZero() {
		u.setCheckpoint(cp)
	}
	if rewind != "" {
		u.set[attrRewindID] = &types.AttributeValueMemberS{Value: rewind}
	}
	return s.write(ctx, "CreateAs", key, 0, u)
}
