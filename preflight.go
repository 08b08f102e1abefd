package kinesislease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// preflight checks the store and every stream (and dead-letter stream)
// before taking any lease. A check that fails for a reason that may pass
// (the network or an endpoint not ready yet, throttling, a timeout) is
// retried with backoff until ctx ends, each failure logged with what was
// checked; a missing resource, denied access or a misconfigured table fail
// at once.
func (s *Service) preflight(ctx context.Context, subs []*subscription) error {
	if ch, ok := s.cfg.store.(leases.Checker); ok {
		if err := s.startupCheck(ctx, "lease store", fmt.Sprintf("%T", s.cfg.store), ch.Check, func(err error) error { return err }); err != nil {
			return err
		}
	}
	return s.preflightSubs(ctx, subs)
}

// preflightSubs makes the start-up checks of subs: each stream listed, its
// consumer registered, its dead-letter stream listed.
func (s *Service) preflightSubs(ctx context.Context, subs []*subscription) error {
	for _, sub := range subs {
		kin := s.clientOf(sub)
		err := s.startupCheck(ctx, "stream", sub.stream, func(ctx context.Context) error { return listOne(ctx, kin, sub.stream) },
			func(err error) error { return explain(sub.stream, err) })
		if err != nil {
			return err
		}
		s.readRetention(ctx, sub)
		if sub.consumer != "" {
			if err := s.registerConsumer(ctx, sub); err != nil {
				return err
			}
		}
		if sub.deadLetterStream != "" {
			err := s.startupCheck(ctx, "dead-letter stream", sub.deadLetterStream, func(ctx context.Context) error { return listOne(ctx, kin, sub.deadLetterStream) },
				func(err error) error { return explainDeadLetter(sub.stream, sub.deadLetterStream, err) })
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// streamDescriber is the part of *kinesis.Client that reads a stream's
// retention.
type streamDescriber interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
}

// defaultRetention is Kinesis' default (and least) retention period.
const defaultRetention = 24 * time.Hour

// readRetention reads the retention period of sub's stream once
// (DescribeStreamSummary), unless WithRetention gave it or it was read
// already. It never fails the start: access denied (the policy lacks
// kinesis:DescribeStreamSummary) or any other error leaves Kinesis' default
// of 24 hours, said once at INFO; a client without the call leaves it
// silently.
func (s *Service) readRetention(ctx context.Context, sub *subscription) {
	if sub.worker.Retention > 0 {
		return
	}
	sub.worker.Retention = defaultRetention
	d, ok := s.clientOf(sub).(streamDescriber)
	if !ok {
		return
	}
	in := &kinesis.DescribeStreamSummaryInput{}
	in.StreamName, in.StreamARN = kinesisx.Fields(sub.stream)
	out, err := d.DescribeStreamSummary(ctx, in)
	var hours int32
	if err == nil && out.StreamDescriptionSummary != nil {
		hours = aws.ToInt32(out.StreamDescriptionSummary.RetentionPeriodHours)
	}
	switch {
	case err != nil && kinesisx.IsAccessDenied(err):
		s.log.InfoContext(ctx, "kinesislease: cannot read the stream's retention (kinesis:DescribeStreamSummary denied); assuming 24h: allow the call, or give WithRetention",
			"stream", sub.stream, "err", err)
	case err != nil:
		s.log.InfoContext(ctx, "kinesislease: cannot read the stream's retention; assuming 24h", "stream", sub.stream, "err", err)
	case hours > 0:
		sub.worker.Retention = time.Duration(hours) * time.Hour
	}
}

// registerConsumer finds or registers the stream consumer of sub
// (WithEnhancedFanOut) and waits until it is ACTIVE.
func (s *Service) registerConsumer(ctx context.Context, sub *subscription) error {
	fo, err := fanOutClient(s.clientOf(sub), sub.stream)
	if err != nil {
		return err
	}
	c := &read.Consumer{Client: fo, Stream: sub.stream, Name: sub.consumer, Log: s.log.With("stream", sub.stream)}
	err = s.startupCheck(ctx, "stream consumer", sub.consumer, c.Register, func(err error) error { return explainConsumer(sub.stream, sub.consumer, err) })
	if err != nil {
		return err
	}
	sub.fanOut = c
	s.log.InfoContext(ctx, "kinesislease: reading with enhanced fan-out", "stream", sub.stream, "consumer", sub.consumer, "arn", c.ARN())
	return nil
}

// fanOutClient returns kin as the client enhanced fan-out needs, or an
// error naming the subscription to stream (Subscribe reports it).
func fanOutClient(kin Kinesis, stream string) (kinesisx.FanOut, error) {
	fo, ok := kin.(kinesisx.FanOut)
	if !ok {
		return nil, fmt.Errorf("%w: stream %q: WithEnhancedFanOut needs a Kinesis client with DescribeStreamSummary, RegisterStreamConsumer, DescribeStreamConsumer and SubscribeToShard (a *kinesis.Client); %T has not", ErrInvalidOption, stream, kin)
	}
	return fo, nil
}

// listOne lists one shard of stream through kin: the cheapest call that
// shows the stream exists and may be read.
func listOne(ctx context.Context, kin Kinesis, stream string) error {
	in := &kinesis.ListShardsInput{MaxResults: aws.Int32(1)}
	in.StreamName, in.StreamARN = kinesisx.Fields(stream)
	_, err := kin.ListShards(ctx, in)
	return err
}

// Start-up checks are retried after startupBackoff, doubling up to
// maxStartupBackoff.
const (
	startupBackoff    = 500 * time.Millisecond
	maxStartupBackoff = 30 * time.Second
)

// startupCheck runs check until it succeeds, fails for good (a missing
// resource, denied access, a misconfigured table: explain's error at once)
// or ctx ends (the last failure, explained). what and name say what is
// checked, for the log and the error.
func (s *Service) startupCheck(ctx context.Context, what, name string, check func(context.Context) error, explainErr func(error) error) error {
	for attempt := 1; ; attempt++ {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || errors.Is(err, leases.ErrMisconfigured) || errors.Is(err, kltype.ErrConsumerLimit) || kinesisx.Permanent(err) {
			return startupError(what, name, explainErr(err))
		}
		delay := backoff.Jitter(backoff.Delay(attempt, startupBackoff, maxStartupBackoff))
		s.log.WarnContext(ctx, "kinesislease: start-up check failed; retrying", "check", what, "name", name, "attempt", attempt, "delay", delay, "err", err)
		if backoff.Sleep(ctx, delay) != nil {
			return startupError(what, name, explainErr(err))
		}
	}
}

// startupError prefixes err with what failed at start, unless it already
// names it (explain's sentinel errors do).
func startupError(what, name string, err error) error {
	if errors.Is(err, ErrStreamNotFound) || errors.Is(err, ErrAccessDenied) || errors.Is(err, leases.ErrMisconfigured) || errors.Is(err, kltype.ErrConsumerLimit) ||
		strings.HasPrefix(err.Error(), "kinesislease:") {
		return err
	}
	return fmt.Errorf("kinesislease: %s %q: not reachable at start: %w", what, name, err)
}

// explain names the stream in errors a Kinesis call returned and maps them
// onto the package's sentinels, keeping the SDK's error wrapped.
func explain(stream string, err error) error {
	switch {
	case kinesisx.IsNotFound(err):
		return fmt.Errorf("%w: stream %q does not exist (or is not in this account and region): create it, or subscribe to the right name: %w", ErrStreamNotFound, stream, err)
	case kinesisx.IsAccessDenied(err) && (strings.Contains(err.Error(), "SubscribeToShard") || strings.Contains(err.Error(), "StreamConsumer")):
		return fmt.Errorf("%w: stream %q: enhanced fan-out needs kinesis:DescribeStreamConsumer and kinesis:SubscribeToShard on the stream's consumers (stream/NAME/consumer/*): %w", ErrAccessDenied, stream, err)
	case kinesisx.IsAccessDenied(err):
		return fmt.Errorf("%w: stream %q: the credentials need kinesis:ListShards, kinesis:GetShardIterator and kinesis:GetRecords on the stream: %w", ErrAccessDenied, stream, err)
	}
	return err
}

// explainConsumer names what is wrong with the stream consumer of the
// subscription to stream (WithEnhancedFanOut), found at start.
func explainConsumer(stream, consumer string, err error) error {
	switch {
	case kinesisx.IsNotFound(err):
		return fmt.Errorf("%w: stream %q (registering its consumer %q): %w", ErrStreamNotFound, stream, consumer, err)
	case kinesisx.IsAccessDenied(err):
		return fmt.Errorf("%w: stream %q, consumer %q: enhanced fan-out needs kinesis:DescribeStreamSummary and kinesis:RegisterStreamConsumer on the stream, "+
			"kinesis:DescribeStreamConsumer and kinesis:SubscribeToShard on its consumers (stream/NAME/consumer/*): %w", ErrAccessDenied, stream, consumer, err)
	}
	return fmt.Errorf("kinesislease: stream %q, consumer %q: %w", stream, consumer, err)
}

// explainDeadLetter names what is wrong with the dead-letter stream dl of
// the subscription to stream, found at start.
func explainDeadLetter(stream, dl string, err error) error {
	switch {
	case kinesisx.IsNotFound(err):
		return fmt.Errorf("%w: dead-letter stream %q (of the subscription to %q) does not exist (or is not in this account and region): create it, or fix WithDeadLetterStream: %w", ErrStreamNotFound, dl, stream, err)
	case kinesisx.IsAccessDenied(err):
		return fmt.Errorf("%w: dead-letter stream %q (of the subscription to %q): the credentials need kinesis:ListShards (checked at start) and kinesis:PutRecords on it: %w", ErrAccessDenied, dl, stream, err)
	}
	return fmt.Errorf("kinesislease: dead-letter stream %q (of the subscription to %q): %w", dl, stream, err)
}
