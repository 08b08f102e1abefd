package engine

// What each subscribed stream knows of its shards' rows: the rows as last
// read or written, which ones were seen missing and since when, and the
// shards set aside after failing.

import (
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/leases"
)

// orphan is a row that may name incarnation inc of this instance with no
// worker reading it; known is the row as this instance last knew it.
type orphan struct {
	inc   string
	known leases.Lease
	// presumed: known is the row as our take would have left it, had its
	// lost answer landed (the counter alone does not prove it).
	presumed bool
	// vanished: this instance found the row missing (a row deleted, a
	// table recreated); if it is back with no checkpoint, it was recreated
	// by a member that knew none, and known's checkpoint is written on it
	// at the retake.
	vanished bool
	// knew: the checkpoint an orphan this one replaced knew, when known
	// has none (see best).
	knew leases.Checkpoint
	// holderUntil (on mono(); 0 for none): the row vanished under this
	// incarnation's own worker, whose release then failed (a drain, a
	// hand-over). Until then, no other member can have recreated it (see
	// vanishedOrphan), so this instance recreates it at once, as a holder
	// does (recreate), not after lostRowWait.
	holderUntil int64
}

type streamState struct {
	cfg StreamConfig
	// key is the stream's identity in the lease table: its name, however
	// it was subscribed (a name or an ARN, cfg.Stream, used for the calls
	// to Kinesis). Units, rows and the plan use it.
	key      string
	log      *slog.Logger
	shards   map[string]types.Shard
	order    []string
	lastSync time.Time
	resync   bool
	// listed: the answer of the listing in flight (listAsync), nil when
	// none is.
	listed chan listing
	// rows is what this instance last read or wrote of each row, by shard
	// id. Guarded by rowsMu while a round's calls run concurrently.
	rowsMu sync.Mutex
	rows   map[string]rowState
	// unread: the shards of the first listing whose rows this instance has
	// neither read nor written since (guarded by rowsMu). The first listing
	// sets the shard list at once and reads the rows over the rounds that
	// follow (readUnread), never inside one round: a row not read yet is
	// unknown, neither missing nor free, and a stream with one is never
	// taken as new (newStream).
	unread map[string]bool
	// children: the shards that are a parent of a listed shard (isParent),
	// computed once per listing (nil until then; guarded by rowsMu).
	children map[string]bool
	// hadRows: this instance saw a row of the stream exist, at its first
	// listing or since: the stream is read already, so a missing row may be
	// one that vanished (see newStream), never a new stream's. Guarded by
	// rowsMu.
	hadRows bool
	// createdAll: this instance created the missing rows of the new
	// stream (see createAll).
	createdAll bool
	// creating: createAll is creating them, in the background.
	creating bool
	// probe: the other members' heartbeats when this instance first found
	// the stream's rows missing as a new stream's (see settled). Guarded
	// by rowsMu.
	probe *newProbe
	// probing: probeEarly is reading the membership for a probe.
	probing bool
	// missingGap: two reads that found a row missing further apart than
	// this do not show it missing in between (a round's reads may take up
	// to a timeout; a row recreated and deleted again within this, unseen
	// by this instance, is not provided for). Nor do two reads between
	// which a call of this instance found the row existing (exist).
	missingGap time.Duration
	exist      *existence // the Group's (nil in tests that build a streamState alone)
	// removing: RemoveStream was called; removed get nil once every shard
	// of the stream is released.
	removing bool
	removed  []chan error
	// failed holds the shards set aside after failing for good, by shard
	// id; listing is the stream's own (ListShards failed for good).
	failed  map[string]*failure
	listing failure
}

func (st *streamState) row(id string) rowState {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	return st.rows[id]
}

// setRow records what a read or write found of row id. A row found missing
// keeps what was known of it before, and the first read that found it
// missing dates its absence.
func (st *streamState) setRow(id string, r rowState) {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	st.setRowLocked(id, r)
}

// setIfUnread records r, what a read of the row of id found, only if no
// other call of this instance read or wrote the row since the first
// listing: a later answer is never replaced by this one. It reports
// whether it did.
func (st *streamState) setIfUnread(id string, r rowState) bool {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	if !st.unread[id] {
		return false
	}
	st.setRowLocked(id, r)
	return true
}

// allRead reports whether the shards are listed and every row of the first
// listing was read (or written) by this instance.
func (st *streamState) allRead() bool {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	return st.shards != nil && len(st.unread) == 0
}

func (st *streamState) setRowLocked(id string, r rowState) {
	delete(st.unread, id)
	old := st.rows[id]
	if r.missing {
		r.lease, r.seen = old.lease, old.seen
		if old.missing && r.missingConfirm-old.missingConfirm <= int64(st.missingGap) && !st.existedSince(id, old.missingConfirm) && old.firstSent >= st.resetAt(id) {
			// Missing at both reads, close enough together to take the row
			// as missing in between, no call of this instance found it
			// existing since the earlier one was sent, and no other member
			// reported a recreation since the first was sent (a row
			// recreated and deleted again between two reads, unseen by this
			// instance: its recreator reports it in the header, and every
			// member starts its wait again; see missingFor).
			n := r
			r.missingSince, r.firstSent, r.reported = old.missingSince, old.firstSent, old.reported
			r.missingConfirm, r.confirmRet = old.missingConfirm, old.confirmRet
			r.validConfirm, r.validOK = old.validated(st.checkedAt())
			if n.missingConfirm > old.missingConfirm {
				r.missingConfirm, r.confirmRet = n.missingConfirm, n.confirmRet
			}
		}
	} else {
		r.seen = true
		st.hadRows = true
	}
	if r.lease.Checkpoint.IsZero() && r.lease.RewindTo.IsZero() && r.knew.IsZero() {
		r.knew = old.best()
	}
	st.rows[id] = r
}

