package kinesisfake

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// Client returns an SDK Kinesis client served by k in the process, with no
// network: every call goes through the SDK's real serialisation, signing,
// retries and middleware, then k.ServeHTTP, and SubscribeToShard's events
// come as an event stream, read by the SDK's decoder or any other. It is
// the client to hand to
// kinesislease.WithKinesisClient for enhanced fan-out, which Kinesis' own
// methods cannot serve (the SDK's SubscribeToShardOutput has no exported
// event stream). optFns adjust the client's options.
//
// As on any SDK client, subscriptions read at once on one client share the
// SDK's event-stream decoder and race on it
// (https://github.com/aws/smithy-go/issues/714) unless each call gets a
// protocol of its own; kinesislease's subscriptions read their event
// streams themselves.
func (k *Kinesis) Client(optFns ...func(*kinesis.Options)) *kinesis.Client {
	o := kinesis.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://kinesisfake.invalid"),
		Credentials:  credentials.NewStaticCredentialsProvider("kinesisfake", "kinesisfake", ""),
		HTTPClient:   &http.Client{Transport: inProcess{k}},
	}
	return kinesis.New(o, optFns...)
}

// inProcess is an http.RoundTripper that serves each request with a
// handler in the process: the response body is a pipe the handler writes
// to, so an event stream flows as it is written.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	pr, pw := io.Pipe()
	rw := &pipeWriter{header: http.Header{}, pw: pw, started: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				if p != http.ErrAbortHandler {
					panic(p)
				}
				pw.CloseWithError(ErrConnectionReset)
			}
			rw.start(http.StatusOK)
			pw.Close()
		}()
		t.h.ServeHTTP(rw, req.WithContext(ctx))
	}()
	select {
	case <-rw.started:
	case <-ctx.Done():
		cancel()
		pr.CloseWithError(ctx.Err())
		return nil, ctx.Err()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", rw.status, http.StatusText(rw.status)), StatusCode: rw.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rw.sent, Body: &pipeBody{pr, cancel}, ContentLength: -1, Request: req,
	}, nil
}

// pipeWriter is the handler's http.ResponseWriter of inProcess.
type pipeWriter struct {
	header  http.Header // the handler's
	pw      *io.PipeWriter
	once    sync.Once
	status  int
	sent    http.Header   // header as it was at the status
	started chan struct{} // closed when the status is set
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) start(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.started)
	})
}

func (w *pipeWriter) WriteHeader(status int) { w.start(status) }

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.start(http.StatusOK)
	return w.pw.Write(p)
}

// Flush is a no-op: every write reaches the reader at once.
func (w *pipeWriter) Flush() {}

// pipeBody is a response body of inProcess: closing it ends the handler's
// request context.
type pipeBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *pipeBody) Close() error {
	b.cancel()
	return b.PipeReader.CloseWithError(context.Canceled)
}
