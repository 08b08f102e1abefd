// Package kinesislease consumes Amazon Kinesis Data Streams with typed
// handlers, on as many instances of a service as you like: each shard is read
// by exactly one instance at a time and resumed from its checkpoint after any
// restart. Leases and checkpoints live in a leases.Store: one DynamoDB table
// (leases/dynamo) for a service of several instances, or memory
// (leases/memory) for one instance and tests.
//
//	svc, err := kinesislease.New(cfg,
//		kinesislease.WithApp("fulfilment", "0.1.0"),
//		kinesislease.WithLeaseStore(dynamo.New(cfg, "fulfilment-leases")),
//	)
//	err = kinesislease.Subscribe[Order](svc, "fulfilment", fulfil)
//	err = svc.Run(ctx) // blocks; cancelling ctx drains, checkpoints and releases
//
// Records of one shard reach the handler one at a time, in order. A nil
// return acknowledges the record; an error retries it in place with backoff.
// The checkpoint advances to the newest record such that it and every
// record before it were acknowledged, every N records or T time and always
// on release: delivery is at least once, and a restart redelivers at most the
// records after the last checkpoint. A handler may defer its record's
// acknowledgement (Defer) to a sink that resolves it later; the checkpoint
// waits for it.
//
// Concurrency: handlers of different shards run concurrently; within a
// shard a handler is not called again before it returned, unless
// WithKeyConcurrency lets records of different partition keys run at once
// (each key still in order).
//
// Reading: by default each shard is polled with GetRecords; with
// WithEnhancedFanOut its records are pushed over SubscribeToShard to a
// registered stream consumer, with the same leases, checkpoints and
// guarantees.
//
// The types a handler, a hook or a test inspects live in package kltype,
// each under one name: the record (kltype.Record, through RecordFrom), start
// positions (kltype.Latest, kltype.TrimHorizon, ...), the outcome errors
// that RetryAfter, Drop and DeadLetter build (kltype.RetryAfterError, ...),
// the retry policy, dead letters and the hook interfaces (lease hooks among
// them).
package kinesislease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/kinesiswire"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// Service consumes the streams it is subscribed to. Build it with New, add
// subscriptions with Subscribe, then call Run once.
type Service struct {
	cfg  config
	log  *slog.Logger
	kin  Kinesis
	mu   sync.Mutex
	subs []*subscription
	run  bool
	// group runs every subscription of the running service; groupSet is
	// closed once it is set, or when Run returns without it.
	group    *engine.Group
	groupSet chan struct{}
	// running: Run passed its start-up checks and has not returned.
	running bool
	// budget bounds what every shard of the service holds fetched and not
	// yet handled.
	budget *engine.Budget
}

