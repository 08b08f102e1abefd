package lostrow

import (
	"cmp"
	"errors"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// Orphan is a row that may name incarnation Inc of this instance with no
// worker reading it (after a fence, or an unanswered take), to be taken
// again or released; Known is the row as last known.
type Orphan struct {
	Inc      string
	Known    leases.Lease
	Presumed bool              // Known is the row as our unanswered take would have left it
	Vanished bool              // found missing: back with no checkpoint, it was recreated by a member that knew none
	Knew     leases.Checkpoint // what an orphan this one replaced knew, if Known has none
	Unwaited bool              // taken without the recovery wait (a repair, an invalidation): a retake to read waits it
}

// Presume returns the orphan left by an unanswered take of row l as
// owner's incarnation inc. What prev (replaced, or zero) knew stays known:
// that the row vanished, its checkpoint; else released (Note's, or zero).
func Presume(l leases.Lease, owner, inc string, prev Orphan, released leases.Checkpoint) Orphan {
	mine := l
	mine.Owner, mine.Incarnation, mine.Counter = owner, inc, l.Counter+1
	o := Orphan{Inc: inc, Known: mine, Presumed: true, Unwaited: prev.Unwaited}
	o.Vanished = prev.Vanished || l.Counter < prev.RealCounter()
	if l.Checkpoint.IsZero() {
		o.Knew = cmp.Or(prev.Best(), released)
	}
	return o
}

// RealCounter is the counter of a version of the row that existed.
func (o Orphan) RealCounter() int64 {
	if o.Presumed {
		return o.Known.Counter - 1
	}
	return o.Known.Counter
}

// KnownRow is the row as o knows it, with Best.
func (o Orphan) KnownRow() leases.Lease {
	k := o.Known
	k.Checkpoint = o.Best()
	return k
}

// Filled returns row l with Best and the rewind it follows, for a take to
// write (leases.Membership.TakeAs).
func (o Orphan) Filled(l leases.Lease) leases.Lease {
	l.Checkpoint, l.Rewind = o.Best(), cmp.Or(o.BestRewind(), l.Rewind)
	return l
}

// BestRewind is the operator's rewind that Best follows, if known.
func (o Orphan) BestRewind() string {
	if o.Known.RewindTo.IsZero() && o.Known.Checkpoint.IsZero() {
		return ""
	}
	return o.Known.Rewind
}

// Best is the checkpoint o knows the row was read to: a rewind pending on
// Known (see Resume), Known's checkpoint, or else Knew.
func (o Orphan) Best() leases.Checkpoint {
	if !o.Known.RewindTo.IsZero() {
		return o.Known.RewindTo
	}
	if o.Known.Checkpoint.IsZero() {
		return o.Knew
	}
	return o.Known.Checkpoint
}

// Disproved reports whether cur, read after o's take failed unanswered,
// shows it has not landed (yet): still the version it was conditional on.
// Its late copy may land: this instance takes the row first (TakeAs).
func (o Orphan) Disproved(cur leases.Lease) bool {
	named := cur.Owner == o.Known.Owner && cur.Incarnation == o.Inc && cur.Owner != ""
	return o.Presumed && o.Known.Token != "" && cur.Token == o.Known.Token && !named
}

// Recreated reports whether o's row, read as l, was recreated since from
// less than o knows, to be written on it: l NoStart or Outdated by Known,
// and o found it missing, its counter went back, or now (the orphan held
// now, zero if none) is o found vanished.
func (o Orphan) Recreated(l leases.Lease, now Orphan) bool {
	if o.Best().IsZero() || !NoStart(l) && !Outdated(l, o.Known) {
		return false
	}
	if o.Vanished || l.Counter < o.RealCounter() || NoStart(l) {
		return true // a checkpoint is never cleared while a row lives
	}
	return now.Inc == o.Inc && now.Vanished
}

// Awaited is row l as a retake of o waits for its recovery: an Unwaited
// orphan waits for the recovery it took.
func (o Orphan) Awaited(l leases.Lease) leases.Lease {
	if o.Unwaited {
		l.Recovered = cmp.Or(l.Recovered, o.Known.Recovered)
	}
	return l
}

// RetakeFrom is what a retake of o writes on l (read: just read; now: the
// orphan held now): Recreated (l says nothing, or less than o knows), Best;
// else unread, the row's own checkpoint.
func (o Orphan) RetakeFrom(l leases.Lease, read bool, now Orphan) leases.Lease {
	switch {
	case o.Recreated(l, now):
		l = o.Filled(l)
	case !read:
		l.Checkpoint = leases.Checkpoint{}
	}
	return l
}

// LaterRewind reports whether cur, o's row read again and not ours,
// carries an operator's rewind o's copy does not, or a later one (Adopt).
func (o Orphan) LaterRewind(cur leases.Lease, ours bool) bool {
	return cur.Rewind != "" && !ours && (o.Known.Rewind == "" || driver.RewindAfter(cur.Rewind, o.Known.Rewind))
}

// Adopt returns o knowing its row at the rewind cur carries (seed
// 98915512: a copy from before it recreated the row past it).
func (o Orphan) Adopt(cur leases.Lease) Orphan {
	r := Resume(cur)
	o.Known.Checkpoint, o.Known.RewindTo, o.Known.Rewind, o.Knew = r.Checkpoint, leases.Checkpoint{}, r.Rewind, leases.Checkpoint{}
	return o
}

// Forgotten is what this instance keeps of o's row, now someone else's
// row cur: cur, or KnownRow if cur has no checkpoint (recreated since).
func (o Orphan) Forgotten(cur leases.Lease) leases.Lease {
	if cur.Checkpoint.IsZero() && !o.Best().IsZero() {
		cur = o.KnownRow()
		cur.Counter, cur.RewindTo = o.RealCounter(), leases.Checkpoint{}
	}
	return cur
}

// ReleaseFill is the checkpoint a release of o's row l writes: none (the
// row's stays), but Best on a row recreated since, no rewind pending.
func (o Orphan) ReleaseFill(l leases.Lease) leases.Checkpoint {
	if l.RewindTo.IsZero() && (NoStart(l) || o.Vanished) {
		return o.Best()
	}
	return leases.Checkpoint{}
}

// InvalidateFrom is what a take that invalidates o's unanswered take writes
// on l, that take's version: Best on a row with none or found missing, so
// that an orphan it leaves unanswered knows it (seed 98123718).
func (o Orphan) InvalidateFrom(l leases.Lease) leases.Lease {
	if l.RewindTo.IsZero() && (l.Checkpoint.IsZero() || o.Vanished) && !o.Best().IsZero() {
		return o.Filled(l)
	}
	return l
}

// Step is what to do with an orphan whose release did not land.
type Step int

const (
	StepLater      Step = iota // failed, or met a row again: next round
	StepRecover                // missing: report it, recreate it free from what o knew
	StepInvalidate             // our take has not landed and may: take the row, release it (InvalidateFrom)
	StepRepair                 // recreated free without o's checkpoint: take it with it, release it
	StepForget                 // someone else's: drop the orphan, keep what it knew (Forgotten)
	StepAgain                  // ours still, perhaps as a later incarnation: release cur
)

// AfterRelease decides what to do with o once its release failed: err is
// the release's error, or that of the read of the row it met, cur; ours
// whether cur names this process; now the orphan held now.
func (o Orphan) AfterRelease(err error, cur leases.Lease, ours bool, now Orphan) Step {
	switch {
	case errors.Is(err, leases.ErrNotFound):
		return StepRecover
	case err != nil:
		return StepLater
	case o.Disproved(cur):
		return StepInvalidate
	case !ours && !cur.Held() && o.Recreated(cur, now):
		return StepRepair
	case !ours:
		return StepForget
	}
	return StepAgain
}
