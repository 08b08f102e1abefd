package lostbook

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/leases"
)

// clock is a settable now for a Book.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newBook() (*Book[string], *clock) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return New[string](c.now), c
}

func at(seq string) leases.Lease {
	return leases.Lease{Key: leases.Key{Stream: "s", Shard: seq}, Checkpoint: leases.Checkpoint{Sequence: seq}}
}

// TestNoteReleasedBounds: a row noted more than ReleasedFor ago is
// forgotten at the next note; with MaxReleased kept, a new one evicts the
// oldest; a row with no checkpoint is not kept; NoteRead never evicts.
func TestNoteReleasedBounds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kept   int           // rows noted before, one a second
		after  time.Duration // from the last of them to the note
		noted  leases.Lease  // the note
		read   bool          // noted by NoteRead
		want   int           // rows kept after it
		gone   []string      // rows forgotten by it
		stayed bool          // the note is kept
	}{
		{name: "room", kept: 3, after: time.Second, noted: at("new"), want: 4, stayed: true},
		{name: "expired forgotten", kept: 3, after: ReleasedFor - time.Second, noted: at("new"), want: 3, gone: []string{"0"}, stayed: true},
		{name: "all expired", kept: 3, after: ReleasedFor + time.Second, noted: at("new"), want: 1, gone: []string{"0", "1", "2"}, stayed: true},
		{name: "full evicts the oldest", kept: MaxReleased, after: time.Second, noted: at("new"), want: MaxReleased, gone: []string{"0"}, stayed: true},
		{name: "no checkpoint: not kept", kept: 3, after: ReleasedFor + time.Hour, noted: leases.Lease{}, want: 3},
		{name: "read while room", kept: 3, after: time.Second, noted: at("new"), read: true, want: 4, stayed: true},
		{name: "read when full: not kept", kept: MaxReleased, after: time.Second, noted: at("new"), read: true, want: MaxReleased},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, c := newBook()
			for i := range tc.kept {
				b.NoteReleased(fmt.Sprint(i), at(fmt.Sprint(i)))
				c.t = c.t.Add(time.Second)
			}
			c.t = c.t.Add(tc.after - time.Second)
			if tc.read {
				b.NoteRead("new", tc.noted)
			} else {
				b.NoteReleased("new", tc.noted)
			}
			if n := len(b.released); n != tc.want {
				t.Errorf("%d rows kept, want %d", n, tc.want)
			}
			for _, u := range tc.gone {
				if _, ok := b.Released(u); ok {
					t.Errorf("row %s still kept", u)
				}
			}
			if r, ok := b.Released("new"); ok != tc.stayed || ok && (r.Lease != tc.noted || !r.At.Equal(c.t)) {
				t.Errorf("the note: %+v (%v), want kept %v as noted at %v", r, ok, tc.stayed, c.t)
			}
		})
	}
}

// TestNoteReleasedOutdated: a recovered row older than the one kept does
// not replace it (lostrow.Note).
func TestNoteReleasedOutdated(t *testing.T) {
	b, _ := newBook()
	b.NoteReleased("u", at("300"))
	old := at("100")
	old.Recovered = "r1"
	b.NoteReleased("u", old)
	if r, _ := b.Released("u"); r.Lease.Checkpoint.Sequence != "300" {
		t.Errorf("kept %v after an outdated recovery, want 300", r.Lease.Checkpoint)
	}
}

