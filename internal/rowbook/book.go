// Package rowbook keeps what an instance knows of one stream's lease rows
// (Book): each row as last read or written (lostrow.Row), which ones it has
// not read since its first listing, whether it saw any exist, whether it is
// creating a new stream's rows, what it knows of the stream's mark, and so
// where a shard with no checkpoint starts (LATEST's moment, recorded in the
// mark: Start). It
// does no store I/O: the engine reads and writes the rows and records here
// what it found; the decisions on a row stay in package lostrow.
package rowbook

import (
	"crypto/rand"
	"slices"
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// Book is what this instance knows of the lease rows of one stream, safe
// for the concurrent calls of a round. Instants are on its clock (New).
type Book struct {
	now func() int64
	mu  sync.Mutex
	// rows is what this instance last read or wrote of each row, by shard
	// id.
	rows map[string]lostrow.Row
	// unread: the shards of the first listing whose rows this instance has
	// neither read nor written since. The first listing sets the shard
	// list at once and reads the rows over the rounds that follow (the
	// engine's readUnread), never inside one round: a row not read yet is
	// unknown, neither missing nor free.
	unread map[string]bool
	// hadRows: this instance saw a row of the stream exist, at its first
	// listing or since: the stream is read already, so a missing row is
	// one that vanished, never a new stream's.
	hadRows bool
	// createdAll: this instance created the missing rows of the new
	// stream (see CreateAll).
	createdAll bool
	// creating: how many creations are under way (Creating, CreateAll):
	// a row read missing meanwhile is being created, not vanished.
	creating int
	// mark: what this instance knows of the stream's mark (Mark).
	mark Mark
	// start and since: the subscription's start position, and when this
	// instance's subscription began; recorded: the Since of the mark last
	// noted, kept when the mark known is forgotten (see Start).
	start           kltype.StartPosition
	since, recorded time.Time
}

// New returns an empty book of a stream whose shards with no checkpoint
// start at start, this instance's subscription having begun at since (see
// Start), and whose instants are read from now (a monotonic clock).
func New(now func() int64, start kltype.StartPosition, since time.Time) *Book {
	return &Book{now: now, rows: map[string]lostrow.Row{}, start: start, since: since}
}

// Row returns what this instance knows of the row of id.
func (b *Book) Row(id string) lostrow.Row {
	return syncx.Guarded(&b.mu, func() lostrow.Row { return b.rows[id] })
}

// Edit changes the row of id as edit does, holding the book's lock.
func (b *Book) Edit(id string, edit func(r *lostrow.Row)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rows[id]
	edit(&r)
	b.rows[id] = r
}

// Set records what a read or write found of row id (after).
func (b *Book) Set(id string, r lostrow.Row) {
	syncx.Guard(&b.mu, func() { b.setLocked(id, r) })
}

// SetIfUnread records r, what a read of the row of id found, only if no
// other call of this instance read or wrote the row since the first
// listing: a later answer is never replaced by this one. It reports
// whether it did.
func (b *Book) SetIfUnread(id string, r lostrow.Row) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.unread[id] {
		return false
	}
	b.setLocked(id, r)
	return true
}

func (b *Book) setLocked(id string, r lostrow.Row) {
	delete(b.unread, id)
	if !r.Missing {
		b.hadRows = true
	}
	b.rows[id] = after(r, b.rows[id], b.now())
}

// RecoveredSince is when this instance first had an answer that showed
// recovery rec of the row of id (leases.Lease.Recovered), on the book's
// clock; now if it never had one.
func (b *Book) RecoveredSince(id, rec string) int64 {
	return recoveredSince(b.Row(id), rec, b.now())
}

// Know records l as the row of id as this instance knows it (an orphan's
// row as this instance last wrote it), keeping what it knows of the row
// being missing: a row seen missing stays missing since its first sighting.
func (b *Book) Know(id string, l leases.Lease) {
	b.Edit(id, func(r *lostrow.Row) {
		r.Lease, r.Seen, r.Created = l, true, false
		b.hadRows = true
		delete(b.unread, id)
	})
}

