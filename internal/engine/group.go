package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/engine/plan"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// DuplicateOwnerError: another process heartbeats with this instance's
// owner id and does not leave (Replaced false), or took this instance's
// membership entry over (Replaced true).
type DuplicateOwnerError struct {
	Owner       string
	Incarnation string // the other process's
	Replaced    bool
}

func (e *DuplicateOwnerError) Error() string {
	if e.Replaced {
		return fmt.Sprintf("owner %q: another process (incarnation %s) took over this instance's membership entry; give each instance its own owner id", e.Owner, e.Incarnation)
	}
	return fmt.Sprintf("owner %q: another process (incarnation %s) keeps heartbeating with it in the lease table; give each instance its own owner id", e.Owner, e.Incarnation)
}

// Defaults of the membership protocol. A heartbeat every 1.25s costs one
// write (one WCU while the membership row stays under 1 KB) per instance:
// 2,880 an hour. The timeout tolerates two failed heartbeats in a row: after
// a failure the next attempt comes half an interval later, so the third
// attempt is sent about 3.75s after the last success at worst, before the
// fence (timeout minus margin: 4.17s).
const (
	DefaultHeartbeat   = 1250 * time.Millisecond
	DefaultTimeout     = 5 * time.Second
	DefaultFenceMargin = time.Second
	// DefaultReconcile: how often a holder re-reads the rows it holds (one
	// GetItem per held shard), to see rows that vanished or were rewound
	// while it wrote nothing. Requests reach it sooner through its
	// membership entry's Notice.
	DefaultReconcile = 5 * time.Minute
	// LegacyRowTimeout: how long a row of the retired per-row renewal
	// protocol (an owner and no incarnation) must be seen unchanged before
	// it is taken. That protocol's holders renewed every lease duration/3
	// at most (10s by default), so an unchanged row for a minute has no
	// live holder.
	LegacyRowTimeout = time.Minute
)

// StreamConfig is one subscription of a Group.
type StreamConfig struct {
	Stream string // name or ARN
	Start  kltype.StartPosition
	Worker WorkerConfig
}

// GroupConfig configures a Group: every subscription of one instance, under
// the membership protocol.
type GroupConfig struct {
	Owner   string
	Store   leases.Store // must implement leases.Membership
	Client  kinesisx.Reader
	Logger  *slog.Logger
	Streams []StreamConfig
	// Heartbeat is the interval between heartbeats (jittered ±10%).
	Heartbeat time.Duration
	// Timeout: a member whose heartbeat is seen unchanged this long on this
	// instance's clock is dead; its leases are taken.
	Timeout time.Duration
	// FenceMargin: this instance delivers only while its last successful
	// heartbeat was sent less than Timeout-FenceMargin ago.
	FenceMargin time.Duration
	// MaxLeases caps the leases this instance holds (0: no cap).
	MaxLeases int
	// ShardSyncInterval: how often ListShards runs (also when a shard ends).
	ShardSyncInterval time.Duration
	// ShutdownTimeout bounds the drain on shutdown.
	ShutdownTimeout time.Duration
	// Reconcile: how often held rows are re-read.
	Reconcile time.Duration
	// FailureBackoff is the first wait before a shard or stream that
	// failed for good (access denied, a checkpoint not in its shard, the
	// stream gone) is tried again; it doubles with each failure in a row,
	// up to MaxFailureBackoff. Defaults 30s and 10 minutes.
	FailureBackoff, MaxFailureBackoff time.Duration
	Events                            func(kltype.LeaseEvent)
	Hooks                             []kltype.Hook
}

// unit names one shard of one stream.
type unit = plan.Unit

// Group keeps the leases of every stream of one instance under the
// membership protocol: it heartbeats in its membership row, watches the
// others', plans the assignment of all the shards of all its streams over
// the live members, takes what the plan gives it and releases what the plan
// gives others, and runs a worker per held shard.
type Group struct {
	cfg   GroupConfig
	mem   leases.Membership
	store leases.Store
	h     *hooks
	log   *slog.Logger
	inc   string
	row   int

	fence atomic.Int64 // mono() after which nothing may be delivered
	hb    int64        // the last heartbeat value written
	// fencedSince is mono() when this instance found itself fenced; 0 when
	// it is not.
	fencedSince int64

	streams map[string]*streamState
	obs     map[string]*memberObs // by owner + "\x00" + incarnation
	view    map[string]leases.Member

	mu      sync.Mutex
	workers map[unit]*worker
	// orphans are rows that may still name this incarnation although it
	// runs no worker for them (lost at a fence): each is taken afresh if the
	// plan gives it to this instance, else released, so that the member the
	// plan gives it to, seeing this instance alive, need not wait for it.
	orphans map[unit]string // the incarnation the row may name

	lastAssign    map[unit]string
	sameRounds    int
	rounds        int
	lastReconcile time.Time
	notice        int64  // our entry's Notice as last seen
	ended         int64  // shards this instance read to their end
	started       bool   // the first heartbeat landed
	needNewInc    bool   // fenced: go on as a new incarnation before taking anything
	nextInc       string // that new incarnation, once chosen
	// nextIncSent is mono() when the first attempt to write nextInc's
	// entry was sent: the earliest it can have landed, so the earliest
	// others can have started timing it. silentFence is the fence counted
	// from that send, for the current incarnation while none of its
	// heartbeats was answered yet (adopted after its ReplaceMember's answer
	// was lost); 0 otherwise.
	nextIncSent, silentFence int64
	hbFailed                 bool        // the last round's heartbeat failed
	viewComplete             bool        // every membership row was read at least once
	ready                    atomic.Bool // joined, with every membership row read: for Health
	// healthMu guards the streams' failed and listing for Health: the
	// round's goroutine, their only writer, takes it to write them.
	healthMu sync.Mutex

	stats groupStats
}

type streamState struct {
	cfg StreamConfig
	// key is the stream's identity in the lease table: its name, however
	// it was subscribed (a name or an ARN, cfg.Stream, used for the calls
	// to Kinesis). Units, rows and the plan use it.
	key      string
	log      *slog.Logger
	shards   map[string]types.Shard
	order    []string
	lastSync time.Time
	resync   bool
	rows     map[string]rowState // what this instance last read or wrote, by shard id
	legacy   map[string]legacyObs
	// failed holds the shards set aside after failing for good, by shard
	// id; listing is the stream's own (ListShards failed for good).
	failed  map[string]*failure
	listing failure
}

// failure is a shard or stream set aside after failing for good: it is
// tried again at until.
type failure struct {
	n     int // failures in a row
	until time.Time
	err   error
}

// waiting reports whether f still sets its shard or stream aside.
func (f *failure) waiting(now time.Time) bool { return f != nil && now.Before(f.until) }

type rowState struct {
	lease   leases.Lease
	missing bool // the row did not exist when read
}

// memberObs is what this instance last saw of one incarnation, and since
// when on its own clock it has seen it unchanged.
// legacyObs is a per-row row as first seen with its write token.
type legacyObs struct {
	token string
	since time.Time
}

