package engine

// What each subscribed stream knows of its shards' rows: the rows as last
// read or written, which ones were seen missing and since when, and the
// shards set aside after failing.

import (
	"crypto/rand"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/lostrow"
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
	// unwaited: the row names this instance by a take it made without the
	// recovery wait (a repair, an invalidation: it never delivered from
	// it): retaking it to read waits as any take does (recoveryPassed).
	unwaited bool
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
	// unknown, neither missing nor free.
	unread map[string]bool
	// hadRows: this instance saw a row of the stream exist, at its first
	// listing or since: the stream is read already, so a missing row is
	// one that vanished, never a new stream's. Guarded by rowsMu.
	hadRows bool
	// createdAll: this instance created the missing rows of the new
	// stream (see createAll).
	createdAll bool
	// creating: createAll is creating them, in the background.
	creating bool
	// mark: what this instance knows of the stream's mark (marks.go).
	// Guarded by rowsMu.
	mark streamMark
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
	return guarded(&st.rowsMu, func() rowState { return st.rows[id] })
}

// editRow changes the row of id as edit does, holding rowsMu.
func (st *streamState) editRow(id string, edit func(r *rowState)) {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	r := st.rows[id]
	edit(&r)
	st.rows[id] = r
}

// setRow records what a read or write found of row id. A row found missing
// keeps what was known of it before, and the first read that found it
// missing dates its absence.
func (st *streamState) setRow(id string, r rowState) {
	guard(&st.rowsMu, func() { st.setRowLocked(id, r) })
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

func (st *streamState) setRowLocked(id string, r rowState) {
	delete(st.unread, id)
	old := st.rows[id]
	if r.missing {
		r.lease, r.seen = old.lease, old.seen
		r.missingSince, r.reported = mono(), false
		if old.missing {
			r.missingSince, r.reported = old.missingSince, old.reported
		}
	} else {
		r.seen = true
		st.hadRows = true
	}
	if lostrow.NoStart(r.lease) && r.knew.IsZero() {
		r.knew = old.best()
	}
	r.recovery, r.recoveredAt, r.reportDue = old.recovery, old.recoveredAt, old.reportDue || r.reportDue
	if r.lease.Token == old.markFor {
		r.markTok, r.markFor = old.markTok, old.markFor
	}
	if rec := r.lease.Recovered; rec != "" && rec != r.recovery {
		r.recovery, r.recoveredAt = rec, mono() // the first answer that showed this recovery
	}
	st.rows[id] = r
}

// recoveredSince is when this instance first had an answer that showed
// recovery rec of the row of id (leases.Lease.Recovered), on mono(); now
// if it never had one.
func (st *streamState) recoveredSince(id, rec string) int64 {
	if r := st.row(id); r.recovery == rec {
		return r.recoveredAt
	}
	return mono()
}

// know records l as the row of id as this instance knows it (an orphan's
// row as this instance last wrote it), keeping what it knows of the row
// being missing: a row seen missing stays missing since its first sighting.
func (st *streamState) know(id string, l leases.Lease) {
	st.editRow(id, func(r *rowState) {
		r.lease, r.seen, r.created = l, true, false
		st.hadRows = true
		delete(st.unread, id)
	})
}

// sawRows reports whether this instance ever saw a row of the stream exist
// (see hadRows).
func (st *streamState) sawRows() bool {
	return guarded(&st.rowsMu, func() bool { return st.hadRows })
}

// creatingRows reports whether createAll is creating the stream's rows.
func (st *streamState) creatingRows() bool {
	return guarded(&st.rowsMu, func() bool { return st.creating })
}

// markReported records that the vanished row id was reported.
func (st *streamState) markReported(id string) {
	st.editRow(id, func(r *rowState) { r.reported = true })
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
	// missing: the last read found no row, and the reads before it since
	// missingSince (on mono()).
	missing      bool
	missingSince int64
	reported     bool // this instance reported it vanished (ReportVanished)
	seen         bool // this instance saw the row exist
	// recovery is the last recovery of the row an answer showed
	// (leases.Lease.Recovered), and recoveredAt (on mono()) when the first
	// such answer came (see recoveredSince).
	recovery    string
	recoveredAt int64
	// reportDue: this instance recovered the row knowing no checkpoint
	// of it, and has not reported it since (reportRecovery).
	reportDue bool
	// created: this instance created the row free (createAll), and no
	// call of it read or wrote the row since: lease is the row as created.
	created bool
	// knew: the checkpoint a version of the row this instance saw before
	// had, while lease (the row recreated since: a checkpoint is never
	// cleared while a row lives) has none.
	knew leases.Checkpoint
	// markTok is the token of this instance's MarkTaken of the version of
	// the row whose Token is markFor (markFirstTake), kept until another
	// version is known.
	markTok, markFor string
}

// best is the checkpoint this instance knows the row was read to: its
// lease's, or the one it knew before the row was recreated without one.
func (r rowState) best() leases.Checkpoint {
	if lostrow.NoStart(r.lease) {
		return r.knew
	}
	return r.lease.Checkpoint
}

// markToken returns the token for this instance's MarkTaken of row l of
// id: the one it used for that version of the row before, if it knows no
// other version since (a mark sent again after its answer was lost finds
// its own), else a new one.
func (st *streamState) markToken(id string, l leases.Lease) string {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	r := st.rows[id]
	if r.markFor != l.Token || r.markTok == "" {
		r.markTok, r.markFor = rand.Text(), l.Token
		st.rows[id] = r
	}
	return r.markTok
}

// noteRecovery records that this instance knows the row of id recovered
// as rec (leases.Lease.Recovered) from now on, unless it knew so before
// (see recoveredSince).
func (st *streamState) noteRecovery(id, rec string) {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	if r := st.rows[id]; r.recovery != rec {
		r.recovery, r.recoveredAt = rec, mono()
		st.rows[id] = r
	}
}
