package testutil

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
)

// fastRetries keeps the standard retryer but backs off 10ms, so tests of
// retried faults do not wait the SDK's jittered seconds.
func fastRetries(o *retry.StandardOptions) {
	o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 10 * time.Millisecond, nil })
}

func fastKinesis(o *kinesis.Options) { o.Retryer = retry.NewStandard(fastRetries) }
func fastDynamo(o *dynamodb.Options) { o.Retryer = retry.NewStandard(fastRetries) }

// kinesisWithFaults returns a Kinesalite client with faults and a 1-shard stream.
func kinesisWithFaults(t *testing.T, e Emulator) (*kinesis.Client, *Faults, string) {
	t.Helper()
	f := &Faults{}
	c := KinesisClient(t, e, f.KinesisOptions, fastKinesis)
	stream := StreamName(t)
	CreateStream(t, c, stream, 1)
	return c, f, stream
}

func shardIterator(t *testing.T, c *kinesis.Client, stream string) *string {
	t.Helper()
	out, err := c.GetShardIterator(t.Context(), &kinesis.GetShardIteratorInput{
		StreamName:        aws.String(stream),
		ShardId:           aws.String("shardId-000000000000"),
		ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.ShardIterator
}

func TestFaultsRecordOps(t *testing.T) {
	t.Parallel()
	c, f, stream := kinesisWithFaults(t, Kinesalite)
	ctx := t.Context()
	if ops := f.Ops(); len(ops) != 0 {
		t.Fatalf("set-up calls were recorded: %v", ops)
	}
	if _, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	it := shardIterator(t, c, stream)
	if _, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRecords(WithoutFaults(ctx), &kinesis.GetRecordsInput{ShardIterator: it}); err != nil {
		t.Fatal(err)
	}
	want := []string{"ListShards", "PutRecord", "GetShardIterator", "GetRecords"}
	if got := f.Ops(); !slices.Equal(got, want) {
		t.Errorf("Ops() = %v, want %v", got, want)
	}
	for _, op := range want {
		if f.Calls(op) != 1 || f.Attempts(op) != 1 {
			t.Errorf("%s: %d calls, %d attempts, want 1 and 1", op, f.Calls(op), f.Attempts(op))
		}
	}
}

func TestFaultsInjectKinesisErrors(t *testing.T) {
	t.Parallel()
	c, f, stream := kinesisWithFaults(t, Kinesalite)
	ctx := t.Context()
	it := shardIterator(t, c, stream)

	// Per call: the caller sees the error, the SDK does not retry it and
	// nothing is sent.
	f.Inject(Fault{Op: "GetRecords", Times: 1, Err: &ktypes.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded for shard")}})
	_, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it})
	var pte *ktypes.ProvisionedThroughputExceededException
	if !errors.As(err, &pte) {
		t.Fatalf("GetRecords: %v, want ProvisionedThroughputExceededException", err)
	}
	var respErr *awshttp.ResponseError
	if !errors.As(err, &respErr) || respErr.HTTPStatusCode() != 400 || respErr.ServiceRequestID() != "testutil-injected" {
		t.Errorf("error %v is not wrapped like a service error (status 400, request id)", err)
	}
	var opErr *smithy.OperationError
	if !errors.As(err, &opErr) || opErr.Operation() != "GetRecords" || opErr.Service() != "Kinesis" {
		t.Errorf("error %v is not an OperationError of Kinesis GetRecords", err)
	}
	if n := f.Attempts("GetRecords"); n != 0 {
		t.Errorf("%d attempts reached the transport, want 0", n)
	}
	if _, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it}); err != nil {
		t.Fatalf("GetRecords after the fault: %v", err)
	}

	// Expired iterator, which neither emulator produces before 5 minutes.
	f.Inject(Fault{Op: "GetRecords", Times: 1, Err: &ktypes.ExpiredIteratorException{Message: aws.String("Iterator expired")}})
	_, err = c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it})
	var expired *ktypes.ExpiredIteratorException
	if !errors.As(err, &expired) {
		t.Fatalf("GetRecords: %v, want ExpiredIteratorException", err)
	}

	// Per attempt: the SDK's retryer sees the throttle and retries it.
	f.Inject(Fault{Op: "GetRecords", Times: 2, PerAttempt: true, Err: &ktypes.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded")}})
	before := f.Attempts("GetRecords")
	if _, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: it}); err != nil {
		t.Fatalf("GetRecords with 2 retried throttles: %v", err)
	}
	if n := f.Attempts("GetRecords") - before; n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}

	// Per attempt, on every attempt: the caller sees it once attempts run out.
	f.Inject(Fault{Op: "PutRecord", PerAttempt: true, Err: &ktypes.ProvisionedThroughputExceededException{Message: aws.String("Rate exceeded")}})
	_, err = c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte("x")})
	if !errors.As(err, &pte) {
		t.Fatalf("PutRecord: %v, want ProvisionedThroughputExceededException", err)
	}
	if f.Calls("PutRecord") != 1 || f.Attempts("PutRecord") != 3 {
		t.Errorf("PutRecord: %d calls, %d attempts, want 1 and 3", f.Calls("PutRecord"), f.Attempts("PutRecord"))
	}
	f.Clear()
	if _, err := c.PutRecord(ctx, &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte("x")}); err != nil {
		t.Fatalf("PutRecord after Clear: %v", err)
	}
}

