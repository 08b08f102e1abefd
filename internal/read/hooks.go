package read

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
)

// WithCallHook returns k with every call (ListShards, GetShardIterator,
// GetRecords) reported to onCall as it returns: the operation's name, the
// instant the call started and its error.
func WithCallHook(k kinesisx.Reader, onCall func(op string, start time.Time, err error)) kinesisx.Reader {
	return &hookedKinesis{Reader: k, onCall: onCall}
}

// hookedKinesis times every Kinesis call for its onCall.
type hookedKinesis struct {
	kinesisx.Reader
	onCall func(op string, start time.Time, err error)
}

func timed[T any](k *hookedKinesis, op string, call func() (T, error)) (T, error) {
	start := time.Now()
	v, err := call()
	k.onCall(op, start, err)
	return v, err
}

func (k *hookedKinesis) ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	return timed(k, "ListShards", func() (*kinesis.ListShardsOutput, error) { return k.Reader.ListShards(ctx, in, optFns...) })
}

func (k *hookedKinesis) GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error) {
	return timed(k, "GetShardIterator", func() (*kinesis.GetShardIteratorOutput, error) {
		return k.Reader.GetShardIterator(ctx, in, optFns...)
	})
}

func (k *hookedKinesis) GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error) {
	return timed(k, "GetRecords", func() (*kinesis.GetRecordsOutput, error) { return k.Reader.GetRecords(ctx, in, optFns...) })
}