// TestToRecheck: expired rows are forgotten, those held or with an orphan
// left out of the copy (but kept).
func TestToRecheck(t *testing.T) {
	b, c := newBook()
	b.NoteReleased("old", at("1"))
	c.t = c.t.Add(ReleasedFor)
	for _, u := range []string{"held", "orphan", "free"} {
		b.NoteReleased(u, at("2"))
	}
	c.t = c.t.Add(time.Second)
	b.Put("orphan", lostrow.Orphan{Inc: "0.A"})
	rel := b.ToRecheck(func(u string) bool { return u == "held" })
	if len(rel) != 1 || rel["free"].Lease != at("2") {
		t.Errorf("ToRecheck = %v, want the free row alone", rel)
	}
	if _, ok := b.Released("old"); ok {
		t.Error("a row noted more than ReleasedFor ago still kept")
	}
	if _, ok := b.Released("held"); !ok {
		t.Error("a held row forgotten")
	}
	l := at("9")
	l.RewindTo = leases.Checkpoint{Sequence: "5"}
	b.Renew("free", l)
	b.Renew("none", l)
	if r, _ := b.Released("free"); r.Lease.Checkpoint.Sequence != "5" || !r.At.Equal(c.t.Add(-time.Second)) {
		t.Errorf("renewed: %+v, want the rewind's position, noted when it was", r)
	}
	if _, ok := b.Released("none"); ok {
		t.Error("Renew kept a row not kept")
	}
}

