package testutil

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kschemas "github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
)

// FanOutConfig configures a FanOut. Zero durations and limits take the
// defaults given with each field.
type FanOutConfig struct {
	// Backend is the base URL (http://127.0.0.1:port) of the Kinesis emulator
	// the bench forwards to and reads shards from. Required.
	Backend string
	// Lifetime is how long a subscription streams before its response ends
	// cleanly (default 5 minutes, as Kinesis does).
	Lifetime time.Duration
	// TakeoverAfter is the 5-second rule: a SubscribeToShard call for a
	// (consumer, shard) less than this after its last successful call fails
	// with ResourceInUseException; a later one takes the subscription over
	// (default 5s).
	TakeoverAfter time.Duration
	// MinCallInterval is the one-call-per-second rule: a SubscribeToShard
	// call for a (consumer, shard) less than this after its previous call,
	// successful or not, fails with LimitExceededException (default 1s).
	MinCallInterval time.Duration
	// Poll is how long a caught-up subscription waits before reading the
	// backend shard again (default 20ms).
	Poll time.Duration
	// Heartbeat is how long a subscription goes without sending an event
	// before it sends one without records (default 1s).
	Heartbeat time.Duration
	// ActivateAfter is how long a registered consumer stays CREATING
	// (default 200ms).
	ActivateAfter time.Duration
	// DeleteAfter is how long a deregistered consumer stays DELETING before
	// it is gone (default 200ms).
	DeleteAfter time.Duration
	// Limit is the Limit of each GetRecords call to the backend, so the
	// most records one event carries (default 1000).
	Limit int32
	// ShutdownGrace is how long Close waits for connections to finish,
	// once it has told every subscription to end, before it cuts them
	// (default 5s; FanOutStats.ClosedForcibly says it did).
	ShutdownGrace time.Duration
}

func (c FanOutConfig) withDefaults() FanOutConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Lifetime, 5*time.Minute)
	def(&c.TakeoverAfter, 5*time.Second)
	def(&c.MinCallInterval, time.Second)
	def(&c.Poll, 20*time.Millisecond)
	def(&c.Heartbeat, time.Second)
	def(&c.ActivateAfter, 200*time.Millisecond)
	def(&c.DeleteAfter, 200*time.Millisecond)
	def(&c.ShutdownGrace, 5*time.Second)
	if c.Limit <= 0 {
		c.Limit = 1000
	}
	return c
}

// maxConsumersPerStream is Kinesis's limit of registered consumers per stream.
const maxConsumersPerStream = 20

// A FanOut is a local enhanced fan-out endpoint (the "fan-out bench"): an
// HTTP server on 127.0.0.1 that implements the consumer operations
// (RegisterStreamConsumer, DescribeStreamConsumer, ListStreamConsumers,
// DeregisterStreamConsumer) and SubscribeToShard itself and forwards every
// other Kinesis operation unchanged to a backing emulator. Subscriptions
// carry the backend's records, sequence numbers, MillisBehindLatest, shard
// ends and child shards (read with GetShardIterator, GetRecords and
// ListShards); only the event-stream framing and the service's rules are the
// bench's:
//   - a consumer is CREATING for ActivateAfter, then ACTIVE; DELETING for
//     DeleteAfter after it is deregistered, then gone (its subscriptions end
//     with a ResourceNotFoundException event); at most 20 per stream;
//   - SubscribeToShard checks, in order: the consumer exists
//     (ResourceNotFoundException), the request is well formed
//     (InvalidArgumentException), the shard exists
//     (ResourceNotFoundException), one call per MinCallInterval per
//     (consumer, shard) (LimitExceededException), the consumer is ACTIVE
//     and no successful call came less than TakeoverAfter ago
//     (ResourceInUseException), the starting position is valid (the
//     backend's GetShardIterator error, e.g. InvalidArgumentException);
//   - a call TakeoverAfter or more after the last successful one takes over:
//     the older subscription gets a ResourceInUseException event and ends;
//   - a subscription sends an initial-response, then one
//     SubscribeToShardEvent per non-empty GetRecords, an empty one after
//     Heartbeat without events, and at a shard's end a last event with no
//     ContinuationSequenceNumber and the ChildShards; it ends cleanly after
//     Lifetime.
//
// DeleteStream is forwarded too, but, as Kinesis does, refused with
// ResourceInUseException while the stream has consumers unless
// EnforceConsumerDeletion is set; a deleted stream's consumers are gone.
//
// Drop, FailNext, Stats and Active let tests disturb and observe the
// subscriptions. A FanOut is safe for concurrent use.
type FanOut struct {
	cfg       FanOutConfig
	url       string
	ln        net.Listener
	srv       *http.Server
	proxy     *httputil.ReverseProxy
	transport *http.Transport
	backend   *kinesis.Client
	serveDone chan struct{}
	serveErr  error

	handlers sync.WaitGroup // running handlers; Add under mu while !closed

	mu        sync.Mutex
	closed    bool
	consumers map[string]*consumer // by ARN; gone ones are pruned lazily
	calls     map[subKey]*callState
	subs      map[*subscription]struct{}
	failNext  map[string][]string // shard ID -> exception types to send, oldest first
	stats     FanOutStats
}

