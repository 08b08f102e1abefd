package ddbmeter_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/kinesislease/kinesislease/internal/testkit/ddbmeter"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
	"github.com/kinesislease/kinesislease/leases/leasestest"
)

// TestEndpoint: a real dynamodb.Client on an Endpoint served over HTTP
// creates the lease table as the demo's setup does (CreateTable, then the
// SDK's TableExistsWaiter on DescribeTable), is told so when it exists
// already or does not exist, and the DynamoDB store on it passes the
// leases conformance suite.
func TestEndpoint(t *testing.T) {
	ep := ddbmeter.NewEndpoint()
	srv := httptest.NewServer(ep)
	defer srv.Close()
	client := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: aws.AnonymousCredentials{}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var rnf *types.ResourceNotFoundException
	if _, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("leases"),
		Key: map[string]types.AttributeValue{ddbmeter.KeyAttr: &types.AttributeValueMemberS{Value: "k"}}}); !errors.As(err, &rnf) {
		t.Fatalf("GetItem before CreateTable: %v, want a ResourceNotFoundException", err)
	}
	if _, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("leases")}); !errors.As(err, &rnf) {
		t.Fatalf("DescribeTable before CreateTable: %v, want a ResourceNotFoundException", err)
	}
	create := &dynamodb.CreateTableInput{
		TableName:            aws.String("leases"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(ddbmeter.KeyAttr), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(ddbmeter.KeyAttr), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}
	out, err := client.CreateTable(ctx, create)
	if err != nil {
		t.Fatal(err)
	}
	if d := out.TableDescription; aws.ToString(d.TableName) != "leases" || d.TableStatus != types.TableStatusActive {
		t.Errorf("CreateTable answered %+v, want leases ACTIVE", d)
	}
	var riu *types.ResourceInUseException
	if _, err := client.CreateTable(ctx, create); !errors.As(err, &riu) {
		t.Errorf("CreateTable again: %v, want a ResourceInUseException", err)
	}
	if err := dynamodb.NewTableExistsWaiter(client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("leases")}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	bad := *create
	bad.TableName = aws.String("other")
	bad.KeySchema = []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}}
	if _, err := client.CreateTable(ctx, &bad); err == nil || ep.Table("other") != nil {
		t.Errorf("CreateTable with another key: %v, want a ValidationException", err)
	}

	s := dynamo.New(aws.Config{}, "leases", dynamo.WithDynamoDBClient(client))
	leasestest.Run(t, func(*testing.T) leases.Store { return s })
	if b := ep.Table("leases").Bill().ByClient[0]; b.Reads == 0 || b.Writes == 0 {
		t.Errorf("bill %+v: the suite's calls did not reach the table", b)
	}
}
