package kinesislease

import (
	"context"
	"fmt"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
)

// Kinesis is the part of *kinesis.Client the service uses: reading
// (ListShards, GetShardIterator, GetRecords), and PutRecords for Publish and
// dead-letter streams. WithEnhancedFanOut needs more: the client must also
// have DescribeStreamSummary, RegisterStreamConsumer, DescribeStreamConsumer
// and SubscribeToShard (a *kinesis.Client has them all).
type Kinesis interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

var _ Kinesis = (*kinesis.Client)(nil)

// Producer is the part of *kinesis.Client a Publisher uses.
type Producer interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

var streamARN = regexp.MustCompile(`^arn:aws[a-zA-Z-]*:kinesis:[a-z0-9-]+:\d{12}:stream/[a-zA-Z0-9_.-]{1,128}$`)

func validStream(stream string) error {
	if kinesisx.ValidName(stream) || streamARN.MatchString(stream) {
		return nil
	}
	return fmt.Errorf("%w: stream %q: want a stream name (1 to 128 of a-z, A-Z, 0-9, '_', '-', '.') or a stream ARN", ErrInvalidOption, stream)
}
