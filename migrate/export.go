package migrate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
)

// Export writes our checkpoints of stream from.Stream (those of the rows of
// from.LeaseNamespace, if given) into the KCL table to (single-stream keys,
// or multi-stream keys with to.StreamID), as the package documentation
// describes, so that a KCL application resumes where kinesislease stopped:
// Import of the written items gives back exactly the checkpoints exported.
// Shards without a checkpoint are not exported.
//
// Like Import it reads both tables twice, an interval apart, and refuses
// (ErrRefused) while the kinesislease service or the KCL application still
// runs, or when an item's checkpoint would move backwards; WithForce
// overrides, WithDryRun writes nothing. Items are written with UpdateItem,
// conditional on the leaseCounter read (or on the item being absent), and
// bump it.
func Export(ctx context.Context, from Ours, to Foreign, opts ...Option) (*Report, error) {
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := checkOurs(from); err != nil {
		return nil, err
	}
	if to.Client == nil || to.Table == "" {
		return nil, fmt.Errorf("%w: Export needs the KCL table's Client and name", ErrInvalid)
	}
	if to.Format != "" && to.Format != KCL {
		return nil, fmt.Errorf("%w: Export writes KCL tables only, not %q", ErrInvalid, to.Format)
	}
	name := kinesisx.Name(from.Stream)
	if to.StreamID != "" {
		m := streamIDPattern.FindStringSubmatch(to.StreamID)
		if m == nil {
			return nil, fmt.Errorf("%w: stream identifier %q: want account:stream:creationEpoch", ErrInvalid, to.StreamID)
		}
		if m[2] != name {
			return nil, fmt.Errorf("%w: stream identifier %q names stream %q, not %q", ErrInvalid, to.StreamID, m[2], name)
		}
	}
	shards, _, err := listShards(ctx, from.Kinesis, from.Stream)
	if err != nil {
		return nil, err
	}

	read := func() (map[string]ourRow, map[string]int64, snapshot, error) {
		rows, err := readOurs(ctx, from.Store, from.leaseStream(), shards)
		if err != nil {
			return nil, nil, nil, err
		}
		members, err := fleet(ctx, from.Store)
		if err != nil {
			return nil, nil, nil, err
		}
		snap, err := scan(ctx, to.Client, to.Table)
		return rows, members, snap, err
	}
	ours1, fleet1, kcl1, err := read()
	if err != nil {
		return nil, err
	}
	if err := backoff.Sleep(ctx, o.interval); err != nil {
		return nil, err
	}
	ours2, fleet2, kcl2, err := read()
	if err != nil {
		return nil, err
	}

	rep := &Report{Stream: name, Target: to.Table, DryRun: o.dryRun}
	var refusals []error
	if moved := changed(kcl1, kcl2); len(moved) > 0 {
		refusals = append(refusals, &RunningError{Table: to.Table, Stream: name, Changed: moved, Interval: o.interval})
	}
	if moved := oursChanged(ours1, ours2, fleet1, fleet2); len(moved) > 0 {
		refusals = append(refusals, &RunningError{Stream: name, Changed: moved, Interval: o.interval})
	}
	var lookups []*shardInfo
	for _, si := range shards {
		if r := ours2[si.id]; r.found && isDigits(r.lease.Checkpoint.Sequence) && r.lease.Checkpoint.SubSequence == 0 {
			lookups = append(lookups, si)
		}
	}
	records, err := countUserRecords(ctx, from, lookups, func(si *shardInfo) string { return ours2[si.id].lease.Checkpoint.Sequence })
	if err != nil {
		return nil, err
	}
	plans := make([]exportPlan, 0, len(shards))
	for _, si := range shards {
		p, err := planExport(to, si, ours2[si.id], max(records[si.id], 1), kcl2)
		if err != nil {
			return nil, err
		}
		if p.row.Err != nil {
			refusals = append(refusals, fmt.Errorf("shard %s: %w", si.id, p.row.Err))
			if !o.force {
				p.row.Action = Refused
			}
		}
		plans = append(plans, p)
		rep.Rows = append(rep.Rows, p.row)
	}
	if err := refused(o, rep, "export of", from, nil, refusals); err != nil {
		return rep, err
	}
	if o.dryRun {
		return rep, nil
	}
	for i := range plans {
		p := &plans[i]
		if p.row.Action != Write {
			continue
		}
		err := applyExport(ctx, o, to, p)
		rep.Rows[i] = p.row
		if err != nil {
			return rep, fmt.Errorf("table %q, item %s: %w", to.Table, p.row.Key, err)
		}
	}
	return rep, nil
}

