package sim

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kpl"
)

// Ledger puts records on chosen shards of one stream of a
// kinesisfake.Kinesis and keeps the account the simulation's checks
// need: where each user record of a KPL aggregate sits in its shard, as the
// consumer numbers them. It knows the shards the stream had when the Ledger
// was made and the records put through it: the stream must not be
// resharded, nor records put on it by other means.
//
// It is safe for concurrent use.
type Ledger struct {
	k    *kinesisfake.Kinesis
	name string
	ids  []string

	mu     sync.Mutex
	shards map[string]*shardLedger
}

type shardLedger struct {
	hashKey string // the shard's starting hash key: Put routes there
	records []put
	bySeq   map[string]int
	users   int // user records in all (KPL aggregates count theirs)
}

// put is one record put and where its user records sit in the shard.
type put struct {
	seq      string
	userBase int // index of its first user record in the shard
	users    int // 1, or the number of user records of a KPL aggregate
}

// ListPage is how many shards one ListShards answer of NewKinesis' Kinesis
// lists, so that callers must follow NextToken on a stream of a few shards.
const ListPage = 3

// NewKinesis returns an empty kinesisfake.Kinesis as strict as the
// simulation wants it: Kinesis' limit of GetRecords calls per shard and
// second (kinesisfake.WithGetRecordsRateLimit) and ListShards answers
// of ListPage shards.
func NewKinesis() *kinesisfake.Kinesis {
	return kinesisfake.New(kinesisfake.WithGetRecordsRateLimit(), kinesisfake.WithListShardsPage(ListPage))
}

// NewStream creates a stream named name with shards shards on k
// (kinesisfake.Kinesis.CreateStream) and returns its Ledger.
func NewStream(k *kinesisfake.Kinesis, name string, shards int) (*Ledger, error) {
	if err := k.CreateStream(name, shards); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return NewLedger(k, name)
}

// NewLedger returns a Ledger of the stream named name of k, with the shards
// k's ListShards lists now.
func NewLedger(k *kinesisfake.Kinesis, name string) (*Ledger, error) {
	l := &Ledger{k: k, name: name, shards: map[string]*shardLedger{}}
	in := &kinesis.ListShardsInput{StreamName: aws.String(name)}
	for {
		out, err := k.ListShards(context.Background(), in)
		if err != nil {
			return nil, fmt.Errorf("sim: ledger of stream %s: %w", name, err)
		}
		for _, sh := range out.Shards {
			id := aws.ToString(sh.ShardId)
			l.ids = append(l.ids, id)
			l.shards[id] = &shardLedger{hashKey: aws.ToString(sh.HashKeyRange.StartingHashKey), bySeq: map[string]int{}}
		}
		if out.NextToken == nil {
			return l, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// Name returns the stream's name.
func (l *Ledger) Name() string { return l.name }

// ShardIDs returns the ids of the stream's shards, in id order.
func (l *Ledger) ShardIDs() []string { return slices.Clone(l.ids) }

// HashKey returns the hash key Put gives shard id's records (its starting
// hash key), which the user records of an aggregate put there must carry
// too (as their ExplicitHashKey), lest the consumer filter them out as
// belonging to another shard; "" if there is no such shard.
func (l *Ledger) HashKey(id string) string {
	if sh := l.shards[id]; sh != nil {
		return sh.hashKey
	}
	return ""
}

// Put puts a record on shard id (PutRecord with the shard's hash key as
// its ExplicitHashKey) and returns its sequence number. Data made by
// kpl.Aggregate counts as its user records.
func (l *Ledger) Put(id, partitionKey string, data []byte) (string, error) {
	sh := l.shards[id]
	if sh == nil {
		return "", &types.ResourceNotFoundException{Message: aws.String("shard " + id + " of stream " + l.name + " is not in the ledger")}
	}
	users := 1
	if u, err := kpl.Split(data); err == nil && u != nil {
		users = len(u)
	}
	// Under mu: the records of a shard are put, and counted, in one order.
	l.mu.Lock()
	defer l.mu.Unlock()
	out, err := l.k.PutRecord(context.Background(), &kinesis.PutRecordInput{
		StreamName: aws.String(l.name), PartitionKey: aws.String(partitionKey), ExplicitHashKey: aws.String(sh.hashKey), Data: data,
	})
	if err != nil {
		return "", fmt.Errorf("sim: put on %s: %w", id, err)
	}
	if got := aws.ToString(out.ShardId); got != id {
		return "", fmt.Errorf("sim: put on %s landed on %s: the stream was resharded", id, got)
	}
	seq := aws.ToString(out.SequenceNumber)
	sh.bySeq[seq] = len(sh.records)
	sh.records = append(sh.records, put{seq: seq, userBase: sh.users, users: users})
	sh.users += users
	return seq, nil
}

// UserRecords returns how many user records shard id holds (a KPL aggregate
// counts as its user records), or -1 if there is no such shard.
func (l *Ledger) UserRecords(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sh := l.shards[id]; sh != nil {
		return sh.users
	}
	return -1
}

// UserIndex returns the index, in shard id, of the user record at seq and
// sub (sub is 0 for a record that is not an aggregate).
func (l *Ledger) UserIndex(id, seq string, sub int64) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sh := l.shards[id]
	if sh == nil {
		return 0, false
	}
	i, ok := sh.bySeq[seq]
	if !ok || sub < 0 || int(sub) >= sh.records[i].users {
		return 0, false
	}
	return sh.records[i].userBase + int(sub), true
}

// RecordAt returns the sequence number of the record of shard id that
// holds its user record number idx.
func (l *Ledger) RecordAt(id string, idx int) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sh := l.shards[id]
	if sh == nil || idx < 0 || idx >= sh.users {
		return "", false
	}
	i, _ := slices.BinarySearchFunc(sh.records, idx, func(r put, idx int) int {
		switch {
		case r.userBase+r.users <= idx:
			return -1
		case r.userBase > idx:
			return 1
		}
		return 0
	})
	return sh.records[i].seq, true
}

// Covered returns how many user records of shard id a checkpoint at seq and
// sub covers (every user record before the returned index is done), as the
// consumer means it: sub 0 covers the whole record at seq, sub k > 0 its
// first k user records. SHARD_END is an error: the Ledger's shards are
// open.
func (l *Ledger) Covered(id, seq string, sub int64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sh := l.shards[id]
	switch {
	case sh == nil:
		return 0, fmt.Errorf("no shard %s", id)
	case seq == "":
		return 0, nil
	case seq == "SHARD_END":
		return 0, fmt.Errorf("SHARD_END on open shard %s", id)
	}
	i, ok := sh.bySeq[seq]
	if !ok {
		return 0, fmt.Errorf("shard %s has no record %s", id, seq)
	}
	r := sh.records[i]
	if sub < 0 || int(sub) >= r.users {
		return 0, fmt.Errorf("shard %s record %s has %d user records; sub-sequence %d", id, seq, r.users, sub)
	}
	if sub == 0 {
		return r.userBase + r.users, nil
	}
	return r.userBase + int(sub), nil
}
