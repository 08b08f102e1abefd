package dynamo_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// deleteAtCleanup deletes table when the test ends.
func deleteAtCleanup(t *testing.T, client *dynamodb.Client, table string) {
	t.Cleanup(func() {
		_, err := client.DeleteTable(testutil.WithoutFaults(context.Background()), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
		var notFound *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &notFound) {
			t.Errorf("deleting table %s: %v", table, err)
		}
	})
}

// TestCreateTable creates a lease table on DynamoDB Local, checks its
// schema and billing, that a store works on it, and that a second call
// finds it and changes nothing.
func TestCreateTable(t *testing.T) {
	t.Parallel()
	faults := &testutil.Faults{}
	client := testutil.DynamoClient(t, faults.DynamoOptions)
	table := testutil.TableName(t)
	deleteAtCleanup(t, client, table)

	before := time.Now()
	got, err := dynamo.CreateTable(ctx(t), client, table)
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	if got.Born.Before(before.Add(-2*time.Second)) || got.Born.After(time.Now().Add(2*time.Second)) {
		t.Errorf("CreateTable: Born %v, want the table's CreationDateTime, between %v and now", got.Born, before)
	}
	if !got.Created || got.Name != table || !strings.HasSuffix(got.ARN, ":table/"+table) ||
		got.BillingMode != types.BillingModePayPerRequest || got.PointInTimeRecovery || got.Tags != nil {
		t.Errorf("CreateTable = %+v, want created, PAY_PER_REQUEST, an ARN ending in :table/%s", got, table)
	}
	out, err := client.DescribeTable(ctx(t), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	d := out.Table
	if d.TableStatus != types.TableStatusActive || len(d.KeySchema) != 1 || aws.ToString(d.KeySchema[0].AttributeName) != "lease_key" ||
		d.KeySchema[0].KeyType != types.KeyTypeHash || len(d.AttributeDefinitions) != 1 || d.AttributeDefinitions[0].AttributeType != types.ScalarAttributeTypeS ||
		d.BillingModeSummary == nil || d.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("the table: status %s, key %+v, attributes %+v, billing %+v", d.TableStatus, d.KeySchema, d.AttributeDefinitions, d.BillingModeSummary)
	}
	if ops, u := faults.Ops(), slices.Index(faults.Ops(), "UpdateItem"); u < 2 || ops[0] != "CreateTable" ||
		slices.ContainsFunc(ops[1:u], func(op string) bool { return op != "DescribeTable" }) {
		t.Errorf("operations %v, want CreateTable, then DescribeTable until ACTIVE, then UpdateItem (born)", faults.Ops())
	}

	// A store works on it.
	s := dynamo.New(testutil.Config(t), table, dynamo.WithDynamoDBClient(client))
	if err := s.Check(ctx(t)); err != nil {
		t.Fatalf("Check on the new table: %v", err)
	}
	l, err := s.Create(ctx(t), leases.Key{Stream: "orders", Shard: "shardId-000000000000"})
	if err != nil {
		t.Fatalf("Create on the new table: %v", err)
	}

	// Members read when it was born in the membership header.
	if h, err := s.Header(ctx(t)); err != nil || h.Born != got.Born.UnixMilli() {
		t.Errorf("Header = %+v, %v; want Born %d (the table's CreationDateTime)", h, err, got.Born.UnixMilli())
	}

	// Again: found, unchanged (the row is still there, the born time too).
	again, err := dynamo.CreateTable(ctx(t), client, table)
	if err != nil {
		t.Fatalf("CreateTable again: %v", err)
	}
	if again.Created || again.ARN != got.ARN || again.BillingMode != types.BillingModePayPerRequest || !again.Born.Equal(got.Born) {
		t.Errorf("CreateTable again = %+v, want not created, the same ARN %s and Born %v", again, got.ARN, got.Born)
	}
	if h, err := s.Header(ctx(t)); err != nil || h.Born != got.Born.UnixMilli() {
		t.Errorf("Header after CreateTable again = %+v, %v; want Born %d", h, err, got.Born.UnixMilli())
	}
	if l2, err := s.Get(ctx(t), l.Key); err != nil || l2.Counter != l.Counter {
		t.Errorf("the row after the second CreateTable: %+v, %v; want %+v", l2, err, l)
	}
}