// New returns a Service whose Kinesis client is built from cfg (the same
// aws.Config the lease store is built from, so both reach one account and
// region). Invalid options are reported here, each error naming the option;
// Run reports none.
func New(cfg aws.Config, opts ...Option) (*Service, error) {
	c := config{shutdownTimeout: DefaultShutdownTimeout}
	for _, o := range opts {
		if o == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: nil option", ErrInvalidOption))
			continue
		}
		o.applyService(&c)
	}
	if c.heartbeat == 0 {
		c.heartbeat, c.timeout = DefaultHeartbeat, DefaultTimeout
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	if c.owner == "" {
		c.owner = defaultOwner(c.app)
	}
	if c.store == nil {
		c.store, c.storeDefaulted = memory.New(), true
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.client == nil {
		c.client = kinesis.NewFromConfig(cfg)
	}
	// The engine adds stream and owner to every line it logs.
	log := c.logger
	if c.app != "" {
		log = log.With("app", c.app, "version", c.version)
	}
	if c.budgetBytes == 0 {
		c.budgetBytes, c.budgetRecords = DefaultMemoryBudgetBytes, DefaultMemoryBudgetRecords
	}
	return &Service{cfg: c, log: log, kin: c.client, budget: engine.NewBudget(c.budgetBytes, c.budgetRecords)}, nil
}

// Owner returns this instance's owner id.
func (s *Service) Owner() string { return s.cfg.owner }

func defaultOwner(app string) string {
	host, _ := os.Hostname()
	parts := []string{}
	if app != "" {
		parts = append(parts, app)
	}
	if host != "" {
		parts = append(parts, host)
	}
	parts = append(parts, fmt.Sprint(os.Getpid()), strings.ToLower(rand.Text()[:6]))
	return strings.Join(parts, "-")
}

// Held returns the shard ids of stream this instance holds now, sorted;
// nil when the service is not running or has no such subscription.
func (s *Service) Held(stream string) []string {
	s.mu.Lock()
	g := s.group
	s.mu.Unlock()
	if g == nil {
		return nil
	}
	return g.Held(stream)
}

// LeaseStoreCalls counts the lease store calls the service made so far, for
// every stream (its heartbeats serve them all); zero before Run. It is what
// the service costs in DynamoDB: see docs/cost.md.
func (s *Service) LeaseStoreCalls() kltype.LeaseStoreCalls {
	s.mu.Lock()
	g := s.group
	s.mu.Unlock()
	if g == nil {
		return kltype.LeaseStoreCalls{}
	}
	return g.LeaseStoreCalls()
}

// Run consumes every subscription until ctx is cancelled, then stops
// reading, drains in-flight handlers (bounded by the shutdown timeout),
// writes final checkpoints and releases every lease, so other instances take
// over at once. It returns nil after such a shutdown, also when ctx is
// cancelled while a start-up check is in flight.
//
// It returns an error at once for a configuration that cannot work: a
// missing stream (ErrStreamNotFound), denied access (ErrAccessDenied), a
// misconfigured store (leases.ErrMisconfigured, e.g. a missing table); each
// message names the resource. Run may be called once.
func (s *Service) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.run {
		s.mu.Unlock()
		return ErrRunning
	}
	s.run = true
	s.groupSet = make(chan struct{})
	subs := slices.Clone(s.subs)
	s.mu.Unlock()
	defer s.markGroupSet()
	if len(subs) == 0 {
		return fmt.Errorf("%w: Run with no subscription: call Subscribe first", ErrInvalidOption)
	}
	if s.cfg.storeDefaulted {
		s.log.Warn("kinesislease: no lease store given (WithLeaseStore): leases and checkpoints are kept in this process's memory; " +
			"other instances cannot see them, so each reads every shard, and a restart starts again from the start position: " +
			"safe only for a single instance that may re-read")
	}
	if err := s.preflight(ctx, subs); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) && errors.Is(err, context.Canceled) {
			// Stopped while a start-up check was in flight: a shutdown
			// like any other, before any lease was taken (the chaos run
			// sent SIGINT while the first ListShards was on its way).
			return nil
		}
		return err
	}
	s.setRunning(true)
	defer s.setRunning(false)
	return s.runGroup(ctx, subs)
}

// markGroupSet closes groupSet once (Run set the group, or returns).
func (s *Service) markGroupSet() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.groupSet:
	default:
		close(s.groupSet)
	}
}

func (s *Service) setRunning(r bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = r
}

// runGroup runs every subscription in one engine.Group.
func (s *Service) runGroup(ctx context.Context, subs []*subscription) error {
	c := s.cfg
	gc := engine.GroupConfig{
		Owner: c.owner, Store: c.store, Client: s.kin, Logger: s.log,
		Heartbeat: c.heartbeat, Timeout: c.timeout, MaxLeases: c.maxLeases,
		ShardSyncInterval: c.shardSync, ShutdownTimeout: c.shutdownTimeout,
		Hooks: c.hooks,
	}
	for _, sub := range subs {
		gc.Streams = append(gc.Streams, engine.StreamConfig{Stream: sub.stream, Start: sub.start, Worker: s.workerConfig(sub)})
	}
	g, err := engine.NewGroup(gc)
	if err != nil {
		// New and Subscribe checked every option: this is a bug.
		return fmt.Errorf("kinesislease: %w", err)
	}
	s.mu.Lock()
	s.group = g
	s.mu.Unlock()
	s.markGroupSet()
	s.log.Info("kinesislease: starting", "owner", c.owner, "incarnation", g.Incarnation(), "streams", len(subs), "store", fmt.Sprintf("%T", c.store))
	err = g.Run(ctx)
	s.log.Info("kinesislease: stopped", "owner", c.owner)
	var dup *engine.DuplicateOwnerError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &dup):
		return fmt.Errorf("%w: %w", ErrDuplicateOwner, err)
	}
	return err
}

// preflight checks the store and every stream (and dead-letter stream)
// before taking any lease. A check that fails for a reason that may pass
// (the network or an endpoint not ready yet, throttling, a timeout) is
// retried with backoff until ctx ends, each failure logged with what was
// checked; a missing resource, denied access or a misconfigured table fail
// at once.
func (s *Service) preflight(ctx context.Context, subs []*subscription) error {
	if ch, ok := s.cfg.store.(leases.Checker); ok {
		if err := s.startupCheck(ctx, "lease store", fmt.Sprintf("%T", s.cfg.store), ch.Check, func(err error) error { return err }); err != nil {
			return err
		}
	}
	return s.preflightSubs(ctx, subs)
}

