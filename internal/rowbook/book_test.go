package rowbook

import (
	"slices"
	"testing"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/leases"
)

// TestBookUnread: the first listing's rows are unread until a read or a
// write records them; a read of an unread row never replaces a later
// answer; parents are read first.
func TestBookUnread(t *testing.T) {
	now := int64(10)
	b := New(func() int64 { return now })
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
	b := New(func() int64 { return 0 })
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
	b := New(func() int64 { return 0 })
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
	b := New(func() int64 { return now })
	if k := b.NoteMark("i1", "i1"); k != lostrow.MarkOurs {
		t.Errorf("our mark: kind %v", k)
	}
	now = 9
	if k := b.NoteMark("i1", "i1"); k != lostrow.MarkOurs || b.Mark().At != 5 {
		t.Errorf("the same mark noted again: kind %v, at %d, want ours at 5", k, b.Mark().At)
	}
	if k := b.NoteMark("i1", "other"); k != lostrow.MarkOther || b.Mark().At != 9 {
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
