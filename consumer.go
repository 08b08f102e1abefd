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
// records after the last checkpoint.
//
// Concurrency: handlers of different shards run concurrently; a handler of
// one shard is never called again before it returned.
package kinesislease

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
	"github.com/kinesislease/kinesislease/shard"
)

// Errors returned by New, Subscribe and Run; match them with errors.Is.
var (
	// ErrInvalidOption: an option's value cannot work; the message names it.
	ErrInvalidOption = errors.New("kinesislease: invalid option")
	// ErrDuplicateSubscription: the service already has a subscription to
	// the stream.
	ErrDuplicateSubscription = errors.New("kinesislease: stream already subscribed")
	// ErrStreamNotFound: a subscribed stream does not exist.
	ErrStreamNotFound = errors.New("kinesislease: stream not found")
	// ErrAccessDenied: the credentials may not call a Kinesis operation the
	// service needs.
	ErrAccessDenied = errors.New("kinesislease: access denied")
	// ErrRunning: Subscribe or Run on a service that is already running.
	ErrRunning = errors.New("kinesislease: service already running")
)

// Default lease settings. KCL's defaults are a 10s failover time and
// renewals every 3.3s; these match them, so a dead instance's shards move in
// about LeaseDuration plus one ScanInterval.
const (
	DefaultLeaseDuration   = 10 * time.Second
	DefaultRenewInterval   = DefaultLeaseDuration / 3
	DefaultShutdownTimeout = 30 * time.Second
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
	// coordinators of the running service, for Held and tests.
	coords map[string]*shard.Coordinator
}

type config struct {
	app, version    string
	owner           string
	store           leases.Store
	logger          *slog.Logger
	client          Kinesis
	leaseDuration   time.Duration
	renewInterval   time.Duration
	scanInterval    time.Duration
	shardSync       time.Duration
	shutdownTimeout time.Duration
	events          func(LeaseEvent)
	hooks           []Hook
	errs            []error
}

// Option configures a Service.
type Option interface{ applyService(*config) }

type serviceOption func(*config)

func (f serviceOption) applyService(c *config) { f(c) }

// WithApp names the application and its version: they prefix the default
// owner id and appear in logs.
func WithApp(name, version string) Option {
	return serviceOption(func(c *config) { c.app, c.version = name, version })
}

// WithOwner sets this instance's owner id, written in the lease rows it
// holds. It must be unique among the instances sharing a lease table. The
// default is app-hostname-pid-random, unique per process.
func WithOwner(id string) Option {
	return serviceOption(func(c *config) {
		if err := leases.ValidateOwner(id); err != nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithOwner(%q): %w", ErrInvalidOption, id, err))
		}
		c.owner = id
	})
}

// WithLeaseStore sets where leases and checkpoints live. The default is an
// in-memory store: one instance only, and checkpoints die with the process.
// Use leases/dynamo for a service of several instances.
func WithLeaseStore(s leases.Store) Option {
	return serviceOption(func(c *config) {
		if s == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithLeaseStore(nil)", ErrInvalidOption))
		}
		c.store = s
	})
}

// WithLogger sets the logger; the default is slog.Default(). At INFO an
// operator sees starts, lease moves and shutdown, never a line per record.
func WithLogger(l *slog.Logger) Option {
	return serviceOption(func(c *config) { c.logger = l })
}

// Kinesis is the part of *kinesis.Client the service uses: reading, and
// PutRecords for Publish and dead-letter streams.
type Kinesis interface {
	shard.Kinesis
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

var _ Kinesis = (*kinesis.Client)(nil)

// WithKinesisClient makes the service call client instead of a Kinesis
// client built from the aws.Config given to New.
func WithKinesisClient(client Kinesis) Option {
	return serviceOption(func(c *config) { c.client = client })
}

// WithLease sets the lease duration and renewal interval (defaults
// DefaultLeaseDuration and DefaultRenewInterval, as KCL's). Another
// instance takes a lease over once it has seen it unrenewed for duration;
// the holder stops handing records to handlers once its last renewal is older
// than 4/5 of duration. renew must be below that: a third of duration leaves
// room for two failed renewals. Shorter leases fail over faster and cost more
// DynamoDB writes (3600/renew per held shard per hour).
func WithLease(duration, renew time.Duration) Option {
	return serviceOption(func(c *config) {
		if duration <= 0 || renew <= 0 || renew >= duration-duration/5 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithLease(%v, %v): want 0 < renew < 4/5 of duration", ErrInvalidOption, duration, renew))
		}
		c.leaseDuration, c.renewInterval = duration, renew
	})
}

