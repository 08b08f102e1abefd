package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/engine/plan"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// Config configures a Coordinator: one stream, one owner.
type Config struct {
	Stream string // name or ARN
	Owner  string
	Store  leases.Store
	Client kinesisx.Reader
	Logger *slog.Logger
	// Start is where a shard without a checkpoint starts. A child of a
	// split or merge starts at its own beginning instead.
	Start kltype.StartPosition
	// LeaseDuration: a lease whose counter another instance sees unchanged
	// for this long is taken over. Default 10s.
	LeaseDuration time.Duration
	// RenewInterval: how often held leases are renewed. Default
	// LeaseDuration/3.
	RenewInterval time.Duration
	// FenceMargin: delivery stops once the last successful renewal was sent
	// more than LeaseDuration-FenceMargin ago. Default LeaseDuration/5.
	FenceMargin time.Duration
	// ScanInterval: how often the rows of shards this instance does not hold
	// are read, to find free and expired leases and balance (jittered by
	// ±10%). Default LeaseDuration.
	ScanInterval time.Duration
	// ShardSyncInterval: how often ListShards runs to see splits and merges.
	// Default 60s; it also runs whenever a held shard ends.
	ShardSyncInterval time.Duration
	// ShutdownTimeout bounds the drain on shutdown: in-flight handlers then
	// have their context cancelled. Default 30s.
	ShutdownTimeout time.Duration
	Worker          WorkerConfig
	// Events, if set, is told of lease moves (see Event).
	Events func(kltype.LeaseEvent)
	// Hooks are told of lease, shard, batch, record, checkpoint, throttle,
	// dead-letter and call events (see Hook).
	Hooks []kltype.Hook
}

// Coordinator keeps the leases of one stream for one owner and runs a
// worker per held shard.
type Coordinator struct {
	cfg Config
	h   *hooks
	log *slog.Logger

	reads, writes    atomic.Int64
	scanN, fullScanN atomic.Int64

	mu       sync.Mutex
	workers  map[string]*worker // by shard id
	shards   map[string]types.Shard
	order    []string // shard ids in ListShards order
	lv       *liveness
	rnd      *rand.Rand      // the planner's random source (the global one)
	pending  map[string]bool // shards we asked to be handed over to us
	lastSync time.Time
	resync   bool
	// handedOver: shards this instance handed over on request, and when.
	// It does not take them back for a lease duration: the requester takes
	// them at its next renewal tick, and this instance's own scan (which
	// does not count a requester that holds nothing) would win that race
	// every time if it scans faster.
	handedOver map[string]time.Time
}

