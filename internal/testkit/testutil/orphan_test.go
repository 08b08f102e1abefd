package testutil

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNoOrphanEmulators runs this test binary again as a child that starts
// all three emulators and then dies in one of the ways that skip Main's
// clean-up: a panicking test, a test killed by -test.timeout, and SIGKILL.
// Every process carrying the child's marker environment variable (which
// the emulators and anything they spawn inherit) must be gone soon after.
const (
	orphanModeEnv   = "TESTUTIL_ORPHAN_MODE"
	orphanMarkerEnv = "TESTUTIL_ORPHAN_MARKER"
	orphanReady     = "TESTUTIL-ORPHAN-READY"
)

func TestNoOrphanEmulators(t *testing.T) {
	if os.Getenv(orphanModeEnv) != "" {
		return // in the child
	}
	if runtime.GOOS != "linux" {
		t.Skip("scans /proc")
	}
	t.Parallel()
	Slow(t)
	for _, mode := range []string{"panic", "timeout", "sigkill"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			var buf [8]byte
			_, _ = rand.Read(buf[:])
			marker := hex.EncodeToString(buf[:])
			args := []string{"-test.run=^TestOrphanHelperProcess$", "-test.v"}
			if mode == "timeout" {
				args = append(args, "-test.timeout=3s")
			}
			cmd := exec.Command(os.Args[0], args...)
			// Its own temporary directory: the other modes' checks, and
			// any Bench started meanwhile, remove the directories of dead
			// processes from the shared one, this child's among them.
			tmp := t.TempDir()
			cmd.Env = append(os.Environ(), orphanModeEnv+"="+mode, orphanMarkerEnv+"="+marker, "TMPDIR="+tmp)
			var out syncBuffer
			cmd.Stderr = &out
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			ready := make(chan struct{})
			copied := make(chan struct{})
			go func() {
				defer close(copied)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					fmt.Fprintln(&out, sc.Text())
					if sc.Text() == orphanReady {
						close(ready)
					}
				}
			}()
			// After a t.Fatal below too, the child is gone and the copier
			// has returned when the test ends (both no-ops after the
			// test's own Kill or Wait).
			t.Cleanup(func() { _ = cmd.Process.Kill(); <-copied; _ = cmd.Wait() })
			select {
			case <-ready:
			case <-copied:
				_ = cmd.Wait()
				t.Fatalf("child exited before starting the emulators:\n%s", out.String())
			case <-time.After(3 * startTimeout):
				_ = cmd.Process.Kill()
				<-copied
				_ = cmd.Wait()
				t.Fatalf("child did not start the emulators:\n%s", out.String())
			}

			// The child said all three answered; under load /proc can lag a
			// moment behind, so look again for a while before judging.
			running := markedProcesses(t, marker, cmd.Process.Pid)
			for deadline := time.Now().Add(10 * time.Second); len(running) != 3 && time.Now().Before(deadline); {
				time.Sleep(100 * time.Millisecond)
				running = markedProcesses(t, marker, cmd.Process.Pid)
			}
			if len(running) != 3 {
				t.Errorf("child runs %d marked processes, want 3 emulators: %v", len(running), running)
			}
			switch mode {
			case "sigkill":
				_ = cmd.Process.Kill()
			default:
				fmt.Fprintln(stdin, "go")
			}
			<-copied
			err = cmd.Wait()
			t.Logf("child exited: %v", err)
			switch mode {
			case "panic":
				if !strings.Contains(out.String(), "deliberate panic") {
					t.Errorf("child did not panic:\n%s", out.String())
				}
			case "timeout":
				if !strings.Contains(out.String(), "test timed out after 3s") {
					t.Errorf("child did not time out:\n%s", out.String())
				}
			}

			// The child's temporary directories are left behind; the next
			// Bench to start an emulator removes them.
			pattern := filepath.Join(tmp, fmt.Sprintf("%s*-p%d-*", tempPrefix, cmd.Process.Pid))
			if dirs, _ := filepath.Glob(pattern); len(dirs) != 3 {
				t.Errorf("child left %d temporary directories, want 3: %v", len(dirs), dirs)
			}
			removeStaleDirsIn(tmp)
			if dirs, _ := filepath.Glob(pattern); len(dirs) != 0 {
				t.Errorf("stale directories not removed: %v", dirs)
			}

			deadline := time.Now().Add(stopTimeout)
			for {
				left := markedProcesses(t, marker, 0)
				if len(left) == 0 {
					return
				}
				if time.Now().After(deadline) {
					for _, pid := range left {
						_ = syscallKill(pid)
					}
					t.Fatalf("orphans left after the child died (%s): %v\n%s", mode, left, out.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestOrphanHelperProcess is the child of TestNoOrphanEmulators; it does
// nothing in a normal run. Its TestMain has started the emulators.
func TestOrphanHelperProcess(t *testing.T) {
	mode := os.Getenv(orphanModeEnv)
	if mode == "" {
		return
	}
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // the parent has seen the emulators
	switch mode {
	case "panic":
		panic("testutil: deliberate panic")
	default: // timeout, sigkill
		time.Sleep(time.Hour)
	}
}

// startForOrphanCheck starts every emulator before m.Run, so that the
// child's -test.timeout only counts the wait for the parent.
func startForOrphanCheck() {
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, e := range []Emulator{DynamoDBLocal, Kinesalite, KinesisLocal} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = shared.ensure(context.Background(), e)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
	}
	fmt.Println(orphanReady)
}

// markedProcesses returns the live (not zombie) processes other than except
// whose environment holds the marker.
func markedProcesses(t *testing.T, marker string, except int) []int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte(orphanMarkerEnv + "=" + marker + "\x00")
	var pids []int
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || pid == except || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil || !strings.Contains(string(env), string(want)) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		// The state follows the parenthesised command name.
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func syscallKill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

var _ io.Writer = (*syncBuffer)(nil)

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