// FanOutStats counts what a FanOut did (see FanOut.Stats).
type FanOutStats struct {
	// Subscribes counts successful SubscribeToShard calls.
	Subscribes int
	// Takeovers counts subscriptions ended because a newer call for the same
	// consumer and shard took over.
	Takeovers int
	// ResourceInUse counts SubscribeToShard calls refused with
	// ResourceInUseException (consumer not ACTIVE, or the 5-second rule).
	ResourceInUse int
	// LimitExceeded counts SubscribeToShard calls refused with
	// LimitExceededException (the one-call-per-second rule).
	LimitExceeded int
	// Active is the number of running subscriptions per shard ID (of any
	// stream and consumer); shards without one are absent.
	Active map[string]int
	// ClosedForcibly says Close cut connections still open ShutdownGrace
	// after it told the subscriptions to end.
	ClosedForcibly bool
}

type consumer struct {
	name, arn  string
	streamARN  string
	streamName string
	created    time.Time
	deleted    time.Time // zero until deregistered
	removed    bool      // its stream was deleted: gone at once
}

// consumerGone is the status of a consumer deleted DeleteAfter ago.
const consumerGone ktypes.ConsumerStatus = ""

func (c *consumer) status(now time.Time, cfg *FanOutConfig) ktypes.ConsumerStatus {
	switch {
	case c.removed:
		return consumerGone
	case c.deleted.IsZero() && now.Sub(c.created) < cfg.ActivateAfter:
		return ktypes.ConsumerStatusCreating
	case c.deleted.IsZero():
		return ktypes.ConsumerStatusActive
	case now.Sub(c.deleted) < cfg.DeleteAfter:
		return ktypes.ConsumerStatusDeleting
	}
	return consumerGone
}

// subKey identifies the subscriptions the service's rules are about.
type subKey struct{ consumerARN, shardID string }

type callState struct {
	lastCall    time.Time     // last SubscribeToShard call, successful or not
	lastSuccess time.Time     // last successful one
	pending     bool          // a call passed the checks and is starting
	active      *subscription // the newest running subscription
}

// StartFanOut starts a fan-out bench in front of the Kinesis emulator at
// cfg.Backend, listening on a free 127.0.0.1 port. The caller must Close it.
func StartFanOut(cfg FanOutConfig) (*FanOut, error) {
	if cfg.Backend == "" {
		return nil, errors.New("testutil: FanOutConfig.Backend is not set")
	}
	backendURL, err := url.Parse(cfg.Backend)
	if err != nil {
		return nil, fmt.Errorf("testutil: FanOutConfig.Backend: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &FanOut{
		cfg:       cfg.withDefaults(),
		url:       "http://" + ln.Addr().String(),
		ln:        ln,
		transport: awshttp.NewBuildableClient().GetTransport(),
		serveDone: make(chan struct{}),
		consumers: make(map[string]*consumer),
		calls:     make(map[subKey]*callState),
		subs:      make(map[*subscription]struct{}),
		failNext:  make(map[string][]string),
	}
	f.backend = kinesis.NewFromConfig(aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		Retryer:     func() aws.Retryer { return retry.NewStandard() },
		HTTPClient:  &http.Client{Transport: f.transport},
	}, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(cfg.Backend) })
	f.proxy = &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(backendURL) },
		Transport: f.transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeAPIError(w, http.StatusInternalServerError, "InternalFailureException",
				"testutil fan-out bench: backend: "+err.Error())
		},
	}
	f.srv = &http.Server{
		Handler:           http.HandlerFunc(f.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	go func() {
		defer close(f.serveDone)
		if err := f.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			f.serveErr = err
		}
	}()
	return f, nil
}