func TestFaultsSkipTimesAndAnyOp(t *testing.T) {
	t.Parallel()
	f := &Faults{}
	c := DynamoClient(t, f.DynamoOptions)
	ctx := t.Context()
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate of requests exceeds the allowed throughput."}
	f.Inject(Fault{Op: "ListTables", Skip: 1, Times: 2, Err: throttle})
	var got []bool
	for range 5 {
		_, err := c.ListTables(ctx, &dynamodb.ListTablesInput{})
		var apiErr smithy.APIError
		if err != nil && (!errors.As(err, &apiErr) || apiErr.ErrorCode() != "ThrottlingException") {
			t.Fatalf("ListTables: %v, want ThrottlingException", err)
		}
		got = append(got, err != nil)
	}
	if want := []bool{false, true, true, false, false}; !slices.Equal(got, want) {
		t.Errorf("failed calls %v, want %v", got, want)
	}

	f.Clear()
	denied := &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "User is not authorized to perform: dynamodb:DescribeTable"}
	f.Inject(Fault{Times: 2, Err: denied}) // any operation
	for _, call := range []func() error{
		func() error {
			_, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("x")})
			return err
		},
		func() error { _, err := c.ListTables(ctx, &dynamodb.ListTablesInput{}); return err },
	} {
		err := call()
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "AccessDeniedException" || apiErr.ErrorFault() != smithy.FaultUnknown {
			t.Errorf("got %v, want AccessDeniedException", err)
		}
	}
	if _, err := c.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Errorf("third call: %v, want no fault", err)
	}
}

func TestFaultsDelay(t *testing.T) {
	t.Parallel()
	f := &Faults{}
	c := DynamoClient(t, f.DynamoOptions)
	f.Inject(Fault{Op: "ListTables", Delay: 300 * time.Millisecond})
	start := time.Now()
	if _, err := c.ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("call took %v, want >= 300ms", d)
	}

	// A delay ends with the call's context. On a testing/synctest bubble's
	// clock (the delay comes before the call goes out, so nothing leaves
	// the bubble) the call returns exactly when its deadline passes, not
	// when the hour's delay would have ended.
	f.Clear()
	f.Inject(Fault{Op: "ListTables", Delay: time.Hour})
	synctest.Test(t, func(t *testing.T) {
		const deadline = 50 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		_, err := c.ListTables(ctx, &dynamodb.ListTablesInput{})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("delayed call past its deadline: %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != deadline {
			t.Errorf("the call with an hour's delay returned %v (virtual) after it began, want when its %v deadline passed", d, deadline)
		}
	})
}

// counter returns the counter attribute of item "c" in table.
func counter(t *testing.T, c *dynamodb.Client, table string) int {
	t.Helper()
	out, err := c.GetItem(WithoutFaults(t.Context()), &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]dtypes.AttributeValue{LeaseKeyAttribute: &dtypes.AttributeValueMemberS{Value: "c"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := out.Item["n"].(*dtypes.AttributeValueMemberN)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v.Value)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func increment(ctx context.Context, c *dynamodb.Client, table string, optFns ...func(*dynamodb.Options)) error {
	_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       map[string]dtypes.AttributeValue{LeaseKeyAttribute: &dtypes.AttributeValueMemberS{Value: "c"}},
		UpdateExpression:          aws.String("ADD n :one"),
		ExpressionAttributeValues: map[string]dtypes.AttributeValue{":one": &dtypes.AttributeValueMemberN{Value: "1"}},
	}, optFns...)
	return err
}

