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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/leases"
)

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