// WithScanInterval sets how often the rows of shards this instance does not
// hold are read, to find free and expired leases and balance (default: the
// lease duration, jittered). It costs one GetItem per such shard per scan.
func WithScanInterval(d time.Duration) Option {
	return serviceOption(func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithScanInterval(%v): must be positive", ErrInvalidOption, d))
		}
		c.scanInterval = d
	})
}

// WithShardSyncInterval sets how often ListShards runs to see splits and
// merges (default 60s; it also runs whenever a held shard ends).
func WithShardSyncInterval(d time.Duration) Option {
	return serviceOption(func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithShardSyncInterval(%v): must be positive", ErrInvalidOption, d))
		}
		c.shardSync = d
	})
}

// WithShutdownTimeout bounds the drain when Run's context is cancelled
// (default 30s): handlers still running then have their context cancelled,
// and the leases are released with the last acknowledged checkpoint.
func WithShutdownTimeout(d time.Duration) Option {
	return serviceOption(func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: WithShutdownTimeout(%v): must be positive", ErrInvalidOption, d))
		}
		c.shutdownTimeout = d
	})
}

// LeaseEventType tells what happened to a lease.
type LeaseEventType = shard.EventType

// Lease events.
const (
	LeaseAcquired = shard.Acquired // this instance took the lease
	LeaseReleased = shard.Released // handed over after a final checkpoint (we could still commit)
	LeaseLost     = shard.Lost     // another instance took it; nothing more was written
	ShardEnded    = shard.Ended    // the shard was read to its end; SHARD_END written
)

// LeaseEvent is a lease move seen by this instance.
type LeaseEvent = shard.Event

// WithLeaseEvents calls fn on every lease move of this instance. fn is called
// from the service's goroutines, possibly concurrently for different
// streams, and must return quickly.
func WithLeaseEvents(fn func(LeaseEvent)) Option {
	return serviceOption(func(c *config) { c.events = fn })
}

