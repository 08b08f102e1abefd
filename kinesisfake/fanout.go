package kinesisfake

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// Enhanced fan-out: registered consumers and SubscribeToShard, with the
// rules Kinesis enforces on them. FanOutRules sets how long each lasts; the
// defaults are Kinesis' own.

// MaxConsumersPerStream is how many consumers a stream may have registered
// at once; RegisterStreamConsumer fails with LimitExceededException beyond.
const MaxConsumersPerStream = 20

// WithFanOutRules sets the timings of enhanced fan-out (FanOutRules), for
// a test that must not wait out Kinesis' own in real time.
func WithFanOutRules(r FanOutRules) Option {
	return option(func(k *Kinesis) { k.rules = r.withDefaults() })
}

// SubscribeStats returns the counts of SubscribeToShard calls so far.
func (k *Kinesis) SubscribeStats() SubscribeStats {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.subStats
	for _, calls := range k.subs {
		if calls.active != nil {
			st.Open++
		}
	}
	return st
}

// findConsumer returns the consumer named by ARN, or by stream and name.
// k.mu is held.
func (k *Kinesis) findConsumer(arn, streamARN, name string) (*consumer, error) {
	if arn != "" {
		c := k.consumers[arn]
		if c == nil || k.streams[c.stream.name] != c.stream {
			return nil, consumerNotFound(arn)
		}
		return c, nil
	}
	if streamARN == "" || name == "" {
		return nil, invalidArg("Either ConsumerARN, or StreamARN and ConsumerName, should be provided.")
	}
	s, err := k.lookup(streamARN)
	if err != nil {
		return nil, err
	}
	for _, c := range k.consumers {
		if c.stream == s && c.name == name {
			return c, nil
		}
	}
	return nil, consumerNotFound(name)
}

func (k *Kinesis) describeConsumer(c *consumer, now time.Time) types.ConsumerDescription {
	status := types.ConsumerStatusActive
	if now.Before(c.created.Add(k.rules.ActivateAfter)) {
		status = types.ConsumerStatusCreating
	}
	return types.ConsumerDescription{
		ConsumerARN: aws.String(c.arn), ConsumerName: aws.String(c.name), ConsumerStatus: status,
		ConsumerCreationTimestamp: aws.Time(c.created), StreamARN: aws.String(arnPrefix + c.stream.name),
	}
}

// listConsumer is c as RegisterStreamConsumer and ListStreamConsumers
// give it: its description without the stream.
func (k *Kinesis) listConsumer(c *consumer, now time.Time) types.Consumer {
	d := k.describeConsumer(c, now)
	return types.Consumer{ConsumerARN: d.ConsumerARN, ConsumerName: d.ConsumerName, ConsumerStatus: d.ConsumerStatus,
		ConsumerCreationTimestamp: d.ConsumerCreationTimestamp}
}

// DescribeStreamSummary describes the stream named by StreamName or
// StreamARN: ACTIVE, its open shards and registered consumers.
func (k *Kinesis) DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.begin(OpDescribeStreamSummary) {
		return nil, &types.LimitExceededException{Message: aws.String("Rate exceeded for DescribeStreamSummary (injected)")}
	}
	s, err := k.resolve(in.StreamName, in.StreamARN)
	if err != nil {
		return nil, err
	}
	open, consumers := 0, 0
	for _, sh := range s.shards {
		if !sh.closed {
			open++
		}
	}
	for _, c := range k.consumers {
		if c.stream == s {
			consumers++
		}
	}
	return &kinesis.DescribeStreamSummaryOutput{StreamDescriptionSummary: &types.StreamDescriptionSummary{
		StreamName: aws.String(s.name), StreamARN: aws.String(arnPrefix + s.name),
		StreamStatus: types.StreamStatusActive, StreamCreationTimestamp: aws.Time(s.created),
		OpenShardCount: aws.Int32(int32(open)), ConsumerCount: aws.Int32(int32(consumers)),
		RetentionPeriodHours: aws.Int32(24), EncryptionType: types.EncryptionTypeNone,
		EnhancedMonitoring: []types.EnhancedMetrics{},
		StreamModeDetails:  &types.StreamModeDetails{StreamMode: types.StreamModeProvisioned},
	}}, nil
}

