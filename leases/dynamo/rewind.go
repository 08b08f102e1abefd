package dynamo

// The operator's rewinds: Rewind (the shard's rewind record written first
// by recordRewind, then the row: at once on a free row, as a pending
// rewind_to on a held one; the record put back by restoreRewind when the
// row's write fails), LastRewind reading the record, and ApplyRewind, the
// holder's write that applies a pending rewind.

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

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
