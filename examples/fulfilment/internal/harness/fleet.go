package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Build builds examples/fulfilment into dir (with -race when race) and
// returns the binary's path.
func Build(ctx context.Context, dir string, race bool) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("the go command is not in PATH")
	}
	root, err := moduleRoot(ctx, goBin)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "fulfilment")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, goBin, append(args, "./examples/fulfilment")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./examples/fulfilment: %v\n%s", err, out)
	}
	return bin, nil
}

// ModuleRoot returns the directory of the kinesislease module (go env
// GOMOD), which the command must run inside.
func ModuleRoot() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("the go command is not in PATH")
	}
	return moduleRoot(context.Background(), goBin)
}

func moduleRoot(ctx context.Context, goBin string) (string, error) {
	gomod, err := exec.CommandContext(ctx, goBin, "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return "", fmt.Errorf("run me inside the kinesislease module (go env GOMOD: %v)", err)
	}
	return filepath.Dir(strings.TrimSpace(string(gomod))), nil
}

// instanceEnv is the instances' environment: ours without AWS_*, plus the
// emulators' region and static credentials.
func instanceEnv(race bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	env = append(env, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_EC2_METADATA_DISABLED=true")
	if race {
		env = append(env, "GORACE=halt_on_error=1")
	}
	return env
}

// Fleet starts the instances of one run: processes of Binary on one stream
// and lease table (which must exist), with the same lease settings, their
// reports and logs in Dir. Set its fields and Prepare it before the first
// Start.
type Fleet struct {
	Name          string // the command, prefix of the messages ("demo")
	Binary, Dir   string
	Env           Env
	Stream, Table string
	// Lease settings of every instance (--heartbeat, --timeout; 0 for the
	// library's defaults), its checkpoint interval and shutdown timeout.
	Heartbeat, Timeout time.Duration
	// KeyConcurrency is the instances' --key-concurrency; 0 for the default.
	KeyConcurrency int
	// FanOut is the instances' --fan-out, the stream consumer they read
	// with enhanced fan-out; empty: they poll. Env.KinesisEndpoint must then
	// serve SubscribeToShard (a FanOutKinesis).
	FanOut             string
	CheckpointInterval time.Duration
	ShutdownTimeout    time.Duration
	Race               bool // the binary was built with -race

	mu  sync.Mutex
	all []*Instance
}

// Prepare readies the fleet for its first Start: it builds
// examples/fulfilment into Dir when Binary is empty (with -race when Race)
// and returns the ids of the stream's shards.
func (f *Fleet) Prepare(ctx context.Context) (shards []string, err error) {
	if f.Binary == "" {
		if f.Binary, err = Build(ctx, f.Dir, f.Race); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	if shards, err = ListShards(ctx, f.Env.Kinesis, f.Stream); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	return shards, nil
}

// Instance is one process of examples/fulfilment.
type Instance struct {
	Owner           string // its owner id (--owner)
	Report, LogPath string // its report (--report) and its stdout and stderr
	Cmd             *exec.Cmd
	Tail            *Tail // of Report

	logFile  *os.File
	done     chan struct{} // closed once Wait returned
	err      error         // Wait's
	exitedAt time.Time
	expected atomic.Bool // told to exit: SIGKILLed or SIGINTed
}

// Start starts a process with owner id owner, its report in
// Dir/owner.report (removed first) and its log in Dir/owner.log. The process
// is in its own process group where the platform has them, and on Linux the
// kernel SIGKILLs it if this process dies first.
func (f *Fleet) Start(owner string) (*Instance, error) {
	in := &Instance{
		Owner:   owner,
		Report:  filepath.Join(f.Dir, owner+".report"),
		LogPath: filepath.Join(f.Dir, owner+".log"),
		done:    make(chan struct{}),
	}
	in.Tail = &Tail{Path: in.Report}
	// Reports are appended to: start from none.
	if err := os.Remove(in.Report); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	lf, err := os.Create(in.LogPath)
	if err != nil {
		return nil, err
	}
	in.logFile = lf
	args := []string{
		"--stream", f.Stream, "--table", f.Table, "--owner", owner,
		"--dynamodb-endpoint-url", f.Env.DynamoEndpoint, "--kinesis-endpoint-url", f.Env.KinesisEndpoint,
		"--start", "TRIM_HORIZON",
		"--checkpoint-interval", f.CheckpointInterval.String(),
		"--shutdown-timeout", f.ShutdownTimeout.String(),
		"--report", in.Report,
	}
	if f.Heartbeat > 0 { // else the library's default
		args = append(args, "--heartbeat", f.Heartbeat.String())
	}
	if f.Timeout > 0 {
		args = append(args, "--timeout", f.Timeout.String())
	}
	if f.KeyConcurrency > 0 {
		args = append(args, "--key-concurrency", strconv.Itoa(f.KeyConcurrency))
	}
	if f.FanOut != "" {
		args = append(args, "--fan-out", f.FanOut)
	}
	in.Cmd = exec.Command(f.Binary, args...)
	in.Cmd.Stdout, in.Cmd.Stderr = lf, lf
	in.Cmd.Env = instanceEnv(f.Race)
	in.Cmd.SysProcAttr = sysProcAttr()
	if err := in.Cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%s: starting %s: %w", f.Name, owner, err)
	}
	go func() {
		in.err = in.Cmd.Wait()
		in.exitedAt = time.Now()
		close(in.done)
	}()
	f.mu.Lock()
	f.all = append(f.all, in)
	f.mu.Unlock()
	return in, nil
}

// All returns every instance started, in order.
func (f *Fleet) All() []*Instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.all)
}

// Died returns an error for an instance that exited without being told to
// (see Instance.Expect).
func (f *Fleet) Died() error {
	for _, in := range f.All() {
		if in.Exited() && !in.Expected() {
			return fmt.Errorf("%s: %s exited by itself (%v); the end of its log:\n%s", f.Name, in.Owner, in.err, in.LogTail())
		}
	}
	return nil
}

// Cleanup kills whatever still runs (also a stopped process) and waits for
// it.
func (f *Fleet) Cleanup() {
	all := f.All()
	for _, in := range all {
		if !in.Exited() {
			in.Expect()
			in.Kill()
		}
	}
	for _, in := range all {
		select {
		case <-in.done:
		case <-time.After(10 * time.Second):
			fmt.Fprintf(os.Stderr, "%s: %s (pid %d) did not exit after SIGKILL\n", f.Name, in.Owner, in.Cmd.Process.Pid)
		}
		in.logFile.Close()
	}
}

// Done is closed once the process exited.
func (in *Instance) Done() <-chan struct{} { return in.done }

// Err is how the process exited (exec.Cmd.Wait's error), once Done is closed.
func (in *Instance) Err() error {
	<-in.done
	return in.err
}

// Exited reports whether the process exited.
func (in *Instance) Exited() bool {
	select {
	case <-in.done:
		return true
	default:
		return false
	}
}

// ExitedAt is when the process exited; zero while it runs.
func (in *Instance) ExitedAt() time.Time {
	if !in.Exited() {
		return time.Time{}
	}
	return in.exitedAt
}

// Expect records that the process was told to exit (SIGKILL, SIGINT): its
// exit is no error for Fleet.Died.
func (in *Instance) Expect() { in.expected.Store(true) }

// Expected reports whether Expect was called.
func (in *Instance) Expected() bool { return in.expected.Load() }

// LogTail returns the last lines of the process's log.
func (in *Instance) LogTail() string {
	data, err := os.ReadFile(in.LogPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