// RegisterStreamConsumer registers a consumer of the stream StreamARN,
// CREATING for FanOutRules.ActivateAfter, then ACTIVE. A name already
// registered on the stream fails with ResourceInUseException, a stream
// with MaxConsumersPerStream consumers with LimitExceededException.
func (k *Kinesis) RegisterStreamConsumer(ctx context.Context, in *kinesis.RegisterStreamConsumerInput, _ ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.begin(OpRegisterStreamConsumer) {
		return nil, &types.LimitExceededException{Message: aws.String("Rate exceeded for RegisterStreamConsumer (injected)")}
	}
	name := aws.ToString(in.ConsumerName)
	if !streamNameRE.MatchString(name) {
		return nil, invalidArg("ConsumerName %q: want 1 to 128 of a-z, A-Z, 0-9, '_', '-', '.'", name)
	}
	if !strings.HasPrefix(aws.ToString(in.StreamARN), "arn:") {
		return nil, invalidArg("StreamARN %q is not an ARN.", aws.ToString(in.StreamARN))
	}
	s, err := k.lookup(aws.ToString(in.StreamARN))
	if err != nil {
		return nil, err
	}
	n := 0
	for _, c := range k.consumers {
		if c.stream != s {
			continue
		}
		if c.name == name {
			return nil, &types.ResourceInUseException{Message: aws.String(fmt.Sprintf("Consumer %s under account %s already exists.", c.arn, account))}
		}
		n++
	}
	if n >= MaxConsumersPerStream {
		return nil, &types.LimitExceededException{Message: aws.String(fmt.Sprintf("Stream %s under account %s has reached its limit of %d consumers.", s.name, account, MaxConsumersPerStream))}
	}
	now := time.Now().Round(0)
	c := &consumer{name: name, stream: s, created: now,
		arn: fmt.Sprintf("%s%s/consumer/%s:%d", arnPrefix, s.name, name, now.Unix())}
	if k.consumers == nil {
		k.consumers = map[string]*consumer{}
	}
	for k.consumers[c.arn] != nil { // registered, deregistered and registered again within a second
		c.arn += "0"
	}
	k.consumers[c.arn] = c
	listed := k.listConsumer(c, now)
	return &kinesis.RegisterStreamConsumerOutput{Consumer: &listed}, nil
}

// DescribeStreamConsumer describes the consumer named by ConsumerARN, or by
// StreamARN and ConsumerName; a missing one fails with
// ResourceNotFoundException.
func (k *Kinesis) DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput, _ ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.begin(OpDescribeStreamConsumer) {
		return nil, &types.LimitExceededException{Message: aws.String("Rate exceeded for DescribeStreamConsumer (injected)")}
	}
	c, err := k.findConsumer(aws.ToString(in.ConsumerARN), aws.ToString(in.StreamARN), aws.ToString(in.ConsumerName))
	if err != nil {
		return nil, err
	}
	d := k.describeConsumer(c, time.Now())
	return &kinesis.DescribeStreamConsumerOutput{ConsumerDescription: &d}, nil
}

// ListStreamConsumers lists the consumers of the stream StreamARN, by
// name, in one page.
func (k *Kinesis) ListStreamConsumers(ctx context.Context, in *kinesis.ListStreamConsumersInput, _ ...func(*kinesis.Options)) (*kinesis.ListStreamConsumersOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.begin(OpListStreamConsumers) {
		return nil, &types.LimitExceededException{Message: aws.String("Rate exceeded for ListStreamConsumers (injected)")}
	}
	s, err := k.lookup(aws.ToString(in.StreamARN))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := &kinesis.ListStreamConsumersOutput{Consumers: []types.Consumer{}}
	for _, c := range k.consumers {
		if c.stream == s {
			out.Consumers = append(out.Consumers, k.listConsumer(c, now))
		}
	}
	slices.SortFunc(out.Consumers, func(a, b types.Consumer) int {
		return strings.Compare(aws.ToString(a.ConsumerName), aws.ToString(b.ConsumerName))
	})
	return out, nil
}

// DeregisterStreamConsumer deletes the consumer named by ConsumerARN, or by
// StreamARN and ConsumerName, at once: its subscriptions end with
// ResourceNotFoundException.
func (k *Kinesis) DeregisterStreamConsumer(ctx context.Context, in *kinesis.DeregisterStreamConsumerInput, _ ...func(*kinesis.Options)) (*kinesis.DeregisterStreamConsumerOutput, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.begin(OpDeregisterStreamConsumer) {
		return nil, &types.LimitExceededException{Message: aws.String("Rate exceeded for DeregisterStreamConsumer (injected)")}
	}
	c, err := k.findConsumer(aws.ToString(in.ConsumerARN), aws.ToString(in.StreamARN), aws.ToString(in.ConsumerName))
	if err != nil {
		return nil, err
	}
	delete(k.consumers, c.arn)
	k.notifyLocked()
	return &kinesis.DeregisterStreamConsumerOutput{}, nil
}

