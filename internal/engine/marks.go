package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/membership"
	"github.com/kinesislease/kinesislease/internal/rowbook"
)

// Stream marks (leases.Membership.MarkStream). This instance marks a
// stream, once per incarnation, before it takes or creates any row of it;
// the mark outlives the rows' deletion. So a row found missing in a stream
// without a mark, in a table not recreated for longer than a timeout
// (membership.Member.TableOld), is a new stream's: nobody can deliver from it, and the first
// to mark the stream creates its rows free, to be read at once. A missing
// row of a marked stream vanished: it is recovered (see recover).

// markOf returns what this instance knows of st's mark, and for how long
// it has known another's. It reads the mark when this incarnation knows
// none, at most once a round, and only in a table known old: an absent
// mark proves nothing before. An absent mark counts (MarkNone) only if
// this instance's entry is still in the table after the read, and was not
// written again since the table was judged old (rejoin, as the same
// incarnation: the entry found may be in a table recreated since; seeds
// 96123701, 97214516): the table was not recreated since the entry was written.
func (g *Group) markOf(ctx context.Context, st *streamState) (lostrow.Mark, time.Duration) {
	inc := g.Incarnation()
	rejoin := g.m.RejoinSent() // before TableOld
	m := st.book.Mark()
	switch {
	case m.Inc == inc && m.Token != "":
		return m.Kind(), time.Duration(mono() - m.At)
	case !g.m.TableOld() || m.Inc == inc && m.Round == g.rs.rounds:
		return lostrow.MarkUnknown, 0
	}
	mk, err := g.mem.StreamMark(ctx, st.key)
	if err == nil && mk.Token != "" {
		return st.book.NoteMark(inc, mk), 0
	}
	st.book.SetMark(rowbook.Mark{Inc: inc, Round: g.rs.rounds})
	// joinsSettled again after SameTable, whose read may show a join.
	if err != nil || !g.joinsSettled(st) || !g.m.SameTable(ctx, mono(), rejoin) || !g.joinsSettled(st) || g.Incarnation() != inc {
		return lostrow.MarkUnknown, 0
	}
	return lostrow.MarkNone, 0
}

// joinsSettled reports whether no member joined in the last
// membership.SettleBeats heartbeats, nor this instance itself, as far as
// it saw, or it has waited a recovery wait past the table's timeout: a
// fleet started over a few seconds creates a new stream's rows once it is
// all there, so that each shard is taken once, by the member the plan
// gives it to, not moved at every join (TestFleetStartedOverSeconds).
func (g *Group) joinsSettled(st *streamState) bool {
	now := mono()
	return time.Duration(now-g.m.LastJoin()) >= membership.SettleBeats*g.cfg.Heartbeat ||
		time.Duration(now-g.m.EntrySince()) >= g.cfg.Timeout+g.recoveryWait(st)
}

// ensureMarked marks st as this incarnation, before a take, unless it
// knows the mark already, and returns an error if it could not (no row of
// st is taken then).
func (g *Group) ensureMarked(ctx context.Context, st *streamState) error {
	_, err := g.mark(ctx, st, false)
	return err
}

// markToCreate marks st before this instance creates a row of it, whatever
// it knows: the table may have been recreated since it last wrote the mark
// (its entry's loss tells it only at its next heartbeat), and a row must
// never stand in a table without its stream's mark, or a member that finds
// it deleted there would take the stream for new.
func (g *Group) markToCreate(ctx context.Context, st *streamState) error {
	_, err := g.mark(ctx, st, true)
	return err
}

// mark writes st's mark as this incarnation, with when its subscription
// began, if the stream has none (unless this incarnation knows it already
// and fresh is not set), and returns its kind.
func (g *Group) mark(ctx context.Context, st *streamState, fresh bool) (lostrow.Mark, error) {
	inc := g.Incarnation()
	m := st.book.Mark()
	if m.Inc == inc && m.Token != "" && !fresh {
		return m.Kind(), nil
	}
	mk, err := g.mem.MarkStream(ctx, st.key, st.book.Ours(inc))
	if err != nil {
		return lostrow.MarkUnknown, fmt.Errorf("marking stream %s: %w", st.key, err)
	}
	return st.book.NoteMark(inc, mk), nil
}

// forgetMarks forgets every mark this instance knows: its entry vanished,
// perhaps with the table and the marks, and it goes on as the same
// incarnation (rejoin), so the next take marks again.
func (g *Group) forgetMarks() {
	g.streamsMu.RLock()
	defer g.streamsMu.RUnlock()
	for _, st := range g.streams {
		st.book.SetMark(rowbook.Mark{})
	}
}
