package engine

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/shardlist"
	"github.com/kinesislease/kinesislease/leases"
)

// syncShards lists the shards of every stream that is due (shardlist.State.Due: the
// first round; this instance's own shard ended; for the stream's lister,
// every ShardSyncInterval and after a shard ended at another member; for
// the others, once its lister's digest of the shard set changes to one
// that differs from theirs), publishes what it lists for the others, and
// announces a shard end or a new digest of its own (Announce; see
// shardlist).
func (g *Group) syncShards(ctx context.Context) {
	g.listing.Announce(ctx)
	ended := g.sig.resync.Swap(false)
	g.listing.Choose(g.streamsDigest())
	now := time.Now()
	g.listing.Prune() // removed
	for st := range g.subscribed() {
		g.listing.OthersEnded(st.key, ended)
		if st.listed != nil {
			select {
			case res := <-st.listed:
				st.listed = nil
				g.listedShards(ctx, st, res)
			default:
				continue // still listing: the round goes on with the shards it knows
			}
		}
		if !st.listing.waiting(now) && g.listing.Due(st.key, st.shards == nil || st.resync || st.listing.n > 0) {
			g.listAsync(st)
		}
	}
	g.listing.Publish()
}

// listTimeout bounds a background listing of a stream's shards (every
// page, with the client's retries), when the timeout is shorter.
const listTimeout = 30 * time.Second

// listAsync lists st's shards in the background: ListShards may take
// seconds (throttled, paged, slow), and the round's reads, takes and
// releases, which keep a vanished row's sightings close enough together to
// join and the plan's moves on time, must not wait on it. The round that
// finds the answer applies it (listedShards); the answer kicks one at once.
func (g *Group) listAsync(st *streamState) {
	ch := make(chan listing, 1)
	st.listed = ch
	st.resync = false // asked for before this listing: it answers that
	g.listing.ListingNow(st.key)
	sent := time.Now()
	ctx := g.run.ctx
	g.run.listers.Go(func() {
		// No round waits on it, so it is bounded by listTimeout rather
		// than the lease timeout: a listing slower than the timeout (a
		// loaded kinesis-local took over 600 ms a call for 30 s, the test
		// fleets' timeout) completes instead of being cancelled every time.
		lctx, cancel := context.WithTimeout(ctx, max(g.cfg.Timeout, listTimeout))
		defer cancel()
		shards, err := kinesisx.ListShards(lctx, g.cfg.Client, st.cfg.Stream)
		ch <- listing{shards: shards, err: err, sent: sent}
		g.kickRound()
	})
}

// listedShards applies the answer of a listing of st (see listAsync).
func (g *Group) listedShards(ctx context.Context, st *streamState, res listing) {
	err := res.err
	if err == nil {
		err = g.listShards(ctx, st, res.shards, res.sent)
	}
	g.listing.Retry(st.key, err != nil)
	switch {
	case err == nil:
		g.healthMu.Lock()
		st.listing = failure{}
		g.healthMu.Unlock()
	case kinesisx.Permanent(err) && !errors.Is(err, leases.ErrMisconfigured):
		g.fail(st, "", err)
	case ctx.Err() == nil:
		// A lease store that stopped working while running (its table
		// dropped, access withdrawn) is not the stream's fault: the
		// heartbeat fences and reports it, and the listing is tried
		// again every round, so that the stream resumes as soon as the
		// table is back, not after a stream's backoff.
		st.log.Warn("kinesislease: listing shards failed; retrying", "err", err)
	}
}

// listShards refreshes the shard list of st from shards, listed by a call
// sent at sent. The first listing sets the shard list at once, so that the
// plan runs, and leaves every row unread: the rounds that follow read them
// (the planned ones to take them, the others in readBehind), keeping what
// they read, for checkpoints at SHARD_END (parents done), rows that exist,
// the checkpoints this instance would recreate a vanished row from.
func (g *Group) listShards(ctx context.Context, st *streamState, shards []types.Shard, sent time.Time) error {
	old := st.shards // nil before the first listing
	shardsNow, order := shardlist.ShardMap(shards, st.order)
	st.shards, st.order = shardsNow, order
	if old == nil {
		st.book.FirstListed(order)
	}
	st.lastSync = sent
	g.listing.Listed(st.key, order)
	if old == nil {
		return nil
	}
	// New shards (children of a split or merge): create their rows (free,
	// no checkpoint: a child starts at its own beginning), and have the
	// next round poll the parents of those the plan will give this
	// instance (ParentsToRead), so that they start as soon as the parents
	// are done.
	for _, id := range st.order {
		if _, known := old[id]; known {
			continue
		}
		if l, err := g.store.Create(ctx, leases.Key{Stream: st.key, Shard: id}); err == nil {
			st.book.Set(id, lostrow.Row{Lease: l})
		} else if !errors.Is(err, leases.ErrConflict) {
			return err
		}
		g.listing.PollSoon()
	}
	return nil
}
