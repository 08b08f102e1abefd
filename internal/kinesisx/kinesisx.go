// Package kinesisx is the one place that knows Kinesis' request shapes and
// AWS error codes: stream names versus ARNs and the stream identity used in
// lease rows, iterator requests for start positions and checkpoints, shard
// listing, and the classification of AWS errors (access denied, not found,
// throttled, permanent). The root package, the engine, migrate,
// cmd/kinesislease and otelkl use it instead of copies of their own. The
// codecs of GetRecords and SubscribeToShard are kinesiswire's, which
// imports this package.
package kinesisx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kschemas "github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"

	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// Reader is the part of *kinesis.Client that reading a stream needs.
type Reader interface {
	ListShards(ctx context.Context, in *kinesis.ListShardsInput, optFns ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error)
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}

var _ Reader = (*kinesis.Client)(nil)

// IsARN reports whether stream is a stream ARN rather than a name.
func IsARN(stream string) bool { return strings.HasPrefix(stream, "arn:") }

// Fields returns the StreamName and StreamARN fields of a request naming
// stream: one of them is set, the other nil.
func Fields(stream string) (name, arn *string) {
	if IsARN(stream) {
		return nil, aws.String(stream)
	}
	return aws.String(stream), nil
}

// Name returns the stream's name: stream itself, or the part of an ARN
// after "stream/".
func Name(stream string) string {
	if !IsARN(stream) {
		return stream
	}
	if i := strings.LastIndex(stream, ":stream/"); i >= 0 {
		return stream[i+len(":stream/"):]
	}
	return stream
}

// NamespaceSeparator separates a lease namespace from the stream's name in
// the stream part of a lease row's key (LeaseStream). No stream name
// contains it, and a namespace may not.
const NamespaceSeparator = "/"

// LeaseStream returns the stream part of the keys of the lease rows of
// stream (a name or an ARN) under namespace: its name, after namespace and
// NamespaceSeparator unless namespace is "" ("acct-b/orders"; "orders").
func LeaseStream(namespace, stream string) string {
	if namespace == "" {
		return Name(stream)
	}
	return namespace + NamespaceSeparator + Name(stream)
}

// namePattern is a stream name: 1 to 128 letters, digits, '_', '.' and '-'.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)

// ValidName reports whether s is a stream name (not an ARN): 1 to 128
// letters, digits, '_', '.' and '-'.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// CheckNamespace returns an error unless namespace can be a lease namespace
// (LeaseStream): a stream name's characters, 1 to 128 letters, digits, '_',
// '.' and '-', so never NamespaceSeparator nor the ':' of a lease key. It is
// the one rule of WithLeaseNamespace, migrate.Ours.LeaseNamespace and the
// command's --lease-namespace.
func CheckNamespace(namespace string) error {
	if !ValidName(namespace) {
		return fmt.Errorf("lease namespace %q: want 1 to 128 letters, digits, '_', '.' and '-'", namespace)
	}
	return nil
}

// IsLeaseStream reports whether s is the stream part of a namespaced lease
// key (LeaseStream) rather than a stream's name or ARN.
func IsLeaseStream(s string) bool { return !IsARN(s) && strings.Contains(s, NamespaceSeparator) }

// IteratorInput is the GetShardIterator request that starts shardID of
// stream at p.
func IteratorInput(stream, shardID string, p kltype.StartPosition) *kinesis.GetShardIteratorInput {
	sp := StartingPosition(p)
	in := &kinesis.GetShardIteratorInput{ShardId: aws.String(shardID), ShardIteratorType: sp.Type, StartingSequenceNumber: sp.SequenceNumber, Timestamp: sp.Timestamp}
	in.StreamName, in.StreamARN = Fields(stream)
	return in
}

// GetRecordsInput is the GetRecords request for iterator (limit 0: Kinesis'
// default). A stream named by ARN is named in the request too, as IAM
// policies on ARNs expect.
func GetRecordsInput(stream, iterator string, limit int32) *kinesis.GetRecordsInput {
	in := &kinesis.GetRecordsInput{ShardIterator: aws.String(iterator)}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	if IsARN(stream) {
		in.StreamARN = aws.String(stream)
	}
	return in
}

