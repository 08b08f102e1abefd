package main

// The orders of a run: published over PublishOver (demo.publish,
// newOrder), and the waits that follow: for survivors to take over every
// shard the killed instance held (waitTakeover, lastTakeover) and for every
// published order to be handled (waitHandled).

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/codec"
	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
)

// publish puts the orders on the stream in a steady trickle over
// PublishOver, in PutRecords calls of at most 500, partitioned by customer.
// It closes killNow once KillAt of them are published, and returns the ids
// of the orders put.
func (d *demo) publish(ctx context.Context, killNow chan struct{}) ([]string, error) {
	c := d.cfg
	var once sync.Once
	signalKill := func() { once.Do(func() { close(killNow) }) }
	defer signalKill()
	killAt := int(float64(c.Orders) * c.KillAt)
	if c.Orders == 0 || killAt <= 0 {
		signalKill()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var ids []string
	var pending []ktypes.PutRecordsRequestEntry
	var pendingIDs []string
	next := 0
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for len(ids) < c.Orders {
		select {
		case <-ctx.Done():
			return ids, ctx.Err()
		case <-tick.C:
		}
		due := c.Orders
		if c.PublishOver > 0 {
			due = min(c.Orders, int(float64(c.Orders)*float64(time.Since(start))/float64(c.PublishOver))+1)
		}
		for ; next < due; next++ {
			o := newOrder(rng, next)
			data, err := codec.Msgpack.Marshal(&o)
			if err != nil {
				return ids, err
			}
			pending = append(pending, ktypes.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(o.Customer)})
			pendingIDs = append(pendingIDs, o.ID)
			d.customers.Store(o.ID, o.Customer)
		}
		for len(pending) > 0 {
			n := min(500, len(pending))
			out, err := d.env.Kinesis.PutRecords(ctx, &kinesis.PutRecordsInput{
				StreamName: aws.String(c.Stream), Records: pending[:n],
			})
			if err != nil {
				return ids, fmt.Errorf("demo: PutRecords: %w", err)
			}
			// Keep the failed entries (throttled) for the next tick.
			var retry []ktypes.PutRecordsRequestEntry
			var retryIDs []string
			for i, r := range out.Records {
				if r.ErrorCode != nil {
					retry, retryIDs = append(retry, pending[i]), append(retryIDs, pendingIDs[i])
				} else {
					ids = append(ids, pendingIDs[i])
				}
			}
			pending = append(retry, pending[n:]...)
			pendingIDs = append(retryIDs, pendingIDs[n:]...)
			d.published.Store(int64(len(ids)))
			if len(retry) > 0 {
				break
			}
		}
		if c.Kill && len(ids) >= killAt {
			signalKill()
		}
	}
	return ids, nil
}

func newOrder(rng *rand.Rand, n int) harness.Order {
	o := harness.Order{
		ID:        fmt.Sprintf("ord-%06d", n),
		Customer:  fmt.Sprintf("customer-%03d", rng.IntN(200)),
		CreatedAt: time.Now().UTC(),
	}
	for range 1 + rng.IntN(3) {
		it := harness.Item{SKU: fmt.Sprintf("sku-%04d", rng.IntN(1000)), Quantity: 1 + rng.IntN(3), Price: int64(100 + rng.IntN(9900))}
		o.Items = append(o.Items, it)
		o.Total += int64(it.Quantity) * it.Price
	}
	return o
}

// waitTakeover waits until a survivor acquired every shard the killed
// instance held, printing each takeover.
func (d *demo) waitTakeover(ctx context.Context) error {
	k := d.kill
	deadline := time.Now().Add(d.cfg.takeoverTimeout())
	reported := map[string]bool{}
	return harness.Poll(ctx, 50*time.Millisecond, d.fleet.Died, func() (bool, error) {
		d.mu.Lock()
		for _, e := range d.reports.Events {
			if e.Kind == "acquired" && e.Owner != k.owner && e.At.After(k.at) && slices.Contains(k.shards, e.Shard) && !reported[e.Shard] {
				reported[e.Shard] = true
				d.printf("%s took shard %s over, %.2fs after the kill\n", e.Owner, harness.ShortShard(e.Shard), e.At.Sub(k.at).Seconds())
			}
		}
		d.mu.Unlock()
		if len(reported) == len(k.shards) {
			d.printf("every shard held again %.2fs after the kill (timeout %v + heartbeat %v = %v; bounds %.1fs..%.1fs)\n",
				d.lastTakeover().Sub(k.at).Seconds(), d.cfg.timeout(), d.cfg.heartbeat(), d.cfg.expectedFailover(),
				d.cfg.bestFailover().Seconds(), d.cfg.worstFailover().Seconds())
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("demo: %v after killing %s, shards %s are not all taken over", d.cfg.takeoverTimeout(), k.owner, harness.ShortList(k.shards))
		}
		return false, nil
	})
}

func (d *demo) lastTakeover() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := d.kill
	var last time.Time
	for _, s := range k.shards {
		var first time.Time
		for _, e := range d.reports.Events {
			if e.Shard == s && e.Kind == "acquired" && e.Owner != k.owner && e.At.After(k.at) && (first.IsZero() || e.At.Before(first)) {
				first = e.At
			}
		}
		if first.After(last) {
			last = first
		}
	}
	return last
}

var errNotHandled = errors.New("demo: timeout")

// waitHandled waits until every published order was handled.
func (d *demo) waitHandled(ctx context.Context, ids []string) error {
	deadline := time.Now().Add(d.cfg.drainTimeout())
	return harness.Poll(ctx, 100*time.Millisecond, d.fleet.Died, func() (bool, error) {
		d.mu.Lock()
		missing := 0
		for _, id := range ids {
			if !d.reports.Handled[id] {
				missing++
			}
		}
		d.mu.Unlock()
		if missing == 0 {
			d.printf("every published order handled\n")
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("%w: %d orders not handled %v after publishing", errNotHandled, missing, d.cfg.drainTimeout())
		}
		return false, nil
	})
}
