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
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/budget"
	"github.com/kinesislease/kinesislease/internal/engine"
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
	// group runs every subscription of the running service; groupSet
	// (made by New) is closed once it is set, or when Run returns without
	// it.
	group    *engine.Group
	groupSet chan struct{}
	// runCtx is Run's context: a Subscribe while running obeys it.
	runCtx context.Context
	// running: Run passed its start-up checks and has not returned.
	running bool
	// budget bounds what every shard of the service holds fetched and not
	// yet handled.
	budget *budget.Budget
}

// New returns a Service whose Kinesis client is built from cfg (the same
// aws.Config the lease store is built from, so both reach one account and
// region). Invalid options are reported here, each error naming the option;
// Run reports none.
func New(cfg aws.Config, opts ...Option) (*Service, error) {
	c := config{shutdownTimeout: DefaultShutdownTimeout, balance: defaultBalance}
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
		c.client = kinesis.NewFromConfig(cfg, c.kinesisOpts...)
	}
	// The engine adds stream and owner to every line it logs.
	log := c.logger
	if c.app != "" {
		log = log.With("app", c.app, "version", c.version)
	}
	if c.budgetBytes == 0 {
		c.budgetBytes, c.budgetRecords = DefaultMemoryBudgetBytes, DefaultMemoryBudgetRecords
	}
	svc := &Service{cfg: c, log: log, kin: c.client, budget: budget.NewBudget(c.budgetBytes, c.budgetRecords), groupSet: make(chan struct{})}
	for _, h := range c.hooks {
		if hh, ok := h.(kltype.HookHealth); ok {
			hh.OnHealthSource(svc.Health)
		}
	}
	return svc, nil
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
// nil when the service is not running or has no such subscription. stream
// is the stream's name or ARN, or the lease key of a subscription given
// WithLeaseNamespace ("acct-b/orders").
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
