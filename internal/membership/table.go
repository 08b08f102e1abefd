package membership

import (
	"context"
	"slices"
	"time"

	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/internal/roster"
	"github.com/kinesislease/kinesislease/leases"
)

// TableOld reports whether the table this instance's entry is in was not
// recreated for longer than a timeout: the entry has stood that long, or a
// read of the table since showed an entry of another member that had
// (leases.Member.Young). A holder in a table recreated before then has
// passed its fence: it never joins the new table as the incarnation that
// held (rejoin).
func (me *Member) TableOld() bool {
	since := me.entrySince.Load()
	seen := me.oldSeen.Load()
	return since != 0 && (time.Duration(fence.Mono()-since) >= me.cfg.Timeout || seen != 0 && seen >= since)
}

// SameTable reports whether a read of this instance's membership row sent
// at or after at found its entry, not written again (rejoin) since the
// RejoinSent the caller read before it judged the table old: what was read
// before at was read from the table the entry is in, not one recreated
// since. Callers share reads: one sent after their at, in flight or done,
// serves them all, and a new one starts only when none will, so that the
// reads run back to back however many rows are being taken (20,000 at a
// start).
func (me *Member) SameTable(ctx context.Context, at, rejoin int64) bool {
	return me.check.Read(ctx, at, fence.Mono, func() bool { return me.ownEntryIntact(ctx, me.Incarnation()) }) && me.rejoinSent.Load() == rejoin
}

// ownEntryIntact reads this instance's membership row and reports whether
// its entry as inc is still there.
func (me *Member) ownEntryIntact(ctx context.Context, inc string) bool {
	row := roster.RowOf(inc)
	sent := fence.Mono()
	ms, err := me.mem.Members(ctx, row)
	if err != nil {
		return false
	}
	me.observe(row, ms, sent, fence.Mono())
	return slices.ContainsFunc(ms, func(m leases.Member) bool { return m.Owner == me.cfg.Owner && m.Incarnation == inc })
}
