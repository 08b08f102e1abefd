package roster

import (
	"maps"
	"slices"
	"time"
)

// Book is what this instance knows of the membership rows: the roster
// version of each row in the header as last read, the version each row had
// when this instance last read it, and how many entries it held. Not safe
// for concurrent use: internal/membership's Member guards it with its
// viewMu.
type Book struct {
	Header   map[int]int64 // row -> roster version, as the header said
	HeaderOK bool          // the header was read at least once
	HeaderAt int64         // when the header was last read (on Mono())
	Vanished int64         // the header's Vanished count, as last read
	ReadAt   map[int]int64 // row -> the header's version when last read
	Entries  map[int]int   // row -> entries alive (not leaving, not found dead) at the last read
	Total    map[int]int   // row -> entries at the last read
	// Bump holds the rows whose roster this instance changed and whose
	// header version it has not bumped yet (a bump failed): retried every
	// round until it lands.
	Bump map[int]bool
}

// NewBook returns the Book of an instance that has read nothing yet.
func NewBook() Book {
	return Book{Header: map[int]int64{}, ReadAt: map[int]int64{}, Entries: map[int]int{}, Total: map[int]int{}, Bump: map[int]bool{}}
}

// Watched returns the membership rows this instance times besides its own:
// walking the rows after its own, in ring order, every row with entries up
// to and including the first that has an entry alive (or that the header
// lists and was never read), at most maxWatched of them. Every
// row with entries is so watched by the members of the row before it, and
// the members of a row watch each other through their heartbeats, so every
// member is timed by someone at the cost of one read a round; the rows
// passed on the way, whose members are all dead (a whole row died), are
// read too until their entries are removed.
func (b *Book) Watched(own int) []int {
	last := own
	for r := range b.Header {
		last = max(last, r)
	}
	var rows []int
	for i := 1; i <= last && len(rows) < maxWatched; i++ {
		r := (own + i) % (last + 1)
		total, read := b.Total[r]
		if !read {
			if _, listed := b.Header[r]; listed {
				return append(rows, r)
			}
			continue
		}
		if total == 0 {
			continue
		}
		rows = append(rows, r)
		if b.Entries[r] > 0 {
			return rows
		}
	}
	return rows
}

// maxWatched bounds the rows a member times besides its own: one in steady
// state, more only while rows of dead members lie in between (they are read
// until their entries are removed, three timeouts after they died).
const maxWatched = 8

// Due returns the rows to read now: those whose roster version moved since
// this instance read them, the watched rows, and the rows asked for (want,
// which it adds the others to); never own.
func (b *Book) Due(own int, want map[int]bool) []int {
	for r, v := range b.Header {
		if at, ok := b.ReadAt[r]; !ok || at != v {
			want[r] = true
		}
	}
	for _, w := range b.Watched(own) {
		want[w] = true
	}
	delete(want, own) // comes back with every heartbeat
	return slices.Sorted(maps.Keys(want))
}

// Complete reports whether every row the header lists has been read once.
func (b *Book) Complete(own int) bool {
	if !b.HeaderOK {
		return false
	}
	for r := range b.Header {
		if _, ok := b.Total[r]; !ok && r != own {
			return false
		}
	}
	return true
}

// ToRead returns the rows a refresh reads, the header as last read: those
// due (Due), those that view v asks for, and those of the members whose
// timeout has run out at now.
func (b *Book) ToRead(v *View, own int, now int64) []int {
	// Rows to read besides: those of incarnations never seen that a lease
	// row names.
	want := maps.Clone(v.Unknown)
	for id := range v.Dupes {
		// Another process's entry with this owner id: read its row every
		// round, so that one that stopped heartbeating is seen stale and
		// forgotten (the row may never change roster again).
		want[RowOf(id.Inc)] = true
	}
	delete(want, -1) // an incarnation that names no row (RowOf)
	clear(v.Unknown)
	rows := b.Due(own, want)
	// Rows of members whose timeout has run out: read now, own row
	// included (its entries otherwise come back only with the heartbeat).
	suspect, _ := v.Suspects(now, b.Timed(own))
	rows = slices.Concat(rows, slices.DeleteFunc(suspect, func(r int) bool { return slices.Contains(rows, r) }))
	return rows
}

// Timed returns whether this instance times the members of a row: its
// own row's (their heartbeats come back with its own) and the watched
// rows'.
func (b *Book) Timed(own int) func(row int) bool {
	watched := b.Watched(own)
	return func(row int) bool { return row == own || slices.Contains(watched, row) }
}

// headerBudget is the read units a second the fleet spends on the
// membership header, which every member reads: a third of DynamoDB's
// per-item limit (3,000), so that the header never throttles.
const headerBudget = 1000

// HeaderEvery is how long a member waits between two reads of the header,
// in a fleet of members live members whose header lists rows rows: every
// round (0) while the fleet is small, and so that the fleet's reads stay
// within headerBudget as it grows (a strongly consistent read costs a
// unit per 4 KB; the header holds about 9 bytes a row). At the defaults,
// every round up to 1,250 members; every 10 s at 5,000 (a 5.6 KB header:
// two units a read, 1,000 units a second in all). A roster change or a
// vanished report is seen that much later; heartbeats, deaths of the
// members a member times and its own row are not read through it.
func HeaderEvery(members, rows int) time.Duration {
	units := (16 + 9*rows + 4095) / 4096
	d := time.Duration(float64(members*units) / headerBudget * float64(time.Second))
	if d < time.Second {
		return 0 // every round
	}
	return d
}
