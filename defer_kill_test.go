package kinesislease_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/internal/testkit/testutil"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// The child process of TestDeferSinkSIGKILL: these variables name what it
// reads and where its sink writes.
const (
	deferChildEnv    = "KINESISLEASE_DEFER_CHILD" // the owner id; set only in the child
	deferDynamoEnv   = "KINESISLEASE_DEFER_DYNAMO"
	deferKinesisEnv  = "KINESISLEASE_DEFER_KINESIS"
	deferTableEnv    = "KINESISLEASE_DEFER_TABLE"
	deferStreamEnv   = "KINESISLEASE_DEFER_STREAM"
	deferSinkFileEnv = "KINESISLEASE_DEFER_SINK"
)

// TestDeferSinkSIGKILL is the test: a sink that holds deferred
// acknowledgements and flushes every 500 records or 2 seconds (writing the
// order ids to a file, then acknowledging them) runs in a child process
// (this test binary again); the child is SIGKILLed mid-run and another one
// started on the same lease table. Every published record must reach the
// file (none lost); the duplicates (records written twice: flushed or
// acknowledged after the last checkpoint of the killed child) are
// reported.
func TestDeferSinkSIGKILL(t *testing.T) {
	t.Parallel()
	if owner := os.Getenv(deferChildEnv); owner != "" {
		deferChild(t, owner)
		return
	}
	const total, killAt = 6000, 2000
	kc := testutil.KinesisClient(t, testutil.Kinesalite)
	dc := testutil.DynamoClient(t)
	stream, table := testutil.StreamName(t), testutil.TableName(t)
	testutil.CreateStream(t, kc, stream, 2)
	testutil.CreateLeaseTable(t, dc, table)
	sinkFile := t.TempDir() + "/sink.txt"

	start := func(owner string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDeferSinkSIGKILL$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			deferChildEnv+"="+owner,
			deferDynamoEnv+"="+testutil.Endpoint(t, testutil.DynamoDBLocal),
			deferKinesisEnv+"="+testutil.Endpoint(t, testutil.Kinesalite),
			deferTableEnv+"="+table, deferStreamEnv+"="+stream, deferSinkFileEnv+"="+sinkFile)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, &out
	}

	// The producer publishes in chunks while the children run.
	published := make(chan error, 1)
	go func() {
		var err error
		for first := 0; first < total && err == nil; first += 500 {
			err = putOrders(kc, stream, first, 500)
		}
		published <- err
	}()
	c1, out1 := start("c1")
	waitLines(t, sinkFile, killAt, 60*time.Second, out1)
	if err := c1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c1.Wait()
	_, atKill := readSink(t, sinkFile)
	c2, out2 := start("c2")
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	waitDistinct(t, sinkFile, total, 90*time.Second, out2)
	if err := c2.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c2.Wait(); err != nil {
		t.Fatalf("second child: %v\n%s", err, out2)
	}
	ids, lines := readSink(t, sinkFile)
	lost := 0
	for id := range total {
		if ids[id] == 0 {
			lost++
		}
	}
	t.Logf("records %d, written by the first child before SIGKILL %d lines, lines %d, lost %d, duplicates %d", total, atKill, lines, lost, lines-len(ids))
	if lost > 0 {
		t.Fatalf("%d records lost", lost)
	}
}

// readSink returns how many times each id was written, and the lines.
func readSink(t *testing.T, path string) (map[int]int, int) {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[int]int{}, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids := map[int]int{}
	lines := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, err := strconv.Atoi(sc.Text())
		if err != nil {
			continue // a line being written when the child was killed
		}
		ids[id]++
		lines++
	}
	return ids, lines
}

func waitLines(t *testing.T, path string, n int, timeout time.Duration, out *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, lines := readSink(t, path); lines >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d lines in the sink after %v; child output:\n%s", n, timeout, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitDistinct(t *testing.T, path string, n int, timeout time.Duration, out *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if ids, _ := readSink(t, path); len(ids) >= n {
			return
		}
		if time.Now().After(deadline) {
			ids, _ := readSink(t, path)
			t.Fatalf("%d of %d records in the sink after %v; child output:\n%s", len(ids), n, timeout, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// flushSink holds deferred acknowledgements and flushes every 500 records
// or 2 seconds, and when a shard is let go: it writes the ids to its file,
// then acknowledges them.
type flushSink struct {
	t    *testing.T
	mu   sync.Mutex
	f    *os.File
	ids  []int
	acks []kinesislease.Deferred
}

func (s *flushSink) add(id int, ack kinesislease.Deferred) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = append(s.ids, id)
	s.acks = append(s.acks, ack)
	if len(s.ids) >= 500 {
		s.flushLocked()
	}
}

func (s *flushSink) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked()
}

func (s *flushSink) flushLocked() {
	if len(s.ids) == 0 {
		return
	}
	var b []byte
	for _, id := range s.ids {
		b = strconv.AppendInt(b, int64(id), 10)
		b = append(b, '\n')
	}
	if _, err := s.f.Write(b); err != nil {
		s.t.Errorf("sink write: %v", err)
		return
	}
	for _, a := range s.acks {
		if err := a.Ack(); err != nil && err != kltype.ErrLeaseGone {
			s.t.Errorf("Ack: %v", err)
		}
	}
	s.ids, s.acks = s.ids[:0], s.acks[:0]
}

// deferChild runs the service of TestDeferSinkSIGKILL's child until
// SIGTERM (or SIGKILL).
func deferChild(t *testing.T, owner string) {
	cfg := testutil.Config(t)
	dc := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(os.Getenv(deferDynamoEnv))
		o.DisableValidateResponseChecksum = true
	})
	kc := kinesis.NewFromConfig(cfg, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(os.Getenv(deferKinesisEnv)) })
	f, err := os.OpenFile(os.Getenv(deferSinkFileEnv), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sink := &flushSink{t: t, f: f}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	svc, err := kinesislease.New(cfg,
		testEncoding(t),
		kinesislease.WithKinesisClient(kc),
		kinesislease.WithLeaseStore(dynamo.New(cfg, os.Getenv(deferTableEnv), dynamo.WithDynamoDBClient(dc))),
		kinesislease.WithOwner(owner),
		kinesislease.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		kinesislease.WithHeartbeat(500*time.Millisecond, 2*time.Second),
		kinesislease.WithShutdownTimeout(5*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	err = kinesislease.Subscribe(svc, os.Getenv(deferStreamEnv), func(ctx context.Context, o order) error {
		ack, err := kinesislease.Defer(ctx)
		if err != nil {
			return err
		}
		sink.add(o.ID, ack)
		return nil
	}, kinesislease.WithStartPosition(kltype.TrimHorizon),
		kinesislease.WithCheckpoint(1000, time.Second),
		kinesislease.WithPolling(20*time.Millisecond, 50*time.Millisecond, 0),
		kinesislease.WithOnRelease(func(ctx context.Context, info kltype.ReleaseInfo) { sink.flush() }))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				sink.flush()
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := svc.Run(ctx); err != nil {
		t.Error(err)
	}
	<-done
	fmt.Fprintln(os.Stderr, "child", owner, "stopped")
}