func TestFaultsLostResponse(t *testing.T) {
	t.Parallel()
	f := &Faults{}
	c := DynamoClient(t, f.DynamoOptions, fastDynamo)
	table := TableName(t)
	CreateLeaseTable(t, c, table)
	ctx := t.Context()

	// The first attempt reaches DynamoDB Local and is applied, its response
	// is lost, and the SDK retries: the server applies the increment twice
	// while the caller made one successful call.
	f.Inject(Fault{Op: "UpdateItem", Times: 1, PerAttempt: true, LoseResponse: true})
	if err := increment(ctx, c, table); err != nil {
		t.Fatalf("UpdateItem with a lost, retried response: %v", err)
	}
	if f.Calls("UpdateItem") != 1 || f.Attempts("UpdateItem") != 2 {
		t.Errorf("%d calls, %d attempts, want 1 and 2", f.Calls("UpdateItem"), f.Attempts("UpdateItem"))
	}
	if n := counter(t, c, table); n != 2 {
		t.Errorf("counter = %d after one call whose first response was lost, want 2", n)
	}

	// Without retries the caller sees a timeout, yet the server applied it.
	f.Inject(Fault{Op: "UpdateItem", Times: 1, PerAttempt: true, LoseResponse: true})
	err := increment(ctx, c, table, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	var netErr net.Error
	if !errors.Is(err, ErrResponseLost) || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("UpdateItem without retries: %v, want a lost-response timeout", err)
	}
	if !retry.NewStandard().IsErrorRetryable(err) {
		t.Errorf("the SDK's standard retryer does not retry %v", err)
	}
	if n := counter(t, c, table); n != 3 {
		t.Errorf("counter = %d, want 3", n)
	}

	// Per call, the SDK finishes the call (one attempt) and the caller still
	// sees the loss.
	attempts := f.Attempts("UpdateItem")
	f.Inject(Fault{Op: "UpdateItem", Times: 1, LoseResponse: true})
	if err := increment(ctx, c, table); !errors.Is(err, ErrResponseLost) {
		t.Fatalf("UpdateItem with a lost call: %v, want ErrResponseLost", err)
	}
	if n := f.Attempts("UpdateItem") - attempts; n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
	if n := counter(t, c, table); n != 4 {
		t.Errorf("counter = %d, want 4", n)
	}

	// Err with LoseResponse: applied by the server, reported as Err.
	f.Inject(Fault{Op: "UpdateItem", Times: 1, LoseResponse: true, Err: &smithy.GenericAPIError{Code: "InternalServerError", Fault: smithy.FaultServer}})
	err = increment(ctx, c, table)
	var respErr *awshttp.ResponseError
	if !errors.As(err, &respErr) || respErr.HTTPStatusCode() != 500 {
		t.Fatalf("UpdateItem: %v, want an InternalServerError with status 500", err)
	}
	if n := counter(t, c, table); n != 5 {
		t.Errorf("counter = %d, want 5", n)
	}
}

// TestFaultsLostPutRecordDuplicates shows the at-least-once consequence on
// Kinesis: a PutRecord whose response is lost is written twice.
func TestFaultsLostPutRecordDuplicates(t *testing.T) {
	t.Parallel()
	for _, e := range KinesisEmulators() {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			c, f, stream := kinesisWithFaults(t, e)
			f.Inject(Fault{Op: "PutRecord", Times: 1, PerAttempt: true, LoseResponse: true})
			if _, err := c.PutRecord(t.Context(), &kinesis.PutRecordInput{StreamName: aws.String(stream), PartitionKey: aws.String("k"), Data: []byte("once")}); err != nil {
				t.Fatal(err)
			}
			recs := readRecords(t, c, shardIterator(t, c, stream), 2)
			if len(recs) != 2 || string(recs[0].Data) != "once" || string(recs[1].Data) != "once" {
				t.Fatalf("records %v, want the record twice", recs)
			}
		})
	}
}