// subscribe is SubscribeToShard (served by Client and ServeHTTP): it
// subscribes the consumer ConsumerARN to shard ShardId from
// StartingPosition. The subscription pushes each record as it is put (events
// of at most 1,000 records), an event without records every
// FanOutRules.EventInterval while nothing comes, and, at the end of a closed
// shard, an event with its ChildShards and no ContinuationSequenceNumber. It
// ends cleanly after FanOutRules.Lifetime, or with an exception:
// ResourceInUseException when another subscription takes over,
// ResourceNotFoundException when the consumer or stream is deleted, or what
// FailSubscriptions injects. Cancelling ctx ends it too.
//
// The call fails with LimitExceededException within
// FanOutRules.CallInterval of the previous call for the consumer and shard,
// ResourceInUseException within FanOutRules.TakeoverAfter of the last
// successful one or while the consumer is not ACTIVE,
// ResourceNotFoundException for a missing consumer or shard, and
// InvalidArgumentException for a bad starting position.
func (k *Kinesis) subscribe(ctx context.Context, in *kinesis.SubscribeToShardInput) (*subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	shardID := aws.ToString(in.ShardId)
	if k.begin(OpSubscribeToShard) {
		k.subStats.LimitExceeded++
		return nil, &types.LimitExceededException{Message: aws.String(fmt.Sprintf("Rate exceeded for shard %s (injected)", shardID))}
	}
	if in.ConsumerARN == nil || in.ShardId == nil || in.StartingPosition == nil {
		return nil, invalidArg("ConsumerARN, ShardId and StartingPosition are required.")
	}
	c, err := k.findConsumer(aws.ToString(in.ConsumerARN), "", "")
	if err != nil {
		return nil, err
	}
	s := c.stream
	sh := s.shard(shardID)
	if sh == nil {
		return nil, shardNotFound(s, shardID)
	}
	sp := in.StartingPosition
	pos, err := sh.position(s, &kinesis.GetShardIteratorInput{ShardIteratorType: types.ShardIteratorType(sp.Type),
		StartingSequenceNumber: sp.SequenceNumber, Timestamp: sp.Timestamp})
	if err != nil {
		return nil, err
	}
	now := time.Now()
	key := subKey{c.arn, shardID}
	if k.subs == nil {
		k.subs = map[subKey]*subCalls{}
	}
	calls := k.subs[key]
	if calls == nil {
		calls = &subCalls{}
		k.subs[key] = calls
	}
	last := calls.lastCall
	calls.lastCall = now
	switch {
	case !last.IsZero() && now.Sub(last) < k.rules.CallInterval:
		k.subStats.LimitExceeded++
		return nil, &types.LimitExceededException{Message: aws.String(fmt.Sprintf(
			"Rate exceeded for consumer %s and shard %s: one SubscribeToShard call per %v.", c.arn, shardID, k.rules.CallInterval))}
	case k.describeConsumer(c, now).ConsumerStatus != types.ConsumerStatusActive:
		k.subStats.ResourceInUse++
		return nil, &types.ResourceInUseException{Message: aws.String(fmt.Sprintf("Consumer %s is CREATING, not ACTIVE.", c.arn))}
	case !calls.lastSuccess.IsZero() && now.Sub(calls.lastSuccess) < k.rules.TakeoverAfter:
		k.subStats.ResourceInUse++
		return nil, &types.ResourceInUseException{Message: aws.String(fmt.Sprintf(
			"Another active subscription exists for consumer %s and shard %s (a successful call came less than %v ago).", c.arn, shardID, k.rules.TakeoverAfter))}
	}
	calls.lastSuccess = now
	k.subStats.Subscribed++
	if old := calls.active; old != nil && old.end(&types.ResourceInUseException{Message: aws.String(fmt.Sprintf(
		"Another subscription of consumer %s to shard %s took over.", c.arn, shardID))}) {
		k.subStats.TakenOver++
	}
	// An event without records continues from the last record before the
	// position, or the shard's start: resuming after it skips nothing and
	// repeats nothing.
	cont := sh.firstSeq
	if pos > 0 {
		cont = sh.seq(pos - 1)
	}
	sub := &subscription{
		k: k, key: key, consumer: c, stream: s, shard: sh, pos: pos, cont: cont,
		deadline: now.Add(k.rules.Lifetime),
		ch:       make(chan *types.SubscribeToShardEvent),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	calls.active = sub
	go sub.run(ctx)
	return sub, nil
}

// ErrConnectionReset is the error of a subscription DropSubscriptions ended,
// as a broken connection ends one: no Kinesis exception.
var ErrConnectionReset = fmt.Errorf("kinesisfake: subscription connection reset: %w", io.ErrUnexpectedEOF)

// DropSubscriptions ends the open subscriptions to shardID (of any stream
// and consumer) as a broken connection would: their event channels close
// with ErrConnectionReset in Err. It returns how many it ended. The
// 5-second rule still counts from their calls.
func (k *Kinesis) DropSubscriptions(shardID string) int {
	return k.endSubscriptions(shardID, ErrConnectionReset)
}

// FailSubscriptions ends the open subscriptions to shardID with err as
// their stream's exception, as Kinesis sends one mid-stream: pass one of
// the SDK's exception types, such as *types.InternalFailureException or
// *types.KMSThrottlingException. It returns how many it ended.
func (k *Kinesis) FailSubscriptions(shardID string, err error) int {
	if err == nil {
		panic("kinesisfake: FailSubscriptions with a nil error")
	}
	return k.endSubscriptions(shardID, err)
}

func (k *Kinesis) endSubscriptions(shardID string, err error) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for key, calls := range k.subs {
		if key.shardID == shardID && calls.active != nil && calls.active.end(err) {
			n++
		}
	}
	return n
}

// Subscriptions returns how many subscriptions to shardID are open, of any
// stream and consumer.
func (k *Kinesis) Subscriptions(shardID string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for key, calls := range k.subs {
		if key.shardID == shardID && calls.active != nil {
			n++
		}
	}
	return n
}