type memberObs struct {
	m leases.Member
	// since is when the read that first showed this heartbeat value
	// returned; confirm is when the latest read that still showed it (or,
	// for an absent incarnation, a read of its row that did not show it)
	// was sent. The incarnation is dead once confirm-since >= Timeout.
	since, confirm int64
	absent         bool
	announced      bool // this instance tried to mark it leaving (announceDead)
}

type groupStats struct {
	reads, writes, heartbeats, memberReads atomic.Int64
}

// NewGroup validates cfg and returns a Group.
func NewGroup(cfg GroupConfig) (*Group, error) {
	mem, ok := cfg.Store.(leases.Membership)
	switch {
	case cfg.Owner == "":
		return nil, errors.New("engine: empty owner")
	case cfg.Store == nil:
		return nil, errors.New("engine: no lease store")
	case !ok:
		return nil, fmt.Errorf("engine: lease store %T does not implement leases.Membership", cfg.Store)
	case cfg.Client == nil:
		return nil, errors.New("engine: no Kinesis client")
	case len(cfg.Streams) == 0:
		return nil, errors.New("engine: no stream")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.FenceMargin <= 0 {
		cfg.FenceMargin = cfg.Timeout / 6
	}
	// A heartbeat answered before its deadline (half an interval) was
	// applied before the answer came: the margin must cover that deadline,
	// or a taker's read sent after the fence could miss a heartbeat the
	// holder counts.
	cfg.FenceMargin = max(cfg.FenceMargin, cfg.Heartbeat/2+cfg.Heartbeat/10)
	if cfg.ShardSyncInterval <= 0 {
		cfg.ShardSyncInterval = time.Minute
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.Reconcile <= 0 {
		cfg.Reconcile = DefaultReconcile
	}
	if cfg.FailureBackoff <= 0 {
		cfg.FailureBackoff = 30 * time.Second
	}
	if cfg.MaxFailureBackoff < cfg.FailureBackoff {
		cfg.MaxFailureBackoff = max(10*time.Minute, cfg.FailureBackoff)
	}
	if cfg.Heartbeat >= cfg.Timeout-cfg.FenceMargin {
		return nil, fmt.Errorf("engine: heartbeat interval %v must be shorter than the timeout %v less the fence margin %v",
			cfg.Heartbeat, cfg.Timeout, cfg.FenceMargin)
	}
	h := newHooks(cfg.Hooks)
	g := &Group{
		cfg: cfg, h: h, inc: rand.Text()[:10], row: leases.MemberRow(cfg.Owner),
		streams: map[string]*streamState{}, obs: map[string]*memberObs{}, view: map[string]leases.Member{},
		workers: map[unit]*worker{}, orphans: map[unit]string{},
		log: cfg.Logger.With("owner", cfg.Owner),
	}
	g.store = h.wrapStore(&countingStore{Store: cfg.Store, mem: mem, s: &g.stats})
	g.mem = g.store.(leases.Membership)
	cfg.Client = h.wrapKinesis(cfg.Client)
	g.cfg.Client = cfg.Client
	for i := range cfg.Streams {
		sc := cfg.Streams[i]
		if sc.Worker.Handler == nil && (sc.Worker.Batch == nil || sc.Worker.Batch.Handler == nil) {
			return nil, fmt.Errorf("engine: stream %q: no handler", sc.Stream)
		}
		sc.Worker.defaults()
		key := kinesisx.Name(sc.Stream)
		if prev, dup := g.streams[key]; dup {
			return nil, fmt.Errorf("engine: stream %q subscribed twice (as %q and %q)", key, prev.cfg.Stream, sc.Stream)
		}
		g.streams[key] = &streamState{cfg: sc, key: key, log: g.log.With("stream", sc.Stream), rows: map[string]rowState{}, legacy: map[string]legacyObs{}, failed: map[string]*failure{}}
	}
	g.fence.Store(fenced)
	return g, nil
}

// Incarnation returns this process's incarnation id.
func (g *Group) Incarnation() string { return g.inc }

// Held returns the shard ids of stream this instance holds now, sorted: the
// shards it reads under a lease it can trust (not past its fence).
func (g *Group) Held(stream string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ids []string
	for u, w := range g.workers {
		if u.Stream == kinesisx.Name(stream) && w.lease.valid() {
			ids = append(ids, u.Shard)
		}
	}
	slices.Sort(ids)
	return ids
}

// Health returns a snapshot of the instance (see kltype.Health). It may be
// called from any goroutine while Run runs.
func (g *Group) Health() kltype.Health {
	h := kltype.Health{Owner: g.cfg.Owner, Ready: g.ready.Load(), Live: g.ready.Load() && mono() < g.fence.Load()}
	g.mu.Lock()
	shards := map[string][]kltype.ShardHealth{}
	for u, w := range g.workers {
		sh := kltype.ShardHealth{ShardID: u.Shard, Reading: w.lease.valid() && !w.stopping(), MillisBehindLatest: w.lag.Load()}
		if e := w.readErr.Load(); e != nil {
			sh.Err = *e
		}
		shards[u.Stream] = append(shards[u.Stream], sh)
	}
	g.mu.Unlock()
	g.healthMu.Lock()
	defer g.healthMu.Unlock()
	for _, sc := range g.cfg.Streams {
		st := g.streams[kinesisx.Name(sc.Stream)]
		sh := kltype.StreamHealth{Stream: sc.Stream, Shards: shards[st.key]}
		if st.listing.n > 0 {
			sh.Err, sh.RetryAt = st.listing.err, st.listing.until
		}
		for id, f := range st.failed {
			if !slices.ContainsFunc(sh.Shards, func(x kltype.ShardHealth) bool { return x.ShardID == id }) {
				sh.Shards = append(sh.Shards, kltype.ShardHealth{ShardID: id, MillisBehindLatest: -1, Err: f.err, RetryAt: f.until})
			}
		}
		slices.SortFunc(sh.Shards, func(a, b kltype.ShardHealth) int { return cmpString(a.ShardID, b.ShardID) })
		h.Streams = append(h.Streams, sh)
	}
	return h
}

// Stats returns the store calls made so far: lease rows and membership rows.
func (g *Group) Stats() kltype.Stats {
	return kltype.Stats{
		Reads:      g.stats.reads.Load() + g.stats.memberReads.Load(),
		Writes:     g.stats.writes.Load() + g.stats.heartbeats.Load(),
		Heartbeats: g.stats.heartbeats.Load(), MemberReads: g.stats.memberReads.Load(),
	}
}

// Run coordinates until ctx ends, then drains every worker (bounded by
// ShutdownTimeout, heartbeating meanwhile), writes final checkpoints,
// releases the leases and removes this instance's membership entry. It
// returns nil after a shutdown, a *DuplicateOwnerError when another process
// with the same owner id keeps heartbeating, or a misconfigured store
// (leases.ErrMisconfigured). A shard or stream failing for good does not
// end it: that one is set aside and tried again later (see fail).
func (g *Group) Run(ctx context.Context) error {
	if err := g.join(ctx); err != nil {
		return err
	}
	err := g.loop(ctx)
	g.shutdown()
	return err
}

// join writes this incarnation's first heartbeat. An entry of another
// incarnation of the same owner is waited for (up to ShutdownTimeout) to
// leave, or replaced once seen unchanged for a whole Timeout.
func (g *Group) join(ctx context.Context) error {
	wait := max(g.cfg.ShutdownTimeout, 2*g.cfg.Timeout)
	var (
		seen            leases.Member
		seenAt, firstAt time.Time
		changed, failed bool
	)
	for {
		err := g.heartbeat(ctx)
		var conflict *leases.MemberConflictError
		switch {
		case err == nil:
			g.started = true
			if failed {
				// An earlier attempt may have landed unanswered, and others
				// may have seen this incarnation go silent since: start
				// afresh as a new one before taking anything.
				g.needNewInc = true
			}
			return nil
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &conflict):
			cur := conflict.Current
			now := time.Now()
			if cur.Owner == "" {
				continue // gone meanwhile
			}
			if cur.Leaving || (cur == seen && now.Sub(seenAt) >= g.cfg.Timeout) {
				// Left, or dead: its fence has passed. Take the entry over.
				if cur.Incarnation == g.inc {
					// Our own earlier attempt landed unanswered, and others
					// found it dead since: an incarnation marked leaving
					// never comes back, so join as a new one.
					g.inc = rand.Text()[:10]
				}
				g.hb++
				next := leases.Member{Owner: g.cfg.Owner, Incarnation: g.inc, Heartbeat: g.hb}
				sent := mono()
				if rows, err := g.mem.ReplaceMember(ctx, g.row, cur, next); err == nil {
					g.extendFence(sent)
					g.observeRow(g.row, rows, sent, mono())
					g.markDead(cur)
					g.log.Info("kinesislease: replaced the membership entry of an earlier incarnation", "incarnation", cur.Incarnation)
					g.started = true
					return nil
				} else if ctx.Err() == nil {
					failed = true // it may have landed unanswered
					g.log.Warn("kinesislease: replacing the membership entry of an earlier incarnation failed; retrying", "err", err)
				}
				break // and try again after a heartbeat interval
			}
			if cur != seen {
				if firstAt.IsZero() {
					firstAt = now
					g.log.Warn("kinesislease: another process heartbeats with this owner id; waiting for it to leave",
						"incarnation", cur.Incarnation)
				} else if cur.Incarnation == seen.Incarnation {
					changed = true // it heartbeats: alive
				}
				seen, seenAt = cur, now
			}
			if changed && now.Sub(firstAt) >= wait {
				return &DuplicateOwnerError{Owner: g.cfg.Owner, Incarnation: cur.Incarnation}
			}
		case errors.Is(err, leases.ErrMisconfigured):
			return err
		default:
			failed = true
			g.log.Warn("kinesislease: heartbeat failed; retrying", "err", err)
		}
		if err := backoff.Sleep(ctx, backoff.Jitter(g.cfg.Heartbeat)); err != nil {
			return nil
		}
	}
}

func (g *Group) loop(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := g.round(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if g.hbFailed {
			t.Reset(g.cfg.Heartbeat / 2) // try again soon: two failures in a row must not fence
		} else {
			t.Reset(backoff.Jitter(g.cfg.Heartbeat))
		}
	}
}

// heartbeat advances this incarnation's heartbeat. Its deadline is half the
// interval: the SDK's own retries fit inside it, and the library does not
// retry (the next round does).
func (g *Group) heartbeat(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, g.cfg.Heartbeat/2)
	defer cancel()
	// Every attempt writes a new value: an attempt whose answer was lost
	// may have landed, and a next attempt writing the same value would move
	// the holder's fence while takers see no change.
	g.hb++
	m := leases.Member{Owner: g.cfg.Owner, Incarnation: g.inc, Heartbeat: g.hb, Notice: g.notice, Ended: g.ended}
	// A fenced incarnation says so: its leases may be taken at once. Only
	// the old incarnation: once the instance goes on as a new one, that one
	// holds what it takes afresh.
	m.Leaving = g.needNewInc
	sent := mono()
	rows, err := g.mem.Heartbeat(hctx, g.row, m)
	var conflict *leases.MemberConflictError
	if errors.As(err, &conflict) && conflict.Current.Incarnation == g.inc && conflict.Current.Notice != g.notice {
		// Someone bumped our notice (an operator's rewind): look at the
		// held rows now, and heartbeat with the notice as it is.
		g.notice = conflict.Current.Notice
		g.lastReconcile = time.Time{}
		m.Notice = g.notice
		g.hb++
		m.Heartbeat = g.hb
		sent = mono()
		rows, err = g.mem.Heartbeat(hctx, g.row, m)
	}
	if err != nil {
		return err
	}
	g.extendFence(sent)
	g.observeRow(g.row, rows, sent, mono())
	return nil
}

