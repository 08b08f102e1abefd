package main

// The producer: the orders it put on the stream (published), Rate orders a
// second round-robin over the partition keys (produce), each PutRecords
// call carrying at most one order per key and its failed orders put again
// first (put).

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
)

// published is one order the producer put on the stream: its partition key,
// its counter among that key's orders (1, 2, ...), and where it landed.
type published struct {
	id, key    string
	counter    int
	shard, seq string
	at         time.Time
}

// produce publishes Rate orders a second until ctx is done, round-robin
// over Keys partition keys, each with its key's next counter. A PutRecords
// call carries at most one order per key, and an order that failed is put
// again before any later order: per key, counters land in order (PutRecords
// does not order the records of one call). It returns nil once stop is
// closed.
func (r *runner) produce(ctx context.Context, stop <-chan struct{}) error {
	c := r.cfg
	counters := make([]int, c.Keys)
	next := 0
	start := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return nil
		case <-tick.C:
		}
		due := int(float64(c.Rate) * time.Since(start).Seconds())
		for next < due {
			n := min(due-next, c.Keys, 500)
			batch := make([]published, n)
			entries := make([]ktypes.PutRecordsRequestEntry, n)
			for i := range n {
				k := (next + i) % c.Keys
				counters[k]++
				key := fmt.Sprintf("cust-%03d", k)
				o := harness.Order{
					ID:        fmt.Sprintf("k%03d-%07d", k, counters[k]),
					Customer:  key,
					Items:     []harness.Item{{SKU: fmt.Sprintf("sku-%04d", (next+i)%1000), Quantity: 1, Price: 100}},
					Total:     100,
					CreatedAt: time.Now().UTC(),
				}
				data, err := codec.Msgpack.Marshal(&o)
				if err != nil {
					return err
				}
				batch[i] = published{id: o.ID, key: key, counter: counters[k]}
				entries[i] = ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(key)}
			}
			if err := r.put(ctx, batch, entries); err != nil {
				return err
			}
			next += n
		}
	}
}

// put puts one batch, retrying failed entries (alone, in order) until every
// one landed, and records where each landed.
func (r *runner) put(ctx context.Context, batch []published, entries []ktypes.PutRecordsRequestEntry) error {
	for attempt := 0; len(entries) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(min(attempt, 10)) * 50 * time.Millisecond):
			}
		}
		out, err := r.env.Kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(r.cfg.Stream), Records: entries})
		if err != nil {
			if ctx.Err() != nil || attempt >= 20 {
				return fmt.Errorf("chaos: PutRecords: %w", err)
			}
			continue
		}
		now := time.Now()
		var retryB []published
		var retryE []ktypes.PutRecordsRequestEntry
		r.mu.Lock()
		for i, res := range out.Records {
			if res.ErrorCode != nil {
				retryB, retryE = append(retryB, batch[i]), append(retryE, entries[i])
				continue
			}
			p := batch[i]
			p.shard, p.seq, p.at = aws.ToString(res.ShardId), aws.ToString(res.SequenceNumber), now
			r.pub = append(r.pub, p)
			if harness.CmpSeq(p.seq, r.lastSeq[p.shard]) > 0 {
				r.lastSeq[p.shard] = p.seq
			}
		}
		r.mu.Unlock()
		batch, entries = retryB, retryE
	}
	return nil
}
