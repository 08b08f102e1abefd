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
	ctx, cancel := context.WithTimeout(WithoutFaults(context.Background()), setupTimeout)
	defer cancel()
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String(LeaseKeyAttribute), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String(LeaseKeyAttribute), KeyType: dtypes.KeyTypeHash}},
		BillingMode:          dtypes.BillingModePayPerRequest,
	})
	if err != nil {
		tb.Fatalf("testutil: creating table %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(WithoutFaults(context.Background()), setupTimeout)
		defer cancel()
		_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		var notFound *dtypes.ResourceNotFoundException
		if err != nil && !errors.As(err, &notFound) {
			tb.Errorf("testutil: deleting table %s: %v", name, err)
		}
	})
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			tb.Fatalf("testutil: waiting for table %s: %v", name, err)
		}
		if out.Table.TableStatus == dtypes.TableStatusActive {
			return
		}
		if err := sleep(ctx, pollInterval); err != nil {
			tb.Fatalf("testutil: table %s still %s: %v", name, out.Table.TableStatus, err)
		}
	}
}

// CreateStream creates a provisioned stream name with shards shards, waits
// until it is ACTIVE and deletes it when the test ends (the emulators count
// shards against an account limit, and kinesis-local slows down with data).
// Its calls bypass any Faults on client (see WithoutFaults).
func CreateStream(tb testing.TB, client *kinesis.Client, name string, shards int32) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(WithoutFaults(context.Background()), setupTimeout)
	defer cancel()
	_, err := client.CreateStream(ctx, &kinesis.CreateStreamInput{
		StreamName: aws.String(name),
		ShardCount: aws.Int32(shards),
	})
	if err != nil {
		tb.Fatalf("testutil: creating stream %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(WithoutFaults(context.Background()), setupTimeout)
		defer cancel()
		_, err := client.DeleteStream(ctx, &kinesis.DeleteStreamInput{
			StreamName:              aws.String(name),
			EnforceConsumerDeletion: aws.Bool(true),
		})
		var notFound *ktypes.ResourceNotFoundException
		if err != nil && !errors.As(err, &notFound) {
			tb.Errorf("testutil: deleting stream %s: %v", name, err)
		}
	})
	for {
		out, err := client.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
		if err != nil {
			tb.Fatalf("testutil: waiting for stream %s: %v", name, err)
		}
		if out.StreamDescriptionSummary.StreamStatus == ktypes.StreamStatusActive {
			return
		}
		if err := sleep(ctx, pollInterval); err != nil {
			tb.Fatalf("testutil: stream %s still %s: %v", name, out.StreamDescriptionSummary.StreamStatus, err)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