// PositionAfter returns where to read a shard whose checkpoint is cp, and
// false for no checkpoint. A sequence number resumes after it (at it, to
// skip the done part of a KPL aggregate, when SubSequence is set); the
// checkpoints a rewind writes (leases.RewindTrimHorizon, RewindLatest,
// RewindAtSequence, RewindAtTimestamp) map to their positions.
func PositionAfter(cp leases.Checkpoint) (kltype.StartPosition, bool) {
	seq := cp.Sequence
	switch {
	case seq == "":
		return kltype.StartPosition{}, false
	case seq == leases.RewindTrimHorizon:
		return kltype.TrimHorizon, true
	case seq == leases.RewindLatest:
		return kltype.Latest, true
	case strings.HasPrefix(seq, leases.AtSequencePrefix):
		return kltype.AtSequenceNumber(strings.TrimPrefix(seq, leases.AtSequencePrefix)), true
	case strings.HasPrefix(seq, leases.AtTimestampPrefix):
		ms, err := strconv.ParseInt(strings.TrimPrefix(seq, leases.AtTimestampPrefix), 10, 64)
		if err == nil {
			return kltype.AtTimestamp(time.UnixMilli(ms)), true
		}
	case cp.SubSequence > 0:
		// Inside a KPL aggregate: read it again; the worker skips the user
		// records already done.
		return kltype.AtSequenceNumber(seq), true
	}
	return kltype.AfterSequenceNumber(seq), true
}

// ListShards returns every shard of stream, in ListShards' order, following
// NextToken. Its error names the stream and the operation.
func ListShards(ctx context.Context, client Reader, stream string) ([]types.Shard, error) {
	var shards []types.Shard
	in := &kinesis.ListShardsInput{}
	in.StreamName, in.StreamARN = Fields(stream)
	for {
		out, err := client.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("stream %q: ListShards: %w", stream, err)
		}
		shards = append(shards, out.Shards...)
		if out.NextToken == nil {
			return shards, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// Parents returns the ids of a shard's parents (ParentShardId,
// AdjacentParentShardId), those that are set.
func Parents(s types.Shard) []string {
	ps := []string{}
	for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
		if id := aws.ToString(p); id != "" {
			ps = append(ps, id)
		}
	}
	return ps
}

// ErrorCode returns the AWS error code in err's chain, or "".
func ErrorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// accessDenied are the AWS error codes that say the credentials may not do
// what was asked, or are not valid at all (any service).
var accessDenied = codes("AccessDeniedException", "AccessDenied", "UnrecognizedClientException", "InvalidSignatureException",
	"MissingAuthenticationTokenException", "ExpiredTokenException", "InvalidClientTokenId", "KMSAccessDeniedException")

// throttled are the AWS error codes of throttling: Kinesis'
// ProvisionedThroughputExceededException and LimitExceededException,
// DynamoDB's ThrottlingException and RequestLimitExceeded, and others.
var throttled = codes("ProvisionedThroughputExceededException", "ThrottlingException", "LimitExceededException",
	"RequestLimitExceeded", "TooManyRequestsException")

func codes(cs ...string) map[string]bool {
	m := make(map[string]bool, len(cs))
	for _, c := range cs {
		m[c] = true
	}
	return m
}

// IsAccessDenied reports whether err says the credentials may not do what
// was asked, or are not valid at all (any AWS service).
func IsAccessDenied(err error) bool { return accessDenied[ErrorCode(err)] }

// IsNotFound reports whether err is a Kinesis ResourceNotFoundException.
func IsNotFound(err error) bool {
	var notFound *types.ResourceNotFoundException
	return errors.As(err, &notFound)
}

// IsThrottled reports whether err is a throttling error of Kinesis
// (ProvisionedThroughputExceededException, LimitExceededException) or
// another AWS service (DynamoDB's ThrottlingException,
// RequestLimitExceeded, ...).
func IsThrottled(err error) bool { return throttled[ErrorCode(err)] }

// IsExpiredIterator reports whether err is ExpiredIteratorException.
func IsExpiredIterator(err error) bool {
	var expired *types.ExpiredIteratorException
	return errors.As(err, &expired)
}

// Permanent reports whether err is one no retry can cure: the stream or
// shard does not exist, the request is invalid, or access is denied.
func Permanent(err error) bool {
	var invalid *types.InvalidArgumentException
	switch {
	case IsNotFound(err), errors.As(err, &invalid), IsAccessDenied(err):
		return true
	}
	return ErrorCode(err) == "ValidationException"
}

// WithoutThrottleRetries is a per-call option that keeps the SDK's retryer
// from retrying throttling (ProvisionedThroughputExceededException and the
// like): the reader backs off from a throttle itself, once, and reports
// every one to the hooks. Other transient errors are still retried by the
// SDK as configured.
func WithoutThrottleRetries(o *kinesis.Options) {
	switch r := o.Retryer.(type) {
	case nil:
	case aws.RetryerV2:
		o.Retryer = noThrottleRetriesV2{r}
	default:
		o.Retryer = noThrottleRetries{r}
	}
}

type noThrottleRetries struct{ aws.Retryer }

func (r noThrottleRetries) IsErrorRetryable(err error) bool {
	return !IsThrottled(err) && r.Retryer.IsErrorRetryable(err)
}

type noThrottleRetriesV2 struct{ aws.RetryerV2 }

func (r noThrottleRetriesV2) IsErrorRetryable(err error) bool {
	return !IsThrottled(err) && r.RetryerV2.IsErrorRetryable(err)
}

// FanOut is the part of *kinesis.Client that enhanced fan-out needs:
// finding the stream's ARN (DescribeStreamSummary, for a stream named by
// name), registering its consumer and waiting for it (RegisterStreamConsumer,
// DescribeStreamConsumer), and subscribing to its shards.
type FanOut interface {
	DescribeStreamSummary(ctx context.Context, in *kinesis.DescribeStreamSummaryInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamSummaryOutput, error)
	RegisterStreamConsumer(ctx context.Context, in *kinesis.RegisterStreamConsumerInput, optFns ...func(*kinesis.Options)) (*kinesis.RegisterStreamConsumerOutput, error)
	DescribeStreamConsumer(ctx context.Context, in *kinesis.DescribeStreamConsumerInput, optFns ...func(*kinesis.Options)) (*kinesis.DescribeStreamConsumerOutput, error)
	SubscribeToShard(ctx context.Context, in *kinesis.SubscribeToShardInput, optFns ...func(*kinesis.Options)) (*kinesis.SubscribeToShardOutput, error)
}

var _ FanOut = (*kinesis.Client)(nil)

// OwnEventStreamCodec is a per-call option of SubscribeToShard that gives
// the call a protocol instance of its own. The SDK's client shares one
// event-stream codec (its decoder and payload buffer) among all its calls,
// so two subscriptions read at once on one client race on it
// (https://github.com/aws/smithy-go/issues/714).
func OwnEventStreamCodec(o *kinesis.Options) {
	o.Protocol = awsjson.New11(kschemas.Kinesis_20131202)
}

// StableRequestBody is a per-call option of SubscribeToShard that sends
// the request body from a copy in memory. smithy-go closes the request
// body it built as soon as the HTTP client returns the response's
// headers; when the transport has not yet finished with that body, its
// write loop fails and closes the connection, and the subscription that
// just started ends at its first read with "use of closed network
// connection" (a buffered answer is read by then; an event stream is not).
// Seen once in thirty subscriptions opened at once on one client; with the
// copy, none (TestSubscriptionsOutliveTheRequestBody).
func StableRequestBody(o *kinesis.Options) {
	o.HTTPClient = stableBody{o.HTTPClient}
}

// stableBody is an HTTP client that hands its transport a request body of
// its own, which nothing else closes.
type stableBody struct{ c kinesis.HTTPClient }

func (s stableBody) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, fmt.Errorf("reading the request body: %w", err)
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		req.ContentLength = int64(len(b))
	}
	return s.c.Do(req)
}

