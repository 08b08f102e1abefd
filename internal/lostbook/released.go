package lostbook

// The rows an instance released or read lately (NoteReleased, NoteRead,
// ToRecheck), and its vanished reports (LockReport).

import (
	"maps"
	"slices"
	"time"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/leases"
)

// NoteRead records row l of u, read at the first listing, as NoteReleased
// does, but only while there is room: it never evicts a row this instance
// released or read to take.
func (b *Book[U]) NoteRead(u U, l leases.Lease) {
	b.mu.Lock()
	full := len(b.released) >= MaxReleased
	b.mu.Unlock()
	if !full {
		b.NoteReleased(u, l)
	}
}

// NoteReleased records that this instance released the row of u, leaving
// it as l, or read it so (a row it did not hold): either way it knows where
// the shard was read to, as lostrow.Note keeps it. Rows noted more than
// ReleasedFor ago are forgotten, and the oldest if MaxReleased are kept.
func (b *Book[U]) NoteReleased(u U, l leases.Lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, had := b.released[u]
	l, keep := lostrow.Note(l, r.Lease, had)
	if !keep {
		return
	}
	now := b.now()
	b.expire(now)
	if len(b.released) >= MaxReleased {
		oldest := slices.MinFunc(slices.Collect(maps.Keys(b.released)), func(x, y U) int {
			return b.released[x].At.Compare(b.released[y].At)
		})
		delete(b.released, oldest)
	}
	b.released[u] = Released{Lease: l, At: now}
}

// expire forgets the released rows noted more than ReleasedFor before now
// (b.mu held).
func (b *Book[U]) expire(now time.Time) {
	maps.DeleteFunc(b.released, func(_ U, r Released) bool { return now.Sub(r.At) > ReleasedFor })
}

// Released returns row u as this instance released or read it lately, and
// whether it keeps one.
func (b *Book[U]) Released(u U) (Released, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.released[u]
	return r, ok
}

// ToRecheck forgets the released rows noted more than ReleasedFor ago and
// returns a copy of the others, but for those with an orphan or held
// (by a worker: the caller's).
func (b *Book[U]) ToRecheck(held func(U) bool) map[U]Released {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(b.now())
	rel := maps.Clone(b.released)
	maps.DeleteFunc(rel, func(u U, _ Released) bool {
		_, o := b.orphans[u]
		return held(u) || o
	})
	return rel
}

// Renew records that released row u, read again, was found written since
// as l: it knows l now (lostrow.Resume; the time it was noted stays).
func (b *Book[U]) Renew(u U, l leases.Lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.released[u]; ok {
		r.Lease = lostrow.Resume(l)
		b.released[u] = r
	}
}

// DropWhere forgets the released rows of the units of, and reports whether
// an orphan is of one of them.
func (b *Book[U]) DropWhere(of func(U) bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	maps.DeleteFunc(b.released, func(u U, _ Released) bool { return of(u) })
	for u := range b.orphans {
		if of(u) {
			return true
		}
	}
	return false
}

// LockReport waits for the report semaphore, held across a vanished report
// (a store call) until UnlockReport, and returns when the last report that
// landed was sent, and whether one did.
func (b *Book[U]) LockReport() (last int64, reported bool) {
	b.reportSem <- struct{}{}
	return b.lastReport, b.reported
}

// ReportSent records that a report sent at sent landed (report semaphore
// held).
func (b *Book[U]) ReportSent(sent int64) { b.lastReport, b.reported = sent, true }

// UnlockReport lets the next report go.
func (b *Book[U]) UnlockReport() { <-b.reportSem }