// oursChanged names what moved in our table between two reads: rows
// written, members that heartbeated, joined or left.
func oursChanged(a, b map[string]ourRow, fa, fb map[string]int64) []string {
	var out []string
	for id, x := range a {
		y := b[id]
		if x.found != y.found || x.lease.Counter != y.lease.Counter || x.lease.Token != y.lease.Token {
			out = append(out, "row "+id)
		}
	}
	for m, hb := range fb {
		if old, ok := fa[m]; !ok || old != hb {
			out = append(out, "member "+m)
		}
	}
	sort.Strings(out)
	return out
}

// exportPlan is what to write into one KCL item.
type exportPlan struct {
	row      Row
	si       *shardInfo
	seq      string
	sub      int64
	existing map[string]types.AttributeValue // the item read, nil if none
}

// planExport decides the KCL item of shard si from our row r.
func planExport(to Foreign, si *shardInfo, r ourRow, records int, snap snapshot) (exportPlan, error) {
	key := si.id
	if to.StreamID != "" {
		key = to.StreamID + ":" + si.id
	}
	p := exportPlan{si: si, row: Row{Shard: si.id, Parents: si.parents, Key: key, From: showOurs(r.lease.Checkpoint), Before: "-", To: "-", Checkpoint: r.lease.Checkpoint}}
	var old *foreignRow
	if it, ok := snap[key]; ok {
		fr, skip, err := parseKCL(it.attrs)
		if err != nil {
			return p, fmt.Errorf("table %q: %w", to.Table, err)
		}
		if !skip {
			old, p.existing = &fr, it.attrs
			p.row.Before = fr.show()
		}
	}
	cp := r.lease.Checkpoint
	if !r.found || cp.IsZero() {
		p.row.Action = Skip
		p.row.Note = "no checkpoint: not exported (the KCL starts the shard at its initial position, or where its item says)"
		return p, nil
	}
	seq, sub, note, err := toKCL(cp, records)
	if err != nil {
		return p, fmt.Errorf("shard %s: %w", si.id, err)
	}
	p.seq, p.sub = seq, sub
	p.row.To, p.row.Note = showKCL(seq, sub, true), note
	if records > 1 {
		p.row.Note = joinNote(fmt.Sprintf("a KPL aggregate of %d user records", records), p.row.Note)
	}
	switch {
	case old != nil && old.seq == seq && old.sub == sub:
		p.row.Action = Unchanged
	case old != nil && kclProgress(seq, sub).cmp(kclProgress(old.seq, old.sub)) < 0:
		p.row.Action = Write
		p.row.Err = &BackwardsError{Table: to.Table, Key: key, From: old.show(), To: p.row.To}
	default:
		p.row.Action = Write
	}
	return p, nil
}

// applyExport writes one KCL item, conditional on the counter read; on a
// conflict it reads the item again and checks it again.
func applyExport(ctx context.Context, o options, to Foreign, p *exportPlan) error {
	var lastErr error
	for attempt := 1; attempt <= writeAttempts; attempt++ {
		if attempt > 1 {
			if err := backoff.Sleep(ctx, time.Duration(attempt-1)*50*time.Millisecond+rand.N(50*time.Millisecond)); err != nil {
				return err
			}
			out, err := to.Client.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: aws.String(to.Table), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{kclLeaseKey: &types.AttributeValueMemberS{Value: p.row.Key}},
			})
			if err != nil {
				return fmt.Errorf("GetItem: %w", err)
			}
			p.existing = nil
			if len(out.Item) > 0 {
				p.existing = out.Item
				fr, _, err := parseKCL(out.Item)
				if err != nil {
					return err
				}
				if fr.seq == p.seq && fr.sub == p.sub {
					p.row.Action = Unchanged
					return nil
				}
				if !o.force && kclProgress(p.seq, p.sub).cmp(kclProgress(fr.seq, fr.sub)) < 0 {
					return fmt.Errorf("%w: %w", ErrRefused, &BackwardsError{Table: to.Table, Key: p.row.Key, From: fr.show(), To: p.row.To})
				}
			}
		}
		_, err := to.Client.UpdateItem(ctx, kclUpdate(to, p))
		var failed *types.ConditionalCheckFailedException
		if errors.As(err, &failed) {
			lastErr = err
			continue
		}
		if err != nil {
			return fmt.Errorf("UpdateItem: %w", err)
		}
		return nil
	}
	return fmt.Errorf("the item kept changing (%d attempts); run the export again: %w", writeAttempts, lastErr)
}