// TestOrphanEdits: Edit and Drop touch the orphan they were given only,
// not one that replaced it; MarkUnwaited only after an unanswered error.
func TestOrphanEdits(t *testing.T) {
	unanswered := errors.New("timeout")
	for _, tc := range []struct {
		name   string
		do     func(b *Book[string])
		want   lostrow.Orphan
		exists bool
	}{
		{name: "edit same", do: func(b *Book[string]) {
			b.Edit("u", lostrow.Orphan{Inc: "0.A"}, func(o *lostrow.Orphan) { o.Vanished = true })
		}, want: lostrow.Orphan{Inc: "0.A", Vanished: true}, exists: true},
		{name: "edit replaced", do: func(b *Book[string]) {
			b.Edit("u", lostrow.Orphan{Inc: "0.B"}, func(o *lostrow.Orphan) { o.Vanished = true })
		}, want: lostrow.Orphan{Inc: "0.A"}, exists: true},
		{name: "drop same", do: func(b *Book[string]) { b.Drop("u", lostrow.Orphan{Inc: "0.A"}) }},
		{name: "drop replaced", do: func(b *Book[string]) { b.Drop("u", lostrow.Orphan{Inc: "0.B"}) }, want: lostrow.Orphan{Inc: "0.A"}, exists: true},
		{name: "unwaited", do: func(b *Book[string]) { b.MarkUnwaited("u", unanswered) }, want: lostrow.Orphan{Inc: "0.A", Unwaited: true}, exists: true},
		{name: "unwaited conflict", do: func(b *Book[string]) { b.MarkUnwaited("u", leases.ErrConflict) }, want: lostrow.Orphan{Inc: "0.A"}, exists: true},
		{name: "unwaited none", do: func(b *Book[string]) { b.Delete("u"); b.MarkUnwaited("u", unanswered) }},
		{name: "found lost: has one", do: func(b *Book[string]) { b.FoundLost("u", lostrow.Orphan{Inc: "0.C"}, false, false) }, want: lostrow.Orphan{Inc: "0.A"}, exists: true},
		{name: "found lost: none", do: func(b *Book[string]) { b.Delete("u"); b.FoundLost("u", lostrow.Orphan{Inc: "0.C"}, false, false) }, want: lostrow.Orphan{Inc: "0.C"}, exists: true},
		{name: "found lost: held", do: func(b *Book[string]) { b.Delete("u"); b.FoundLost("u", lostrow.Orphan{Inc: "0.C"}, true, false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := newBook()
			b.Put("u", lostrow.Orphan{Inc: "0.A"})
			tc.do(b)
			if o, ok := b.Lookup("u"); ok != tc.exists || o != tc.want {
				t.Errorf("orphan %+v (%v), want %+v (%v)", o, ok, tc.want, tc.exists)
			}
		})
	}
}

// TestForget: an orphan forgotten as someone else's row is kept as
// released, and FoundLost of a missing row forgets it.
func TestForget(t *testing.T) {
	b, _ := newBook()
	o := lostrow.Orphan{Inc: "0.A", Known: at("40")}
	b.Put("u", o)
	cur := at("50")
	cur.Owner, cur.Incarnation = "b", "0.B"
	b.Forget("u", o, cur)
	if _, ok := b.Lookup("u"); ok {
		t.Error("the orphan forgotten is still one")
	}
	if _, ok := b.Released("u"); !ok {
		t.Error("where the forgotten orphan was read to is not kept")
	}
	b.FoundLost("u", lostrow.Orphan{Inc: "0.A"}, false, true)
	if _, ok := b.Released("u"); ok {
		t.Error("a row found missing is still kept as released")
	}
	if b.Len() != 1 {
		t.Errorf("%d orphans, want the one found lost", b.Len())
	}
}

// TestUncertain: rows are due once their time has come; Settle ends the
// wait read at now but not one set later, and adds the orphan given
// unless there is one; Presume makes a row uncertain and an orphan.
func TestUncertain(t *testing.T) {
	b, _ := newBook()
	b.SetUncertain("early", 10)
	b.SetUncertain("late", 30)
	if due := b.DueUncertain(20); len(due) != 1 || due[0] != "early" {
		t.Errorf("DueUncertain(20) = %v, want early", due)
	}
	b.SetUncertain("early", 40) // a write sent again meanwhile
	if b.Settle("early", 20, nil) {
		t.Error("Settle with no orphan added one")
	}
	if at, ok := b.UncertainAt("early"); !ok || at != 40 {
		t.Errorf("a wait set after the read ended: %d (%v)", at, ok)
	}
	if !b.Settle("late", 30, &lostrow.Orphan{Inc: "0.A"}) || b.Settle("late", 30, &lostrow.Orphan{Inc: "0.B"}) {
		t.Error("Settle: want the first orphan added, not the second")
	}
	if _, ok := b.UncertainAt("late"); ok || b.Orphan("late").Inc != "0.A" {
		t.Errorf("after Settle: still uncertain %v, orphan %+v", ok, b.Orphan("late"))
	}
	b.DropUncertain("early")
	if len(b.DueUncertain(100)) != 0 {
		t.Error("a row dropped still due")
	}
	b.Presume("p", at("7"), "a", "0.CUR", 50)
	if at, _ := b.UncertainAt("p"); at != 50 || !b.Orphan("p").Presumed || b.Orphan("p").Known.Incarnation != "0.CUR" {
		t.Errorf("presumed: due %d, orphan %+v", at, b.Orphan("p"))
	}
}

// TestDropWhere: the released rows of the units it is given are forgotten;
// it reports an orphan among them.
func TestDropWhere(t *testing.T) {
	b, _ := newBook()
	b.NoteReleased("s1/a", at("1"))
	b.NoteReleased("s2/a", at("1"))
	b.PutAll(map[string]lostrow.Orphan{"s2/b": {Inc: "0.A"}})
	of := func(s string) func(string) bool { return func(u string) bool { return u[:2] == s } }
	if b.DropWhere(of("s1")) {
		t.Error("an orphan reported of s1")
	}
	if !b.DropWhere(of("s2")) {
		t.Error("s2's orphan not reported")
	}
	if len(b.released) != 0 {
		t.Errorf("released rows kept: %v", b.released)
	}
}

// TestReports: the report semaphore is held between LockReport and
// UnlockReport, which return the last report that landed.
func TestReports(t *testing.T) {
	b, _ := newBook()
	if last, reported := b.LockReport(); last != 0 || reported {
		t.Errorf("before any report: %d %v", last, reported)
	}
	select {
	case b.reportSem <- struct{}{}:
		t.Fatal("the semaphore is free while held")
	default:
	}
	b.ReportSent(42)
	b.UnlockReport()
	last, reported := b.LockReport()
	defer b.UnlockReport()
	if last != 42 || !reported {
		t.Errorf("after a report: %d %v, want 42 true", last, reported)
	}
}
