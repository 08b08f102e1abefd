package testutil

// An emulator's process: started on free ports and retried when a port is
// taken (Bench.start, Bench.launchRetrying, Bench.launch), waited on until
// it answers, its log's tail kept for errors, stopped, and the temporary
// directories of emulators whose test binary died removed.

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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

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
