package harness

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/testkit/ddbmeter"
	"github.com/kinesislease/kinesislease/kinesisfake"
)

// StartEmbedded serves, in this process, what StartEmulators starts as
// separate ones, each on HTTP on a free port of 127.0.0.1: an in-memory
// Kinesis (kinesisfake.Kinesis, polling and enhanced fan-out alike) and an
// in-memory DynamoDB (ddbmeter.Endpoint: CreateTable, DescribeTable,
// GetItem and UpdateItem, evaluated as DynamoDB does). Setup creates the
// table and the stream on them as on the emulators, and the instances use
// them as their endpoints (--dynamodb-endpoint-url,
// --kinesis-endpoint-url) as they would the emulators': nothing but Go is
// needed. It says so on w, and how long it took since begin. Close the
// returned closer once the processes that use them are gone.
func StartEmbedded(w io.Writer, begin time.Time) (Env, io.Closer, error) {
	ddb, err := serve(ddbmeter.NewEndpoint())
	if err != nil {
		return Env{}, nil, fmt.Errorf("the in-memory DynamoDB: %w", err)
	}
	kin, err := serve(kinesisfake.New())
	if err != nil {
		ddb.Close()
		return Env{}, nil, fmt.Errorf("the in-memory Kinesis: %w", err)
	}
	e := Env{
		DynamoEndpoint:  "http://" + ddb.Addr,
		KinesisEndpoint: "http://" + kin.Addr,
		AWS: aws.Config{
			Region:      "us-east-1",
			Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		},
	}
	e.Dynamo = dynamodb.NewFromConfig(e.AWS, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(e.DynamoEndpoint) })
	e.Kinesis = kinesis.NewFromConfig(e.AWS, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(e.KinesisEndpoint) })
	fmt.Fprintf(w, "in-memory DynamoDB at %s, in-memory Kinesis at %s, in this process (%.1fs)\n", e.DynamoEndpoint, e.KinesisEndpoint, time.Since(begin).Seconds())
	return e, closers{ddb, kin}, nil
}

// serve serves h on a free port of 127.0.0.1.
func serve(h http.Handler) (*http.Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}

// closers closes http servers: at once, ending their connections (open
// subscriptions included).
type closers []*http.Server

func (c closers) Close() error {
	var errs []error
	for _, s := range c {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
