package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// globals are the options every command takes.
type globals struct {
	region, profile string
	endpoint        string // both services
	dynamoEndpoint  string
	kinesisEndpoint string
	readTimeoutSecs int
	table, stream   string // every command names them too (tableOnly: the table alone)
	// tableOnly: the command works on the table alone (init, members): it
	// has no --stream.
	tableOnly bool
	// namespaced: the command takes --lease-namespace (status, rewind,
	// import, export), the namespace of the rows of a subscription given
	// WithLeaseNamespace.
	namespaced bool
	namespace  string
}

// register registers the options on fs. Their help is in help.go; the
// strings default to empty.
func (g *globals) register(fs *flag.FlagSet) {
	for _, o := range []struct {
		name string
		v    *string
	}{
		{"table", &g.table}, {"stream", &g.stream}, {"region", &g.region}, {"profile", &g.profile},
		{"endpoint-url", &g.endpoint}, {"dynamodb-endpoint-url", &g.dynamoEndpoint}, {"kinesis-endpoint-url", &g.kinesisEndpoint},
	} {
		if o.name == "stream" && g.tableOnly {
			continue
		}
		fs.StringVar(o.v, o.name, "", "")
	}
	if g.namespaced {
		fs.StringVar(&g.namespace, "lease-namespace", "", "")
	}
	fs.IntVar(&g.readTimeoutSecs, "cli-read-timeout", 60, "")
}

// check validates the options common to every command.
func (g *globals) check() error {
	var missing []string
	if g.table == "" {
		missing = append(missing, "--table")
	}
	if g.stream == "" && !g.tableOnly {
		missing = append(missing, "--stream")
	}
	if len(missing) > 0 {
		return &argError{msg: "the following arguments are required: " + strings.Join(missing, ", ")}
	}
	if g.readTimeoutSecs < 0 {
		return badArg("argument --cli-read-timeout: %d: want a number of seconds, 0 for none", g.readTimeoutSecs)
	}
	if _, err := leases.NewKey(g.stream, "shardId-000000000000"); err != nil && !g.tableOnly {
		return badArg("argument --stream %q: not a stream name or ARN", g.stream)
	}
	if g.namespace != "" {
		if err := kinesisx.CheckNamespace(g.namespace); err != nil {
			return badArg("argument --lease-namespace: %v (as WithLeaseNamespace takes)", err)
		}
	}
	for _, u := range []struct{ name, v string }{
		{"--endpoint-url", g.endpoint}, {"--dynamodb-endpoint-url", g.dynamoEndpoint}, {"--kinesis-endpoint-url", g.kinesisEndpoint},
	} {
		if u.v != "" && !strings.HasPrefix(u.v, "http://") && !strings.HasPrefix(u.v, "https://") {
			return badArg("argument %s %q: want a URL such as http://127.0.0.1:8000", u.name, u.v)
		}
	}
	return nil
}

func (g *globals) dynamoURL() string  { return firstOf(g.dynamoEndpoint, g.endpoint) }
func (g *globals) kinesisURL() string { return firstOf(g.kinesisEndpoint, g.endpoint) }

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// session is what a command works with: the lease store on the table and a
// Kinesis client, from one aws.Config.
type session struct {
	table, stream string
	// key is the stream part of the keys of the stream's lease rows: its
	// name, after --lease-namespace if given (kinesisx.LeaseStream).
	key    string
	region string
	store  *dynamo.Store
	ddb    *dynamodb.Client // the store's client, for other tables (import, export)
	kin    *kinesis.Client
	conns  *connTracker
}

func (s *session) close() { s.conns.close() }

// connTracker remembers the connections of the command's HTTP client, to
// close them when it is done (the SDK's client offers no way to).
type connTracker struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

func (t *connTracker) track(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		t.conns[conn] = struct{}{}
		t.mu.Unlock()
		return conn, nil
	}
}

func (t *connTracker) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for conn := range t.conns {
		conn.Close()
	}
	clear(t.conns)
}

