// Package testutil runs the local AWS emulators kinesislease's tests use and
// helps tests use them: DynamoDB Local, kinesalite and kinesis-local, from the
// npm packages pinned in the repository's package.json (`npm ci` installs
// them; DynamoDB Local also needs a Java 17 JDK).
//
// A test package opts in with
//
//	func TestMain(m *testing.M) { testutil.Main(m) }
//
// after which Endpoint, DynamoClient and KinesisClient start an emulator the
// first time a test needs it (once per test binary, on a free 127.0.0.1 port,
// in memory), and Main stops them all when the tests are done. The emulators
// also die with the test binary when it panics, times out or is killed: they
// run in their own process group with Pdeathsig SIGKILL (Linux) and exit when
// their stdin pipe from the test binary closes. A test that needs an emulator
// that is not installed fails with the command that installs it; it never
// skips.
//
// TableName and StreamName give each test its own names, CreateLeaseTable and
// CreateStream make the resources, and Faults records and disturbs a client's
// calls (throttling, expired iterators, delays, lost responses), which the
// emulators cannot do on demand.
//
// Enhanced fan-out (SubscribeToShard), which the emulators lack, is tested
// on kinesisfake.Kinesis: its Client in the process, or ServeHTTP on a
// local endpoint for other processes.
//
// Outside tests (a demo command, say), Start runs a Bench directly.
package testutil

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/testkit/leakcheck"
)

// shared is the test binary's Bench, used by the testing.TB helpers.
var shared = newBench("")

// mainRunning says Main is running the tests, so shared will be closed.
var mainRunning atomic.Bool

// Main runs the tests, stops every emulator they started, checks that no
// goroutine leaked (leakcheck.Find) when the tests passed, and exits. Call it
// from TestMain in every package that uses the helpers.
func Main(m *testing.M) {
	mainRunning.Store(true)
	code := m.Run()
	mainRunning.Store(false)
	if err := shared.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "testutil: stopping emulators: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// GetRecordsEncoding returns the read path a test's services run on, for
// kinesislease.WithGetRecordsEncoding: the one KINESISLEASE_TEST_ENCODING
// names (make test-encodings), as a kinesislease.GetRecordsEncoding value:
// 0 (EncodingCBOR) for cbor or when unset, 1 (EncodingJSON) for json, 2
// (EncodingSDK) for sdk. Another value fails tb.
func GetRecordsEncoding(tb testing.TB) int {
	switch s := os.Getenv("KINESISLEASE_TEST_ENCODING"); s {
	case "", "cbor":
		return 0
	case "json":
		return 1
	case "sdk":
		return 2
	default:
		tb.Fatalf("KINESISLEASE_TEST_ENCODING=%q: want cbor, json or sdk", s)
		return 0
	}
}

// Endpoint starts emulator e for the test binary if it is not running yet and
// returns its base URL (http://127.0.0.1:port). It fails the test if e cannot
// start, saying how to install it if it is missing.
func Endpoint(tb testing.TB, e Emulator) string {
	tb.Helper()
	if !mainRunning.Load() {
		tb.Fatalf("testutil: call testutil.Main(m) from this package's TestMain; it stops the emulators after the tests")
	}
	return benchEndpoint(tb, shared, e)
}

func benchEndpoint(tb testing.TB, b *Bench, e Emulator) string {
	tb.Helper()
	p, err := b.ensure(context.Background(), e)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	if p.logged.CompareAndSwap(false, true) {
		tb.Logf("testutil: %s listening at %s (answered %v after launch)", e, p.endpoint, p.started.Round(1e6))
	}
	return p.endpoint
}

// Config returns the aws.Config every test client uses (see Bench.Config):
// region Region, static credentials, the standard retryer, and an HTTP
// transport shared by the test binary whose idle connections Main closes.
func Config(tb testing.TB) aws.Config {
	tb.Helper()
	return shared.Config()
}

// DynamoClient returns a client for the test binary's DynamoDB Local,
// starting it if needed (see Bench.DynamoClient).
func DynamoClient(tb testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	tb.Helper()
	Endpoint(tb, DynamoDBLocal)
	return shared.DynamoClient(optFns...)
}

// KinesisClient returns a client for the test binary's Kinesis emulator e
// (Kinesalite or KinesisLocal), starting it if needed.
func KinesisClient(tb testing.TB, e Emulator, optFns ...func(*kinesis.Options)) *kinesis.Client {
	tb.Helper()
	if e != Kinesalite && e != KinesisLocal {
		tb.Fatalf("testutil: %s is not a Kinesis emulator", e)
	}
	Endpoint(tb, e)
	return shared.KinesisClient(e, optFns...)
}

// Slow marks tb as one of the tests that stay slow (more than about 10s
// under -race on two cores; docs/contributing.md names them with their times):
// go test -short skips it, for quick iterations. make test and .ci/run
// run everything.
func Slow(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("slow (named in docs/contributing.md); run without -short")
	}
}
