package kinesislease

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
)

// Errors returned by New, Subscribe, Run and Rewind; match them with errors.Is.
// Errors of the lease store match the sentinels of package leases
// (leases.ErrMisconfigured: a missing table, denied access).
var (
	// ErrInvalidOption: an option's value cannot work (or a Rewind's
	// position cannot be asked for); the message names it.
	ErrInvalidOption = errors.New("kinesislease: invalid option")
	// ErrDuplicateSubscription: the service already has a subscription to
	// the stream.
	ErrDuplicateSubscription = errors.New("kinesislease: stream already subscribed")
	// ErrStreamNotFound: a subscribed stream does not exist.
	ErrStreamNotFound = errors.New("kinesislease: stream not found")
	// ErrAccessDenied: the credentials may not call a Kinesis operation the
	// service needs.
	ErrAccessDenied = errors.New("kinesislease: access denied")
	// ErrRunning: Subscribe or Run on a service that is already running.
	ErrRunning = errors.New("kinesislease: service already running")
	// ErrNotSubscribed is returned by Unsubscribe for a stream the service
	// does not subscribe.
	ErrNotSubscribed = errors.New("kinesislease: stream not subscribed")
	// ErrDuplicateOwner: another process uses this instance's owner id in
	// the lease table (WithOwner) and keeps heartbeating, or took this
	// instance's membership entry over. The two never deliver at once.
	ErrDuplicateOwner = errors.New("kinesislease: duplicate owner id")
)

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