// extendFence moves the fence to a heartbeat sent at sent. The fence is
// sticky: if it had passed before the heartbeat was sent (a pause, failed
// heartbeats), others may have taken every lease already, so each is lost
// before the fence moves; the instance reads again only what it takes
// afresh.
//
// An incarnation whose entry others may have timed before any heartbeat of
// it was answered is over the same way if that heartbeat was sent after
// the fence counted from when others may first have seen it (silentFence).
func (g *Group) extendFence(sent int64) {
	started := g.fence.Load() != fenced
	if (started && sent >= g.fence.Load()) || (!started && g.silentFence != 0 && sent >= g.silentFence) {
		g.fenceAll("the fence passed before this heartbeat was sent")
		if g.fencedSince == 0 {
			g.fencedSince = sent
		}
	}
	g.silentFence = 0
	g.fence.Store(g.fenceAfter(sent))
}

// fail sets a shard (shard "" for the whole stream) aside after it failed
// for good with err: it logs at ERROR, tells the hooks, and leaves it
// alone for a backoff that doubles with each failure in a row. Every other
// shard and stream goes on.
func (g *Group) fail(st *streamState, shard string, f *failure, err error) {
	g.healthMu.Lock()
	f.n++
	f.err = err
	wait := g.cfg.FailureBackoff << min(f.n-1, 20)
	if wait <= 0 || wait > g.cfg.MaxFailureBackoff {
		wait = g.cfg.MaxFailureBackoff
	}
	f.until = time.Now().Add(wait)
	g.healthMu.Unlock()
	what := "shard"
	if shard == "" {
		what = "stream"
	}
	st.log.Error("kinesislease: "+what+" failed; the other shards and streams go on, this one is tried again later",
		"shard", shard, "err", err, "failures", f.n, "retry_in", wait)
	g.h.onFailed(kltype.FailureInfo{Stream: st.cfg.Stream, ShardID: shard, Err: err, Failures: f.n, RetryIn: wait})
}

// fenceAfter is the fence of a heartbeat sent at sent (mono()).
func (g *Group) fenceAfter(sent int64) int64 {
	return sent + int64(g.cfg.Timeout-g.cfg.FenceMargin)
}