// FanOutEndpoint starts emulator e (Kinesalite or KinesisLocal) if needed
// and a FanOut in front of it with cfg (whose Backend it sets), and closes
// the FanOut when the test ends.
func FanOutEndpoint(tb testing.TB, e Emulator, cfg FanOutConfig) *FanOut {
	tb.Helper()
	if e != Kinesalite && e != KinesisLocal {
		tb.Fatalf("testutil: %s is not a Kinesis emulator", e)
	}
	cfg.Backend = Endpoint(tb, e)
	f, err := StartFanOut(cfg)
	if err != nil {
		tb.Fatalf("testutil: starting the fan-out bench: %v", err)
	}
	tb.Cleanup(func() {
		if err := f.Close(); err != nil {
			tb.Errorf("testutil: closing the fan-out bench: %v", err)
		}
	})
	return f
}

// URL returns the bench's base URL (http://127.0.0.1:port), a client's
// BaseEndpoint.
func (f *FanOut) URL() string { return f.url }

// Client returns a Kinesis client of the bench (the test clients' Config,
// BaseEndpoint URL). optFns apply last. Pass FreshProtocol to each of its
// SubscribeToShard calls when several of its streams may be open at once.
func (f *FanOut) Client(optFns ...func(*kinesis.Options)) *kinesis.Client {
	opts := append([]func(*kinesis.Options){func(o *kinesis.Options) {
		o.BaseEndpoint = aws.String(f.url)
	}}, optFns...)
	return kinesis.NewFromConfig(shared.Config(), opts...)
}

// FreshProtocol is a per-call option of SubscribeToShard (pass it in the
// call's optFns) that gives the call its own protocol instance. The SDK's
// client shares one event-stream codec among all its calls, and a second
// stream opened while one is being read is a data race there that fails
// tests run with -race (https://github.com/aws/smithy-go/issues/714; benign
// in effect as of smithy-go v1.28.9, but reported).
func FreshProtocol(o *kinesis.Options) {
	o.Protocol = awsjson.New11(kschemas.Kinesis_20131202)
}

// Close ends every subscription cleanly, stops the server (closing the
// connections that are still busy after a grace period) and waits for its
// goroutines. Calls after the first return nil.
func (f *FanOut) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	subs := make([]*subscription, 0, len(f.subs))
	for s := range f.subs {
		subs = append(subs, s)
	}
	f.mu.Unlock()
	for _, s := range subs {
		s.stop(endClean, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.ShutdownGrace)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		f.mu.Lock()
		f.stats.ClosedForcibly = true
		f.mu.Unlock()
		_ = f.srv.Close()
	}
	f.handlers.Wait()
	<-f.serveDone
	f.transport.CloseIdleConnections()
	return f.serveErr
}

// Stats returns what the bench has counted so far.
func (f *FanOut) Stats() FanOutStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stats
	st.Active = make(map[string]int)
	for s := range f.subs {
		st.Active[s.key.shardID]++
	}
	return st
}

// Active returns how many subscriptions of shard shardID (of any stream and
// consumer) are running.
func (f *FanOut) Active(shardID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for s := range f.subs {
		if s.key.shardID == shardID {
			n++
		}
	}
	return n
}

// Drop ends every running subscription of shard shardID (of any stream and
// consumer) abruptly: the bench resets its TCP connection (RST) before it
// returns, so the client's stream ends with a non-nil Err (a connection
// reset, not an exception). It returns how many it ended.
func (f *FanOut) Drop(shardID string) int {
	f.mu.Lock()
	var subs []*subscription
	for s := range f.subs {
		if s.key.shardID == shardID {
			subs = append(subs, s)
		}
	}
	f.mu.Unlock()
	n := 0
	for _, s := range subs {
		if s.stop(endDrop, "") {
			n++
		}
	}
	return n
}

// FailNext makes the next event of a subscription of shard shardID (of any
// stream and consumer; the running one, else the next to start) an
// exception message of type exceptionType, e.g. "InternalFailureException"
// or "ResourceInUseException", after which that subscription's response
// ends. The exception goes out within Poll; each call fails one event.
func (f *FanOut) FailNext(shardID, exceptionType string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext[shardID] = append(f.failNext[shardID], exceptionType)
}

