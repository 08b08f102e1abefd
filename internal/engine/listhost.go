package engine

import (
	"context"
	"errors"
	"iter"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/kinesislease/kinesislease/internal/balance"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/shardlist"
	"github.com/kinesislease/kinesislease/leases"
)

// syncShards announces a shard end or a new digest of this instance's own
// (Announce), then lists the shards of every stream that is due and
// publishes what it lists for the others (shardlist.State.Sync).
func (g *Group) syncShards(ctx context.Context) {
	g.listing.Announce(ctx)
	g.listing.Sync(ctx, g.sig.resync.Swap(false), g.streamsDigest())
}

// listingHost is the Group as its listing (shardlist.State) sees it
// (shardlist.Host): its streams as listed, what it knows of their rows,
// what it holds and its last plan; the rows a listing creates and what
// its outcome does. Round goroutine.
type listingHost Group

var _ shardlist.Host = (*listingHost)(nil)

// Subscribed yields the keys of the streams not being removed, in
// subscription order.
func (h *listingHost) Subscribed() iter.Seq[string] {
	return func(yield func(string) bool) {
		for st := range (*Group)(h).subscribed() {
			if !yield(st.key) {
				return
			}
		}
	}
}

// Stream returns the listing of the stream keyed key, and whether the
// Group has it.
func (h *listingHost) Stream(key string) (*shardlist.Stream, bool) {
	st := h.streams[key]
	if st == nil {
		return &shardlist.Stream{}, false
	}
	return st.list, true
}

// Row returns the owner the row of u names and whether it is done
// (lostrow.Row.Done), as this instance last read or wrote it.
func (h *listingHost) Row(u unit) (string, bool) {
	st := h.streams[u.Stream]
	if st == nil {
		return "", false
	}
	r := st.row(u.Shard)
	return r.Lease.Owner, r.Done()
}

// Unread reports whether the row of u is still unread since the first listing.
func (h *listingHost) Unread(u unit) bool { return (*Group)(h).unreadRow(u) }

// Holds reports whether this instance runs a worker on u.
func (h *listingHost) Holds(u unit) bool { return (*Group)(h).holds(u) }

// PlanMembers returns the live owners the plan spreads the streams over.
func (h *listingHost) PlanMembers(now int64) []string {
	return balance.Owners((*Group)(h).planMembers(now))
}

// Planned returns the owner the last plan gave u to.
func (h *listingHost) Planned(u unit) string { return h.rs.lastAssign[u] }

// Background runs fn with Run's context as one of the listers Run waits
// for before it drains, then kicks a round: the one that applies its
// answer.
func (h *listingHost) Background(fn func(ctx context.Context)) {
	g := (*Group)(h)
	ctx := g.run.ctx
	g.run.listers.Go(func() {
		fn(ctx)
		g.kickRound()
	})
}

// ShardsListed does the rows' side of a listing of the stream keyed key,
// old its shards before (nil before the first listing). The first listing
// leaves every row unread: the rounds that follow read them (the planned
// ones to take them, the others in readBehind), keeping what they read,
// for checkpoints at SHARD_END (parents done), rows that exist, the
// checkpoints this instance would recreate a vanished row from.
func (h *listingHost) ShardsListed(ctx context.Context, key string, old map[string]types.Shard) error {
	g, st := (*Group)(h), h.streams[key]
	if old == nil {
		st.book.FirstListed(st.list.Order)
		return nil
	}
	// New shards (children of a split or merge): create their rows (free,
	// no checkpoint: a child starts at its own beginning), and have the
	// next round poll the parents of those the plan will give this
	// instance (ParentsToRead), so that they start as soon as the parents
	// are done.
	for _, id := range st.list.Order {
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

// ListingDone applies the outcome of a listing of the stream keyed key:
// its failure cleared, or the stream set aside (fail) when ListShards
// failed for good, or a warning.
func (h *listingHost) ListingDone(ctx context.Context, key string, err error) {
	g, st := (*Group)(h), h.streams[key]
	switch {
	case err == nil:
		g.healthMu.Lock()
		st.list.Failure = failure{}
		g.healthMu.Unlock()
	case kinesisx.Permanent(err) && !errors.Is(err, leases.ErrMisconfigured):
		g.fail(st, "", err)
	case ctx.Err() == nil:
		// A lease store that stopped working while running (its table
		// dropped, access withdrawn) is not the stream's fault: the
		// heartbeat fences and reports it, and the listing is tried
		// again every round, so that the stream resumes as soon as the
		// table is back, not after a stream's backoff.
		st.log.WarnContext(ctx, "kinesislease: listing shards failed; retrying", "err", err)
	}
}
