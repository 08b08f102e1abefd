// Package harness runs examples/fulfilment as separate processes on local
// endpoints (embedded in-memory ones, or the emulators) and reads what they
// report. It is what the demo (../../demo) and
// the chaos run (../../chaos) share:
//
//   - the endpoints and the stream and lease table: StartEmbedded (an
//     in-memory Kinesis and DynamoDB served in the process),
//     StartEmulators (DynamoDB Local and kinesalite), Setup, ListShards,
//     Env;
//   - the instances: Build builds examples/fulfilment, a Fleet (Prepare
//     builds it if need be) starts processes of it (own process group,
//     emulator environment, report and log files) and kills whatever still
//     runs at the end; Instance signals one (SIGKILL, SIGSTOP, SIGCONT,
//     SIGINT);
//   - their report files: Tail, Reports, Delivery, LeaseEvent, CmpSeq;
//   - watching a run: Watch (the watcher and its progress lines), Poll (the
//     waits), ReadRows (the lease table);
//   - what the producer publishes: Order;
//   - the command's frame: Flags, Frame (OpenFrame), and what it stands on:
//     SignalContext, WorkDir, PrintStopped, Progress;
//   - the tests': TestEnv, TestLog, CutOffStore, RaceEnabled.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
)

// Order is the record the shop puts on the stream; its field names (JSON
// tags, which msgpack uses too) are the contract with examples/fulfilment.
type Order struct {
	ID        string    `json:"id"`
	Customer  string    `json:"customer"`
	Items     []Item    `json:"items"`
	Total     int64     `json:"total"` // cents
	CreatedAt time.Time `json:"created_at"`
}

// Item is one line of an order.
type Item struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
	Price    int64  `json:"price"` // cents per unit
}

// Env is where the endpoints are (StartEmbedded, StartEmulators).
type Env struct {
	DynamoEndpoint, KinesisEndpoint string
	AWS                             aws.Config // region and credentials of the clients below
	Dynamo                          *dynamodb.Client
	Kinesis                         *kinesis.Client
}

// StartEmulators starts DynamoDB Local and kinesalite (internal/testkit/testutil;
// `npm ci` at the repository root installs them), saying so on w, and how
// long it took since begin. Close the returned bench to stop them.
func StartEmulators(ctx context.Context, w io.Writer, begin time.Time) (Env, io.Closer, error) {
	fmt.Fprintf(w, "starting DynamoDB Local and kinesalite...\n")
	bench, err := testutil.Start(ctx, "", testutil.DynamoDBLocal, testutil.Kinesalite)
	if err != nil {
		return Env{}, nil, err
	}
	e := Env{
		DynamoEndpoint:  bench.Endpoint(testutil.DynamoDBLocal),
		KinesisEndpoint: bench.Endpoint(testutil.Kinesalite),
		AWS:             bench.Config(),
		Dynamo:          bench.DynamoClient(),
		Kinesis:         bench.KinesisClient(testutil.Kinesalite),
	}
	fmt.Fprintf(w, "DynamoDB Local at %s, kinesalite at %s (%.1fs)\n", e.DynamoEndpoint, e.KinesisEndpoint, time.Since(begin).Seconds())
	return e, bench, nil
}

