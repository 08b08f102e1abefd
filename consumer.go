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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/kinesiswire"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/kltype"
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