// takeFailure returns and forgets the oldest FailNext of shardID, or "".
func (f *FanOut) takeFailure(shardID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.failNext[shardID]
	if len(q) == 0 {
		return ""
	}
	if len(q) == 1 {
		delete(f.failNext, shardID)
	} else {
		f.failNext[shardID] = q[1:]
	}
	return q[0]
}

const targetPrefix = "Kinesis_20131202."

// connKey is the request context key of the request's connection.
type connKey struct{}

// maxRequestBody bounds the bodies the bench reads itself.
const maxRequestBody = 1 << 20

func (f *FanOut) serveHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		writeAPIError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "testutil fan-out bench: closed")
		return
	}
	f.handlers.Add(1)
	f.mu.Unlock()
	defer f.handlers.Done()

	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), targetPrefix)
	var handle func(http.ResponseWriter, *http.Request, []byte)
	switch {
	case !ok:
	case op == "RegisterStreamConsumer":
		handle = f.registerConsumer
	case op == "DescribeStreamConsumer":
		handle = f.describeConsumer
	case op == "ListStreamConsumers":
		handle = f.listConsumers
	case op == "DeregisterStreamConsumer":
		handle = f.deregisterConsumer
	case op == "SubscribeToShard":
		handle = f.subscribe
	case op == "DeleteStream":
		handle = f.deleteStream
	}
	if handle == nil {
		f.proxy.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "SerializationException", "reading the request: "+err.Error())
		return
	}
	handle(w, r, body)
}

// apiError is an error response the bench sends.
type apiError struct {
	status int
	typ    string
	msg    string
}

func (e *apiError) Error() string { return e.typ + ": " + e.msg }

func errNotFound(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "ResourceNotFoundException", fmt.Sprintf(format, args...)}
}

func errInUse(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "ResourceInUseException", fmt.Sprintf(format, args...)}
}

func errInvalid(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "InvalidArgumentException", fmt.Sprintf(format, args...)}
}

func errLimit(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "LimitExceededException", fmt.Sprintf(format, args...)}
}

// backendError turns an error of a backend call into the error the bench
// answers: the backend's own API error, or InternalFailureException.
func backendError(err error) *apiError {
	var rnf *ktypes.ResourceNotFoundException
	var inv *ktypes.InvalidArgumentException
	var riu *ktypes.ResourceInUseException
	var lim *ktypes.LimitExceededException
	switch {
	case errors.As(err, &rnf):
		return errNotFound("%s", rnf.ErrorMessage())
	case errors.As(err, &inv):
		return errInvalid("%s", inv.ErrorMessage())
	case errors.As(err, &riu):
		return errInUse("%s", riu.ErrorMessage())
	case errors.As(err, &lim):
		return errLimit("%s", lim.ErrorMessage())
	}
	return &apiError{http.StatusInternalServerError, "InternalFailureException", "backend: " + err.Error()}
}

func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeAPIError writes an awsjson 1.1 error response.
func writeAPIError(w http.ResponseWriter, status int, typ, msg string) {
	body, _ := json.Marshal(map[string]string{"__type": typ, "message": msg})
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", requestID())
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeErr(w http.ResponseWriter, err *apiError) {
	writeAPIError(w, err.status, err.typ, err.msg)
}

// writeJSON writes a successful awsjson 1.1 response.
func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeAPIError(w, http.StatusInternalServerError, "InternalFailureException", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", requestID())
	_, _ = w.Write(body)
}

// decodeRequest unmarshals a request body into v.
func decodeRequest(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return &apiError{http.StatusBadRequest, "SerializationException", err.Error()}
	}
	return nil
}

// epochSeconds is a timestamp in awsjson's default format: seconds since
// the epoch, as a number with a fractional part.
type epochSeconds time.Time

func (t epochSeconds) MarshalJSON() ([]byte, error) {
	ms := time.Time(t).UnixMilli()
	return strconv.AppendFloat(nil, float64(ms)/1000, 'f', -1, 64), nil
}

// parseEpochSeconds reads an awsjson timestamp.
func parseEpochSeconds(n json.Number) (time.Time, error) {
	v, err := n.Float64()
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return time.Time{}, fmt.Errorf("invalid timestamp %q", n)
	}
	sec, frac := math.Modf(v)
	return time.Unix(int64(sec), int64(math.Round(frac*1e9))), nil
}

