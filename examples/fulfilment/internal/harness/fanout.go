package harness

import (
	"context"
	"net/http/httptest"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/kinesisfake"
)

// FanOutKinesis is an in-memory Kinesis (kinesisfake.Kinesis) served
// on a local HTTP endpoint, for runs with enhanced fan-out: kinesalite has
// no SubscribeToShard. Every process of a run uses it as its Kinesis: the
// stream, its records and its consumers live in it.
type FanOutKinesis struct {
	*kinesisfake.Kinesis
	srv *httptest.Server
}

// StartFanOutKinesis serves a new in-memory Kinesis with rules (the zero
// FanOutRules: Kinesis' own) on 127.0.0.1. Close it once the processes
// that use it are gone.
func StartFanOutKinesis(rules kinesisfake.FanOutRules) *FanOutKinesis {
	k := kinesisfake.New(kinesisfake.WithFanOutRules(rules))
	return &FanOutKinesis{Kinesis: k, srv: httptest.NewServer(k)}
}

// URL is the endpoint the processes use (--kinesis-endpoint-url).
func (f *FanOutKinesis) URL() string { return f.srv.URL }

// Close stops serving: it ends the open subscriptions' connections.
func (f *FanOutKinesis) Close() error {
	f.srv.CloseClientConnections()
	f.srv.Close()
	return nil
}

// On returns e with its Kinesis (endpoint and client) moved to f.
func (f *FanOutKinesis) On(e Env) Env {
	e.KinesisEndpoint = f.URL()
	e.Kinesis = kinesis.NewFromConfig(e.AWS, func(o *kinesis.Options) { o.BaseEndpoint = &e.KinesisEndpoint })
	return e
}

// CreateStream creates stream with shards on f, as Setup does on the
// emulator.
func (f *FanOutKinesis) CreateStream(_ context.Context, stream string, shards int32) error {
	return f.Kinesis.CreateStream(stream, int(shards))
}