// reincarnate replaces this instance's membership entry with one of a new
// incarnation (after a fence), and reports whether it did.
func (g *Group) reincarnate(ctx context.Context) bool {
	cur, ok := g.view[g.cfg.Owner]
	if !ok || cur.Incarnation != g.inc {
		return false
	}
	if g.nextInc == "" {
		g.nextInc = rand.Text()[:10] // kept across retries: an attempt whose answer was lost may have landed
		g.nextIncSent = 0
	}
	inc := g.nextInc
	g.hb++
	next := leases.Member{Owner: g.cfg.Owner, Incarnation: inc, Heartbeat: g.hb, Notice: cur.Notice, Ended: g.ended}
	sent := mono()
	if g.nextIncSent == 0 {
		g.nextIncSent = sent
	}
	rows, err := g.mem.ReplaceMember(ctx, g.row, cur, next)
	if err != nil {
		if ctx.Err() == nil {
			g.log.Warn("kinesislease: starting a new incarnation after a fence failed; retrying", "err", err)
		}
		return false
	}
	g.log.Info("kinesislease: new incarnation after a fence", "from", g.inc, "incarnation", inc)
	g.markDead(cur)
	g.inc, g.notice, g.needNewInc, g.nextInc, g.silentFence = inc, cur.Notice, false, "", 0
	g.fence.Store(g.fenceAfter(sent))
	g.observeRow(g.row, rows, sent, mono())
	return true
}

// round is one heartbeat round: heartbeat, read the other membership rows,
// then (unless fenced) plan and act.
func (g *Group) round(ctx context.Context) error {
	g.rounds++
	hbErr := g.heartbeat(ctx)
	g.hbFailed = hbErr != nil
	var conflict *leases.MemberConflictError
	if errors.As(hbErr, &conflict) && g.needNewInc && g.nextInc != "" && conflict.Current.Incarnation == g.nextInc && conflict.Current.Leaving {
		// Our new incarnation's entry landed unanswered, then went silent
		// long enough to be found dead: never go on as it; the next round
		// starts yet another.
		g.inc, g.nextInc = conflict.Current.Incarnation, ""
		g.view[g.cfg.Owner] = conflict.Current
		return nil
	}
	if errors.As(hbErr, &conflict) && g.needNewInc && g.nextInc != "" && conflict.Current.Incarnation == g.nextInc {
		// Our own new incarnation's entry: its ReplaceMember landed with the
		// answer lost. Go on as it. Others may have seen that entry since
		// the first attempt was sent, and time it from then: if a fence
		// passes from that send before a heartbeat of it is answered, this
		// incarnation is over too (another one follows; see extendFence).
		g.log.Info("kinesislease: new incarnation after a fence", "from", g.inc, "incarnation", g.nextInc)
		g.markDead(leases.Member{Owner: g.cfg.Owner, Incarnation: g.inc})
		g.inc, g.notice, g.needNewInc, g.nextInc = g.nextInc, conflict.Current.Notice, false, ""
		g.hb = max(g.hb, conflict.Current.Heartbeat)
		g.fence.Store(fenced) // it holds nothing: its fence starts with an answered heartbeat
		g.silentFence = g.fenceAfter(g.nextIncSent)
		hbErr = g.heartbeat(ctx)
		g.hbFailed = hbErr != nil
	}
	if errors.As(hbErr, &conflict) && conflict.Current.Incarnation == g.inc && conflict.Current.Leaving && !g.needNewInc {
		// Someone found this incarnation dead and marked it leaving (it may
		// be one just adopted above, whose first heartbeat's answer came
		// late): it may never come back (a taker may act on that view for a
		// while). All is lost; go on as a new incarnation.
		g.view[g.cfg.Owner] = conflict.Current
		g.fenceAll("another member found this incarnation dead")
		if g.fencedSince == 0 {
			g.fencedSince = mono()
		}
		g.fence.Store(fenced)
		if !g.reincarnate(ctx) {
			return nil
		}
		hbErr = nil
	}
	switch {
	case errors.As(hbErr, &conflict):
		// Another incarnation took our entry over: it believes us dead, so
		// our fence has passed. Stop delivering at once and leave.
		g.fenceAll("another process replaced this instance's membership entry")
		return &DuplicateOwnerError{Owner: g.cfg.Owner, Incarnation: conflict.Current.Incarnation, Replaced: true}
	case errors.Is(hbErr, leases.ErrMisconfigured):
		return hbErr
	case hbErr != nil && ctx.Err() == nil:
		g.log.Warn("kinesislease: heartbeat failed", "err", hbErr)
	}
	complete := g.readMembers(ctx, hbErr == nil)
	if mono() >= g.fence.Load() {
		if g.fencedSince == 0 {
			g.fencedSince = mono()
		}
		over := g.fence.Load() != fenced ||
			(g.silentFence != 0 && mono() >= g.silentFence)
		if over && !g.needNewInc {
			// This incarnation's fence passed (it may be one adopted
			// unanswered whose heartbeats failed since): others may find it
			// dead, so it is over, whatever it holds.
			g.fenceAll("heartbeats failed past the fence")
		}
		return nil
	}
	if g.needNewInc {
		if !g.reincarnate(ctx) {
			return nil // still the old incarnation: plan and take nothing
		}
	}
	if g.fencedSince != 0 {
		g.log.Info("kinesislease: heartbeat current again; taking leases afresh", "incarnation", g.inc)
		g.fencedSince = 0
	}
	now := time.Now()
	for _, st := range g.streams {
		if st.listing.waiting(now) {
			continue
		}
		if st.shards == nil || st.resync || time.Since(st.lastSync) >= g.cfg.ShardSyncInterval || st.listing.n > 0 {
			err := g.listShards(ctx, st)
			switch {
			case err == nil:
				g.healthMu.Lock()
				st.listing = failure{}
				g.healthMu.Unlock()
			case fatal(err):
				g.fail(st, "", &st.listing, err)
			default:
				st.log.Warn("kinesislease: listing shards failed; retrying", "err", err)
			}
		}
	}
	g.viewComplete = g.viewComplete || complete
	g.ready.Store(g.viewComplete)
	if !g.viewComplete {
		return nil // no full view of the members yet: plan nothing
	}
	if err := g.noticeRequests(ctx); err != nil && fatal(err) {
		return err
	}
	g.announceDead(ctx)
	a := g.plan()
	g.releaseOrphans(ctx, a)
	g.act(ctx, a)
	g.removeStale(ctx)
	g.reap(ctx, false)
	return nil
}

// readMembers reads the membership rows other than ours (ours came back
// with the heartbeat) and reports whether every row was read.
func (g *Group) readMembers(ctx context.Context, own bool) bool {
	complete := own
	for r := range leases.MemberRows {
		if r == g.row {
			continue
		}
		sent := mono()
		rows, err := g.mem.Members(ctx, r)
		if err != nil {
			complete = false
			if ctx.Err() == nil {
				g.log.Warn("kinesislease: reading membership row failed", "row", r, "err", err)
			}
			continue
		}
		g.observeRow(r, rows, sent, mono())
	}
	return complete
}

func obsKey(owner, inc string) string { return owner + "\x00" + inc }

