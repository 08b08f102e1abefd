package kinesisx

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// TestSubscriptionsOutliveTheRequestBody: with StableRequestBody, the
// transport reads a request body that nobody else closes. smithy-go closes
// the body it built as soon as the HTTP client returns the response's
// headers; a transport still reading it then failed in its write loop and
// closed the connection, ending a subscription that had just started
// ("use of closed network connection": a persistConn.writeLoop close, seen
// by tracing the connection's Close, about one subscription in thirty when
// sixteen were opened at once on one client served by kinesisfake).
func TestSubscriptionsOutliveTheRequestBody(t *testing.T) {
	const payload = `{"ConsumerARN":"arn:aws:kinesis:us-east-1:000000000000:stream/s/consumer/c:1","ShardId":"shardId-000000000000"}`
	for _, stable := range []bool{false, true} {
		built := &closableBody{r: strings.NewReader(payload)} // the body smithy-go built, and closes
		transport := &lateReader{}
		o := kinesis.Options{HTTPClient: transport}
		if stable {
			StableRequestBody(&o)
		}
		req, err := http.NewRequest(http.MethodPost, "http://kinesis.invalid", built)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.HTTPClient.Do(req); err != nil {
			t.Fatal(err)
		}
		_ = built.Close() // smithy-go, once Do returned
		got, err := transport.finish()
		switch {
		case stable && (err != nil || got != payload):
			t.Errorf("with StableRequestBody, the transport read %q, %v after the caller closed its body; want the whole body", got, err)
		case !stable && err == nil:
			t.Errorf("without StableRequestBody, the transport read the whole body after the caller closed it: the test no longer shows the race")
		}
	}
}

// closableBody is a request body whose reads fail once it is closed.
type closableBody struct {
	mu     sync.Mutex
	r      io.Reader
	closed bool
}

func (b *closableBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errors.New("read on a closed body")
	}
	return b.r.Read(p)
}

func (b *closableBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

// lateReader is an HTTP client that answers at once and reads the request
// body afterwards, as a transport whose write loop is behind its read loop.
type lateReader struct{ body io.ReadCloser }

func (l *lateReader) Do(req *http.Request) (*http.Response, error) {
	l.body = req.Body
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}}, nil
}

func (l *lateReader) finish() (string, error) {
	b, err := io.ReadAll(l.body)
	return string(b), err
}