// missingAt is a row found missing by a read sent at sent that returned at
// ret (on mono()).
func missingAt(sent, ret int64) rowState {
	return rowState{missing: true, missingSince: ret, missingConfirm: sent, firstSent: sent, confirmRet: ret}
}

// resetAt is when this instance last learnt of another member's recreation
// of a vanished row (see existence.resetAt); math.MinInt64 for none.
func (st *streamState) resetAt(id string) int64 {
	if st.exist == nil {
		return math.MinInt64
	}
	return st.exist.reset(leases.Key{Stream: st.key, Shard: id})
}

// missingFor is how long r has been seen missing, as far as a header read
// has confirmed it: up to the latest read that returned before the last
// header read applied was sent (validated). A read
// that returned after it is not counted yet: a member that recreated the
// row between this instance's reads, and whose holder may deliver,
// announced it in the header (ReportRecreated) before anyone delivered
// from it, so the next header read shows it and every wait begins again
// (setRow). Zero or less when nothing is confirmed.
func (st *streamState) missingFor(id string, r rowState) time.Duration {
	if !r.missing || r.firstSent < st.resetAt(id) {
		return 0
	}
	if v, ok := r.validated(st.checkedAt()); ok {
		return time.Duration(v - r.missingSince)
	}
	return 0
}

// checkedAt is when the last header read applied was sent (see
// existence.checkedAt); in a streamState alone (tests), every read counts
// as confirmed.
func (st *streamState) checkedAt() int64 {
	if st.exist == nil {
		return 1 << 62
	}
	return st.exist.checkedAt.Load()
}

// validated is when the latest read of r's sighting that returned before
// a header read sent at checked was sent, and whether there is one.
func (r rowState) validated(checked int64) (int64, bool) {
	v, ok := r.validConfirm, r.validOK
	if r.confirmRet < checked && (!ok || r.missingConfirm > v) {
		v, ok = r.missingConfirm, true
	}
	return v, ok
}

// existedSince reports whether a call of this instance that returned at or
// after t (on mono()) found the row of id existing (see existence). At t
// too: on a clock that stands still between calls (a synctest bubble, a
// coarse clock) a row recreated at once after the read sent at t returns at
// t as well (seed 409059 again: vanishedOrphan's read, CreateAs and
// Release, all at one instant).
func (st *streamState) existedSince(id string, t int64) bool {
	if st.exist == nil {
		return false
	}
	at, ok := st.exist.last(leases.Key{Stream: st.key, Shard: id})
	return ok && at >= t
}

// know records l as the row of id as this instance knows it (an orphan's
// row as this instance last wrote it), keeping what it knows of the row
// being missing: a row seen missing stays missing since its first sighting.
func (st *streamState) know(id string, l leases.Lease) {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	r := st.rows[id]
	r.lease, r.seen, r.created = l, true, false
	st.rows[id] = r
	st.hadRows = true
	delete(st.unread, id)
}

// sawRows reports whether this instance ever saw a row of the stream exist
// (see hadRows).
func (st *streamState) sawRows() bool {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	return st.hadRows
}

// creatingRows reports whether createAll is creating the stream's rows.
func (st *streamState) creatingRows() bool {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	return st.creating
}

// markReported records that the vanished row id was reported.
func (st *streamState) markReported(id string) {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	r := st.rows[id]
	r.reported = true
	st.rows[id] = r
}

// failure is a shard or stream set aside after failing for good: it is
// tried again at until.
type failure struct {
	n     int // failures in a row
	until time.Time
	err   error
}

// waiting reports whether f still sets its shard or stream aside.
func (f *failure) waiting(now time.Time) bool { return f != nil && now.Before(f.until) }

// rowState is what this instance last knew of a row.
type rowState struct {
	lease leases.Lease // as last read or written (kept when it vanished)
	// missing: the last read found no row. missingSince is when the first
	// read that found it missing returned, missingConfirm when the latest
	// one was sent (see lostRowWait).
	missing                      bool
	missingSince, missingConfirm int64
	// firstSent is when the first read that found it missing was sent,
	// confirmRet when the latest one returned; validConfirm is when the
	// latest read known to precede a header read was sent, if validOK
	// (see missingFor).
	firstSent, confirmRet, validConfirm int64
	validOK                             bool
	reported                            bool // this instance reported it vanished (ReportVanished)
	seen                                bool // this instance saw the row exist
	// created: this instance created the row free (createAll), and no
	// call of it read or wrote the row since: lease is the row as created.
	created bool
	// knew: the checkpoint a version of the row this instance saw before
	// had, while lease (the row recreated since: a checkpoint is never
	// cleared while a row lives) has none.
	knew leases.Checkpoint
}

// best is the checkpoint this instance knows the row was read to: its
// lease's, or the one it knew before the row was recreated without one.
func (r rowState) best() leases.Checkpoint {
	if r.lease.Checkpoint.IsZero() {
		return r.knew
	}
	return r.lease.Checkpoint
}
