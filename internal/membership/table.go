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
// (leases.Member.Young), or a header born long enough ago (bornOld). A
// holder in a table recreated before then has passed its fence: it never
// joins the new table as the incarnation that held (rejoin).
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

// bornOld reports whether a table whose header shows born
// (leases.MemberHeader.Born) was created more than twice timeout before
// now: a holder of an earlier table of the name lost it before born and
// has passed its fence a timeout later at most, and the second timeout
// covers clocks (the creator's, DynamoDB's, this instance's) apart by up
// to a timeout. A table that never had an earlier one
// (leases.BornNoPredecessor) is old at once; an unknown birth (0) never.
func bornOld(born int64, now time.Time, timeout time.Duration) bool {
	return born == leases.BornNoPredecessor || born > 0 && now.Sub(time.UnixMilli(born)) > 2*timeout
}