// observeRow records membership row r as read by a call sent at sent that
// returned at ret. An unreadable row is never observed: its members' ages
// freeze, they never grow.
func (g *Group) observeRow(r int, rows []leases.Member, sent, ret int64) {
	present := map[string]bool{}
	for _, m := range rows {
		k := obsKey(m.Owner, m.Incarnation)
		present[k] = true
		if m.Owner == g.cfg.Owner && m.Incarnation == g.inc {
			g.view[m.Owner] = m
			continue
		}
		o := g.obs[k]
		if prev, ok := g.view[m.Owner]; ok && prev.Ended != m.Ended {
			g.resyncAll() // a member ended a shard: its children are in the shard lists now
		}
		if o != nil && !o.absent && o.m == m {
			o.confirm = max(o.confirm, sent)
		} else {
			g.obs[k] = &memberObs{m: m, since: ret, confirm: ret}
		}
		g.view[m.Owner] = m
	}
	for k, o := range g.obs {
		if leases.MemberRow(o.m.Owner) != r || present[k] {
			continue
		}
		if !o.absent {
			// Gone from its row (removed, or replaced by a new incarnation):
			// watch its absence from now.
			o.absent, o.since = true, ret
			if cur, ok := g.view[o.m.Owner]; ok && cur.Incarnation == o.m.Incarnation {
				delete(g.view, o.m.Owner)
			}
		}
		o.confirm = max(o.confirm, sent)
	}
}

// resyncAll makes the next round list every stream's shards again.
func (g *Group) resyncAll() {
	for _, st := range g.streams {
		st.resync = true
	}
}

// alive reports whether incarnation inc of owner may still hold leases:
// seen heartbeating (or present) within the timeout, and not leaving.
func (g *Group) alive(owner, inc string) bool {
	if owner == g.cfg.Owner && inc == g.inc {
		return g.fencedSince == 0
	}
	o := g.obs[obsKey(owner, inc)]
	if o == nil {
		// Never seen: watch it from now (a row names it).
		g.obs[obsKey(owner, inc)] = &memberObs{m: leases.Member{Owner: owner, Incarnation: inc}, since: mono(), confirm: mono(), absent: true}
		return true
	}
	if o.m.Leaving && !o.absent {
		return false
	}
	return time.Duration(o.confirm-o.since) < g.cfg.Timeout
}

// markDead records that inc of owner is known dead (its entry replaced after
// it was seen stale, or it left).
func (g *Group) markDead(m leases.Member) {
	g.obs[obsKey(m.Owner, m.Incarnation)] = &memberObs{m: m, since: 0, confirm: int64(g.cfg.Timeout), absent: true}
}

// live returns the owners the plan spreads the shards over: this instance
// and every member seen alive, not leaving.
func (g *Group) live() []string {
	owners := []string{g.cfg.Owner}
	for owner, m := range g.view {
		if owner != g.cfg.Owner && g.alive(owner, m.Incarnation) {
			owners = append(owners, owner)
		}
	}
	slices.Sort(owners)
	return owners
}

// plan returns the assignment of every active shard over the live members.
func (g *Group) plan() map[unit]string {
	var units []unit
	for name, st := range g.streams {
		for _, id := range st.order {
			if g.active(st, id) {
				units = append(units, unit{Stream: name, Shard: id})
			}
		}
	}
	a := plan.Assign(g.live(), units, g.cfg.MaxLeases)
	if mapsEqual(a, g.lastAssign) {
		g.sameRounds++
	} else {
		g.sameRounds = 0
	}
	g.lastAssign = a
	return a
}

func mapsEqual(a, b map[unit]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// active reports whether shard id may be read: not ended (unless a rewind
// is pending), every parent still in the stream at SHARD_END.
func (g *Group) active(st *streamState, id string) bool {
	r := st.rows[id]
	if r.lease.Checkpoint.Sequence == leases.ShardEnd && r.lease.RewindTo.IsZero() {
		return false
	}
	for _, p := range kinesisx.Parents(st.shards[id]) {
		if _, in := st.shards[p]; in && st.rows[p].lease.Checkpoint.Sequence != leases.ShardEnd {
			return false
		}
	}
	return true
}

// act takes what the plan gives this instance and it does not hold, and
// hands over what it holds and the plan gives another (once the plan has
// been the same for two rounds, so that views settling do not move leases
// back and forth).
func (g *Group) act(ctx context.Context, a map[unit]string) {
	g.mu.Lock()
	held := map[unit]*worker{}
	for u, w := range g.workers {
		held[u] = w
	}
	g.mu.Unlock()
	over := len(held) - g.cfg.MaxLeases // beyond the cap, leases the plan left out go too
	for u, w := range held {
		if g.sameRounds < 2 || w.stopping() {
			continue
		}
		owner, ok := a[u]
		switch {
		case ok && owner != g.cfg.Owner:
			g.streams[u.Stream].log.Info("kinesislease: handing lease over", "shard", u.Shard, "to", owner)
			w.stopWithin(g.cfg.ShutdownTimeout)
		case !ok && g.cfg.MaxLeases > 0 && over > 0 && g.active(g.streams[u.Stream], u.Shard):
			g.streams[u.Stream].log.Info("kinesislease: releasing a lease beyond the cap", "shard", u.Shard, "max_leases", g.cfg.MaxLeases)
			over--
			w.stopWithin(g.cfg.ShutdownTimeout)
		}
	}
	var want []unit
	now := time.Now()
	for u, owner := range a {
		if owner == g.cfg.Owner && held[u] == nil && !g.streams[u.Stream].failed[u.Shard].waiting(now) {
			want = append(want, u)
		}
	}
	slices.SortFunc(want, func(x, y unit) int {
		if x.Stream != y.Stream {
			return cmpString(x.Stream, y.Stream)
		}
		return cmpString(x.Shard, y.Shard)
	})
	// Parents not known to be done are read too, a few rounds apart, so that
	// their children start once they reach SHARD_END.
	if g.rounds%4 == 0 {
		for name, st := range g.streams {
			for _, id := range st.order {
				for _, p := range kinesisx.Parents(st.shards[id]) {
					if _, in := st.shards[p]; in && st.rows[p].lease.Checkpoint.Sequence != leases.ShardEnd && !g.holds(unit{Stream: name, Shard: p}) {
						g.readRow(ctx, st, p)
					}
				}
			}
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, readConcurrency)
	var mu sync.Mutex // guards the rows, legacy and obs maps while takes run concurrently
	for _, u := range want {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			g.acquire(ctx, u, &mu)
		})
	}
	wg.Wait()
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (g *Group) holds(u unit) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.workers[u] != nil
}

// readRow reads (without creating) the row of shard id into st.rows.
func (g *Group) readRow(ctx context.Context, st *streamState, id string) (leases.Lease, bool, error) {
	l, err := g.store.Get(ctx, leases.Key{Stream: st.key, Shard: id})
	if errors.Is(err, leases.ErrNotFound) {
		st.rows[id] = rowState{missing: true}
		return leases.Lease{}, false, nil
	}
	if err != nil {
		return leases.Lease{}, false, err
	}
	st.rows[id] = rowState{lease: l}
	return l, true, nil
}

