package testutil

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/kinesislease/kinesislease/internal/backoff"
)

// Faults records the operations a client calls and injects faults into them.
// Add it to a client with DynamoOptions, KinesisOptions or AddToStack (as an
// APIOptions entry); use one Faults per client. It is safe for concurrent use.
//
// It sits at two places in the SDK's middleware stack:
//   - per call, first in the Initialize step, outside the retry loop: it
//     records each call (Ops, Calls) and applies the faults that are not
//     PerAttempt, so the caller sees their errors as they are;
//   - per attempt, in the Finalize step right after the "Retry" middleware:
//     it counts attempts (Attempts) and applies PerAttempt faults, whose
//     errors the SDK's retryer sees and may retry.
//
// Calls made with a context from WithoutFaults pass through unrecorded.
type Faults struct {
	mu       sync.Mutex
	faults   []*faultState
	ops      []string
	calls    map[string]int
	attempts map[string]int
}

// Fault describes one injected fault. It applies to the calls (or, if
// PerAttempt, the attempts) of operation Op numbered Skip+1 to Skip+Times,
// counted from when it was injected; Times 0 means every one after Skip.
// Delay, Err and LoseResponse combine; when several faults apply to one call,
// their delays add up and the first injected one's error wins.
type Fault struct {
	// Op is the SDK operation name, e.g. "GetRecords" or "UpdateItem"; ""
	// matches every operation.
	Op string
	// Match, if set, narrows the fault to the calls whose input (the
	// operation's *Input struct, e.g. *kinesis.GetShardIteratorInput) it
	// accepts. Calls it rejects are not counted for Skip and Times. It is
	// not consulted for PerAttempt faults, which apply to every matching Op.
	Match func(input any) bool
	// Skip is how many matching calls pass before the fault applies.
	Skip int
	// Times is how many matching calls the fault applies to; 0 means all.
	Times int
	// PerAttempt applies the fault to each attempt inside the SDK's retry
	// loop instead of once per call: a retryable Err (a throttle, a lost
	// response) is then retried by the SDK and the caller only sees it when
	// the attempts run out. Retries take the standard retryer's backoff
	// (up to seconds; tests may set a faster Retryer) and draw on its retry
	// quota (500 tokens per client, 5 per retry, 10 per timeout).
	PerAttempt bool
	// Delay is slept (until the context ends) before the call proceeds.
	Delay time.Duration
	// Err is returned instead of sending the request. An error implementing
	// smithy.APIError (e.g. &ktypes.ProvisionedThroughputExceededException{},
	// &smithy.GenericAPIError{Code: "ThrottlingException"}) is wrapped the
	// way the SDK wraps service errors, in an *awshttp.ResponseError with
	// status 400 (500 for smithy.FaultServer) and request id "testutil-injected".
	Err error
	// LoseResponse sends the request and lets the server apply it, then
	// discards the response and returns a timeout-like transport error that
	// the SDK's retryer retries (Err, if set, is returned instead). With
	// PerAttempt the SDK retries the call; without it the caller sees the
	// error after the SDK is done. errors.Is(err, ErrResponseLost) holds.
	LoseResponse bool
}

type faultState struct {
	Fault
	seen int
}

// ErrResponseLost is matched (errors.Is) by the error a LoseResponse fault
// returns.
var ErrResponseLost = errors.New("testutil: response lost (injected)")

// lostError is the transport error of a lost response: a read timeout.
type lostError struct{}

func (lostError) Error() string   { return "i/o timeout (response lost by testutil.Faults)" }
func (lostError) Timeout() bool   { return true }
func (lostError) Temporary() bool { return true }
func (lostError) Is(target error) bool {
	return target == ErrResponseLost || target == os.ErrDeadlineExceeded
}

// Inject adds a fault.
func (f *Faults) Inject(ft Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, &faultState{Fault: ft})
}

// Clear removes every fault; the records stay.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// Ops returns the operation names of all recorded calls, in call order.
func (f *Faults) Ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ops...)
}

// Calls returns how many times op was called (retries not included).
func (f *Faults) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Attempts returns how many attempts the SDK made for op, retries included;
// attempts stopped by a per-call fault are not counted.
func (f *Faults) Attempts(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts[op]
}

// AddToStack adds the recorder and injector to an operation's middleware
// stack; it has the type of an APIOptions entry of every SDK client.
func (f *Faults) AddToStack(stack *middleware.Stack) error {
	if err := stack.Initialize.Add(callMiddleware{f}, middleware.Before); err != nil {
		return err
	}
	return stack.Finalize.Insert(attemptMiddleware{f}, "Retry", middleware.After)
}

// DynamoOptions adds f to a DynamoDB client: pass it as an option function.
func (f *Faults) DynamoOptions(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, f.AddToStack)
}

