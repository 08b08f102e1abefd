package rowbook

import (
	"slices"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// TestBookUnread: the first listing's rows are unread until a read or a
// write records them; a read of an unread row never replaces a later
// answer; parents are read first.
func TestBookUnread(t *testing.T) {
	now := int64(10)
	b := New(func() int64 { return now }, kltype.Latest, time.Time{})
	b.Set("known", lostrow.Row{Lease: leases.Lease{Counter: 1}})
	b.FirstListed([]string{"a", "p", "known", "c"})
	if got := b.UnreadIn([]string{"a", "p", "known", "c"}, func(id string) bool { return id == "p" }); !slices.Equal(got, []string{"p", "a", "c"}) {
		t.Errorf("UnreadIn = %v, want the parent first, then a and c, never the row known", got)
	}
	if !b.SawRows() {
		t.Error("a row recorded before the listing: SawRows false")
	}
	b.Set("a", lostrow.Row{Missing: true})
	if b.Unread("a") || b.SetIfUnread("a", lostrow.Row{Lease: leases.Lease{Counter: 3}}) || !b.Row("a").Missing {
		t.Error("a row read since the listing: still unread, or a read of it as unread replaced that answer")
	}
	b.Know("c", leases.Lease{Counter: 2})
	if b.Unread("c") || !b.Row("c").Seen {
		t.Error("Know: the row stays unread or not seen")
	}
	if !b.SetIfUnread("p", lostrow.Row{Lease: leases.Lease{Counter: 4}}) || b.Unread("p") {
		t.Error("SetIfUnread of an unread row: not recorded")
	}
}

// TestBookCreateAll: the rows of a new stream are created once, all but
// those seen and skip, Creating until CreatedAll.
func TestBookCreateAll(t *testing.T) {
	b := New(func() int64 { return 0 }, kltype.Latest, time.Time{})
	b.Set("seen", lostrow.Row{Lease: leases.Lease{Counter: 1}})
	ids, first := b.CreateAll([]string{"a", "seen", "skip", "b"}, "skip")
	if !first || !slices.Equal(ids, []string{"a", "b"}) || !b.Creating() {
		t.Errorf("CreateAll = %v, %v (creating %v), want [a b], true, creating", ids, first, b.Creating())
	}
	if _, again := b.CreateAll([]string{"a"}, ""); again {
		t.Error("CreateAll started twice")
	}
	b.CreatedAll()
	if b.Creating() {
		t.Error("Creating after CreatedAll")
	}
}

// TestBookBeginCreating: a creation begun before the stream is marked
// counts until it ends, whatever CreateAll does meanwhile: a row read
// missing after the mark the creator just made waits instead of being
// recovered as vanished (TestStoreMissingWhileJoining).
func TestBookBeginCreating(t *testing.T) {
	b := New(func() int64 { return 0 }, kltype.Latest, time.Time{})
	b.BeginCreating()
	if !b.Creating() {
		t.Fatal("not Creating after BeginCreating")
	}
	b.CreateAll([]string{"a"}, "")
	b.CreatedAll() // the background creation ends first
	if !b.Creating() {
		t.Error("CreatedAll ended the creation begun before it")
	}
	b.EndCreating()
	if b.Creating() {
		t.Error("Creating after every creation ended")
	}
}

// TestBookMarks: a mark noted is dated when first noted; a first-take token
// is kept for the same version of a row only.
func TestBookMarks(t *testing.T) {
	now := int64(5)
	b := New(func() int64 { return now }, kltype.Latest, time.Time{})
	if k := b.NoteMark("i1", leases.Mark{Token: "i1"}); k != lostrow.MarkOurs {
		t.Errorf("our mark: kind %v", k)
	}
	now = 9
	if k := b.NoteMark("i1", leases.Mark{Token: "i1"}); k != lostrow.MarkOurs || b.Mark().At != 5 {
		t.Errorf("the same mark noted again: kind %v, at %d, want ours at 5", k, b.Mark().At)
	}
	if k := b.NoteMark("i1", leases.Mark{Token: "other"}); k != lostrow.MarkOther || b.Mark().At != 9 {
		t.Errorf("another's mark: kind %v, at %d, want other at 9", k, b.Mark().At)
	}
	b.SetMark(Mark{})
	if b.Mark() != (Mark{}) {
		t.Error("SetMark: the mark known stays")
	}
	tok := b.MarkToken("s", leases.Lease{Token: "v1"})
	if b.MarkToken("s", leases.Lease{Token: "v1"}) != tok || b.MarkToken("s", leases.Lease{Token: "v2"}) == tok {
		t.Error("MarkToken: not kept for the same version, or kept for another")
	}
	b.NoteRecovery("s", "r1")
	now = 20
	b.NoteRecovery("s", "r1")
	if got := b.RecoveredSince("s", "r1"); got != 9 {
		t.Errorf("RecoveredSince = %d, want 9, when first noted", got)
	}
}

// TestBookStart: a shard with no checkpoint starts at LATEST's moment as the
// stream's mark records it (the first marker's), whatever this instance's
// own subscription time; at its own when the mark carries none (an older
// version's) or none was noted; the recorded moment survives the mark
// known being forgotten and follows a new mark (the table recreated). A
// position other than LATEST is used as given.
func TestBookStart(t *testing.T) {
	own := time.Date(2026, 5, 1, 10, 0, 7, 0, time.UTC)
	first := own.Add(-4 * time.Second)
	b := New(func() int64 { return 0 }, kltype.Latest, own)
	want := func(what string, at time.Time) {
		t.Helper()
		if got := b.Start(); got != kltype.AtTimestamp(at) {
			t.Errorf("%s: Start %v, want %v", what, got, kltype.AtTimestamp(at))
		}
	}
	want("no mark noted", own)
	if m := b.Ours("i1"); m.Token != "i1" || !m.Since.Equal(own) {
		t.Errorf("Ours: %+v, want token i1 since %v", m, own)
	}
	b.NoteMark("i1", leases.Mark{Token: "i0", Since: first})
	want("the first marker's mark", first)
	b.SetMark(Mark{})
	want("the mark known forgotten", first)
	b.NoteMark("i1", leases.Mark{Token: "i1", Since: own.Add(time.Hour)})
	want("a new mark (the table recreated)", own.Add(time.Hour))
	b.NoteMark("i1", leases.Mark{Token: "old"})
	want("a mark with no time", own)

	if got := New(func() int64 { return 0 }, kltype.Latest, time.Time{}).Start(); got != kltype.Latest {
		t.Errorf("no time known: Start %v, want LATEST", got)
	}
	th := New(func() int64 { return 0 }, kltype.TrimHorizon, own)
	th.NoteMark("i1", leases.Mark{Token: "i0", Since: first})
	if got := th.Start(); got != kltype.TrimHorizon {
		t.Errorf("TRIM_HORIZON given: Start %v", got)
	}
}