// acquire reads the row of u and takes it if it is free, held by a dead
// incarnation, or still names this incarnation (after a fence).
func (g *Group) acquire(ctx context.Context, u unit, mu *sync.Mutex) {
	st := g.streams[u.Stream]
	key := leases.Key{Stream: u.Stream, Shard: u.Shard}
	l, err := g.store.Get(ctx, key)
	if errors.Is(err, leases.ErrNotFound) {
		mu.Lock()
		known := st.rows[u.Shard]
		mu.Unlock()
		if !known.missing && !known.lease.Checkpoint.IsZero() {
			g.log.Error("kinesislease: lease row vanished; recreating it from the last checkpoint this instance saw",
				"stream", u.Stream, "shard", u.Shard, "seq", known.lease.Checkpoint.Sequence)
		}
		l, err = g.store.Create(ctx, key)
		if errors.Is(err, leases.ErrConflict) {
			l, err = g.store.Get(ctx, key)
		}
		if err == nil && !known.missing && !known.lease.Checkpoint.IsZero() {
			l, err = g.store.Rewind(ctx, l, known.lease.Checkpoint) // a free row takes the checkpoint at once
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			st.log.Warn("kinesislease: reading lease row failed", "shard", u.Shard, "err", err)
		}
		return
	}
	if err := g.arnRow(ctx, st, l); err != nil {
		if !errors.Is(err, errArnRowUnread) {
			g.healthMu.Lock()
			f := st.failed[u.Shard]
			if f == nil {
				f = &failure{}
				st.failed[u.Shard] = f
			}
			g.healthMu.Unlock()
			g.fail(st, u.Shard, f, err)
		}
		return
	}
	mu.Lock()
	st.rows[u.Shard] = rowState{lease: l}
	takeable := g.takeable(st, u.Shard, l)
	mu.Unlock()
	if !takeable {
		return
	}
	t, err := g.mem.TakeAs(ctx, l, g.cfg.Owner, g.inc)
	if err != nil {
		if !errors.Is(err, leases.ErrConflict) {
			// The take may have landed with its answer lost: the row would
			// name this incarnation with nobody reading it.
			g.orphan(u)
			if ctx.Err() == nil {
				st.log.Warn("kinesislease: taking lease failed", "shard", u.Shard, "err", err)
			}
		}
		return
	}
	if mono() >= g.fence.Load() {
		// Fenced while taking: the row is ours but may not be read. The
		// next round (if the heartbeat is current again) takes it afresh,
		// or releases it.
		g.orphan(u)
		return
	}
	h := newMemberLease(g.store, t, &g.fence)
	if t.RewindTo.Sequence != "" {
		if t, err = h.applyRewind(ctx); err != nil {
			st.log.Warn("kinesislease: applying a pending rewind failed", "shard", u.Shard, "err", err)
			g.orphan(u)
			return
		}
		st.log.Info("kinesislease: rewind applied", "shard", u.Shard, "seq", t.Checkpoint.Sequence)
	}
	from := ""
	if l.Owner != "" && l.Owner != g.cfg.Owner {
		from = l.Owner
		st.log.Info("kinesislease: lease taken over", "shard", u.Shard, "from", l.Owner, "seq", t.Checkpoint.Sequence)
	} else {
		st.log.Info("kinesislease: lease acquired", "shard", u.Shard, "seq", t.Checkpoint.Sequence)
	}
	mu.Lock()
	st.rows[u.Shard] = rowState{lease: t}
	mu.Unlock()
	emit(g.h, g.cfg.Events, kltype.LeaseAcquired, kltype.LeaseInfo{Stream: st.cfg.Stream, ShardID: u.Shard, Owner: g.cfg.Owner, Checkpoint: t.Checkpoint, From: from})
	g.startWorker(ctx, st, u, h)
}

// errArnRowUnread: the row an earlier version keyed by the stream's ARN
// could not be read; the take waits for the next round.
var errArnRowUnread = errors.New("engine: the ARN-keyed row could not be read")

// ArnRowError refuses a shard of a stream subscribed by ARN whose row, in
// an earlier version, was keyed by the ARN: rows are keyed by the stream
// name now, and the name's row has no checkpoint yet.
type ArnRowError struct {
	ArnKey, NameKey leases.Key
	// Checkpoint is the ARN-keyed row's.
	Checkpoint leases.Checkpoint
}

func (e *ArnRowError) Error() string {
	return fmt.Sprintf("engine: the lease row %s (keyed by the stream's ARN, as an earlier version did) exists, with checkpoint %q; "+
		"rows are keyed by the stream name now (%s, which has no checkpoint yet): stop any instance of the earlier version, then copy the checkpoint "+
		"(kinesislease rewind --stream %s --shard %s --to %s), which starts the shard from it",
		e.ArnKey, e.Checkpoint.Sequence, e.NameKey, e.NameKey.Stream, e.NameKey.Shard, e.Checkpoint.Sequence)
}

// arnRow checks, for a stream subscribed by ARN whose name-keyed row l has
// no checkpoint, that no row keyed by the ARN (an earlier version's) holds
// one: reading from the start position would skip or repeat what that row
// says was read.
func (g *Group) arnRow(ctx context.Context, st *streamState, l leases.Lease) error {
	if st.cfg.Stream == st.key || !l.Checkpoint.IsZero() {
		return nil
	}
	old, err := g.store.Get(ctx, leases.Key{Stream: st.cfg.Stream, Shard: l.Key.Shard})
	switch {
	case errors.Is(err, leases.ErrNotFound):
		return nil
	case err != nil:
		if ctx.Err() == nil {
			st.log.Warn("kinesislease: reading the ARN-keyed lease row failed", "shard", l.Key.Shard, "err", err)
		}
		return errArnRowUnread
	case old.Checkpoint.IsZero() && old.Owner == "":
		return nil
	}
	return &ArnRowError{ArnKey: old.Key, NameKey: l.Key, Checkpoint: old.Checkpoint}
}

// takeable reports whether row l, just read, may be taken by this instance.
func (g *Group) takeable(st *streamState, id string, l leases.Lease) bool {
	switch {
	case l.Checkpoint.Sequence == leases.ShardEnd && l.RewindTo.IsZero():
		return false
	case !l.Held():
		return true
	case l.Incarnation == "":
		// A row of the retired per-row renewal protocol (an owner, no
		// incarnation): its holder, if it still runs, renews the row, which
		// moves its write token. Taken only once seen unchanged for
		// LegacyRowTimeout, longer than any per-row lease in use.
		o, ok := st.legacy[id]
		if !ok || o.token != l.Token {
			st.legacy[id] = legacyObs{token: l.Token, since: time.Now()}
			st.log.Error("kinesislease: a lease row is held by an instance of the retired per-row renewal protocol (no incarnation): stop every instance of the earlier version; the row is taken once it has not changed for "+LegacyRowTimeout.String(),
				"shard", id, "holder", l.Owner)
			return false
		}
		return time.Since(o.since) >= LegacyRowTimeout
	case l.Owner == g.cfg.Owner && l.Incarnation == g.inc:
		return true // ours, from before a fence: take it afresh
	}
	return !g.alive(l.Owner, l.Incarnation)
}

// startWorker starts reading u, held by h, from its checkpoint.
func (g *Group) startWorker(ctx context.Context, st *streamState, u unit, h *heldLease) {
	start := startAt(st.cfg.Start, st.shards, u.Shard, h.current().Checkpoint)
	w := newWorker(ctx, &st.cfg.Worker, st.log, g.cfg.Client, st.cfg.Stream, u.Shard, start, h)
	w.h = g.h
	w.proc.OnDeadLetter = g.h.deadLettered
	g.mu.Lock()
	g.workers[u] = w
	g.mu.Unlock()
	go w.run()
}

