package migrate

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
)

// Attribute names of the KCL (DynamoDBLeaseSerializer,
// DynamoDBMultiStreamLeaseSerializer).
const (
	kclLeaseKey       = "leaseKey"
	kclLeaseOwner     = "leaseOwner"
	kclLeaseCounter   = "leaseCounter"
	kclOwnerSwitches  = "ownerSwitchesSinceCheckpoint"
	kclCheckpoint     = "checkpoint"
	kclSubSequence    = "checkpointSubSequenceNumber"
	kclPending        = "pendingCheckpoint"
	kclPendingSub     = "pendingCheckpointSubSequenceNumber"
	kclPendingState   = "pendingCheckpointState"
	kclParentShardID  = "parentShardId"
	kclChildShardIDs  = "childShardIds"
	kclStartingHash   = "startingHashKey"
	kclEndingHash     = "endingHashKey"
	kclEntityType     = "entityType"
	kclEntityLease    = "LEASE"
	kclStreamIDAttr   = "streamName" // "Keeping the stream id as "streamName" for legacy reasons."
	kclShardIDAttr    = "shardId"
	vmwShardID        = "ShardID"
	vmwAssignedTo     = "AssignedTo"
	vmwCheckpoint     = "Checkpoint"
	vmwParentShardID  = "ParentShardId"
	ourLeaseKeyAttr   = "lease_key"
	maxShownStreamIDs = 10
)

// streamIDPattern is the KCL's serialized multi-stream identifier
// (StreamIdentifier.STREAM_IDENTIFIER_PATTERN).
var streamIDPattern = regexp.MustCompile(`^([0-9]+):([^:]+):([0-9]+)$`)

// foreignRow is one shard's item of a foreign table.
type foreignRow struct {
	key      string // the item's key as stored
	streamID string // KCL multi-stream identifier; "" for a bare key
	shard    string
	seq      string // checkpoint; "" for none
	sub      int64
	hasSub   bool
	parents  []string
	owner    string
}

// show renders the row's checkpoint in its table's notation.
func (r *foreignRow) show() string { return showKCL(r.seq, r.sub, r.hasSub) }

// item is a scanned item with its canonical form, to notice changes.
type item struct {
	attrs map[string]types.AttributeValue
	canon string
}

// snapshot is one read of a whole table: items by key.
type snapshot map[string]item

