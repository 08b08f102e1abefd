package testutil

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/backoff"
)

// LeaseKeyAttribute is the hash key of tables made by CreateLeaseTable.
const LeaseKeyAttribute = "lease_key"

const (
	setupTimeout = 60 * time.Second
	pollInterval = 20 * time.Millisecond
)

// CreateLeaseTable creates a PAY_PER_REQUEST table name with the string hash
// key lease_key, waits until it is ACTIVE and deletes it when the test ends.
// Its calls bypass any Faults on client (see WithoutFaults).
func CreateLeaseTable(tb testing.TB, client *dynamodb.Client, name string) {
	tb.Helper()
	CreateKeyedTable(tb, client, name, LeaseKeyAttribute)
}

// CreateKeyedTable is CreateLeaseTable with another string hash key: the
// lease tables of other libraries (the KCL's leaseKey, vmware-go-kcl's
// ShardID).
func CreateKeyedTable(tb testing.TB, client *dynamodb.Client, name, hashKey string) {
	tb.Helper()
	ctx, cancel := setupContext()
	defer cancel()
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String(hashKey), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String(hashKey), KeyType: dtypes.KeyTypeHash}},
		BillingMode:          dtypes.BillingModePayPerRequest,
	})
	if err != nil {
		tb.Fatalf("testutil: creating table %s: %v", name, err)
	}
	deleteAtCleanup[*dtypes.ResourceNotFoundException](tb, "table "+name, func(ctx context.Context) error {
		_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		return err
	})
	waitActive(ctx, tb, "table "+name, func() (string, bool, error) {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			return "", false, err
		}
		return string(out.Table.TableStatus), out.Table.TableStatus == dtypes.TableStatusActive, nil
	})
}

// setupContext is the context of the setup and cleanup calls: bounded by
// setupTimeout, bypassing any Faults.
func setupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(WithoutFaults(context.Background()), setupTimeout)
}

// deleteAtCleanup calls del, which deletes what ("table t"), when the test
// ends, failing the test on an error other than a NotFound (deleted
// already).
func deleteAtCleanup[NotFound error](tb testing.TB, what string, del func(context.Context) error) {
	tb.Cleanup(func() {
		ctx, cancel := setupContext()
		defer cancel()
		var notFound NotFound
		if err := del(ctx); err != nil && !errors.As(err, &notFound) {
			tb.Errorf("testutil: deleting %s: %v", what, err)
		}
	})
}

// waitActive polls describe until it reports the resource active, failing
// the test on an error or when ctx ends.
func waitActive(ctx context.Context, tb testing.TB, what string, describe func() (status string, active bool, err error)) {
	tb.Helper()
	for {
		status, active, err := describe()
		if err != nil {
			tb.Fatalf("testutil: waiting for %s: %v", what, err)
		}
		if active {
			return
		}
		if err := backoff.Sleep(ctx, pollInterval); err != nil {
			tb.Fatalf("testutil: %s still %s: %v", what, status, err)
		}
	}
}

// CreateStream creates a provisioned stream name with shards shards, waits
// until it is ACTIVE and deletes it when the test ends (the emulators count
// shards against an account limit, and kinesis-local slows down with data).
// Its calls bypass any Faults on client (see WithoutFaults).
func CreateStream(tb testing.TB, client *kinesis.Client, name string, shards int32) {
	tb.Helper()
	ctx, cancel := setupContext()
	defer cancel()
	_, err := client.CreateStream(ctx, &kinesis.CreateStreamInput{
		StreamName: aws.String(name),
		ShardCount: aws.Int32(shards),
	})
	if err != nil {
		tb.Fatalf("testutil: creating stream %s: %v", name, err)
	}
	deleteAtCleanup[*ktypes.ResourceNotFoundException](tb, "stream "+name, func(ctx context.Context) error {
		_, err := client.DeleteStream(ctx, &kinesis.DeleteStreamInput{
			StreamName:              aws.String(name),
			EnforceConsumerDeletion: aws.Bool(true),
		})
		return err
	})
	waitActive(ctx, tb, "stream "+name, func() (string, bool, error) {
		out, err := client.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			return "", false, err
		}
		st := out.StreamDescriptionSummary.StreamStatus
		return string(st), st == ktypes.StreamStatusActive, nil
	})
}
