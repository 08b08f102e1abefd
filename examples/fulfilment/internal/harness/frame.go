package harness

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// Flags are the flags the commands share: the fleet's size and lease
// settings, and whether to keep the work directory.
type Flags struct {
	Instances, Shards int
	// Heartbeat and Timeout are the instances' --heartbeat and --timeout;
	// 0 for the library's defaults.
	Heartbeat, Timeout time.Duration
	CheckpointInterval time.Duration
	Keep               bool
}

// Register registers the flags on fs, with the values f holds as their
// defaults; fs.Parse sets them.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.IntVar(&f.Instances, "instances", f.Instances, "instances of the fulfilment service")
	fs.IntVar(&f.Shards, "shards", f.Shards, "shards of the stream")
	fs.DurationVar(&f.Heartbeat, "heartbeat", f.Heartbeat, "heartbeat interval of the instances (0: the library's default, 1.25s)")
	fs.DurationVar(&f.Timeout, "heartbeat-timeout", f.Timeout, "the instances' timeout: a member whose heartbeat stands still this long is dead (0: the library's default, 5s)")
	fs.DurationVar(&f.CheckpointInterval, "checkpoint-interval", f.CheckpointInterval, "checkpoint interval of the instances")
	fs.BoolVar(&f.Keep, "keep", f.Keep, "keep the directory with the instances' logs and reports")
}

// Frame is the frame of a command's run (the demo's, the chaos run's): its
// context (SignalContext), its work directory (WorkDir) and the endpoints,
// the emulators (StartEmulators) or embedded ones (StartEmbedded). Close
// it when the run is over.
type Frame struct {
	Name  string          // the command ("demo"), the prefix of its messages
	Ctx   context.Context // cancelled by SIGINT or SIGTERM or after the timeout
	Dir   string          // the work directory
	Env   Env             // the endpoints
	Begin time.Time       // when the endpoints were started

	timeout time.Duration
	close   func()
}

// OpenFrame opens the frame of the run of command name: a context that
// ends after timeout, the work directory fulfilment-<name>-* (kept with
// keep) and the emulators, which it says on stdout. On error it closes
// what it opened.
func OpenFrame(name string, timeout time.Duration, keep bool) (*Frame, error) {
	return openFrame(name, timeout, keep, func(ctx context.Context, begin time.Time) (Env, io.Closer, error) {
		return StartEmulators(ctx, os.Stdout, begin)
	})
}

// OpenEmbeddedFrame is OpenFrame on embedded endpoints (StartEmbedded)
// instead of the emulators.
func OpenEmbeddedFrame(name string, timeout time.Duration, keep bool) (*Frame, error) {
	return openFrame(name, timeout, keep, func(_ context.Context, begin time.Time) (Env, io.Closer, error) {
		return StartEmbedded(os.Stdout, begin)
	})
}

func openFrame(name string, timeout time.Duration, keep bool, start func(context.Context, time.Time) (Env, io.Closer, error)) (*Frame, error) {
	ctx, cancel := SignalContext(timeout)
	dir, removeDir, err := WorkDir("fulfilment-"+name, keep)
	if err != nil {
		cancel()
		return nil, err
	}
	begin := time.Now()
	e, bench, err := start(ctx, begin)
	if err != nil {
		removeDir()
		cancel()
		return nil, err
	}
	return &Frame{
		Name: name, Ctx: ctx, Dir: dir, Env: e, Begin: begin, timeout: timeout,
		close: func() { bench.Close(); removeDir(); cancel() },
	}, nil
}

// Close stops the endpoints, removes the work directory (unless kept) and
// cancels Ctx.
func (f *Frame) Close() { f.close() }

// Setup creates the lease table and the stream (see Setup) and says so on
// stdout.
func (f *Frame) Setup(table, stream string, shards int32) error {
	if err := Setup(f.Ctx, f.Env, table, stream, shards); err != nil {
		return err
	}
	fmt.Printf("lease table %s, stream %s with %d shards\n", table, stream, shards)
	return nil
}

// Fail says err on stderr, prefixed with the command's name, and returns
// the exit status 1.
func (f *Frame) Fail(err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", f.Name, err)
	return 1
}

// Stopped says on stderr why the run stopped (see PrintStopped) and returns
// the exit status 1.
func (f *Frame) Stopped(err error) int {
	PrintStopped(f.Ctx, f.Name, f.timeout, err)
	return 1
}
