package dynamo

// The conditional write every lease-row operation ends in: a holder's write
// (holderWrite), the SET, REMOVE and conditions of an UpdateExpression
// (update), the one UpdateItem that bumps the counter and writes a new token
// (write), the checks before a call (begin), a row decoded into a Lease,
// DynamoDB's errors mapped to the store's, and the attribute helpers.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/leases"
)

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
	// The holder's throughput too (see leases.Lease.Throughput).
	for attr, v := range map[string]int64{attrBytesPerS: l.Throughput.BytesPerSecond, attrRecordsPerS: l.Throughput.RecordsPerSecond} {
		if v > 0 {
			u.set[attr] = numAttr(v)
		} else {
			u.remove = append(u.remove, attr)
		}
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
			if l.RewindTo.SubSequence, err = num(item, attrRewindSub); err == nil {
				if l.Throughput.BytesPerSecond, err = num(item, attrBytesPerS); err == nil {
					l.Throughput.RecordsPerSecond, err = num(item, attrRecordsPerS)
				}
			}
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