// fenceAll stops every worker at once: no lease of this instance may be
// trusted any more.
func (g *Group) fenceAll(why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.workers) > 0 {
		g.log.Warn("kinesislease: fenced: every lease is lost", "why", why, "leases", len(g.workers))
	}
	for u, w := range g.workers {
		w.lease.markLost()
		w.kill()
		g.orphans[u] = g.inc
	}
	// Past a fence this incarnation is over: takers may have read it
	// leaving or dead in any membership row they read since. The instance
	// goes on as a new incarnation, so that no taker's view of the old one
	// can ever apply to a row it takes afresh.
	g.needNewInc = true
}

func (g *Group) unorphan(u unit) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.orphans, u)
}

// orphan records that the row of u may name this incarnation with no
// worker reading it.
func (g *Group) orphan(u unit) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.orphans[u] = g.inc
}

// releaseOrphans releases the rows that still name this incarnation and
// the plan gives another member (or nobody); those it gives this instance
// are taken afresh by act.
func (g *Group) releaseOrphans(ctx context.Context, a map[unit]string) {
	g.mu.Lock()
	orphans := make(map[unit]string, len(g.orphans))
	maps.Copy(orphans, g.orphans)
	g.mu.Unlock()
	for u, inc := range orphans {
		g.mu.Lock()
		w := g.workers[u]
		g.mu.Unlock()
		if w != nil {
			if !w.lease.isLost() {
				g.unorphan(u) // taken afresh
			}
			continue // a lost worker not reaped yet: next round
		}
		if a[u] == g.cfg.Owner && inc == g.inc {
			continue // act takes it afresh
		}
		l, err := g.store.Get(ctx, leases.Key{Stream: u.Stream, Shard: u.Shard})
		switch {
		case errors.Is(err, leases.ErrNotFound):
			g.unorphan(u)
			continue
		case err != nil:
			continue
		case l.Owner != g.cfg.Owner || l.Incarnation != inc:
			g.unorphan(u) // someone took it
			continue
		}
		// The checkpoint stays: it is the last one written while the lease
		// was trusted.
		if _, err := g.store.Release(ctx, l, leases.Checkpoint{}); err == nil || errors.Is(err, leases.ErrConflict) {
			g.streams[u.Stream].log.Info("kinesislease: released a lease lost at a fence", "shard", u.Shard)
			g.unorphan(u)
		}
	}
}

// noticeRequests re-reads the held rows when an operator asked (our entry's
// Notice changed) or every Reconcile: a pending rewind is applied, a row
// that vanished is recreated from the checkpoint this instance knows, a row
// another owner holds is lost.
func (g *Group) noticeRequests(ctx context.Context) error {
	vanished := false
	g.mu.Lock()
	for _, w := range g.workers {
		vanished = vanished || w.lease.vanished.Load()
	}
	g.mu.Unlock()
	if !vanished && time.Since(g.lastReconcile) < g.cfg.Reconcile {
		return nil
	}
	g.lastReconcile = time.Now()
	g.mu.Lock()
	ws := make(map[unit]*worker, len(g.workers))
	for u, w := range g.workers {
		ws[u] = w
	}
	g.mu.Unlock()
	for u, w := range ws {
		if w.stopping() {
			continue
		}
		known := w.lease.current()
		l, err := g.store.Get(ctx, known.Key)
		switch {
		case errors.Is(err, leases.ErrNotFound):
			g.recreate(ctx, u, w)
		case err != nil:
			if ctx.Err() == nil {
				g.log.Warn("kinesislease: re-reading a held row failed", "stream", u.Stream, "shard", u.Shard, "err", err)
			}
		case l.Owner != g.cfg.Owner || l.Incarnation != g.inc:
			g.streams[u.Stream].log.Warn("kinesislease: lease lost", "shard", u.Shard, "new_owner", l.Owner)
			w.lease.markLost()
			w.kill()
		case l.RewindTo.Sequence != "" && l.Counter != known.Counter:
			w.lease.adopt(l)
			g.streams[u.Stream].log.Info("kinesislease: rewinding", "shard", u.Shard, "from", l.Checkpoint.Sequence, "to", l.RewindTo.Sequence)
			w.rewind()
		}
	}
	return nil
}

// recreate writes the row of u again after it vanished, from the checkpoint
// this instance knows, and keeps reading: never a silent restart from the
// start position.
func (g *Group) recreate(ctx context.Context, u unit, w *worker) {
	log := g.streams[u.Stream].log
	// With the lease's write token held, so that no checkpoint of the
	// worker meets the row half recreated (free) and counts the lease lost.
	err := w.lease.exclusive(func(known leases.Lease) (leases.Lease, error) {
		log.Error("kinesislease: lease row vanished (table recreated or row deleted); recreating it from this instance's checkpoint",
			"shard", u.Shard, "seq", known.Checkpoint.Sequence)
		l, err := g.store.Create(ctx, known.Key)
		if err != nil {
			return known, err
		}
		if !known.Checkpoint.IsZero() {
			if l, err = g.store.Rewind(ctx, l, known.Checkpoint); err != nil {
				return known, err
			}
		}
		return g.mem.TakeAs(ctx, l, g.cfg.Owner, g.inc)
	})
	switch {
	case err == nil:
		w.lease.vanished.Store(false)
	case errors.Is(err, leases.ErrConflict):
		// Someone recreated or took it first: it is not ours any more.
		w.lease.markLost()
		w.kill()
	case ctx.Err() == nil:
		log.Warn("kinesislease: recreating the lease row failed; retrying", "shard", u.Shard, "err", err)
	}
}

// announceDead marks the entry of every member this instance just found
// dead as leaving (a write conditional on the heartbeat it saw unchanged for
// the timeout), so that the other members act on the death at their next
// read instead of each waiting out its own timeout: the failover is the
// first detector's, not the last's. The dead member's fence has passed; if
// it was only paused, it has lost every lease and its next heartbeat rejoins
// it with none.
func (g *Group) announceDead(ctx context.Context) {
	for _, o := range g.obs {
		if o.absent || o.announced || o.m.Leaving || o.m.Owner == g.cfg.Owner || time.Duration(o.confirm-o.since) < g.cfg.Timeout {
			continue
		}
		o.announced = true // tried once: the others try too, the row decides
		next := o.m
		next.Leaving = true
		if _, err := g.mem.ReplaceMember(ctx, leases.MemberRow(o.m.Owner), o.m, next); err == nil {
			g.log.Info("kinesislease: member dead; its leases are free to take", "member", o.m.Owner, "incarnation", o.m.Incarnation)
		}
	}
}