// KinesisOptions adds f to a Kinesis client: pass it as an option function.
func (f *Faults) KinesisOptions(o *kinesis.Options) {
	o.APIOptions = append(o.APIOptions, f.AddToStack)
}

type bypassKey struct{}

// WithoutFaults returns a context whose calls Faults neither records nor
// disturbs, for set-up and clean-up calls on a client under test.
func WithoutFaults(ctx context.Context) context.Context {
	return context.WithValue(ctx, bypassKey{}, true)
}

func bypassed(ctx context.Context) bool {
	b, _ := ctx.Value(bypassKey{}).(bool)
	return b
}

// action is what the faults that apply to one call or attempt add up to.
type action struct {
	delay time.Duration
	err   error
	lose  bool
}

// record counts a call (with its input) or an attempt of op and returns
// the faults to apply.
func (f *Faults) record(op string, input any, perAttempt bool) action {
	f.mu.Lock()
	defer f.mu.Unlock()
	if perAttempt {
		if f.attempts == nil {
			f.attempts = make(map[string]int)
		}
		f.attempts[op]++
	} else {
		if f.calls == nil {
			f.calls = make(map[string]int)
		}
		f.calls[op]++
		f.ops = append(f.ops, op)
	}
	var act action
	for _, ft := range f.faults {
		if ft.PerAttempt != perAttempt || (ft.Op != "" && ft.Op != op) || (!perAttempt && ft.Match != nil && !ft.Match(input)) {
			continue
		}
		ft.seen++
		if ft.seen <= ft.Skip || (ft.Times > 0 && ft.seen > ft.Skip+ft.Times) {
			continue
		}
		act.delay += ft.Delay
		if act.err == nil {
			act.err = ft.Err
		}
		act.lose = act.lose || ft.LoseResponse
	}
	return act
}

func (a action) sleep(ctx context.Context) error {
	if a.delay <= 0 {
		return nil
	}
	return backoff.Sleep(ctx, a.delay)
}

// failure returns the error to report instead of a (possibly received)
// response; rawURL is the request's URL, if known.
func (a action) failure(rawURL string) error {
	if a.err != nil {
		return wrapAPIError(a.err)
	}
	var err error = &net.OpError{Op: "read", Net: "tcp", Err: lostError{}}
	if rawURL != "" {
		err = &url.Error{Op: "Post", URL: rawURL, Err: err}
	}
	return &smithyhttp.RequestSendError{Err: err}
}

// wrapAPIError wraps a service error the way the SDK's deserializers do.
func wrapAPIError(err error) error {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return err
	}
	status := http.StatusBadRequest
	if apiErr.ErrorFault() == smithy.FaultServer {
		status = http.StatusInternalServerError
	}
	header := http.Header{}
	header.Set("X-Amzn-Requestid", "testutil-injected")
	return &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{
				StatusCode: status,
				Status:     http.StatusText(status),
				Header:     header,
			}},
			Err: err,
		},
		RequestID: "testutil-injected",
	}
}

type callMiddleware struct{ f *Faults }

func (callMiddleware) ID() string { return "testutil.Faults.Call" }

func (m callMiddleware) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
	middleware.InitializeOutput, middleware.Metadata, error,
) {
	return inject(ctx, m.f, false, in.Parameters, func() string { return "" },
		func() (middleware.InitializeOutput, middleware.Metadata, error) {
			return next.HandleInitialize(ctx, in)
		})
}

// inject records the call (or, perAttempt, the attempt) in f and carries
// out the action it draws around next, the rest of the middleware stack:
// its delay, then its error instead of the call, or after it (a lost
// answer, naming the request's URL). A bypassed call goes straight on.
func inject[Out any](ctx context.Context, f *Faults, perAttempt bool, input any, url func() string, next func() (Out, middleware.Metadata, error)) (Out, middleware.Metadata, error) {
	if bypassed(ctx) {
		return next()
	}
	act := f.record(middleware.GetOperationName(ctx), input, perAttempt)
	var none Out
	if err := act.sleep(ctx); err != nil {
		return none, middleware.Metadata{}, err
	}
	if act.err != nil && !act.lose {
		return none, middleware.Metadata{}, act.failure("")
	}
	out, md, err := next()
	if act.lose {
		return none, md, act.failure(url())
	}
	return out, md, err
}

type attemptMiddleware struct{ f *Faults }

func (attemptMiddleware) ID() string { return "testutil.Faults.Attempt" }

func (m attemptMiddleware) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	middleware.FinalizeOutput, middleware.Metadata, error,
) {
	url := func() string {
		if req, ok := in.Request.(*smithyhttp.Request); ok && req.URL != nil {
			return req.URL.String()
		}
		return ""
	}
	return inject(ctx, m.f, true, nil, url,
		func() (middleware.FinalizeOutput, middleware.Metadata, error) { return next.HandleFinalize(ctx, in) })
}
