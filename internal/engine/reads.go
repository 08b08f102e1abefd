package engine

// The rows read apart from the round's takes: the first listing's rows
// over the rounds that follow, and open parents polled for SHARD_END
// (readBehind), each recorded in its stream's book (rowbook.Book); and
// what the book tells of a shard or a stream (active, youngWait).

import (
	"context"
	"errors"
	"time"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

// readBehind reads, within a part of the round (readBudget), rows that no
// round's plan waits on: first the rows of the first listing not read yet
// (readUnread), then the rows of open parents that parentsToRead picks:
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
		for _, id := range st.book.UnreadIn(st.list.Order, func(id string) bool { return len(g.listing.Children(st.key, id)) > 0 }) {
			units = append(units, unit{Stream: st.key, Shard: id})
		}
	}
	syncx.Bounded(ctx, storeConcurrency, len(units), func(i int) {
		if st := g.streams[units[i].Stream]; ctx.Err() == nil {
			// Unless another call of this instance read or wrote the
			// row meanwhile (that answer stands).
			g.readRowAs(ctx, st, units[i].Shard, st.book.SetIfUnread)
		}
	})
}

// readRow reads (without creating) the row of shard id into st.book.
func (g *Group) readRow(ctx context.Context, st *streamState, id string) error {
	return g.readRowAs(ctx, st, id, func(id string, r lostrow.Row) bool { st.book.Set(id, r); return true })
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
		// it vanish within lostbook.ReleasedFor, a vanished report makes this
		// instance read it again and recreate it from what it knows, not
		// leave it to a member that knows none (TestDynamoMembership/seed=1:
		// a member that had read the row only at its first listing knew 84
		// records' checkpoint while a restarted member that knew none
		// created the row at the start position).
		g.lost.NoteRead(unit{Stream: st.key, Shard: id}, l)
	}
	return nil
}

// active reports whether shard id may be read: not ended (unless a rewind
// is pending), every parent still in the stream at SHARD_END.
func (g *Group) active(st *streamState, id string) bool {
	if st.row(id).Done() {
		return false
	}
	for _, p := range kinesisx.Parents(st.list.Shards[id]) {
		if _, in := st.list.Shards[p]; in && st.row(p).Lease.Checkpoint.Sequence != leases.ShardEnd {
			return false
		}
	}
	return true
}

// youngWait is how long until the table is known old and the joins
// settled (membership.Member.SettledAt, joinsSettled), plus
// a millisecond, while a stream none of whose rows this instance saw waits
// for that to be taken as new; 0 otherwise. The round loop runs a round
// then rather than at its cadence.
func (g *Group) youngWait() time.Duration {
	at := g.m.SettledAt()
	for _, st := range g.streams {
		if st.list.Shards != nil && !st.removing && !st.book.SawRows() && at > mono() {
			return time.Duration(at-mono()) + time.Millisecond
		}
	}
	return 0
}