// NewCoordinator validates cfg, fills in defaults and returns a Coordinator.
func NewCoordinator(cfg Config) (*Coordinator, error) {
	switch {
	case cfg.Stream == "":
		return nil, errors.New("shard: empty stream")
	case cfg.Owner == "":
		return nil, errors.New("shard: empty owner")
	case cfg.Store == nil:
		return nil, errors.New("shard: no lease store")
	case cfg.Client == nil:
		return nil, errors.New("shard: no Kinesis client")
	case cfg.Worker.Handler == nil && (cfg.Worker.Batch == nil || cfg.Worker.Batch.Handler == nil):
		return nil, errors.New("shard: no handler")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 10 * time.Second
	}
	if cfg.RenewInterval <= 0 {
		cfg.RenewInterval = cfg.LeaseDuration / 3
	}
	if cfg.FenceMargin <= 0 {
		cfg.FenceMargin = cfg.LeaseDuration / 5
	}
	if cfg.ScanInterval <= 0 {
		cfg.ScanInterval = cfg.LeaseDuration
	}
	if cfg.ShardSyncInterval <= 0 {
		cfg.ShardSyncInterval = time.Minute
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.RenewInterval >= cfg.LeaseDuration-cfg.FenceMargin {
		return nil, fmt.Errorf("shard: renew interval %v must be shorter than the lease duration %v less the fence margin %v",
			cfg.RenewInterval, cfg.LeaseDuration, cfg.FenceMargin)
	}
	cfg.Worker.defaults()
	h := newHooks(cfg.Hooks)
	cfg.Store = h.wrapStore(cfg.Store)
	cfg.Client = h.wrapKinesis(cfg.Client)
	return &Coordinator{
		h:       h,
		cfg:     cfg,
		log:     cfg.Logger.With("stream", cfg.Stream, "owner", cfg.Owner),
		workers: map[string]*worker{},
		lv:      newLiveness(cfg.Owner, cfg.LeaseDuration),
		rnd:     rand.New(globalSource{}),
		pending: map[string]bool{},

		handedOver: map[string]time.Time{},
	}, nil
}

// Stats returns the store calls made so far.
func (c *Coordinator) Stats() kltype.Stats {
	return kltype.Stats{Reads: c.reads.Load(), Writes: c.writes.Load(), Scans: c.scanN.Load(), FullScans: c.fullScanN.Load()}
}

// Held returns the shard ids this instance holds now, sorted.
func (c *Coordinator) Held() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.workers))
	for id := range c.workers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Run coordinates until ctx ends, then drains every worker (bounded by
// ShutdownTimeout), writes final checkpoints and releases the leases. It
// returns nil after a shutdown, or an error no retry can cure (the stream
// does not exist, access denied, a misconfigured store).
func (c *Coordinator) Run(ctx context.Context) error {
	err := c.loop(ctx)
	c.shutdown()
	return err
}

func (c *Coordinator) loop(ctx context.Context) error {
	renew := time.NewTicker(c.cfg.RenewInterval)
	defer renew.Stop()
	scan := time.NewTimer(0)
	defer scan.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-renew.C:
			if err := c.transient(ctx, c.renewAll(ctx), "taking a lease handed over failed; retrying"); err != nil || ctx.Err() != nil {
				return err
			}
		case <-scan.C:
			if err := c.transient(ctx, c.scan(ctx), "lease scan failed; retrying"); err != nil || ctx.Err() != nil {
				return err
			}
			scan.Reset(backoff.Jitter(c.cfg.ScanInterval))
		}
		ended, rewound, err := c.reap()
		if err != nil {
			return err
		}
		for _, w := range rewound {
			c.startWorker(ctx, w.shard, w.lease) // read on from the rewound checkpoint
		}
		if ended {
			// A held shard ended: its children may start now.
			scan.Reset(0)
		}
	}
}

// globalSource is math/rand/v2's global source, as a rand.Source: the
// planner takes its randomness as an input.
type globalSource struct{}

func (globalSource) Uint64() uint64 { return rand.Uint64() }

// transient returns err if it means the configuration cannot work; any
// other error (a transient store error, or the cancellation of ctx) must not
// end Run with an error: it is logged with msg, unless ctx ended, and nil
// returned.
func (c *Coordinator) transient(ctx context.Context, err error, msg string) error {
	switch {
	case err == nil, ctx.Err() != nil:
		return nil
	case fatal(err):
		return err
	}
	c.log.Warn("kinesislease: "+msg, "err", err)
	return nil
}

// renewAll renews every held lease. A lease found lost stops its worker at
// once; one whose holder was asked for a handoff is drained and released.
func (c *Coordinator) renewAll(ctx context.Context) error {
	c.mu.Lock()
	ws := make([]*worker, 0, len(c.workers))
	for _, w := range c.workers {
		ws = append(ws, w)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		select {
		case <-w.done:
			continue
		default:
		}
		wg.Go(func() {
			l, err := w.lease.renew(ctx)
			c.writes.Add(1)
			switch {
			case err == nil:
				switch {
				case l.HandoffTo != "":
					c.log.Info("kinesislease: handing lease over", "shard", w.shard, "to", l.HandoffTo)
					c.mu.Lock()
					c.handedOver[w.shard] = time.Now()
					c.mu.Unlock()
					w.stop()
				case l.RewindTo.Sequence != "" && !w.stopping():
					c.log.Info("kinesislease: rewinding", "shard", w.shard, "from", l.Checkpoint.Sequence, "to", l.RewindTo.Sequence)
					w.rewind()
				}
			case errors.Is(err, errLost):
				c.log.Warn("kinesislease: lease lost", "shard", w.shard, "new_owner", l.Owner)
				w.kill()
			case ctx.Err() != nil:
			default:
				c.log.Warn("kinesislease: renewal failed", "shard", w.shard, "err", err)
			}
		})
	}
	wg.Wait()
	// Look again at shards we asked to be handed over: they are free soon.
	if len(c.pending) > 0 {
		return c.takePending(ctx)
	}
	return nil
}

