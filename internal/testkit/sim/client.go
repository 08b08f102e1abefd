package sim

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kinesisfake"
)

// KinesisHooks lets a test disturb the calls of one Client view. Every hook
// may be nil.
type KinesisHooks struct {
	// Decide is asked at the start of each call (op is "ListShards",
	// "GetShardIterator" or "GetRecords"; shardID is empty for
	// ListShards and for a GetRecords whose iterator names no shard): the
	// call sleeps delay (or until ctx ends), then fails with err if it is
	// not nil.
	Decide func(op, shardID string) (delay time.Duration, err error)
	// Stall blocks while the caller's process is stalled (a GC pause): it is
	// called before the call is served and before its answer is returned.
	Stall func()
	// Dead reports whether the caller's process is dead: its calls fail.
	Dead func() bool
}

// ErrDead is returned by every call of a dead process's view.
var ErrDead = errors.New("sim: the calling process is dead")

// Client returns one process's view of k: the three calls kinesisx.Reader
// needs, served by k and disturbed by hooks. Its delays sleep on timers, so
// inside a testing/synctest bubble they run on the bubble's clock.
func Client(k *kinesisfake.Kinesis, hooks KinesisHooks) kinesisx.Reader {
	return &client{k: k, hooks: hooks}
}

type client struct {
	k     *kinesisfake.Kinesis
	hooks KinesisHooks
}

// begin runs the hooks before a call of op on shardID reaches the Kinesis.
func (c *client) begin(ctx context.Context, op, shardID string) error {
	if c.hooks.Stall != nil {
		c.hooks.Stall()
	}
	if c.hooks.Dead != nil && c.hooks.Dead() {
		return ErrDead
	}
	if c.hooks.Decide != nil {
		delay, err := c.hooks.Decide(op, shardID)
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		if c.hooks.Stall != nil {
			c.hooks.Stall()
		}
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// end runs the hooks before an answer is returned.
func (c *client) end() error {
	if c.hooks.Stall != nil {
		c.hooks.Stall()
	}
	if c.hooks.Dead != nil && c.hooks.Dead() {
		return ErrDead
	}
	return nil
}

// serve runs call between the hooks: the Kinesis' own error comes back
// as it is, and a process that died or stalled meanwhile answers late or
// not at all.
func serve[Out any](c *client, ctx context.Context, op, shardID string, call func() (*Out, error)) (*Out, error) {
	if err := c.begin(ctx, op, shardID); err != nil {
		return nil, err
	}
	out, err := call()
	if err != nil {
		return nil, err
	}
	if err := c.end(); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *client) ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return serve(c, ctx, "ListShards", "", func() (*kinesis.ListShardsOutput, error) { return c.k.ListShards(ctx, in, opts...) })
}

func (c *client) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, opts ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return serve(c, ctx, "GetShardIterator", aws.ToString(in.ShardId), func() (*kinesis.GetShardIteratorOutput, error) {
		return c.k.GetShardIterator(ctx, in, opts...)
	})
}

func (c *client) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	_, shardID, _ := c.k.IteratorShard(aws.ToString(in.ShardIterator))
	return serve(c, ctx, "GetRecords", shardID, func() (*kinesis.GetRecordsOutput, error) { return c.k.GetRecords(ctx, in, opts...) })
}