// New returns a Service whose Kinesis client is built from cfg (the same
// aws.Config the lease store is built from, so both reach one account and
// region). Invalid options are reported here, each error naming the option.
func New(cfg aws.Config, opts ...Option) (*Service, error) {
	c := config{
		leaseDuration:   DefaultLeaseDuration,
		renewInterval:   DefaultRenewInterval,
		shutdownTimeout: DefaultShutdownTimeout,
	}
	for _, o := range opts {
		if o == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: nil option", ErrInvalidOption))
			continue
		}
		o.applyService(&c)
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	if c.owner == "" {
		c.owner = defaultOwner(c.app)
	}
	if c.store == nil {
		c.store = memory.New()
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.client == nil {
		c.client = kinesis.NewFromConfig(cfg)
	}
	// The coordinators add stream and owner to every line they log.
	log := c.logger
	if c.app != "" {
		log = log.With("app", c.app, "version", c.version)
	}
	return &Service{cfg: c, log: log, kin: c.client, coords: map[string]*shard.Coordinator{}}, nil
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

// Held returns the shards of stream this instance holds now, sorted; nil
// when the service is not running or has no such subscription.
func (s *Service) Held(stream string) []string {
	s.mu.Lock()
	c := s.coords[stream]
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Held()
}

// Stats returns the lease store calls made so far for stream's leases.
func (s *Service) Stats(stream string) shard.Stats {
	s.mu.Lock()
	c := s.coords[stream]
	s.mu.Unlock()
	if c == nil {
		return shard.Stats{}
	}
	return c.Stats()
}

var streamName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,128}$`)
var streamARN = regexp.MustCompile(`^arn:aws[a-zA-Z-]*:kinesis:[a-z0-9-]+:\d{12}:stream/[a-zA-Z0-9_.-]{1,128}$`)

func validStream(stream string) error {
	if streamName.MatchString(stream) || streamARN.MatchString(stream) {
		return nil
	}
	return fmt.Errorf("%w: stream %q: want a stream name (1 to 128 of a-z, A-Z, 0-9, '_', '-', '.') or a stream ARN", ErrInvalidOption, stream)
}

// Run consumes every subscription until ctx is cancelled, then stops
// reading, drains in-flight handlers (bounded by the shutdown timeout),
// writes final checkpoints and releases every lease, so other instances take
// over at once. It returns nil after such a shutdown.
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
	subs := s.subs
	s.mu.Unlock()
	if len(subs) == 0 {
		return fmt.Errorf("%w: Run with no subscription: call Subscribe first", ErrInvalidOption)
	}
	if err := s.preflight(ctx, subs); err != nil {
		return err
	}
	coords := make([]*shard.Coordinator, len(subs))
	for i, sub := range subs {
		c, err := shard.NewCoordinator(s.coordinatorConfig(sub))
		if err != nil {
			return fmt.Errorf("%w: stream %q: %w", ErrInvalidOption, sub.stream, err)
		}
		coords[i] = c
	}
	s.mu.Lock()
	for i, sub := range subs {
		s.coords[sub.stream] = coords[i]
	}
	s.mu.Unlock()

	s.log.Info("kinesislease: starting", "owner", s.cfg.owner, "streams", len(subs))
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(coords))
	var wg sync.WaitGroup
	for i, c := range coords {
		wg.Go(func() {
			if err := c.Run(runCtx); err != nil {
				errs[i] = s.explain(subs[i].stream, err)
				cancel() // one subscription that cannot work stops the service
			}
		})
	}
	wg.Wait()
	s.log.Info("kinesislease: stopped", "owner", s.cfg.owner)
	return errors.Join(errs...)
}

// preflight checks the store and every stream before taking any lease.
func (s *Service) preflight(ctx context.Context, subs []*subscription) error {
	if ch, ok := s.cfg.store.(interface{ Check(context.Context) error }); ok {
		if err := ch.Check(ctx); err != nil {
			return err
		}
	}
	for _, sub := range subs {
		in := &kinesis.ListShardsInput{MaxResults: aws.Int32(1)}
		if shard.IsARN(sub.stream) {
			in.StreamARN = aws.String(sub.stream)
		} else {
			in.StreamName = aws.String(sub.stream)
		}
		if _, err := s.kin.ListShards(ctx, in); err != nil {
			return s.explain(sub.stream, err)
		}
	}
	return nil
}

// explain names the stream in errors a Kinesis call returned and maps them
// onto the package's sentinels.
func (s *Service) explain(stream string, err error) error {
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return fmt.Errorf("%w: stream %q does not exist (or is not in this account and region): create it, or subscribe to the right name: %w", ErrStreamNotFound, stream, err)
	case isAccessDenied(err):
		return fmt.Errorf("%w: stream %q: the credentials need kinesis:ListShards, kinesis:GetShardIterator and kinesis:GetRecords on the stream: %w", ErrAccessDenied, stream, err)
	}
	return err
}

func isAccessDenied(err error) bool {
	var api interface{ ErrorCode() string }
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException",
			"MissingAuthenticationTokenException", "ExpiredTokenException":
			return true
		}
	}
	return false
}

func (s *Service) coordinatorConfig(sub *subscription) shard.Config {
	c := s.cfg
	cfg := shard.Config{
		Stream:            sub.stream,
		Owner:             c.owner,
		Store:             c.store,
		Client:            s.kin,
		Logger:            s.log,
		Start:             sub.start,
		LeaseDuration:     c.leaseDuration,
		RenewInterval:     c.renewInterval,
		ScanInterval:      c.scanInterval,
		ShardSyncInterval: c.shardSync,
		ShutdownTimeout:   c.shutdownTimeout,
		Worker:            sub.worker,
		Hooks:             c.hooks,
	}
	if sub.deadLetterStream != "" {
		cfg.Worker.Sink = streamSink(s.kin, sub.deadLetterStream)
	}
	if c.events != nil {
		cfg.Events = func(e shard.Event) { c.events(e) }
	}
	return cfg
}