// reap forgets finished workers, reports whether one of them ended its
// shard, returns those that stopped to apply a rewind (their lease still
// held) and a permanent read error.
func (c *Coordinator) reap() (ended bool, rewound []*worker, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, w := range c.workers {
		select {
		case <-w.done:
		default:
			continue
		}
		delete(c.workers, id)
		switch {
		case w.err != nil:
			return ended, rewound, w.err
		case w.rewound:
			rewound = append(rewound, w) // still ours: read on from the new checkpoint
		case w.ended:
			c.log.Info("kinesislease: shard ended", "shard", id)
			c.resync = true
			ended = true
			c.emit(kltype.ShardEnded, id, w.lease.current().Checkpoint, "")
		case w.lease.takenOver():
			// A released lease is fenced too (isLost), with the row's owner
			// empty: only a lease another owner took is lost.
			c.emit(kltype.LeaseLost, id, w.lease.current().Checkpoint, "")
		default:
			c.emit(kltype.LeaseReleased, id, w.lease.current().Checkpoint, "")
		}
	}
	return ended, rewound, nil
}

// emit tells the Events func and the hooks of a lease event. cp is the
// checkpoint at the event; from the previous owner of a taken-over lease.
func (c *Coordinator) emit(t kltype.LeaseEventType, shardID string, cp leases.Checkpoint, from string) {
	emit(c.h, c.cfg.Events, t, kltype.LeaseInfo{Stream: c.cfg.Stream, ShardID: shardID, Owner: c.cfg.Owner, Checkpoint: cp, From: from})
}

// listShards refreshes the shard list.
func (c *Coordinator) listShards(ctx context.Context) error {
	shards, err := kinesisx.ListShards(ctx, c.cfg.Client, c.cfg.Stream)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shards, c.order = shardMap(shards, c.order)
	c.lastSync = time.Now()
	c.resync = false
	return nil
}

// scan reads the row of every shard this instance does not hold, creates
// missing rows, takes free and expired leases up to the fair share, and asks
// for at most one handoff from an owner above its share. Which rows it reads
// is liveness's; what to take and ask for is the planner's (package plan).
func (c *Coordinator) scan(ctx context.Context) error {
	if c.shards == nil || c.resync || time.Since(c.lastSync) >= c.cfg.ShardSyncInterval {
		if err := c.listShards(ctx); err != nil {
			return err
		}
	}
	c.mu.Lock()
	order := slices.Clone(c.order)
	held := map[string]bool{}
	for id := range c.workers {
		held[id] = true
	}
	c.mu.Unlock()

	rows, full, now, err := c.readScan(ctx, order, held)
	if err != nil {
		return err
	}
	d := plan.Plan(c.planInput(order, held, rows, now))
	c.scanN.Add(1)
	if full {
		c.fullScanN.Add(1)
		c.lv.settle(d.Live, d.Stable)
	}
	taken := 0
	for _, id := range d.Take {
		if taken >= d.Want {
			break
		}
		if c.take(ctx, id, rows[id]) {
			taken++
		}
	}
	return c.requestHandoff(ctx, d.Handoff(taken, c.rnd), rows)
}

// readScan reads the rows of a scan (see liveness.begin) and returns every
// row of the shards of order not in held, whether the scan was full, and
// the time of its last read. Rows not read keep their last observation.
func (c *Coordinator) readScan(ctx context.Context, order []string, held map[string]bool) (rows map[string]leases.Lease, full bool, now time.Time, err error) {
	s := c.lv.begin(order, held)
	rows, full = s.rows, s.full
	if err = c.readRows(ctx, s.read, rows); err != nil {
		return nil, false, now, err
	}
	now = time.Now()
	if !full {
		if c.lv.moved(s.read, now) {
			full = true // something moved: look at everything
			if err = c.readRows(ctx, s.unread, rows); err != nil {
				return nil, false, now, err
			}
			now = time.Now()
		} else {
			c.lv.recall(s.unread, rows)
		}
	}
	c.lv.retain(func(id string) bool { _, ok := c.shards[id]; return ok })
	return rows, full, now, nil
}

