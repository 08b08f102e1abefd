package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/leases/dynamo"
	"github.com/kinesislease/kinesislease/migrate"
)

// How KCL checkpoints become ours: the KCL checkpoints the last user record
// processed and resumes after it; ours counts the user records of the record
// done (0: all). The start sentinels keep their position; AT_TIMESTAMP needs
// the time the KCL application was configured with.
func ExampleFromKCL() {
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		seq     string // a sequence number, or a sentinel
		sub     int64
		records int // user records of the Kinesis record seq: 1 plain, n a KPL aggregate
	}{
		{"4959", 0, 1},
		{"4959", 0, 4},
		{"4959", 3, 4},
		{"4959", -1, 1},
		{"SHARD_END", 0, 1},
		{"TRIM_HORIZON", 0, 1},
		{"AT_TIMESTAMP", 0, 1},
	} {
		cp, err := migrate.FromKCL(c.seq, c.sub, c.records, at)
		fmt.Printf("KCL %s sub %d (record of %d) -> %s %v\n", c.seq, c.sub, c.records, cp, err)
	}
	_, err := migrate.FromKCL("AT_TIMESTAMP", 0, 1, time.Time{})
	fmt.Println(errors.Is(err, migrate.ErrNeedTimestamp))
	// Output:
	// KCL 4959 sub 0 (record of 1) -> 4959 <nil>
	// KCL 4959 sub 0 (record of 4) -> 4959/1 <nil>
	// KCL 4959 sub 3 (record of 4) -> 4959 <nil>
	// KCL 4959 sub -1 (record of 1) -> AT_SEQUENCE_NUMBER:4959 <nil>
	// KCL SHARD_END sub 0 (record of 1) -> SHARD_END <nil>
	// KCL TRIM_HORIZON sub 0 (record of 1) -> TRIM_HORIZON <nil>
	// KCL AT_TIMESTAMP sub 0 (record of 1) -> AT_TIMESTAMP:1796018400000 <nil>
	// true
}

// Moving the consumer of stream "orders" from the KCL application whose
// lease table is "orders-kcl" (stopped first) to a kinesislease service on
// the lease table "orders-leases".
func ExampleImport() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	rep, err := migrate.Import(ctx,
		migrate.Foreign{Client: dynamodb.NewFromConfig(cfg), Table: "orders-kcl"},
		migrate.Ours{Store: dynamo.New(cfg, "orders-leases"), Kinesis: kinesis.NewFromConfig(cfg), Stream: "orders"},
	)
	if rep != nil {
		for _, row := range rep.Rows {
			fmt.Println(row) // every shard: what was written, or would have been
		}
	}
	var running *migrate.RunningError
	switch {
	case errors.As(err, &running):
		log.Fatalf("stop the KCL application first: %v", running)
	case err != nil:
		log.Fatal(err)
	}
}