// preflightSubs makes the start-up checks of subs: each stream listed, its
// consumer registered, its dead-letter stream listed.
func (s *Service) preflightSubs(ctx context.Context, subs []*subscription) error {
	for _, sub := range subs {
		err := s.startupCheck(ctx, "stream", sub.stream, func(ctx context.Context) error { return s.listOne(ctx, sub.stream) },
			func(err error) error { return explain(sub.stream, err) })
		if err != nil {
			return err
		}
		if sub.consumer != "" {
			if err := s.registerConsumer(ctx, sub); err != nil {
				return err
			}
		}
		if sub.deadLetterStream != "" {
			err := s.startupCheck(ctx, "dead-letter stream", sub.deadLetterStream, func(ctx context.Context) error { return s.listOne(ctx, sub.deadLetterStream) },
				func(err error) error { return explainDeadLetter(sub.stream, sub.deadLetterStream, err) })
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// registerConsumer finds or registers the stream consumer of sub
// (WithEnhancedFanOut) and waits until it is ACTIVE.
func (s *Service) registerConsumer(ctx context.Context, sub *subscription) error {
	fo, err := fanOutClient(s.kin, sub.stream)
	if err != nil {
		return err
	}
	c := &read.Consumer{Client: fo, Stream: sub.stream, Name: sub.consumer, Log: s.log.With("stream", sub.stream)}
	err = s.startupCheck(ctx, "stream consumer", sub.consumer, c.Register, func(err error) error { return explainConsumer(sub.stream, sub.consumer, err) })
	if err != nil {
		return err
	}
	sub.fanOut = c
	s.log.Info("kinesislease: reading with enhanced fan-out", "stream", sub.stream, "consumer", sub.consumer, "arn", c.ARN())
	return nil
}

// fanOutClient returns kin as the client enhanced fan-out needs, or an
// error naming the subscription to stream (Subscribe reports it).
func fanOutClient(kin Kinesis, stream string) (kinesisx.FanOut, error) {
	fo, ok := kin.(kinesisx.FanOut)
	if !ok {
		return nil, fmt.Errorf("%w: stream %q: WithEnhancedFanOut needs a Kinesis client with DescribeStreamSummary, RegisterStreamConsumer, DescribeStreamConsumer and SubscribeToShard (a *kinesis.Client); %T has not", ErrInvalidOption, stream, kin)
	}
	return fo, nil
}

// listOne lists one shard of stream: the cheapest call that shows the
// stream exists and may be read.
func (s *Service) listOne(ctx context.Context, stream string) error {
	in := &kinesis.ListShardsInput{MaxResults: aws.Int32(1)}
	in.StreamName, in.StreamARN = kinesisx.Fields(stream)
	_, err := s.kin.ListShards(ctx, in)
	return err
}

// Start-up checks are retried after startupBackoff, doubling up to
// maxStartupBackoff.
const (
	startupBackoff    = 500 * time.Millisecond
	maxStartupBackoff = 30 * time.Second
)

// startupCheck runs check until it succeeds, fails for good (a missing
// resource, denied access, a misconfigured table: explain's error at once)
// or ctx ends (the last failure, explained). what and name say what is
// checked, for the log and the error.
func (s *Service) startupCheck(ctx context.Context, what, name string, check func(context.Context) error, explainErr func(error) error) error {
	for attempt := 1; ; attempt++ {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || errors.Is(err, leases.ErrMisconfigured) || errors.Is(err, kltype.ErrConsumerLimit) || kinesisx.Permanent(err) {
			return startupError(what, name, explainErr(err))
		}
		delay := backoff.Jitter(backoff.Delay(attempt, startupBackoff, maxStartupBackoff))
		s.log.Warn("kinesislease: start-up check failed; retrying", "check", what, "name", name, "attempt", attempt, "delay", delay, "err", err)
		if backoff.Sleep(ctx, delay) != nil {
			return startupError(what, name, explainErr(err))
		}
	}
}

// startupError prefixes err with what failed at start, unless it already
// names it (explain's sentinel errors do).
func startupError(what, name string, err error) error {
	if errors.Is(err, ErrStreamNotFound) || errors.Is(err, ErrAccessDenied) || errors.Is(err, leases.ErrMisconfigured) || errors.Is(err, kltype.ErrConsumerLimit) ||
		strings.HasPrefix(err.Error(), "kinesislease:") {
		return err
	}
	return fmt.Errorf("kinesislease: %s %q: not reachable at start: %w", what, name, err)
}

// workerConfig returns the shard workers' configuration of sub.
func (s *Service) workerConfig(sub *subscription) engine.WorkerConfig {
	w := sub.worker
	w.Budget = s.budget
	w.DrainTimeout = s.cfg.shutdownTimeout
	w.Encoding = kinesiswire.Encoding(s.cfg.encoding)
	if sub.fanOut != nil {
		w.FanOut = &read.FanOutConfig{Consumer: sub.fanOut}
	}
	if sub.deadLetterStream != "" {
		w.Sink = streamSink(s.kin, sub.deadLetterStream)
	}
	return w
}
