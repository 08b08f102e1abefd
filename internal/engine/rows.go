package engine

// What each subscribed stream knows of its shards' rows: the rows as last
// read or written, which ones were seen missing and since when, and the
// shards set aside after failing; with the answer of its listing in flight
// (listing) and what it knows of its mark (streamMark, see marks.go).

import (
	"crypto/rand"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

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
	rows   map[string]lostrow.Row
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
	// creating: how many createNew calls and createAll runs are under way
	// (a row read missing meanwhile is being created, not vanished).
	creating int
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

func (st *streamState) row(id string) lostrow.Row {
	return syncx.Guarded(&st.rowsMu, func() lostrow.Row { return st.rows[id] })
}

// editRow changes the row of id as edit does, holding rowsMu.
func (st *streamState) editRow(id string, edit func(r *lostrow.Row)) {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	r := st.rows[id]
	edit(&r)
	st.rows[id] = r
}

// setRow records what a read or write found of row id (lostrow.Row.After).
func (st *streamState) setRow(id string, r lostrow.Row) {
	syncx.Guard(&st.rowsMu, func() { st.setRowLocked(id, r) })
}

// setIfUnread records r, what a read of the row of id found, only if no
// other call of this instance read or wrote the row since the first
// listing: a later answer is never replaced by this one. It reports
// whether it did.
func (st *streamState) setIfUnread(id string, r lostrow.Row) bool {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	if !st.unread[id] {
		return false
	}
	st.setRowLocked(id, r)
	return true
}

func (st *streamState) setRowLocked(id string, r lostrow.Row) {
	delete(st.unread, id)
	if !r.Missing {
		st.hadRows = true
	}
	st.rows[id] = r.After(st.rows[id], mono())
}

// recoveredSince is when this instance first had an answer that showed
// recovery rec of the row of id (leases.Lease.Recovered), on mono(); now
// if it never had one.
func (st *streamState) recoveredSince(id, rec string) int64 {
	return st.row(id).RecoveredSince(rec, mono())
}

// know records l as the row of id as this instance knows it (an orphan's
// row as this instance last wrote it), keeping what it knows of the row
// being missing: a row seen missing stays missing since its first sighting.
func (st *streamState) know(id string, l leases.Lease) {
	st.editRow(id, func(r *lostrow.Row) {
		r.Lease, r.Seen, r.Created = l, true, false
		st.hadRows = true
		delete(st.unread, id)
	})
}

// sawRows reports whether this instance ever saw a row of the stream exist
// (see hadRows).
func (st *streamState) sawRows() bool {
	return syncx.Guarded(&st.rowsMu, func() bool { return st.hadRows })
}

// creatingRows reports whether this instance is creating the stream's
// rows (createNew, createAll).
func (st *streamState) creatingRows() bool {
	return syncx.Guarded(&st.rowsMu, func() bool { return st.creating > 0 })
}

// addCreating counts a createNew or createAll begun (1) or ended (-1).
func (st *streamState) addCreating(n int) {
	syncx.Guard(&st.rowsMu, func() { st.creating += n })
}

// markReported records that the vanished row id was reported.
func (st *streamState) markReported(id string) {
	st.editRow(id, func(r *lostrow.Row) { r.Reported = true })
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

// markToken returns the token for this instance's MarkTaken of row l of
// id: the one it used for that version of the row before, if it knows no
// other version since (a mark sent again after its answer was lost finds
// its own), else a new one.
func (st *streamState) markToken(id string, l leases.Lease) string {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	r := st.rows[id]
	if r.MarkFor != l.Token || r.MarkTok == "" {
		r.MarkTok, r.MarkFor = rand.Text(), l.Token
		st.rows[id] = r
	}
	return r.MarkTok
}

// noteRecovery records that this instance knows the row of id recovered
// as rec (leases.Lease.Recovered) from now on, unless it knew so before
// (see recoveredSince).
func (st *streamState) noteRecovery(id, rec string) {
	st.rowsMu.Lock()
	defer st.rowsMu.Unlock()
	if r := st.rows[id]; r.Recovery != rec {
		st.rows[id] = r.Saw(rec, mono())
	}
}

// listing is the answer of a ListShards of a stream (every page), sent at
// sent.
type listing struct {
	shards []types.Shard
	err    error
	sent   time.Time
}

// streamMark is what this instance knows of a stream's mark: the token it
// found or wrote, as incarnation inc, and when (mono); round is the round
// in which inc last found none.
type streamMark struct {
	token, inc string
	at         int64
	round      int
}

// kind is the lostrow.Mark of a mark known.
func (m streamMark) kind() lostrow.Mark {
	if m.token == m.inc {
		return lostrow.MarkOurs
	}
	return lostrow.MarkOther
}