// planInput is what the planner is told at a scan: the shards, the held
// ones, the rows of the others (with liveness's verdict at now) and the
// shards recently handed over.
func (c *Coordinator) planInput(order []string, held map[string]bool, rows map[string]leases.Lease, now time.Time) plan.Input {
	in := plan.Input{
		Self:    c.cfg.Owner,
		Shards:  make([]plan.Shard, 0, len(order)),
		Held:    held,
		Rows:    make(map[string]plan.Row, len(rows)),
		Pending: len(c.pending) > 0,
		Rand:    c.rnd,
	}
	for _, id := range order {
		in.Shards = append(in.Shards, plan.Shard{ID: id, Parents: parentIDs(c.shards[id])})
	}
	for id, l := range rows {
		expired := c.lv.expired(id, now)
		if expired && l.Incarnation != "" {
			// Held under the membership protocol: its holder heartbeats and
			// renews nothing here. Never take it by expires_at.
			c.log.Error("kinesislease: a lease row is held by an instance of the membership protocol: run every instance sharing the table with the same protocol (WithLeaseProtocol)",
				"shard", id, "holder", l.Owner)
			expired = false
		}
		in.Rows[id] = plan.Row{
			Owner:     l.Owner,
			AtEnd:     l.Checkpoint.Sequence == leases.ShardEnd,
			Rewinding: !l.RewindTo.IsZero(),
			Expired:   expired,
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, at := range c.handedOver {
		if now.Sub(at) >= c.cfg.LeaseDuration {
			delete(c.handedOver, id) // the requester had its chance
			continue
		}
		if in.HandedOver == nil {
			in.HandedOver = map[string]bool{}
		}
		in.HandedOver[id] = true
	}
	return in
}

// requestHandoff asks r.Owner to hand r.Shard over, unless r is zero.
func (c *Coordinator) requestHandoff(ctx context.Context, r plan.Request, rows map[string]leases.Lease) error {
	if r.Owner == "" {
		return nil
	}
	l, err := c.cfg.Store.RequestHandoff(ctx, rows[r.Shard], c.cfg.Owner)
	c.writes.Add(1)
	if err != nil {
		if errors.Is(err, leases.ErrConflict) {
			return nil
		}
		return err
	}
	c.log.Info("kinesislease: asked for a lease", "shard", r.Shard, "from", r.Owner)
	c.lv.requested(r.Shard, l) // our request is no sign of the holder's life
	c.pending[r.Shard] = true
	return nil
}

// readRows reads the rows of ids concurrently (a few at a time) into rows
// and tells liveness what it saw.
func (c *Coordinator) readRows(ctx context.Context, ids []string, rows map[string]leases.Lease) error {
	got := make([]leases.Lease, len(ids))
	at := make([]time.Time, len(ids))
	errs := make([]error, len(ids))
	sem := make(chan struct{}, readConcurrency)
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			got[i], errs[i] = c.row(ctx, id)
			// The write that produced this version was sent before the read
			// returned: counting the lease from here never starts it before
			// the holder's own count (from the send of its renewal).
			at[i] = time.Now()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, id := range ids {
		rows[id] = got[i]
		c.lv.observe(id, got[i], at[i])
	}
	return nil
}

// row reads (creating it if missing) the row of shard id.
func (c *Coordinator) row(ctx context.Context, id string) (leases.Lease, error) {
	key := leases.Key{Stream: c.cfg.Stream, Shard: id}
	l, err := c.cfg.Store.Get(ctx, key)
	c.reads.Add(1)
	if errors.Is(err, leases.ErrNotFound) {
		l, err = c.cfg.Store.Create(ctx, key)
		c.writes.Add(1)
		if errors.Is(err, leases.ErrConflict) {
			l, err = c.cfg.Store.Get(ctx, key)
			c.reads.Add(1)
		}
	}
	return l, err
}

// parentIDs returns the ids of the parents of s (none, one, or two for a
// merge).
func parentIDs(s types.Shard) []string {
	var ids []string
	for _, p := range []*string{s.ParentShardId, s.AdjacentParentShardId} {
		if id := aws.ToString(p); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// takePending takes the leases we asked for once their holder released them.
func (c *Coordinator) takePending(ctx context.Context) error {
	for id := range c.pending {
		c.mu.Lock()
		_, running := c.workers[id]
		c.mu.Unlock()
		if running {
			// Taken meanwhile by a scan: taking it again would start a
			// second worker and orphan the first.
			delete(c.pending, id)
			continue
		}
		l, err := c.row(ctx, id)
		if err != nil {
			return err
		}
		switch {
		case l.Checkpoint.Sequence == leases.ShardEnd:
			delete(c.pending, id) // the holder read it to its end: nothing left to take
		case !l.Held():
			delete(c.pending, id)
			c.take(ctx, id, l)
		case l.HandoffTo != c.cfg.Owner:
			delete(c.pending, id) // the holder moved on, or someone else asked
		}
	}
	return nil
}

// take takes the lease of shard id from the row as seen, and starts its
// worker. It reports whether it did.
func (c *Coordinator) take(ctx context.Context, id string, seen leases.Lease) bool {
	sent := mono()
	l, err := c.cfg.Store.Take(ctx, seen, c.cfg.Owner, c.cfg.LeaseDuration)
	c.writes.Add(1)
	if err != nil {
		if !errors.Is(err, leases.ErrConflict) && ctx.Err() == nil {
			c.log.Warn("kinesislease: taking lease failed", "shard", id, "err", err)
		}
		c.lv.forget(id)
		return false
	}
	c.lv.forget(id)
	h := newHeldLease(c.cfg.Store, l, sent, c.cfg.LeaseDuration, c.cfg.LeaseDuration-c.cfg.FenceMargin)
	if l.RewindTo.Sequence != "" {
		// An operator's rewind is pending: apply it before reading.
		if l, err = h.applyRewind(ctx); err != nil {
			c.log.Warn("kinesislease: applying a pending rewind failed", "shard", id, "err", err)
			return false
		}
		c.log.Info("kinesislease: rewind applied", "shard", id, "seq", l.Checkpoint.Sequence)
	}
	if seen.Owner != "" && seen.Owner != c.cfg.Owner {
		c.log.Info("kinesislease: lease taken over", "shard", id, "from", seen.Owner, "seq", l.Checkpoint.Sequence)
	} else {
		c.log.Info("kinesislease: lease acquired", "shard", id, "seq", l.Checkpoint.Sequence)
	}
	from := ""
	if seen.Owner != c.cfg.Owner {
		from = seen.Owner
	}
	// Acquired before the worker starts: hooks see a lease acquired before
	// its shard started and any record of it handled.
	c.emit(kltype.LeaseAcquired, id, l.Checkpoint, from)
	c.startWorker(ctx, id, h)
	return true
}

// startWorker starts reading shard id, held by h, from its checkpoint.
func (c *Coordinator) startWorker(ctx context.Context, id string, h *heldLease) {
	start := startAt(c.cfg.Start, c.shards, id, h.current().Checkpoint)
	w := newWorker(ctx, &c.cfg.Worker, c.log, c.cfg.Client, c.cfg.Stream, id, start, h)
	w.h = c.h
	w.proc.OnDeadLetter = c.h.deadLettered
	c.mu.Lock()
	c.workers[id] = w
	c.mu.Unlock()
	go w.run()
}

// shutdown drains every worker, bounded by ShutdownTimeout, renewing their
// leases meanwhile, and waits for their releases.
func (c *Coordinator) shutdown() {
	ws := stopAll(&c.mu, c.workers)
	if len(ws) == 0 {
		return
	}
	drain(c.log, ws, c.cfg.ShutdownTimeout, c.cfg.RenewInterval, func() {
		// Draining workers keep their leases until they release them.
		for _, w := range ws {
			select {
			case <-w.done:
			default:
				rctx, cancel := context.WithTimeout(context.Background(), c.cfg.RenewInterval)
				if _, err := w.lease.renew(rctx); err == nil {
					c.writes.Add(1)
				}
				cancel()
			}
		}
	})
	_, rewound, _ := c.reap()
	for _, w := range rewound {
		// Rewound just as we stop: hand the lease over at its new checkpoint.
		rctx, cancel := context.WithTimeout(context.Background(), c.cfg.RenewInterval)
		if err := w.lease.release(rctx, leases.Checkpoint{}); err == nil {
			c.emit(kltype.LeaseReleased, w.shard, w.lease.current().Checkpoint, "")
		}
		cancel()
	}
	c.log.Info("kinesislease: stopped")
}
