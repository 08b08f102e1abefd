package read

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
)

// Consumer is a subscription's registered stream consumer (enhanced
// fan-out): its name, and its ARN once Register found or made it ACTIVE.
// One Consumer serves every shard of its stream.
type Consumer struct {
	Client kinesisx.FanOut
	Stream string // name or ARN
	Name   string
	Log    *slog.Logger
	// Poll is the time between DescribeStreamConsumer calls while the
	// consumer is CREATING or DELETING; the default is 1s.
	Poll time.Duration

	mu        sync.Mutex
	streamARN string
	arn       string
	reg       *registration // the Register in progress; nil if none
}

// ARN returns the consumer's ARN, "" before Register succeeded.
func (c *Consumer) ARN() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.arn
}

// StreamARN returns the stream's ARN, "" before Register found it.
func (c *Consumer) StreamARN() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streamARN
}

// Register finds the consumer, registering it if it does not exist, and
// waits until it is ACTIVE (a consumer being deleted is waited for, then
// registered again). Concurrent calls share one registration. Its errors
// name the operation that failed; ErrConsumerLimit says the stream has no
// room for another consumer.
func (c *Consumer) Register(ctx context.Context) error {
	c.mu.Lock()
	if r := c.reg; r != nil {
		c.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.err == nil || !isContextErr(r.err) {
			return r.err
		}
		return c.Register(ctx) // that caller gave up: try ourselves
	}
	r := &registration{done: make(chan struct{})}
	c.reg = r
	c.mu.Unlock()
	arn, err := c.register(ctx)
	c.mu.Lock()
	c.arn = arn
	c.reg = nil
	r.err = err
	c.mu.Unlock()
	close(r.done)
	return err
}

// registration is a Register in progress; err is its result once done is
// closed.
type registration struct {
	done chan struct{}
	err  error
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func (c *Consumer) logger() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

func (c *Consumer) register(ctx context.Context) (string, error) {
	poll := c.Poll
	if poll <= 0 {
		poll = time.Second
	}
	streamARN, err := c.resolveStream(ctx)
	if err != nil {
		return "", err
	}
	registered, limited := false, 0
	for attempt := 1; ; attempt++ {
		out, err := c.Client.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String(c.Name)})
		switch {
		case err == nil:
			d := out.ConsumerDescription
			switch d.ConsumerStatus {
			case types.ConsumerStatusActive:
				if registered {
					c.logger().InfoContext(ctx, "kinesislease: stream consumer registered", "consumer", c.Name, "arn", aws.ToString(d.ConsumerARN))
				}
				return aws.ToString(d.ConsumerARN), nil
			case types.ConsumerStatusDeleting:
				c.logger().WarnContext(ctx, "kinesislease: stream consumer is being deleted; waiting to register it again", "consumer", c.Name)
			}
		case kinesisx.IsNotFound(err):
			_, rerr := c.Client.RegisterStreamConsumer(ctx, &kinesis.RegisterStreamConsumerInput{StreamARN: aws.String(streamARN), ConsumerName: aws.String(c.Name)},
				kinesisx.WithoutThrottleRetries) // LimitExceededException is handled below

			if !kinesisx.IsLimitExceeded(rerr) {
				limited = 0
			}
			switch {
			case rerr == nil:
				registered = true
			case kinesisx.IsResourceInUse(rerr):
				// Another instance registered it first (or the stream is
				// being updated): describe again.
			case kinesisx.IsLimitExceeded(rerr):
				// Too many consumers, or too many registrations at once
				// (5 a second per account): a peer's registration shows
				// up on the next describe; three refusals in a row mean
				// the stream is full.
				if limited++; limited >= 3 {
					return "", fmt.Errorf("stream consumer %q of %s: RegisterStreamConsumer: %w: %w", c.Name, streamARN, kltype.ErrConsumerLimit, rerr)
				}
			case ctx.Err() != nil || kinesisx.Permanent(rerr):
				return "", fmt.Errorf("stream consumer %q of %s: RegisterStreamConsumer: %w", c.Name, streamARN, rerr)
			default:
				c.logger().WarnContext(ctx, "kinesislease: registering the stream consumer failed; retrying", "consumer", c.Name, "err", rerr)
			}
		case ctx.Err() != nil || kinesisx.Permanent(err):
			return "", fmt.Errorf("stream consumer %q of %s: DescribeStreamConsumer: %w", c.Name, streamARN, err)
		default:
			c.logger().WarnContext(ctx, "kinesislease: describing the stream consumer failed; retrying", "consumer", c.Name, "err", err)
		}
		if err := backoff.Sleep(ctx, backoff.Jitter(min(poll*time.Duration(attempt), 5*poll))); err != nil {
			return "", fmt.Errorf("stream consumer %q of %s: not ACTIVE: %w", c.Name, streamARN, err)
		}
	}
}

// resolveStream returns the stream's ARN: the stream itself if named by
// ARN, else DescribeStreamSummary's.
func (c *Consumer) resolveStream(ctx context.Context) (string, error) {
	if arn := c.StreamARN(); arn != "" {
		return arn, nil
	}
	arn := c.Stream
	if !kinesisx.IsARN(arn) {
		out, err := c.Client.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(c.Stream)})
		if err != nil {
			return "", fmt.Errorf("stream %q: DescribeStreamSummary (for its ARN, to register consumer %q): %w", c.Stream, c.Name, err)
		}
		arn = aws.ToString(out.StreamDescriptionSummary.StreamARN)
	}
	c.mu.Lock()
	c.streamARN = arn
	c.mu.Unlock()
	return arn, nil
}

// gone reports whether the consumer no longer exists, or is being deleted
// (deleted while its shards were read): the caller registers it again.
// An error of the describe call itself is returned.
func (c *Consumer) gone(ctx context.Context) (bool, error) {
	arn := c.ARN()
	if arn == "" {
		return true, nil
	}
	out, err := c.Client.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
	switch {
	case kinesisx.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return out.ConsumerDescription.ConsumerStatus == types.ConsumerStatusDeleting, nil
}

// forget drops the consumer's ARN if it is still arn, so that the next
// Register finds or makes the consumer anew.
func (c *Consumer) forget(arn string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.arn == arn {
		c.arn = ""
	}
}
