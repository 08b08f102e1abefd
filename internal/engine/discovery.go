package engine

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/shardlist"
	"github.com/kinesislease/kinesislease/internal/syncx"
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

// readBehind reads, within a part of the round (readBudget), rows that no
// round's plan waits on: first the rows of the first listing not read yet
// (readUnread), then the rows of open parents that ParentsToRead picks:
// every fourth round those whose children the plan will give this
// instance, so that they start once the parents reach SHARD_END, and
// those of a member that announced a shard end. Neither starts again from
// the first row: what was read stays read, and the parents are read from
// where the last poll stopped.
func (g *Group) readBehind(ctx context.Context) {
	bctx, cancel := context.WithTimeout(ctx, g.readBudget())
	defer cancel()
	g.sig.ended.Add(g.listing.FoundEnded())
	g.readUnread(bctx)
	if bctx.Err() != nil {
		return
	}
	poll := g.listing.TakePollSoon() || g.rs.rounds%4 == 0
	parents := g.listing.ParentsToRead(poll)
	n := len(parents)
	if n == 0 {
		return
	}
	from := g.rs.parentPoll % n
	sent, ok := make([]int64, n), make([]bool, n)
	syncx.Bounded(bctx, storeConcurrency, n, func(i int) {
		j := (from + i) % n
		u := parents[j]
		sent[j] = mono()
		ok[j] = g.readRow(bctx, g.streams[u.Stream], u.Shard) == nil
	})
	read := 0
	for i, u := range parents {
		if ok[i] {
			read++
			g.listing.ParentRead(u, sent[i])
		}
	}
	g.rs.parentPoll = from + read
}

// readBudget is how long a round may spend on the reads of readBehind: a
// heartbeat interval, so that whatever their number the next round plans,
// takes and releases on time, and the reads go on then.
func (g *Group) readBudget() time.Duration { return g.cfg.Heartbeat }

// readUnread reads the rows of the first listing that this instance has
// not read yet: the parents of a split or merge first (their SHARD_END
// decides which children are planned), then in shard order. The rows the
// plan gives this instance were read by the round's takes already.
func (g *Group) readUnread(ctx context.Context) {
	var units []unit
	for st := range g.subscribed() {
		st.rowsMu.Lock()
		for _, parents := range []bool{true, false} {
			for _, id := range st.order {
				if st.unread[id] && (len(g.listing.Children(st.key, id)) > 0) == parents {
					units = append(units, unit{Stream: st.key, Shard: id})
				}
			}
		}
		st.rowsMu.Unlock()
	}
	syncx.Bounded(ctx, storeConcurrency, len(units), func(i int) {
		if st := g.streams[units[i].Stream]; ctx.Err() == nil {
			// Unless another call of this instance read or wrote the
			// row meanwhile (that answer stands).
			g.readRowAs(ctx, st, units[i].Shard, st.setIfUnread)
		}
	})
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
	st.rowsMu.Lock()
	st.shards, st.order = shardsNow, order
	if old == nil {
		st.unread = make(map[string]bool, len(order))
		for _, id := range order {
			if _, known := st.rows[id]; !known {
				st.unread[id] = true
			}
		}
	}
	st.rowsMu.Unlock()
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
			st.setRow(id, lostrow.Row{Lease: l})
		} else if !errors.Is(err, leases.ErrConflict) {
			return err
		}
		g.listing.PollSoon()
	}
	return nil
}

// readRow reads (without creating) the row of shard id into st.rows.
func (g *Group) readRow(ctx context.Context, st *streamState, id string) error {
	return g.readRowAs(ctx, st, id, func(id string, r lostrow.Row) bool { st.setRow(id, r); return true })
}

// readRowAs reads the row of shard id and records what it found with set,
// which reports whether it recorded it.
func (g *Group) readRowAs(ctx context.Context, st *streamState, id string, set func(string, lostrow.Row) bool) error {
	l, err := g.store.Get(ctx, leases.Key{Stream: st.key, Shard: id})
	switch {
	case errors.Is(err, leases.ErrNotFound):
		set(id, lostrow.Row{Missing: true})
		return nil
	case err != nil:
		return err
	}
	if set(id, lostrow.Row{Lease: l}) && !g.ours(l) {
		// Known by its checkpoint now, as a row read to take it is: should
		// it vanish within releasedFor, a vanished report makes this
		// instance read it again and recreate it from what it knows, not
		// leave it to a member that knows none (TestDynamoMembership/seed=1:
		// a member that had read the row only at its first listing knew 84
		// records' checkpoint while a restarted member that knew none
		// created the row at the start position).
		g.noteRead(unit{Stream: st.key, Shard: id}, l)
	}
	return nil
}

// rowDone reports whether row r is at its shard's end with no rewind
// pending.
func rowDone(r lostrow.Row) bool {
	return r.Lease.Checkpoint.Sequence == leases.ShardEnd && r.Lease.RewindTo.IsZero()
}

// active reports whether shard id may be read: not ended (unless a rewind
// is pending), every parent still in the stream at SHARD_END.
func (g *Group) active(st *streamState, id string) bool {
	if rowDone(st.row(id)) {
		return false
	}
	for _, p := range kinesisx.Parents(st.shards[id]) {
		if _, in := st.shards[p]; in && st.row(p).Lease.Checkpoint.Sequence != leases.ShardEnd {
			return false
		}
	}
	return true
}

// youngWait is how long until the table is known old
// (membership.Member.TableOld) and the joins settled (joinsSettled), plus
// a millisecond, while a stream none of
// whose rows this instance saw waits for that to be taken as new; 0
// otherwise. The round loop runs a round
// then rather than at its cadence.
func (g *Group) youngWait() time.Duration {
	since := g.m.EntrySince()
	if since == 0 || g.m.TableOld() {
		return 0
	}
	at := since + int64(g.cfg.Timeout)
	if seen := g.m.JoinSeen(); seen != 0 {
		at = max(at, seen+int64(3*g.cfg.Heartbeat))
	}
	for _, st := range g.streams {
		if st.shards != nil && !st.removing && !st.sawRows() && at > mono() {
			return time.Duration(at-mono()) + time.Millisecond
		}
	}
	return 0
}