// IsResourceInUse reports whether err is a Kinesis ResourceInUseException.
func IsResourceInUse(err error) bool {
	var inUse *types.ResourceInUseException
	return errors.As(err, &inUse)
}

// IsLimitExceeded reports whether err is a Kinesis LimitExceededException.
func IsLimitExceeded(err error) bool {
	var limit *types.LimitExceededException
	return errors.As(err, &limit)
}

// StartingPosition is the SubscribeToShard starting position for p (and
// the iterator type, sequence number and timestamp of GetShardIterator's).
func StartingPosition(p kltype.StartPosition) *types.StartingPosition {
	sp := &types.StartingPosition{}
	switch p.Type {
	case kltype.PositionLatest:
		sp.Type = types.ShardIteratorTypeLatest
	case kltype.PositionTrimHorizon:
		sp.Type = types.ShardIteratorTypeTrimHorizon
	case kltype.PositionAtTimestamp:
		sp.Type = types.ShardIteratorTypeAtTimestamp
		sp.Timestamp = aws.Time(p.Time)
	case kltype.PositionAtSequenceNumber:
		sp.Type = types.ShardIteratorTypeAtSequenceNumber
		sp.SequenceNumber = aws.String(p.Sequence)
	case kltype.PositionAfterSequenceNumber:
		sp.Type = types.ShardIteratorTypeAfterSequenceNumber
		sp.SequenceNumber = aws.String(p.Sequence)
	}
	return sp
}
