package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// Creating the lease table "fulfilment-leases" at deploy time, with
// point-in-time recovery and a tag; running it again finds the table and
// changes nothing else. It needs DynamoDB, so it has no Output to check
// (TestCreateTable and TestCreateTableOptions test CreateTable on DynamoDB
// Local); `kinesislease init` does the same from a shell.
func ExampleCreateTable() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	t, err := dynamo.CreateTable(ctx, dynamodb.NewFromConfig(cfg), "fulfilment-leases",
		dynamo.WithPointInTimeRecovery(),
		dynamo.WithTableTags(map[string]string{"team": "fulfilment"}))
	if errors.Is(err, leases.ErrMisconfigured) {
		log.Fatal(err) // a table of that name with another key: name another table
	}
	if err != nil {
		log.Fatal(err)
	}
	if t.Created {
		fmt.Println("created", t.ARN)
	} else {
		fmt.Println("found", t.ARN, t.BillingMode)
	}
	// The service itself needs only dynamodb:GetItem and dynamodb:UpdateItem
	// on t.ARN.
}