// Setup creates the lease table and the stream, and waits until both are
// active.
func Setup(ctx context.Context, e Env, table, stream string, shards int32) error {
	_, err := e.Dynamo.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("lease_key"), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("lease_key"), KeyType: dtypes.KeyTypeHash}},
		BillingMode:          dtypes.BillingModePayPerRequest,
	})
	if err != nil {
		return fmt.Errorf("creating table %s: %w", table, err)
	}
	if err := dynamodb.NewTableExistsWaiter(e.Dynamo, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 50 * time.Millisecond
	}).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 30*time.Second); err != nil {
		return fmt.Errorf("waiting for table %s: %w", table, err)
	}
	if _, err := e.Kinesis.CreateStream(ctx, &kinesis.CreateStreamInput{
		StreamName: aws.String(stream), ShardCount: aws.Int32(shards),
	}); err != nil {
		return fmt.Errorf("creating stream %s: %w", stream, err)
	}
	for {
		out, err := e.Kinesis.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(stream)})
		if err != nil {
			return fmt.Errorf("waiting for stream %s: %w", stream, err)
		}
		if out.StreamDescriptionSummary.StreamStatus == ktypes.StreamStatusActive {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("waiting for stream %s", stream), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ListShards returns the ids of the stream's shards.
func ListShards(ctx context.Context, client *kinesis.Client, stream string) ([]string, error) {
	var ids []string
	in := &kinesis.ListShardsInput{StreamName: aws.String(stream)}
	for {
		out, err := client.ListShards(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("ListShards %s: %w", stream, err)
		}
		for _, s := range out.Shards {
			ids = append(ids, aws.ToString(s.ShardId))
		}
		if out.NextToken == nil {
			return ids, nil
		}
		in = &kinesis.ListShardsInput{NextToken: out.NextToken}
	}
}

// SignalContext returns the context of a command's run: cancelled by SIGINT
// or SIGTERM (a second one exits at once: the default action is restored
// once the first arrived) or after timeout. Call cancel when done.
func SignalContext(timeout time.Duration) (ctx context.Context, cancel context.CancelFunc) {
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-sigCtx.Done(); stop() }()
	ctx, cancelTimeout := context.WithTimeout(sigCtx, timeout)
	return ctx, func() { cancelTimeout(); stop() }
}

// WorkDir makes the directory of a run (the binary, the instances' logs and
// reports) in the temporary directory: prefix-p<pid>-*, which done removes,
// or with keep prefix-kept-*, which done keeps, saying where on stdout. It
// first removes the directories of earlier runs that were killed before they
// could (their process is gone).
func WorkDir(prefix string, keep bool) (dir string, done func(), err error) {
	removeStaleDirs(prefix)
	pattern := fmt.Sprintf("%s-p%d-", prefix, os.Getpid())
	if keep {
		pattern = prefix + "-kept-"
	}
	dir, err = os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	if keep {
		return dir, func() { fmt.Printf("logs and reports kept in %s\n", dir) }, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// removeStaleDirs removes the directories prefix-p<pid>-* whose process is
// gone.
func removeStaleDirs(prefix string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"-p*-*"))
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(d), prefix+"-p%d-", &pid); err == nil && pid > 0 && processGone(pid) {
			_ = os.RemoveAll(d)
		}
	}
}

// PrintStopped says on stderr why the run of command name stopped: an
// interrupt, the timeout (--timeout), or err.
func PrintStopped(ctx context.Context, name string, timeout time.Duration, err error) {
	switch {
	case errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		fmt.Fprintf(os.Stderr, "%s: timeout (--timeout %v); every process it started is stopped\n", name, timeout)
	case ctx.Err() != nil:
		fmt.Fprintf(os.Stderr, "%s: %v; every process it started is stopped\n", name, context.Cause(ctx))
	default:
		fmt.Fprintln(os.Stderr, err)
	}
}

// Progress writes a run's progress lines, each prefixed with the seconds
// since the run began; it serialises the writes of the watcher and the main
// flow.
type Progress struct {
	begin time.Time
	mu    sync.Mutex
	w     io.Writer
}

// NewProgress returns the progress of a run that began at begin, written to
// w (nil: discarded).
func NewProgress(w io.Writer, begin time.Time) *Progress {
	if w == nil {
		w = io.Discard
	}
	return &Progress{begin: begin, w: w}
}

// Printf writes one progress line (format includes its newline).
func (p *Progress) Printf(format string, args ...any) {
	args = append([]any{time.Since(p.begin).Seconds()}, args...)
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%6.1fs  "+format, args...)
}