// scan reads every item of table (strongly consistent), by key (see
// itemKey).
func scan(ctx context.Context, c Client, table string) (snapshot, error) {
	snap := snapshot{}
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	for {
		out, err := c.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("table %q: Scan: %w", table, err)
		}
		for _, it := range out.Items {
			key := itemKey(it)
			snap[key] = item{attrs: it, canon: canonical(&types.AttributeValueMemberM{Value: it})}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return snap, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// itemKey returns an item's key: its leaseKey, ShardID or lease_key, else
// its canonical form.
func itemKey(it map[string]types.AttributeValue) string {
	for _, a := range []string{kclLeaseKey, vmwShardID, ourLeaseKeyAttr} {
		if s, ok := it[a].(*types.AttributeValueMemberS); ok {
			return s.Value
		}
	}
	return canonical(&types.AttributeValueMemberM{Value: it})
}

// changed returns the keys of the items that differ between a and b
// (changed, added or removed), sorted.
func changed(a, b snapshot) []string {
	var keys []string
	for k, x := range a {
		if y, ok := b[k]; !ok || y.canon != x.canon {
			keys = append(keys, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// canonical renders an attribute value deterministically (sets sorted, map
// keys sorted).
func canonical(v types.AttributeValue) string {
	var b strings.Builder
	writeCanonical(&b, v)
	return b.String()
}

func writeCanonical(b *strings.Builder, v types.AttributeValue) {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		fmt.Fprintf(b, "S%q", v.Value)
	case *types.AttributeValueMemberN:
		fmt.Fprintf(b, "N%s", v.Value)
	case *types.AttributeValueMemberB:
		fmt.Fprintf(b, "B%x", v.Value)
	case *types.AttributeValueMemberBOOL:
		fmt.Fprintf(b, "BOOL%t", v.Value)
	case *types.AttributeValueMemberNULL:
		b.WriteString("NULL")
	case *types.AttributeValueMemberSS:
		ss := slices.Sorted(slices.Values(v.Value))
		fmt.Fprintf(b, "SS%q", ss)
	case *types.AttributeValueMemberNS:
		ns := slices.Sorted(slices.Values(v.Value))
		fmt.Fprintf(b, "NS%q", ns)
	case *types.AttributeValueMemberBS:
		bs := make([]string, len(v.Value))
		for i, x := range v.Value {
			bs[i] = fmt.Sprintf("%x", x)
		}
		slices.Sort(bs)
		fmt.Fprintf(b, "BS%q", bs)
	case *types.AttributeValueMemberL:
		b.WriteString("L[")
		for _, x := range v.Value {
			writeCanonical(b, x)
			b.WriteByte(',')
		}
		b.WriteByte(']')
	case *types.AttributeValueMemberM:
		b.WriteString("M{")
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range v.Value {
				if !yield(k) {
					return
				}
			}
		}) {
			fmt.Fprintf(b, "%q:", k)
			writeCanonical(b, v.Value[k])
			b.WriteByte(',')
		}
		b.WriteByte('}')
	default:
		fmt.Fprintf(b, "?%T", v)
	}
}

// detect returns the format of the table's items.
func detect(table string, snap snapshot) (Format, error) {
	for _, it := range snap {
		switch {
		case it.attrs[kclLeaseKey] != nil:
			return KCL, nil
		case it.attrs[vmwShardID] != nil:
			return VMware, nil
		case it.attrs[ourLeaseKeyAttr] != nil:
			return "", fmt.Errorf("%w: table %q is a kinesislease lease table (lease_key), not a KCL or vmware-go-kcl table", ErrSchema, table)
		}
	}
	if len(snap) == 0 {
		return "", fmt.Errorf("%w: table %q is empty: nothing to import", ErrSchema, table)
	}
	return "", fmt.Errorf("%w: table %q holds no item with leaseKey (KCL) or ShardID (vmware-go-kcl)", ErrSchema, table)
}

// parseKCL reads a KCL lease item. skip is set for the other entities KCL
// 3.x keeps in its tables (entityType other than LEASE).
func parseKCL(it map[string]types.AttributeValue) (r foreignRow, skip bool, err error) {
	if et, ok := str(it, kclEntityType); ok && et != kclEntityLease {
		return r, true, nil
	}
	key, ok := str(it, kclLeaseKey)
	if !ok || key == "" {
		return r, false, fmt.Errorf("%w: an item has no leaseKey string", ErrSchema)
	}
	r.key, r.shard = key, key
	if i := strings.LastIndexByte(key, ':'); i >= 0 {
		r.streamID, r.shard = key[:i], key[i+1:]
		if !streamIDPattern.MatchString(r.streamID) || r.shard == "" {
			return r, false, fmt.Errorf("%w: leaseKey %q is neither a shard id nor account:stream:creationEpoch:shardId", ErrSchema, key)
		}
	}
	r.seq, _ = str(it, kclCheckpoint)
	if n, ok := it[kclSubSequence].(*types.AttributeValueMemberN); ok {
		if r.sub, err = strconv.ParseInt(n.Value, 10, 64); err != nil {
			return r, false, fmt.Errorf("%w: leaseKey %q: checkpointSubSequenceNumber %q: %v", ErrSchema, key, n.Value, err)
		}
		r.hasSub = true
	}
	if ss, ok := it[kclParentShardID].(*types.AttributeValueMemberSS); ok {
		r.parents = slices.Sorted(slices.Values(ss.Value))
	}
	r.owner, _ = str(it, kclLeaseOwner)
	return r, false, nil
}

// parseVMware reads a vmware-go-kcl checkpoint item.
func parseVMware(it map[string]types.AttributeValue) (foreignRow, error) {
	var r foreignRow
	key, ok := str(it, vmwShardID)
	if !ok || key == "" {
		return r, fmt.Errorf("%w: an item has no ShardID string", ErrSchema)
	}
	r.key, r.shard = key, key
	r.seq, _ = str(it, vmwCheckpoint)
	if p, ok := str(it, vmwParentShardID); ok && p != "" {
		r.parents = []string{p}
	}
	r.owner, _ = str(it, vmwAssignedTo)
	return r, nil
}

func str(it map[string]types.AttributeValue, name string) (string, bool) {
	s, ok := it[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return s.Value, true
}

// selectRows parses the items of the table and returns those of stream
// (name or ARN), by shard id.
func selectRows(from Foreign, format Format, snap snapshot, stream string) (map[string]*foreignRow, error) {
	var all []foreignRow
	for _, it := range snap {
		var (
			r    foreignRow
			skip bool
			err  error
		)
		if format == VMware {
			r, err = parseVMware(it.attrs)
		} else {
			r, skip, err = parseKCL(it.attrs)
		}
		if err != nil {
			return nil, fmt.Errorf("table %q: %w", from.Table, err)
		}
		if !skip {
			all = append(all, r)
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%w: table %q holds no lease item", ErrSchema, from.Table)
	}
	ids := map[string]bool{}
	bare := 0
	for _, r := range all {
		if r.streamID == "" {
			bare++
		} else {
			ids[r.streamID] = true
		}
	}
	pick := ""
	switch {
	case bare > 0 && len(ids) > 0:
		return nil, fmt.Errorf("%w: table %q mixes single-stream items (bare shard ids) and multi-stream items (account:stream:epoch:shardId)", ErrSchema, from.Table)
	case len(ids) == 0 && from.StreamID != "":
		return nil, fmt.Errorf("%w: table %q is a single-stream table (its keys are bare shard ids): drop the stream identifier %q", ErrInvalid, from.Table, from.StreamID)
	case len(ids) > 0:
		var err error
		if pick, err = pickStreamID(from, ids, stream); err != nil {
			return nil, err
		}
	}
	rows := map[string]*foreignRow{}
	for i := range all {
		if all[i].streamID == pick {
			rows[all[i].shard] = &all[i]
		}
	}
	return rows, nil
}

// pickStreamID chooses the multi-stream identifier of stream among ids.
func pickStreamID(from Foreign, ids map[string]bool, stream string) (string, error) {
	found := slices.Sorted(func(yield func(string) bool) {
		for id := range ids {
			if !yield(id) {
				return
			}
		}
	})
	shown := strings.Join(firstN(found, maxShownStreamIDs), ", ")
	if from.StreamID != "" {
		if m := streamIDPattern.FindStringSubmatch(from.StreamID); m == nil || m[2] != kinesisx.Name(stream) {
			return "", fmt.Errorf("%w: stream identifier %q does not name stream %q", ErrInvalid, from.StreamID, stream)
		}
		if !ids[from.StreamID] {
			return "", fmt.Errorf("%w: table %q has no items of stream %q (it has %s)", ErrSchema, from.Table, from.StreamID, shown)
		}
		return from.StreamID, nil
	}
	name, account := kinesisx.Name(stream), arnAccount(stream)
	var match []string
	for _, id := range found {
		m := streamIDPattern.FindStringSubmatch(id)
		if m[2] == name && (account == "" || m[1] == account) {
			match = append(match, id)
		}
	}
	switch len(match) {
	case 0:
		return "", fmt.Errorf("%w: table %q has no items of stream %q (it has %s)", ErrSchema, from.Table, stream, shown)
	case 1:
		return match[0], nil
	}
	return "", fmt.Errorf("%w: table %q has items of %d streams named %q (%s): name one with its identifier account:stream:creationEpoch",
		ErrInvalid, from.Table, len(match), name, strings.Join(match, ", "))
}

// arnAccount returns the account of a stream ARN, "" for a name.
func arnAccount(stream string) string {
	if !kinesisx.IsARN(stream) {
		return ""
	}
	parts := strings.SplitN(stream, ":", 6)
	if len(parts) < 6 {
		return ""
	}
	return parts[4]
}