// SawRows reports whether this instance ever saw a row of the stream exist
// (see hadRows).
func (b *Book) SawRows() bool {
	return syncx.Guarded(&b.mu, func() bool { return b.hadRows })
}

// Creating reports whether the stream's rows are being created: by a
// caller between BeginCreating and EndCreating (one that marks the
// stream new and creates its rows), or since CreateAll until CreatedAll.
func (b *Book) Creating() bool {
	return syncx.Guarded(&b.mu, func() bool { return b.creating > 0 })
}

// BeginCreating counts a creation begun, before the stream is marked: a
// mark of this instance read meanwhile is that of a stream whose rows it
// is creating. EndCreating ends it.
func (b *Book) BeginCreating() { syncx.Guard(&b.mu, func() { b.creating++ }) }

// EndCreating ends a creation BeginCreating began.
func (b *Book) EndCreating() { syncx.Guard(&b.mu, func() { b.creating-- }) }

// MarkReported records that the vanished row id was reported.
func (b *Book) MarkReported(id string) {
	b.Edit(id, func(r *lostrow.Row) { r.Reported = true })
}

// MarkToken returns the token for this instance's MarkTaken of row l of
// id: the one it used for that version of the row before, if it knows no
// other version since (a mark sent again after its answer was lost finds
// its own), else a new one.
func (b *Book) MarkToken(id string, l leases.Lease) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rows[id]
	if r.MarkFor != l.Token || r.MarkTok == "" {
		r.MarkTok, r.MarkFor = rand.Text(), l.Token
		b.rows[id] = r
	}
	return r.MarkTok
}

// NoteRecovery records that this instance knows the row of id recovered
// as rec (leases.Lease.Recovered) from now on, unless it knew so before
// (see RecoveredSince).
func (b *Book) NoteRecovery(id, rec string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := b.rows[id]; r.Recovery != rec {
		b.rows[id] = saw(r, rec, b.now())
	}
}

// FirstListed records order, the shards of the stream's first listing:
// every one whose row this instance neither read nor wrote yet is unread
// (see unread).
func (b *Book) FirstListed(order []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unread = make(map[string]bool, len(order))
	for _, id := range order {
		if _, known := b.rows[id]; !known {
			b.unread[id] = true
		}
	}
}

// Unread reports whether the row of id is still unread since the first
// listing.
func (b *Book) Unread(id string) bool {
	return syncx.Guarded(&b.mu, func() bool { return b.unread[id] })
}

// UnreadIn returns the shards of order whose rows are still unread since
// the first listing: those for which parent reports true first (the
// parents of a split or merge), then the others, each in order.
func (b *Book) UnreadIn(order []string, parent func(id string) bool) []string {
	var ids []string
	b.mu.Lock()
	for _, parents := range []bool{true, false} {
		for _, id := range order {
			if b.unread[id] && parent(id) == parents {
				ids = append(ids, id)
			}
		}
	}
	b.mu.Unlock()
	return ids
}

// CreateAll starts creating, once per stream, every row of a new stream
// not seen but that of skip, of the shards in order: it returns their ids
// and true, Creating reporting true until CreatedAll, or false if it did
// so before.
func (b *Book) CreateAll(order []string, skip string) ([]string, bool) {
	b.mu.Lock()
	if b.createdAll {
		b.mu.Unlock()
		return nil, false
	}
	b.createdAll = true
	b.creating++
	// Every row not seen, read or not: the first to mark the stream
	// creates the rows of the shards the plan gives the others too. A row
	// that exists fails the Create harmlessly.
	ids := slices.DeleteFunc(slices.Clone(order), func(id string) bool { return b.rows[id].Seen || id == skip })
	b.mu.Unlock()
	return ids, true
}

// CreatedAll records that the creation CreateAll started is over.
func (b *Book) CreatedAll() {
	b.EndCreating()
}