// TestCreateTableWrongKey: an existing table with another key schema is
// refused with an error naming the table and both schemas, matching
// leases.ErrMisconfigured, and nothing else is called.
func TestCreateTableWrongKey(t *testing.T) {
	t.Parallel()
	faults := &testutil.Faults{}
	client := testutil.DynamoClient(t, faults.DynamoOptions)
	table := testutil.TableName(t)
	testutil.CreateKeyedTable(t, client, table, "leaseKey")

	_, err := dynamo.CreateTable(ctx(t), client, table, dynamo.WithPointInTimeRecovery(), dynamo.WithTableTags(map[string]string{"team": "payments"}))
	if !errors.Is(err, leases.ErrMisconfigured) {
		t.Fatalf("CreateTable on a table keyed leaseKey: %v, want leases.ErrMisconfigured", err)
	}
	for _, s := range []string{`"` + table + `"`, "HASH leaseKey (S)", "want HASH lease_key (S)"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error lacks %q: %v", s, err)
		}
	}
	if ops := faults.Ops(); slices.Contains(ops, "UpdateContinuousBackups") || slices.Contains(ops, "TagResource") {
		t.Errorf("operations %v: the refused table was changed", ops)
	}
}

// awsClient is DynamoDB Local with what it lacks: point-in-time recovery
// (UpdateContinuousBackups and DescribeContinuousBackups answer
// UnknownOperationException) and tags (TagResource and ListTagsOfResource
// answer "Tagging is not currently supported in DynamoDB Local"; CreateTable
// accepts Tags and drops them). It records the tags CreateTable sends and
// the calls of the other two, and answers UpdateContinuousBackups like
// DynamoDB: the first unavailable times with
// ContinuousBackupsUnavailableException, as DynamoDB may right after
// CreateTable.
type awsClient struct {
	*dynamodb.Client
	unavailable int
	calls       []*dynamodb.UpdateContinuousBackupsInput
	createTags  map[string]string // the Tags of the last CreateTable
	tagged      []*dynamodb.TagResourceInput
}

