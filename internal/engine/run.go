package engine

// A Group is built (NewGroup) and run (Run): Run joins the membership,
// runs the round loop until its context ends, then shuts down. A round
// reads the members, lists and reads rows, plans, and takes and releases
// what the plan says.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/balance"
	"github.com/kinesislease/kinesislease/internal/lostbook"
	"github.com/kinesislease/kinesislease/internal/membership"
	"github.com/kinesislease/kinesislease/internal/observe"
	"github.com/kinesislease/kinesislease/internal/shardlist"
	"github.com/kinesislease/kinesislease/leases"
)

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
	orDefault(&cfg.Heartbeat, DefaultHeartbeat)
	orDefault(&cfg.Timeout, DefaultTimeout)
	orDefault(&cfg.FenceMargin, cfg.Timeout/6)
	// A heartbeat answered before its deadline was applied before the
	// answer came, so it must have landed before a taker can find the
	// previous one a Timeout old (the fence plus the margin): the margin
	// must cover the least deadline (half an interval), and a longer one
	// ends before the fence (see membership.Member.Heartbeats).
	cfg.FenceMargin = max(cfg.FenceMargin, cfg.Heartbeat/2+cfg.Heartbeat/10)
	orDefault(&cfg.ShardSyncInterval, time.Minute)
	orDefault(&cfg.ShutdownTimeout, 30*time.Second)
	orDefault(&cfg.Reconcile, DefaultReconcile)
	orDefault(&cfg.FailureBackoff, 30*time.Second)
	if cfg.MaxFailureBackoff < cfg.FailureBackoff {
		cfg.MaxFailureBackoff = max(10*time.Minute, cfg.FailureBackoff)
	}
	if cfg.Heartbeat >= cfg.Timeout-cfg.FenceMargin {
		return nil, fmt.Errorf("engine: heartbeat interval %v must be shorter than the timeout %v less the fence margin %v",
			cfg.Heartbeat, cfg.Timeout, cfg.FenceMargin)
	}
	h := observe.NewHooks(cfg.Hooks)
	g := &Group{
		cfg: cfg, h: h, run: runState{kick: make(chan struct{}, 1)},
		streams: map[string]*streamState{},
		workers: map[unit]*worker{},
		lost:    lostbook.New[unit](time.Now),
		rs:      roundState{balance: balance.New(balance.Config{Self: cfg.Owner, Capacity: cfg.Capacity, MaxLeases: cfg.MaxLeases, Mode: cfg.Balance})},
		log:     cfg.Logger.With("owner", cfg.Owner),
	}
	is := observe.NewStore(cfg.Store, mem, h, &g.stats)
	g.store, g.mem = is, is
	g.m = membership.New(membership.Config{
		Owner: cfg.Owner, Store: is, Log: g.log, Host: (*memberHost)(g),
		Heartbeat: cfg.Heartbeat, Timeout: cfg.Timeout, FenceMargin: cfg.FenceMargin, ShutdownTimeout: cfg.ShutdownTimeout,
	})
	g.listing = shardlist.New(shardlist.Config{
		Owner: cfg.Owner, Heartbeat: cfg.Heartbeat, Timeout: cfg.Timeout, ShardSyncInterval: cfg.ShardSyncInterval,
		MaxLeases: cfg.MaxLeases, Store: is, Log: g.log, View: g.m, Host: (*listingHost)(g),
	})
	for _, sc := range cfg.Streams {
		st, err := g.newStreamState(sc)
		if err != nil {
			return nil, err
		}
		g.streams[st.key] = st
		g.order = append(g.order, st.key)
	}
	g.setDigest()
	g.run.ctx = context.Background()
	return g, nil
}

// DuplicateOwnerError: another process heartbeats with this instance's
// owner id and does not leave (membership.DuplicateOwnerError).
type DuplicateOwnerError = membership.DuplicateOwnerError

