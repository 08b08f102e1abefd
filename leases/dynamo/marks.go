package dynamo

// The first-wins marks: a stream's mark (MarkStream, StreamMark) and a
// lease row's taken mark (MarkTaken), each an item of its own written once
// by one conditional UpdateItem (markOnce), and the checks before them
// (beginMark).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/leases"
)

// MarkStream implements leases.Membership: one UpdateItem that writes m,
// conditional on the item holding no mark (or m itself: a resent call) and
// not being a lease or membership row; when another mark is there, one
// strongly consistent GetItem returns it.
func (s *Store) MarkStream(ctx context.Context, stream string, m leases.Mark) (leases.Mark, error) {
	if err := s.beginMark(ctx, stream, m, true); err != nil {
		return leases.Mark{}, err
	}
	return s.markOnce(ctx, markPrefix+stream, m)
}

// markKind names the mark item mk holds, for errors.
func markKind(mk string) string {
	if strings.HasPrefix(mk, takenPrefix) {
		return "taken mark"
	}
	return "stream mark"
}

// markOnce writes m as the mark of item mk unless it holds another
// (MarkStream, MarkTaken), and returns the mark it holds: a mark, once
// written, never changes.
func (s *Store) markOnce(ctx context.Context, mk string, m leases.Mark) (leases.Mark, error) {
	in := &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      keyAttr(mk),
		UpdateExpression:         aws.String("SET #mk = :tok"),
		ConditionExpression:      aws.String("attribute_not_exists(#c) AND (attribute_not_exists(#mk) OR (#mk = :tok AND attribute_not_exists(#since)))"),
		ExpressionAttributeNames: map[string]string{"#mk": attrMark, "#c": attrCounter, "#since": attrSince},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":tok": &types.AttributeValueMemberS{Value: m.Token},
		},
	}
	if !m.Since.IsZero() {
		m.Since = time.UnixMilli(m.Since.UnixMilli())
		in.UpdateExpression = aws.String("SET #mk = :tok, #since = :since")
		in.ConditionExpression = aws.String("attribute_not_exists(#c) AND (attribute_not_exists(#mk) OR (#mk = :tok AND #since = :since))")
		in.ExpressionAttributeValues[":since"] = numAttr(m.Since.UnixMilli())
	}
	_, err := s.client.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return m, nil
	case !errors.As(err, &ccf):
		return leases.Mark{}, s.mapErr("UpdateItem", mk, err)
	}
	item, err := s.getItem(ctx, mk)
	if err != nil {
		return leases.Mark{}, err
	}
	cur, err := s.decodeMark(mk, item)
	if err == nil && cur.Token == "" {
		err = fmt.Errorf("dynamo: table %q: %s %s: the write met another mark, which the read then did not find", s.table, markKind(mk), mk)
	}
	return cur, err
}

// decodeMark decodes the mark item mk as read or written (item).
func (s *Store) decodeMark(mk string, item map[string]types.AttributeValue) (leases.Mark, error) {
	ms, err := num(item, attrSince)
	if err != nil {
		return leases.Mark{}, fmt.Errorf("dynamo: table %q: %s %s: %w", s.table, markKind(mk), mk, err)
	}
	m := leases.Mark{Token: str(item, attrMark)}
	if ms != 0 {
		m.Since = time.UnixMilli(ms)
	}
	return m, nil
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
	m, err := s.markOnce(ctx, takenPrefix+key.String(), leases.Mark{Token: token})
	return m.Token, err
}

// StreamMark implements leases.Membership: one strongly consistent GetItem.
func (s *Store) StreamMark(ctx context.Context, stream string) (leases.Mark, error) {
	if err := s.beginMark(ctx, stream, leases.Mark{}, false); err != nil {
		return leases.Mark{}, err
	}
	item, err := s.getItem(ctx, markPrefix+stream)
	if err != nil {
		return leases.Mark{}, err
	}
	return s.decodeMark(markPrefix+stream, item)
}

// beginMark is begin for a stream's mark.
func (s *Store) beginMark(ctx context.Context, stream string, m leases.Mark, write bool) error {
	if s.err != nil {
		return s.err
	}
	if err := leases.ValidateMark(stream, m, write); err != nil {
		return err
	}
	return ctx.Err()
}