func tagMap(tags []types.Tag) map[string]string {
	m := map[string]string{}
	for _, tag := range tags {
		m[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	return m
}

func (c *awsClient) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	c.createTags = tagMap(in.Tags)
	return c.Client.CreateTable(ctx, in, optFns...)
}

func (c *awsClient) TagResource(_ context.Context, in *dynamodb.TagResourceInput, _ ...func(*dynamodb.Options)) (*dynamodb.TagResourceOutput, error) {
	c.tagged = append(c.tagged, in)
	return &dynamodb.TagResourceOutput{}, nil
}

func (c *awsClient) UpdateContinuousBackups(ctx context.Context, in *dynamodb.UpdateContinuousBackupsInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateContinuousBackupsOutput, error) {
	c.calls = append(c.calls, in)
	if len(c.calls) <= c.unavailable {
		return nil, &types.ContinuousBackupsUnavailableException{Message: aws.String("Backups are being enabled for the table: " + aws.ToString(in.TableName) + ". Please retry later")}
	}
	status := types.PointInTimeRecoveryStatusDisabled
	if aws.ToBool(in.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled) {
		status = types.PointInTimeRecoveryStatusEnabled
	}
	return &dynamodb.UpdateContinuousBackupsOutput{ContinuousBackupsDescription: &types.ContinuousBackupsDescription{
		ContinuousBackupsStatus:        types.ContinuousBackupsStatusEnabled,
		PointInTimeRecoveryDescription: &types.PointInTimeRecoveryDescription{PointInTimeRecoveryStatus: status},
	}}, nil
}

// TestCreateTableOptions: point-in-time recovery and tags, on a new table
// and on an existing one. DynamoDB Local has neither: awsClient stands in
// for those calls (the table itself is DynamoDB Local's), and on DynamoDB
// Local itself the PITR option fails with its UnknownOperationException.
func TestCreateTableOptions(t *testing.T) {
	t.Parallel()
	client := testutil.DynamoClient(t)
	checkPITR := func(t *testing.T, c *awsClient, table string) {
		t.Helper()
		if len(c.calls) != c.unavailable+1 {
			t.Fatalf("%d UpdateContinuousBackups calls, want %d", len(c.calls), c.unavailable+1)
		}
		for _, in := range c.calls {
			if aws.ToString(in.TableName) != table || !aws.ToBool(in.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled) {
				t.Errorf("UpdateContinuousBackups(%s, enabled %v), want (%s, true)",
					aws.ToString(in.TableName), aws.ToBool(in.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled), table)
			}
		}
	}

	t.Run("new", func(t *testing.T) {
		t.Parallel()
		table := testutil.TableName(t)
		deleteAtCleanup(t, client, table)
		c := &awsClient{Client: client, unavailable: 1}
		got, err := dynamo.CreateTable(ctx(t), c, table, dynamo.WithPointInTimeRecovery(),
			dynamo.WithTableTags(map[string]string{"team": "payments"}), dynamo.WithTableTags(map[string]string{"env": "prod"}))
		if err != nil {
			t.Fatalf("CreateTable: %v", err)
		}
		if !got.Created || !got.PointInTimeRecovery || !maps.Equal(got.Tags, map[string]string{"team": "payments", "env": "prod"}) {
			t.Errorf("CreateTable = %+v, want created, PITR on, 2 tags", got)
		}
		checkPITR(t, c, table)
		if !maps.Equal(c.createTags, map[string]string{"team": "payments", "env": "prod"}) || len(c.tagged) != 0 {
			t.Errorf("CreateTable sent tags %v, then %d TagResource; want team=payments env=prod in CreateTable alone", c.createTags, len(c.tagged))
		}
	})

	t.Run("existing", func(t *testing.T) {
		t.Parallel()
		table := testutil.TableName(t)
		testutil.CreateLeaseTable(t, client, table)
		c := &awsClient{Client: client}
		got, err := dynamo.CreateTable(ctx(t), c, table, dynamo.WithPointInTimeRecovery(), dynamo.WithTableTags(map[string]string{"team": "payments"}))
		if err != nil {
			t.Fatalf("CreateTable: %v", err)
		}
		if got.Created || !got.PointInTimeRecovery {
			t.Errorf("CreateTable = %+v, want found, PITR on", got)
		}
		checkPITR(t, c, table)
		if len(c.tagged) != 1 || aws.ToString(c.tagged[0].ResourceArn) != got.ARN || !maps.Equal(tagMap(c.tagged[0].Tags), map[string]string{"team": "payments"}) {
			t.Errorf("TagResource calls %+v, want one on %s with team=payments", c.tagged, got.ARN)
		}
		if !strings.HasSuffix(got.ARN, ":table/"+table) {
			t.Errorf("ARN %q", got.ARN)
		}
	})

	t.Run("DynamoDB Local", func(t *testing.T) {
		t.Parallel()
		table := testutil.TableName(t)
		deleteAtCleanup(t, client, table)
		got, err := dynamo.CreateTable(ctx(t), client, table, dynamo.WithPointInTimeRecovery())
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "UnknownOperationException" || !strings.Contains(err.Error(), "point-in-time recovery") {
			t.Fatalf("CreateTable with PITR on DynamoDB Local: %v; want its UnknownOperationException (if it supports PITR now, test it there)", err)
		}
		if !got.Created || got.PointInTimeRecovery {
			t.Errorf("CreateTable = %+v, want created (the table stays), PITR off", got)
		}
	})
}

// TestCreateTableErrors: a bad name is refused before any call; a denied
// CreateTable keeps the SDK's error.
func TestCreateTableErrors(t *testing.T) {
	t.Parallel()
	faults := &testutil.Faults{}
	client := testutil.DynamoClient(t, faults.DynamoOptions)
	if _, err := dynamo.CreateTable(ctx(t), client, "a!"); !errors.Is(err, leases.ErrMisconfigured) || !strings.Contains(err.Error(), `"a!"`) {
		t.Errorf("CreateTable(\"a!\"): %v, want leases.ErrMisconfigured naming it", err)
	}
	if _, err := dynamo.CreateTable(ctx(t), client, "abc", dynamo.WithTableTags(map[string]string{"": "x"})); err == nil {
		t.Errorf("CreateTable with an empty tag key: no error")
	}
	if ops := faults.Ops(); len(ops) != 0 {
		t.Errorf("operations %v, want none", ops)
	}
	faults.Inject(testutil.Fault{Op: "CreateTable", Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: dynamodb:CreateTable"}})
	table := testutil.TableName(t)
	_, err := dynamo.CreateTable(ctx(t), client, table)
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "AccessDeniedException" || !strings.Contains(err.Error(), table) {
		t.Errorf("CreateTable denied: %v, want the AccessDeniedException, naming the table", err)
	}
}