// Run coordinates until ctx ends, then drains every worker (bounded by
// ShutdownTimeout, heartbeating meanwhile), writes final checkpoints,
// releases the leases and removes this instance's membership entry. It
// returns nil after a shutdown, a *DuplicateOwnerError when another process
// with the same owner id keeps heartbeating, or a misconfigured store
// (leases.ErrMisconfigured) found at start. Once running, a store that
// fails (even with a missing table) only fences the instance until it
// works again. A shard or stream failing for good does not end it: that
// one is set aside and tried again later (see fail).
func (g *Group) Run(ctx context.Context) error {
	defer g.sig.holding.Stop()
	if err := g.m.Join(ctx); err != nil {
		return err
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g.run.cancelRun = cancel
	g.run.ctx = rctx
	// The heartbeats go on through the drain, until the leases are
	// released: their own context, not Run's.
	hbCtx, hbStop := context.WithCancel(context.WithoutCancel(ctx))
	var hb sync.WaitGroup
	hb.Go(func() {
		if err := g.m.Heartbeats(hbCtx); err != nil {
			cancel(err)
		}
	})
	g.loop(rctx)
	g.run.listers.Wait()
	g.shutdown()
	hbStop()
	hb.Wait()
	g.m.Leave()
	if err := context.Cause(rctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// loop runs a round every heartbeat interval until ctx ends.
func (g *Group) loop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-g.run.kick:
			t.Stop()
		}
		g.round(ctx)
		wait := backoff.Jitter(g.cfg.Heartbeat)
		next := g.m.NextSuspect()
		if d := time.Duration(next - mono()); next != 0 && d < wait {
			wait = max(d+time.Millisecond, time.Millisecond) // a member's timeout runs out first
		}
		if d := g.youngWait(); d > 0 && d < wait {
			wait = d // a new stream's rows may be created then
		}
		t.Reset(wait)
	}
}

// round is one round of the instance's work: read the other membership
// rows, list shards when due, re-read held rows, announce dead members,
// plan, and take and release what the plan says. It does nothing while the
// instance is fenced; its calls end within a timeout, and every take within
// the fence as it stands when the take is sent.
func (g *Group) round(ctx context.Context) {
	holds := false
	defer func() { g.sig.holding.Set(holds) }()
	g.rs.rounds++
	g.applyStreamChanges()
	g.reap(ctx, false)
	g.removeStreams()
	if g.m.Fence().Passed() || g.m.Fenced() {
		return // the heartbeat loop is bringing the instance back
	}
	// The round's calls are bounded by the timeout; a take is bounded by the
	// fence (see fenced), and whatever lands after it is only an orphan.
	rctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	if !g.m.Refresh(rctx) {
		return // no full view of the members yet: plan nothing
	}
	if err := g.m.Duplicates(); err != nil {
		g.run.cancelRun(err)
		return
	}
	g.ready.Store(true)
	g.syncShards(rctx)
	g.reconcile(rctx)
	g.recheckUncertain(rctx)
	g.m.AnnounceDead(rctx)
	a := g.plan()
	g.listing.NotePlannedOpen(a)
	g.apply(rctx, a)
	holds = g.holdsPlan(a, g.rs.planned)
	g.m.RemoveStale(rctx)
	g.readBehind(rctx)
	g.m.Prune()
}

// plan returns the assignment of every active shard over the live members.
func (g *Group) plan() map[unit]string {
	var units []unit
	for name, st := range g.streams {
		if st.removing {
			continue // its shards are being released
		}
		for _, id := range st.list.Order {
			if g.active(st, id) {
				units = append(units, unit{Stream: name, Shard: id})
			}
		}
	}
	a := g.rs.balance.Plan(g.planMembers(mono()), units)
	g.rs.planned = len(units)
	if sameMap(a, g.rs.lastAssign) || maps.Equal(a, g.rs.lastAssign) {
		g.rs.sameRounds++
	} else {
		g.rs.sameRounds = 0
	}
	g.rs.lastAssign = a
	return a
}

// sameMap reports whether a and b are the same map (the planner hands back
// its last plan when nothing changed), without comparing their entries.
func sameMap(a, b map[unit]string) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