// kclUpdate is the UpdateItem that writes p's checkpoint as the KCL's own
// checkpoint does (DynamoDBLeaseSerializer.getDynamoUpdateLeaseUpdate): the
// checkpoint, its sub-sequence number, ownerSwitchesSinceCheckpoint 0, no
// pending checkpoint, the counter bumped; and the shard's metadata a lease
// the KCL creates carries (toDynamoRecord): parents, children, hash range,
// entity type, and the multi-stream attributes. The lease owner is kept.
func kclUpdate(to Foreign, p *exportPlan) *dynamodb.UpdateItemInput {
	set := map[string]types.AttributeValue{
		kclCheckpoint:    &types.AttributeValueMemberS{Value: p.seq},
		kclSubSequence:   &types.AttributeValueMemberN{Value: strconv.FormatInt(p.sub, 10)},
		kclOwnerSwitches: &types.AttributeValueMemberN{Value: "0"},
		kclEntityType:    &types.AttributeValueMemberS{Value: kclEntityLease},
	}
	if len(p.si.parents) > 0 {
		set[kclParentShardID] = &types.AttributeValueMemberSS{Value: p.si.parents}
	}
	if p.seq == kclShardEnd && len(p.si.children) > 0 {
		set[kclChildShardIDs] = &types.AttributeValueMemberSS{Value: p.si.children}
	}
	if p.si.startKey != "" && p.si.endKey != "" {
		set[kclStartingHash] = &types.AttributeValueMemberS{Value: p.si.startKey}
		set[kclEndingHash] = &types.AttributeValueMemberS{Value: p.si.endKey}
	}
	if to.StreamID != "" {
		set[kclStreamIDAttr] = &types.AttributeValueMemberS{Value: to.StreamID}
		set[kclShardIDAttr] = &types.AttributeValueMemberS{Value: p.si.id}
	}
	names := map[string]string{}
	values := map[string]types.AttributeValue{}
	var sets []string
	i := 0
	for _, a := range sortedKeys(set) {
		n, v := fmt.Sprintf("#a%d", i), fmt.Sprintf(":a%d", i)
		names[n], values[v] = a, set[a]
		sets = append(sets, n+" = "+v)
		i++
	}
	names["#lc"] = kclLeaseCounter
	names["#lk"] = kclLeaseKey
	var cond string
	if counter, ok := p.existing[kclLeaseCounter].(*types.AttributeValueMemberN); ok {
		cond = "#lc = :seen"
		values[":seen"] = counter
		n, _ := strconv.ParseInt(counter.Value, 10, 64)
		values[":next"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(n+1, 10)}
	} else if p.existing != nil {
		cond = "attribute_exists(#lk) AND attribute_not_exists(#lc)"
		values[":next"] = &types.AttributeValueMemberN{Value: "1"}
	} else {
		cond = "attribute_not_exists(#lk)"
		values[":next"] = &types.AttributeValueMemberN{Value: "0"} // a new Lease's leaseCounter (Lease.java)
	}
	sets = append(sets, "#lc = :next")
	var removes []string
	for j, a := range []string{kclPending, kclPendingSub, kclPendingState} {
		n := fmt.Sprintf("#r%d", j)
		names[n] = a
		removes = append(removes, n)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                 aws.String(to.Table),
		Key:                       map[string]types.AttributeValue{kclLeaseKey: &types.AttributeValueMemberS{Value: p.row.Key}},
		UpdateExpression:          aws.String("SET " + strings.Join(sets, ", ") + " REMOVE " + strings.Join(removes, ", ")),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}
}

func sortedKeys(m map[string]types.AttributeValue) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
