package engine

// The Group and its state, grouped by owner: what the round loop, the
// heartbeat loop and Run each keep (signals, roundState, runState; the
// listing's is a shardlist.State, the lost rows' a lostbook.Book), with the
// small reads and the wake-up that the other files share (holds, unreadRow,
// kickRound, putIn, loadString).

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/kinesislease/kinesislease/internal/balance"
	"github.com/kinesislease/kinesislease/internal/lostbook"
	"github.com/kinesislease/kinesislease/internal/membership"
	"github.com/kinesislease/kinesislease/internal/observe"
	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/internal/shardlist"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

// unit names one shard of one stream.
type unit = plan.Unit

// Group keeps the leases of every stream of one instance under the
// membership protocol. Three kinds of goroutine share it:
//
//   - the heartbeat loop (its membership.Member's) alone writes this
//     instance's membership entry and moves its fence, on its own
//     schedule: no round, listing, reconciliation or slow store call
//     delays a heartbeat;
//   - the round loop (round, run.go) reads the other membership rows,
//     lists shards, plans, takes and releases, with every call bounded by
//     a deadline that ends at the fence;
//   - one worker per held shard, reading and delivering while its lease is
//     valid.
type Group struct {
	cfg   GroupConfig
	mem   leases.Membership
	store leases.Store
	h     *observe.Hooks
	log   *slog.Logger
	// m is this instance's side of the membership protocol: its join,
	// heartbeats, fence, incarnations and view of the other members.
	m *membership.Member

	// mu guards workers. A change of incarnation and the fencing of every
	// worker happen under m's lock (membership.Member.Locked; fenceWorkers
	// holds both), and so does a new worker's check of the incarnation it
	// took its row as (startWorker), so that no worker of an incarnation
	// that is over ever starts. m's lock is taken first.
	mu      sync.Mutex
	workers map[unit]*worker
	// lost is what this instance keeps of rows it may name or know without
	// a worker (the lost-row protocol: lostrows.go, missing.go, orphans.go,
	// reconcile.go), under its own lock, taken after mu: where the workers
	// and the orphans must agree (a worker started or fenced, an orphan
	// made only of a row not held, the orphans counted with the workers),
	// mu is held across the one call to lost that reads or changes them.
	lost *lostbook.Book[unit]

	// streams is every subscribed stream by key. Only the round goroutine
	// changes it (applyStreamChanges, at the start of a round, with
	// streamsMu held); other goroutines read it under streamsMu.
	streams   map[string]*streamState
	order     []string // the keys of streams, in subscription order
	streamsMu sync.RWMutex
	// digest is streamsDigest's value; otherStreams the live members last
	// seen subscribing other streams (round goroutine).
	digest       atomic.Pointer[string]
	otherStreams []string
	// changes are the AddStream and RemoveStream calls not yet applied.
	changesMu sync.Mutex
	changes   []streamChange

	sig     signals          // set by the heartbeat loop, taken by the round loop
	rs      roundState       // the round goroutine's own
	listing *shardlist.State // the listing of each stream by one lister
	run     runState         // Run's context, its cancel, the round's wake-up

	ready atomic.Bool
	// healthMu guards the streams' failed and listing for Health: the
	// round's goroutine, their only writer, takes it to write them.
	healthMu sync.Mutex
	stats    observe.Stats
}

// signals are set by the heartbeat loop and taken by the round loop.
type signals struct {
	reconcileNow atomic.Bool        // our Notice moved: re-read every held row
	recheckAgain atomic.Bool        // a re-read of lately released rows failed: again next round
	resync       atomic.Bool        // a member ended a shard: the listers list their streams
	ended        atomic.Int64       // shards this instance read to their end, or found ended (shardlist.State.FoundEnded)
	holding      syncx.Latest[bool] // whether each round ended holding this instance's part (WaitHolding)
}

// roundState is the round goroutine's own: the plan and its bookkeeping.
type roundState struct {
	balance    *balance.Balancer // the planner, by count or by load
	lastAssign map[unit]string
	planned    int // active shards the last plan was made of
	sameRounds int
	rounds     int
	reconciled int // rounds of reconciliation done (its slice of the held rows)
	// rechecks: the held rows a re-read of every held row (an operator's
	// notice, a vanished report) has still to read; it goes on over the
	// rounds, within readBudget each.
	rechecks map[unit]bool
	// parentPoll: where the next poll of the parents' rows starts (see
	// readBehind).
	parentPoll int
}

// runState is Run's: kick wakes the round loop early (a held row
// vanished); cancelRun ends Run with an error (set by Run); ctx is Run's
// context while it coordinates (Background before): the background
// listings' (listingHost.Background), which Run waits for (listers) before it drains.
type runState struct {
	kick      chan struct{}
	cancelRun context.CancelCauseFunc
	ctx       context.Context
	listers   sync.WaitGroup
}

// streamChange is one AddStream or RemoveStream call, applied by the round
// goroutine; done gets its outcome (for a removal: once every shard of the
// stream is released).
type streamChange struct {
	add    *streamState
	remove string
	done   chan error
}

// Incarnation returns this process's current incarnation id: before Run
// has joined the membership, the process's random suffix alone (its first
// incarnation is that suffix in the row it joins, "row.suffix").
func (g *Group) Incarnation() string { return g.m.Incarnation() }

func (g *Group) holds(u unit) bool {
	return syncx.Guarded(&g.mu, func() bool { return g.workers[u] != nil })
}

// unreadRow reports whether the row of u is still unread since the first
// listing.
func (g *Group) unreadRow(u unit) bool {
	return g.streams[u.Stream].book.Unread(u.Shard)
}

// kickRound makes the round loop run a round now.
func (g *Group) kickRound() {
	select {
	case g.run.kick <- struct{}{}:
	default:
	}
}