// connect loads the AWS configuration and builds the clients.
func (c *cli) connect(g *globals) (*session, error) {
	// The SDK's own HTTP client (a custom CA bundle needs it), whose
	// connections the session closes when the command is done.
	conns := &connTracker{conns: map[net.Conn]struct{}{}}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		dial := tr.DialContext
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		tr.DialContext = conns.track(dial)
	})
	if g.readTimeoutSecs > 0 {
		httpClient = httpClient.WithTimeout(time.Duration(g.readTimeoutSecs) * time.Second)
	}
	emulators := g.dynamoURL() != "" || g.kinesisURL() != ""
	opts := []func(*config.LoadOptions) error{config.WithHTTPClient(httpClient)}
	if g.profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(g.profile))
	}
	switch {
	case g.region != "":
		opts = append(opts, config.WithRegion(g.region))
	case emulators && os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "":
		opts = append(opts, config.WithRegion("us-east-1"))
	}
	if emulators && g.profile == "" && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		// Emulators accept any credentials; these spare a profile.
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	cfg, err := config.LoadDefaultConfig(c.ctx, opts...)
	if err != nil {
		conns.close()
		var noProfile config.SharedConfigProfileNotExistError
		if errors.As(err, &noProfile) {
			return nil, badArg("argument --profile %q: no such profile in the shared config files: %v", g.profile, err)
		}
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		conns.close()
		return nil, badArg("no region: pass --region, set AWS_REGION or configure one for the profile")
	}
	dopts := []func(*dynamodb.Options){}
	if u := g.dynamoURL(); u != "" {
		dopts = append(dopts, func(o *dynamodb.Options) {
			o.BaseEndpoint = aws.String(u)
			// DynamoDB Local omits the CRC32 header on errors.
			o.DisableValidateResponseChecksum = true
		})
	}
	dopts = append(dopts, c.dynamoOpts...)
	ddb := dynamodb.NewFromConfig(cfg, dopts...)
	kopts := []func(*kinesis.Options){}
	if u := g.kinesisURL(); u != "" {
		kopts = append(kopts, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(u) })
	}
	kopts = append(kopts, c.kinesisOpts...)
	return &session{
		table:  g.table,
		stream: g.stream,
		key:    kinesisx.LeaseStream(g.namespace, g.stream),
		region: cfg.Region,
		store:  dynamo.New(cfg, g.table, dynamo.WithDynamoDBClient(ddb)),
		ddb:    ddb,
		kin:    kinesis.NewFromConfig(cfg, kopts...),
		conns:  conns,
	}, nil
}

// listShards returns the stream's shards, sorted by shard id.
func (s *session) listShards(ctx context.Context) ([]ktypes.Shard, error) {
	shards, err := kinesisx.ListShards(ctx, s.kin, s.stream)
	if err != nil {
		return nil, s.kinesisErr("", "ListShards", errors.Unwrap(err))
	}
	slices.SortFunc(shards, func(a, b ktypes.Shard) int { return strings.Compare(aws.ToString(a.ShardId), aws.ToString(b.ShardId)) })
	return shards, nil
}

// kinesisErr names the stream (and the shard, if any) in a Kinesis error.
func (s *session) kinesisErr(shardID, op string, err error) error {
	var notFound *ktypes.ResourceNotFoundException
	if shardID == "" && errors.As(err, &notFound) {
		return fmt.Errorf("stream %q not found in region %s (%s): check --stream and --region: %w", s.stream, s.region, op, err)
	}
	if shardID == "" {
		return fmt.Errorf("stream %q: %s: %w", s.stream, op, err)
	}
	return fmt.Errorf("stream %q, shard %s: %s: %w", s.stream, shardID, op, err)
}

// rowErr names the table, the stream and the shard in an error of the lease
// store (whose own message names the table and says what to do).
func (s *session) rowErr(shardID string, err error) error {
	return fmt.Errorf("table %q, %s, shard %s: %w", s.table, s.streamRows(), shardID, err)
}

// streamRows names the stream, and its rows' key when namespaced.
func (s *session) streamRows() string {
	if s.key != kinesisx.Name(s.stream) {
		return fmt.Sprintf("stream %q (rows %q)", s.stream, s.key)
	}
	return fmt.Sprintf("stream %q", s.stream)
}

// getRecords calls GetRecords with it.
func (s *session) getRecords(ctx context.Context, it *string, limit int32) (*kinesis.GetRecordsOutput, error) {
	return s.kin.GetRecords(ctx, kinesisx.GetRecordsInput(s.stream, aws.ToString(it), limit))
}
