package engine

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/leases"
)

// syncShards lists the shards of every stream that is due (the first
// round, every ShardSyncInterval, after a shard ended here or at another
// member), and every few rounds re-reads the rows of parents not known to
// be done, so that their children start once they reach SHARD_END.
func (g *Group) syncShards(ctx context.Context) {
	if g.resync.Swap(false) {
		for _, st := range g.streams {
			st.resync = true
		}
	}
	now := time.Now()
	for _, st := range g.streams {
		if st.removing {
			continue
		}
		if st.listed != nil {
			select {
			case res := <-st.listed:
				st.listed = nil
				g.listedShards(ctx, st, res)
			default:
				continue // still listing: the round goes on with the shards it knows
			}
		}
		if st.listing.waiting(now) {
			continue
		}
		if st.shards == nil || st.resync || time.Since(st.lastSync) >= g.cfg.ShardSyncInterval || st.listing.n > 0 {
			g.listAsync(st)
		}
	}
	if g.rounds%4 != 0 {
		return
	}
	var parents []unit
	for name, st := range g.streams {
		for _, id := range st.order {
			for _, p := range kinesisx.Parents(st.shards[id]) {
				if _, in := st.shards[p]; in && st.row(p).lease.Checkpoint.Sequence != leases.ShardEnd && !g.holds(unit{Stream: name, Shard: p}) {
					parents = append(parents, unit{Stream: name, Shard: p})
				}
			}
		}
	}
	bounded(ctx, len(parents), func(i int) {
		g.readRow(ctx, g.streams[parents[i].Stream], parents[i].Shard)
	})
}

// listTimeout bounds a background listing of a stream's shards (every
// page, with the client's retries), when the timeout is shorter.
const listTimeout = 30 * time.Second

// listing is the answer of a ListShards of a stream (every page), sent at
// sent.
type listing struct {
	shards []types.Shard
	err    error
	sent   time.Time
}

// listAsync lists st's shards in the background: ListShards may take
// seconds (throttled, paged, slow), and the round's reads, takes and
// releases, which keep a vanished row's sightings close enough together to
// join and the plan's moves on time, must not wait on it. The round that
// finds the answer applies it (listedShards); the answer kicks one at once.
func (g *Group) listAsync(st *streamState) {
	ch := make(chan listing, 1)
	st.listed = ch
	st.resync = false // asked for before this listing: it answers that
	sent := time.Now()
	ctx := g.runCtx
	g.listers.Go(func() {
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
	switch {
	case err == nil:
		g.healthMu.Lock()
		st.listing = failure{}
		g.healthMu.Unlock()
	case fatal(err) && !errors.Is(err, leases.ErrMisconfigured):
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
// sent at sent. The first listing reads every row once (concurrently):
// checkpoints at SHARD_END (parents done), rows that exist, the
// checkpoints this instance would recreate a vanished row from.
func (g *Group) listShards(ctx context.Context, st *streamState, shards []types.Shard, sent time.Time) error {
	first := st.shards == nil
	old := st.shards
	shardsNow, order := shardMap(shards, st.order)
	if first {
		errs := make([]error, len(order))
		bounded(ctx, len(order), func(i int) { errs[i] = g.readRow(ctx, st, order[i]) })
		if err := errors.Join(errs...); err != nil {
			return err // listed again next round
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	st.shards, st.order = shardsNow, order
	st.lastSync = sent
	if first {
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
			st.setRow(id, rowState{lease: l})
		} else if !errors.Is(err, leases.ErrConflict) {
			return err
		}
		for _, p := range kinesisx.Parents(st.shards[id]) {
			if _, in := st.shards[p]; in && !g.holds(unit{Stream: st.key, Shard: p}) {
				if err := g.readRow(ctx, st, p); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// readRow reads (without creating) the row of shard id into st.rows.
func (g *Group) readRow(ctx context.Context, st *streamState, id string) error {
	sent := mono()
	l, err := g.store.Get(ctx, leases.Key{Stream: st.key, Shard: id})
	switch {
	case errors.Is(err, leases.ErrNotFound):
		st.setRow(id, missingAt(sent, mono()))
		return nil
	case err != nil:
		return err
	}
	st.setRow(id, rowState{lease: l})
	if !g.ours(l) {
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

// active reports whether shard id may be read: not ended (unless a rewind
// is pending), every parent still in the stream at SHARD_END.
func (g *Group) active(st *streamState, id string) bool {
	r := st.row(id)
	if r.lease.Checkpoint.Sequence == leases.ShardEnd && r.lease.RewindTo.IsZero() {
		return false
	}
	for _, p := range kinesisx.Parents(st.shards[id]) {
		if _, in := st.shards[p]; in && st.row(p).lease.Checkpoint.Sequence != leases.ShardEnd {
			return false
		}
	}
	return true
}

// newStream reports whether a stream none of whose rows this instance ever
// saw exist may be taken as new, its missing rows created at once: no fleet
// read the table when this instance joined (the membership header was
// empty, a new table or one emptied under its fleet; or every other entry
// was of a process that had just joined: a fleet starting together), it
// joined at least two heartbeats ago, by when the members of a running
// fleet have written their entries again, and no other member's entry
// that is not leaving says it holds a lease (Held: alive in this view or
// not), and it is the live member with the lowest owner id of those that
// plan the stream (one creator per new stream). On a table in use a missing row may be one that
// vanished under a holder that is paused or partitioned: it is created only
// by missingRow's wait, at the start position only if no member recreated
// it from a checkpoint first. So a stream added to a running fleet starts
// after that wait.
func (g *Group) newStream(st *streamState) bool {
	if st.sawRows() || g.tableInUse.Load() {
		return false
	}
	if time.Duration(mono()-g.joinedAt.Load()) < 2*g.cfg.Heartbeat {
		return false
	}
	g.viewMu.Lock()
	defer g.viewMu.Unlock()
	for owner, m := range g.view.latest {
		// Any entry that says it holds a lease, alive in this view or not:
		// a view whose reads failed may take a live holder for dead, and a
		// dead one's entry is marked leaving (announceDead) once its fence
		// has passed.
		if owner != g.cfg.Owner && m.Held > 0 && !m.Leaving {
			return false
		}
	}
	// One creator per new stream: the live member with the lowest owner id
	// of those that plan it (see planMembers). The others create a missing
	// row only by missingRow's wait, so that a row the creator made, took
	// and lost between two of their reads (each finding it missing) is not
	// created again while its holder may still deliver: an entry shows the
	// take only from its next heartbeat (seeds 2505094, 2510955, 2523609).
	return g.lowestPlanner()
}

// lowestPlanner reports whether this instance has the lowest owner id of
// the live members that plan its streams (see planMembers). The caller
// holds viewMu.
func (g *Group) lowestPlanner() bool {
	mine := g.streamsDigest()
	for _, o := range g.view.live(mono()) {
		if d := g.view.latest[o].Streams; o < g.cfg.Owner && (d == "" || d == mine) {
			return false
		}
	}
	return true
}