// removeStale removes entries seen unchanged for three timeouts, so the
// membership rows stay the size of the live fleet. The lowest live owner
// does it; the writes are conditional, so a race is harmless.
func (g *Group) removeStale(ctx context.Context) {
	if live := g.live(); len(live) == 0 || live[0] != g.cfg.Owner {
		return
	}
	for k, o := range g.obs {
		if o.absent {
			if time.Duration(o.confirm-o.since) >= 3*g.cfg.Timeout {
				delete(g.obs, k)
			}
			continue
		}
		if time.Duration(o.confirm-o.since) < 3*g.cfg.Timeout {
			continue
		}
		if _, err := g.mem.ReplaceMember(ctx, leases.MemberRow(o.m.Owner), o.m, leases.Member{}); err == nil {
			g.log.Info("kinesislease: removed a dead member's entry", "member", o.m.Owner, "incarnation", o.m.Incarnation)
		}
	}
}

// reap forgets finished workers and reports their lease events. A worker
// that applied a rewind reads on from the new checkpoint, or, when the group
// is stopping, releases the lease there.
func (g *Group) reap(ctx context.Context, stopping bool) {
	g.mu.Lock()
	var done []unit
	var ws []*worker
	for u, w := range g.workers {
		select {
		case <-w.done:
			done = append(done, u)
			ws = append(ws, w)
			delete(g.workers, u)
		default:
		}
	}
	g.mu.Unlock()
	for i, u := range done {
		w := ws[i]
		st := g.streams[u.Stream]
		info := kltype.LeaseInfo{Stream: st.cfg.Stream, ShardID: u.Shard, Owner: g.cfg.Owner, Checkpoint: w.lease.current().Checkpoint}
		st.rows[u.Shard] = rowState{lease: w.lease.current()}
		g.healthMu.Lock()
		f := st.failed[u.Shard]
		switch {
		case w.err == nil:
			delete(st.failed, u.Shard)
		case f == nil:
			f = &failure{}
			st.failed[u.Shard] = f
		}
		g.healthMu.Unlock()
		switch {
		case w.err != nil:
			g.fail(st, u.Shard, f, w.err)
		case w.rewound && stopping:
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := w.lease.release(rctx, leases.Checkpoint{}); err == nil {
				emit(g.h, g.cfg.Events, kltype.LeaseReleased, info)
			}
			cancel()
		case w.rewound:
			g.startWorker(ctx, st, u, w.lease)
		case w.ended:
			st.log.Info("kinesislease: shard ended", "shard", u.Shard)
			st.resync = true
			g.ended++
			emit(g.h, g.cfg.Events, kltype.ShardEnded, info)
		case w.lease.takenOver():
			emit(g.h, g.cfg.Events, kltype.LeaseLost, info)
		default:
			if !w.lease.isReleased() {
				// The release failed (a store error): the row may still name
				// this incarnation. Release it again until it lands.
				g.orphan(u)
			}
			emit(g.h, g.cfg.Events, kltype.LeaseReleased, info)
		}
	}
}

// listShards refreshes the shard list of st.
func (g *Group) listShards(ctx context.Context, st *streamState) error {
	shards, err := kinesisx.ListShards(ctx, g.cfg.Client, st.cfg.Stream)
	if err != nil {
		return err
	}
	first := st.shards == nil
	old := st.shards
	st.shards, st.order = shardMap(shards, st.order)
	st.lastSync = time.Now()
	st.resync = false
	if first {
		// Learn every row once: checkpoints at SHARD_END (parents done),
		// rows that exist. One GetItem per shard at start.
		for _, id := range st.order {
			if _, _, err := g.readRow(ctx, st, id); err != nil {
				return err
			}
		}
		return nil
	}
	// New shards (children of a split or merge): create their rows (free,
	// no checkpoint: a child starts at its own beginning) and read their
	// parents' rows now, so that they start as soon as the parents are
	// done.
	for _, id := range st.order {
		if _, known := old[id]; known {
			continue
		}
		key := leases.Key{Stream: st.key, Shard: id}
		if l, err := g.store.Create(ctx, key); err == nil {
			st.rows[id] = rowState{lease: l}
		} else if !errors.Is(err, leases.ErrConflict) {
			return err
		}
		for _, p := range kinesisx.Parents(st.shards[id]) {
			if _, in := st.shards[p]; in && !g.holds(unit{Stream: st.key, Shard: p}) {
				if _, _, err := g.readRow(ctx, st, p); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// shutdown drains every worker, bounded by ShutdownTimeout, heartbeating
// meanwhile (the leases stay held while the heartbeat advances), then
// removes this incarnation's membership entry.
func (g *Group) shutdown() {
	ws := stopAll(&g.mu, g.workers)
	ctx := context.Background()
	if len(ws) > 0 {
		drain(g.log, ws, g.cfg.ShutdownTimeout, g.cfg.Heartbeat, func() {
			if err := g.heartbeat(ctx); err != nil {
				g.log.Warn("kinesislease: heartbeat failed while draining", "err", err)
			}
		})
		g.reap(ctx, true)
	}
	g.releaseOrphans(ctx, nil)
	if g.started {
		me := g.view[g.cfg.Owner]
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := g.mem.ReplaceMember(rctx, g.row, me, leases.Member{})
		var conflict *leases.MemberConflictError
		if errors.As(err, &conflict) && conflict.Current.Incarnation == g.inc {
			// Our view was stale (a heartbeat's answer lost): remove the
			// entry as it is.
			_, err = g.mem.ReplaceMember(rctx, g.row, conflict.Current, leases.Member{})
		}
		if err != nil {
			g.log.Warn("kinesislease: removing the membership entry failed; the next incarnation waits for it to go stale", "err", err)
		}
		cancel()
	}
	g.log.Info("kinesislease: stopped")
}

// countingStore counts the store calls of a Group.
type countingStore struct {
	leases.Store
	mem leases.Membership
	s   *groupStats
}

func (c *countingStore) Get(ctx context.Context, key leases.Key) (leases.Lease, error) {
	c.s.reads.Add(1)
	return c.Store.Get(ctx, key)
}

func (c *countingStore) Create(ctx context.Context, key leases.Key) (leases.Lease, error) {
	c.s.writes.Add(1)
	return c.Store.Create(ctx, key)
}

func (c *countingStore) Checkpoint(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	c.s.writes.Add(1)
	return c.Store.Checkpoint(ctx, l, cp)
}

func (c *countingStore) Release(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	c.s.writes.Add(1)
	return c.Store.Release(ctx, l, cp)
}

func (c *countingStore) Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error) {
	c.s.writes.Add(1)
	return c.Store.Rewind(ctx, l, cp)
}

func (c *countingStore) ApplyRewind(ctx context.Context, l leases.Lease) (leases.Lease, error) {
	c.s.writes.Add(1)
	return c.Store.ApplyRewind(ctx, l)
}

func (c *countingStore) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	c.s.heartbeats.Add(1)
	return c.mem.Heartbeat(ctx, row, m)
}

func (c *countingStore) Members(ctx context.Context, row int) ([]leases.Member, error) {
	c.s.memberReads.Add(1)
	return c.mem.Members(ctx, row)
}

func (c *countingStore) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	c.s.writes.Add(1)
	return c.mem.ReplaceMember(ctx, row, seen, next)
}

func (c *countingStore) TakeAs(ctx context.Context, l leases.Lease, owner, inc string) (leases.Lease, error) {
	c.s.writes.Add(1)
	return c.mem.TakeAs(ctx, l, owner, inc)
}
