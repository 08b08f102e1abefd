// Package lostbook keeps what an instance knows of lease rows it has no
// worker on (Book): its orphans (rows that may name it), its uncertain rows
// (rows a write of its may name it on without it knowing), the rows it
// released or read lately, and when its last vanished report was sent. It
// does no store I/O: the engine reads and writes the rows (the lost-row
// protocol) and records here what it found; the decisions on a row stay in
// package lostrow.
package lostbook

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/leases"
)

const (
	// MaxReleased and ReleasedFor bound the released rows a Book keeps. A
	// row released is normally taken within a few rounds by the member the
	// plan gives it to, which knows the checkpoint from then on.
	MaxReleased = 256
	ReleasedFor = 5 * time.Minute
)

// Book is what an instance keeps of rows that may name it, or whose
// checkpoint it may be the last to know, without a worker of its own on
// them (the lost-row protocol), by unit U (one shard of one stream). It is
// safe for concurrent use; its lock is taken last: a caller may hold its
// own locks across a call, and the funcs it passes are called with the
// Book's lock held (they must take no lock).
type Book[U comparable] struct {
	now func() time.Time
	mu  sync.Mutex
	// orphans are rows that may still name an incarnation of this instance
	// although it runs no worker for them (lost at a fence, a release that
	// failed, a take whose answer was lost): each is taken again directly
	// if the plan gives it to this instance, else released, so that the
	// member the plan gives it to need not wait for it.
	orphans map[U]lostrow.Orphan
	// uncertain are rows a write of this instance may name it on without
	// it knowing (a take or a creation whose answer was lost, which
	// DynamoDB may apply late, after a read found it had not landed), with
	// when to read them again (the engine's recheckUncertain).
	uncertain map[U]int64
	// released are rows this instance released lately, as it left them
	// (free, with its last checkpoint), or read lately while another held
	// them, at most MaxReleased for at most ReleasedFor: if one vanishes
	// and its holder is gone, this instance may be the only live one that
	// knows where it was read to, and recreates it from there (see the
	// engine's recheckReleased).
	released map[U]Released
	// lastReport is when this instance's last ReportVanished that landed
	// was sent (on the caller's clock), under reportSem: a channel, not a
	// mutex, held across a store call (a goroutine waiting on a channel
	// lets a synctest bubble's clock move).
	reportSem  chan struct{}
	lastReport int64
	reported   bool
}

// Released is a row as this instance released it (or read it), and when.
type Released struct {
	Lease leases.Lease
	At    time.Time
}

// New returns an empty Book whose released rows are dated by now
// (time.Now).
func New[U comparable](now func() time.Time) *Book[U] {
	return &Book[U]{
		now: now, orphans: map[U]lostrow.Orphan{}, uncertain: map[U]int64{}, released: map[U]Released{},
		reportSem: make(chan struct{}, 1),
	}
}

// Orphan returns the orphan of u held now (zero if none).
func (b *Book[U]) Orphan(u U) lostrow.Orphan {
	o, _ := b.Lookup(u)
	return o
}

// Lookup returns the orphan of u held now, and whether there is one.
func (b *Book[U]) Lookup(u U) (lostrow.Orphan, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o, ok := b.orphans[u]
	return o, ok
}

// Orphans returns a copy of every orphan.
func (b *Book[U]) Orphans() map[U]lostrow.Orphan {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.orphans)
}

// Len returns how many orphans there are.
func (b *Book[U]) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.orphans)
}

// Put makes o the orphan of u, replacing any.
func (b *Book[U]) Put(u U, o lostrow.Orphan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.orphans[u] = o
}

// PutAll makes each orphan of os that of its unit, replacing any, at once.
func (b *Book[U]) PutAll(os map[U]lostrow.Orphan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	maps.Copy(b.orphans, os)
}

// Delete forgets the orphan of u, whatever it is.
func (b *Book[U]) Delete(u U) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.orphans, u)
}