// streamNameOf returns the stream name in a stream ARN
// (arn:aws:kinesis:<region>:<account>:stream/<name>).
func streamNameOf(streamARN string) (string, bool) {
	parts := strings.SplitN(streamARN, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "kinesis" {
		return "", false
	}
	name, ok := strings.CutPrefix(parts[5], "stream/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return name, true
}

// resolveStream checks with the backend that the stream of streamARN exists
// and returns its name.
func (f *FanOut) resolveStream(ctx context.Context, streamARN string) (string, *apiError) {
	if streamARN == "" {
		return "", errInvalid("StreamARN is required")
	}
	name, ok := streamNameOf(streamARN)
	if !ok {
		return "", errInvalid("invalid StreamARN %q", streamARN)
	}
	out, err := f.backend.DescribeStreamSummary(ctx, &kinesis.DescribeStreamSummaryInput{StreamName: aws.String(name)})
	if err != nil {
		return "", backendError(err)
	}
	if got := aws.ToString(out.StreamDescriptionSummary.StreamARN); got != streamARN {
		return "", errNotFound("Stream %s not found (the stream named %s is %s)", streamARN, name, got)
	}
	return name, nil
}

// pruneLocked forgets the consumers that are gone. f.mu must be held.
func (f *FanOut) pruneLocked(now time.Time) {
	for arn, c := range f.consumers {
		if c.status(now, &f.cfg) == consumerGone {
			delete(f.consumers, arn)
		}
	}
}

// findLocked returns the consumer that ARN, or stream ARN and name, name.
// f.mu must be held, and pruneLocked called.
func (f *FanOut) findLocked(consumerARN, streamARN, name string) *consumer {
	if consumerARN != "" {
		return f.consumers[consumerARN]
	}
	for _, c := range f.consumers {
		if c.streamARN == streamARN && c.name == name {
			return c
		}
	}
	return nil
}

// consumerJSON is a Consumer or ConsumerDescription.
type consumerJSON struct {
	ConsumerName              string       `json:"ConsumerName"`
	ConsumerARN               string       `json:"ConsumerARN"`
	ConsumerStatus            string       `json:"ConsumerStatus"`
	ConsumerCreationTimestamp epochSeconds `json:"ConsumerCreationTimestamp"`
	StreamARN                 string       `json:"StreamARN,omitempty"`
}

func (c *consumer) json(now time.Time, cfg *FanOutConfig, withStream bool) consumerJSON {
	j := consumerJSON{
		ConsumerName:              c.name,
		ConsumerARN:               c.arn,
		ConsumerStatus:            string(c.status(now, cfg)),
		ConsumerCreationTimestamp: epochSeconds(c.created),
	}
	if withStream {
		j.StreamARN = c.streamARN
	}
	return j
}

func (f *FanOut) registerConsumer(w http.ResponseWriter, r *http.Request, body []byte) {
	var in struct{ StreamARN, ConsumerName string }
	if err := decodeRequest(body, &in); err != nil {
		writeErr(w, err)
		return
	}
	if in.ConsumerName == "" {
		writeErr(w, errInvalid("ConsumerName is required"))
		return
	}
	streamName, aerr := f.resolveStream(r.Context(), in.StreamARN)
	if aerr != nil {
		writeErr(w, aerr)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	f.pruneLocked(now)
	if c := f.findLocked("", in.StreamARN, in.ConsumerName); c != nil {
		writeErr(w, errInUse("Consumer %s under stream %s already exists (%s)", in.ConsumerName, in.StreamARN, c.status(now, &f.cfg)))
		return
	}
	n := 0
	for _, c := range f.consumers {
		if c.streamARN == in.StreamARN {
			n++
		}
	}
	if n >= maxConsumersPerStream {
		writeErr(w, errLimit("Stream %s has reached its consumer limit of %d", in.StreamARN, maxConsumersPerStream))
		return
	}
	c := &consumer{
		name:       in.ConsumerName,
		arn:        fmt.Sprintf("%s/consumer/%s:%d", in.StreamARN, in.ConsumerName, now.Unix()),
		streamARN:  in.StreamARN,
		streamName: streamName,
		created:    now,
	}
	f.consumers[c.arn] = c
	writeJSON(w, map[string]any{"Consumer": c.json(now, &f.cfg, false)})
}

func (f *FanOut) describeConsumer(w http.ResponseWriter, r *http.Request, body []byte) {
	f.withConsumer(w, body, func(c *consumer, now time.Time) {
		writeJSON(w, map[string]any{"ConsumerDescription": c.json(now, &f.cfg, true)})
	})
}

// withConsumer decodes a request naming one consumer (ConsumerARN, or
// StreamARN and ConsumerName) and calls fn with it under f.mu, or writes
// the error.
func (f *FanOut) withConsumer(w http.ResponseWriter, body []byte, fn func(c *consumer, now time.Time)) {
	var in struct{ StreamARN, ConsumerName, ConsumerARN string }
	if err := decodeRequest(body, &in); err != nil {
		writeErr(w, err)
		return
	}
	if in.ConsumerARN == "" && (in.StreamARN == "" || in.ConsumerName == "") {
		writeErr(w, errInvalid("either ConsumerARN or both StreamARN and ConsumerName are required"))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	f.pruneLocked(now)
	c := f.findLocked(in.ConsumerARN, in.StreamARN, in.ConsumerName)
	if c == nil {
		writeErr(w, errNotFound("Consumer %s not found", in.ConsumerARN+in.ConsumerName))
		return
	}
	fn(c, now)
}

func (f *FanOut) listConsumers(w http.ResponseWriter, r *http.Request, body []byte) {
	var in struct {
		StreamARN  string
		MaxResults int
		NextToken  string
	}
	if err := decodeRequest(body, &in); err != nil {
		writeErr(w, err)
		return
	}
	if _, aerr := f.resolveStream(r.Context(), in.StreamARN); aerr != nil {
		writeErr(w, aerr)
		return
	}
	if in.MaxResults <= 0 {
		in.MaxResults = 100
	}
	start := 0
	if in.NextToken != "" {
		s, err := strconv.Atoi(in.NextToken)
		if err != nil || s < 0 {
			writeErr(w, errInvalid("invalid NextToken %q", in.NextToken))
			return
		}
		start = s
	}
	f.mu.Lock()
	now := time.Now()
	f.pruneLocked(now)
	var all []*consumer
	for _, c := range f.consumers {
		if c.streamARN == in.StreamARN {
			all = append(all, c)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].created.Equal(all[j].created) {
			return all[i].created.Before(all[j].created)
		}
		return all[i].name < all[j].name
	})
	out := struct {
		Consumers []consumerJSON `json:"Consumers"`
		NextToken *string        `json:"NextToken,omitempty"`
	}{Consumers: []consumerJSON{}}
	for i := start; i < len(all) && i < start+in.MaxResults; i++ {
		out.Consumers = append(out.Consumers, all[i].json(now, &f.cfg, false))
	}
	if start+in.MaxResults < len(all) {
		out.NextToken = aws.String(strconv.Itoa(start + in.MaxResults))
	}
	f.mu.Unlock()
	writeJSON(w, out)
}

func (f *FanOut) deregisterConsumer(w http.ResponseWriter, r *http.Request, body []byte) {
	f.withConsumer(w, body, func(c *consumer, now time.Time) {
		if !c.deleted.IsZero() {
			writeErr(w, errInUse("Consumer %s is DELETING", c.arn))
			return
		}
		c.deleted = now
		writeJSON(w, struct{}{})
	})
}

// deleteStream forwards DeleteStream unless the stream has consumers and
// EnforceConsumerDeletion is not set, and forgets the consumers of a stream
// it deleted.
func (f *FanOut) deleteStream(w http.ResponseWriter, r *http.Request, body []byte) {
	var in struct {
		StreamName, StreamARN   string
		EnforceConsumerDeletion bool
	}
	if err := decodeRequest(body, &in); err != nil {
		writeErr(w, err)
		return
	}
	name := in.StreamName
	if name == "" {
		name, _ = streamNameOf(in.StreamARN)
	}
	f.mu.Lock()
	f.pruneLocked(time.Now())
	n := 0
	for _, c := range f.consumers {
		if c.streamName == name {
			n++
		}
	}
	f.mu.Unlock()
	if n > 0 && !in.EnforceConsumerDeletion {
		writeErr(w, errInUse("Stream %s has %d registered consumers: deregister them or set EnforceConsumerDeletion", name, n))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	sw := &statusWriter{ResponseWriter: w}
	f.proxy.ServeHTTP(sw, r)
	if sw.status == http.StatusOK {
		f.mu.Lock()
		for arn, c := range f.consumers {
			if c.streamName == name {
				c.removed = true
				delete(f.consumers, arn)
			}
		}
		f.mu.Unlock()
	}
}

// statusWriter records the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