// Known returns what this instance knows of the row of u beside its own
// reads, at once: the row as it released it or read it lately, and its
// orphan (nil for none).
func (b *Book[U]) Known(u U) (released *leases.Lease, o *lostrow.Orphan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.released[u]; ok {
		released = &r.Lease
	}
	if x, ok := b.orphans[u]; ok {
		o = &x
	}
	return released, o
}

// Presume records, after a write of row l as incarnation inc of owner that
// failed without a conflict, that the write may have landed with its
// answer lost: the row would then name this instance with nobody reading
// it, and every other member would wait on it for as long as this
// incarnation lives. So it is an orphan, known as the write would have
// left it (lostrow.Presume), and uncertain until due; the next round reads
// it before taking it again or releasing it.
func (b *Book[U]) Presume(u U, l leases.Lease, owner, inc string, due int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.uncertain[u] = due
	b.orphans[u] = lostrow.Presume(l, owner, inc, b.orphans[u], b.released[u].Lease.Checkpoint)
}

// Edit changes orphan o of u as f says, unless it was replaced meanwhile.
func (b *Book[U]) Edit(u U, o lostrow.Orphan, f func(*lostrow.Orphan)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.orphans[u]; ok && cur.Inc == o.Inc {
		f(&cur)
		b.orphans[u] = cur
	}
}

// Update changes the orphan of u, if there is one, as f says.
func (b *Book[U]) Update(u U, f func(*lostrow.Orphan)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if o, ok := b.orphans[u]; ok {
		f(&o)
		b.orphans[u] = o
	}
}

// Drop forgets orphan o of u, unless it was replaced meanwhile.
func (b *Book[U]) Drop(u U, o lostrow.Orphan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.orphans[u]; ok && cur.Inc == o.Inc {
		delete(b.orphans, u)
	}
}

// Forget drops orphan o of u, now someone else's row cur, and keeps where
// it was read to, should it vanish (lostrow.Orphan.Forgotten).
func (b *Book[U]) Forget(u U, o lostrow.Orphan, cur leases.Lease) {
	b.Drop(u, o)
	b.NoteReleased(u, o.Forgotten(cur))
}

// MarkUnwaited marks the orphan a take of u that failed with err with no
// answer left (Presume), made without the recovery wait: see
// lostrow.Orphan.Unwaited.
func (b *Book[U]) MarkUnwaited(u U, err error) {
	if !lostrow.Unanswered(err) {
		return
	}
	b.Update(u, func(o *lostrow.Orphan) { o.Unwaited = true })
}

// FoundLost records that released row u was found lost when read again:
// unless it is held (by a worker: the caller's) or has an orphan, o becomes
// its orphan; a row found missing (forget) is no longer kept as released.
func (b *Book[U]) FoundLost(u U, o lostrow.Orphan, held, forget bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, had := b.orphans[u]; !had && !held {
		b.orphans[u] = o
	}
	if forget {
		delete(b.released, u)
	}
}

// SetUncertain has the row of u read again at due (on the caller's clock):
// a write of this instance whose answer was lost may land on it until
// then.
func (b *Book[U]) SetUncertain(u U, due int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.uncertain[u] = due
}

// UncertainAt returns when uncertain row u is to be read again, and
// whether it is uncertain.
func (b *Book[U]) UncertainAt(u U) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.uncertain[u]
	return at, ok
}

// DueUncertain returns the uncertain rows due at now.
func (b *Book[U]) DueUncertain(now int64) []U {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.DeleteFunc(slices.Collect(maps.Keys(b.uncertain)), func(u U) bool { return now < b.uncertain[u] })
}

// DropUncertain forgets uncertain row u.
func (b *Book[U]) DropUncertain(u U) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.uncertain, u)
}

// Settle ends the wait of uncertain row u, read at now, unless a later
// write made it due again since; and makes o, if not nil, the orphan of u
// unless it has one. It reports whether it did.
func (b *Book[U]) Settle(u U, now int64, o *lostrow.Orphan) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if at := b.uncertain[u]; at <= now {
		delete(b.uncertain, u)
	}
	if _, orphaned := b.orphans[u]; o == nil || orphaned {
		return false
	}
	b.orphans[u] = *o
	return true
}
