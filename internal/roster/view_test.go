package roster

import (
	"slices"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

const sec = int64(time.Second)

func TestMemberView(t *testing.T) {
	t.Parallel()
	const timeout = 5 * time.Second
	a := leases.Member{Owner: "a", Incarnation: "ia", Heartbeat: 1}
	b := leases.Member{Owner: "b", Incarnation: "ib", Heartbeat: 1}
	row := func(owner string) int { return map[string]int{"a": 0, "b": 1}[owner] }
	type read struct {
		at      int64 // sent; returned 10ms later
		row     int
		entries []leases.Member
	}
	bump := func(m leases.Member, f func(*leases.Member)) leases.Member { f(&m); return m }
	cases := []struct {
		name  string
		reads []read
		at    int64
		alive map[string]bool // owner -> alive (its incarnation as in the case)
		live  []string
		dead  []string
	}{
		{
			name:  "heartbeating is alive",
			reads: []read{{0, row("a"), []leases.Member{a}}, {4 * sec, row("a"), []leases.Member{bump(a, func(m *leases.Member) { m.Heartbeat = 2 })}}, {8 * sec, row("a"), []leases.Member{bump(a, func(m *leases.Member) { m.Heartbeat = 3 })}}},
			at:    8 * sec,
			alive: map[string]bool{"a": true},
			live:  []string{"a", "self"},
		},
		{
			name:  "unchanged for the timeout is dead, counted from the first read's return to the last read's send",
			reads: []read{{0, row("a"), []leases.Member{a}}, {5*sec + int64(10*time.Millisecond), row("a"), []leases.Member{a}}},
			at:    6 * sec,
			alive: map[string]bool{"a": false},
			live:  []string{"self"},
			dead:  []string{"a"},
		},
		{
			name:  "just short of the timeout is alive",
			reads: []read{{0, row("a"), []leases.Member{a}}, {5 * sec, row("a"), []leases.Member{a}}},
			at:    6 * sec,
			alive: map[string]bool{"a": true},
			live:  []string{"a", "self"},
		},
		{
			name: "a notice bump does not restart the timer",
			reads: []read{{0, row("a"), []leases.Member{a}},
				{3 * sec, row("a"), []leases.Member{bump(a, func(m *leases.Member) { m.Notice = 7 })}},
				{6 * sec, row("a"), []leases.Member{bump(a, func(m *leases.Member) { m.Notice = 7 })}}},
			at:    6 * sec,
			alive: map[string]bool{"a": false},
			live:  []string{"self"},
			dead:  []string{"a"},
		},
		{
			name:  "marked leaving is dead at once",
			reads: []read{{0, row("a"), []leases.Member{bump(a, func(m *leases.Member) { m.Leaving = true })}}},
			at:    sec,
			alive: map[string]bool{"a": false},
			live:  []string{"self"},
		},
		{
			name:  "an unreadable row freezes ages: never read again, never dead",
			reads: []read{{0, row("b"), []leases.Member{b}}},
			at:    60 * sec,
			alive: map[string]bool{"b": true},
			live:  []string{"b", "self"},
		},
		{
			name:  "absent from its row for the timeout is dead",
			reads: []read{{0, row("a"), []leases.Member{a}}, {sec, row("a"), nil}, {7 * sec, row("a"), nil}},
			at:    7 * sec,
			alive: map[string]bool{"a": false},
			live:  []string{"self"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := NewView("self", timeout)
			for _, r := range c.reads {
				v.Observe(r.row, r.entries, "iself", r.at, r.at+int64(10*time.Millisecond))
			}
			for owner, want := range c.alive {
				inc := "i" + owner
				if got := v.Alive(owner, inc, c.at); got != want {
					t.Errorf("alive(%s) = %v, want %v", owner, got, want)
				}
			}
			if got := v.Live(c.at); !slices.Equal(got, c.live) {
				t.Errorf("live = %v, want %v", got, c.live)
			}
			var dead []string
			for _, m := range v.Dead() {
				dead = append(dead, m.Owner)
			}
			if !slices.Equal(dead, c.dead) {
				t.Errorf("dead = %v, want %v", dead, c.dead)
			}
		})
	}
}

// TestMemberViewUnknownIncarnationTimedFromARead: an incarnation a lease
// row names before any read showed it is alive until a read of its row,
// and is dead only once it has been absent from its row for a whole
// timeout counted from the return of the first such read, not from the
// lookup: its last heartbeat may have been sent just before the lookup,
// its fence a timeout on from that send (judged dead at 5.0 s while its
// fence ran to 5.57 s).
func TestMemberViewUnknownIncarnationTimedFromARead(t *testing.T) {
	t.Parallel()
	v := NewView("self", 5*time.Second)
	if !v.Alive("x", "3.ix", 0) {
		t.Fatal("an incarnation never seen must be alive when a row first names it")
	}
	if !v.Alive("x", "3.ix", 6*sec) {
		t.Fatal("alive until a read of its row, however long since the lookup")
	}
	// Its row is read without it: the timeout counts from this read's return.
	v.Observe(3, nil, "0.self", 6*sec, 6*sec+1)
	v.Observe(3, nil, "0.self", 10*sec, 10*sec+1)
	if !v.Alive("x", "3.ix", 10*sec) {
		t.Fatal("absent 4 s after the first read of its row returned: alive for a timeout from that return, not from the lookup")
	}
	v.Observe(3, nil, "0.self", 11*sec+1, 11*sec+2)
	if v.Alive("x", "3.ix", 11*sec+2) {
		t.Fatal("absent for a whole timeout from the first read of its row must be dead")
	}
	// One that names no row (an earlier version's) is timed from the lookup.
	if !v.Alive("y", "iy", 0) {
		t.Fatal("an incarnation naming no row must be alive when a row first names it")
	}
	v.Observe(-1, nil, "0.self", 5*sec, 5*sec+1)
	if v.Alive("y", "iy", 5*sec) {
		t.Fatal("an incarnation naming no row, absent for a timeout since the lookup, must be dead")
	}
}

// TestMemberViewNoIncarnation: a lease row with an owner and no
// incarnation (no write of this library leaves one) names no membership
// row, so no read ever shows its holder gone: it stays alive, and the row
// is never taken until it is released.
func TestMemberViewNoIncarnation(t *testing.T) {
	t.Parallel()
	v := NewView("self", 5*time.Second)
	for now := int64(0); now <= 20*5*sec; now += sec { // past forget (10 timeouts)
		for r := range 3 {
			v.Observe(r, nil, "0.self", now, now+1)
		}
		v.Prune(now)
		if !v.Alive("x", "", now) {
			t.Fatalf("a holder with no incarnation judged dead at %v", time.Duration(now))
		}
	}
}

func TestMemberViewBounded(t *testing.T) {
	t.Parallel()
	v := NewView("self", time.Second)
	r := 0
	for i := range 1000 {
		m := leases.Member{Owner: "a", Incarnation: string(rune('A'+i%26)) + string(rune('a'+i/26)), Heartbeat: 1}
		r = 0
		at := int64(i) * sec
		v.Observe(r, []leases.Member{m}, "iself", at, at)
		v.Prune(at)
	}
	if n := len(v.Obs); n > 12 {
		t.Fatalf("the view keeps %d incarnations of one owner after 1,000 restarts; want those of the last 10 timeouts at most", n)
	}
}

func TestMarkDead(t *testing.T) {
	t.Parallel()
	v := NewView("self", 5*time.Second)
	a := leases.Member{Owner: "a", Incarnation: "ia", Heartbeat: 1}
	v.Observe(0, []leases.Member{a}, "iself", 0, 0)
	v.MarkDead("a", "ia", sec)
	if v.Alive("a", "ia", sec) {
		t.Fatal("marked dead, still alive")
	}
	if len(v.Dead()) != 0 {
		t.Fatal("a member marked dead (replaced) must not be announced again")
	}
}

// TestMemberViewSuspects: a member whose heartbeat stands still becomes a
// suspect the moment its timeout runs out (its row is read then), and until
// then the next round is due at that moment; a heartbeating member never is.
func TestMemberViewSuspects(t *testing.T) {
	t.Parallel()
	const timeout = 5 * time.Second
	v := NewView("self", timeout)
	a := leases.Member{Owner: "a", Incarnation: "0.AAAA", Heartbeat: 1}
	b := leases.Member{Owner: "b", Incarnation: "1.BBBB", Heartbeat: 1}
	all := func(int) bool { return true }
	v.Observe(0, []leases.Member{a}, "0.SELF", 0, sec/100)
	v.Observe(1, []leases.Member{b}, "0.SELF", 0, sec/100)
	if rows, next := v.Suspects(2*sec, all); len(rows) != 0 || next != sec/100+int64(timeout) {
		t.Fatalf("at 2s: suspects %v, next %v; want none, next at 5.01s", rows, time.Duration(next))
	}
	// b heartbeats at 3s; a does not.
	b.Heartbeat = 2
	v.Observe(1, []leases.Member{b}, "0.SELF", 3*sec, 3*sec+sec/100)
	rows, next := v.Suspects(5*sec+sec/100, all)
	if !slices.Equal(rows, []int{0}) || next != 3*sec+sec/100+int64(timeout) {
		t.Fatalf("at 5.01s: suspects %v, next %v; want row 0, next at 8.01s", rows, time.Duration(next))
	}
	// The read of row 0 sent then finds a dead: no longer a suspect, dead.
	v.Observe(0, []leases.Member{a}, "0.SELF", 5*sec+sec/100, 5*sec+2*sec/100)
	if rows, _ := v.Suspects(5*sec+3*sec/100, all); len(rows) != 0 {
		t.Fatalf("a found dead, still suspected: %v", rows)
	}
	if d := v.Dead(); len(d) != 1 || d[0].Owner != "a" {
		t.Fatalf("dead %v, want a", d)
	}
	// A row this instance does not time is never read for its suspects:
	// the members of the row before it time them.
	if rows, _ := v.Suspects(9*sec, func(r int) bool { return r == 0 }); len(rows) != 0 {
		t.Fatalf("suspects in rows this instance does not time: %v", rows)
	}
}

// TestMemberViewAbsentIncarnationReadAgain: an incarnation a lease row
// names, absent from its membership row at the one read of it that its
// lookup asked for, in a row this instance neither times nor sees change:
// once a timeout has passed since that read, asking whether it is alive
// asks for its row to be read again, so that it is found dead. Before, its
// row was never read again, and the shard it held waited for ever.
func TestMemberViewAbsentIncarnationReadAgain(t *testing.T) {
	t.Parallel()
	v := NewView("self", 5*time.Second)
	v.Alive("x", "3.ix", 0)
	clear(v.Unknown)
	v.Observe(3, nil, "0.self", sec, sec+1) // absent, from this read's return
	if !v.Alive("x", "3.ix", 3*sec) || v.Unknown[3] {
		t.Fatal("within a timeout of the read: alive, and no read asked for")
	}
	if !v.Alive("x", "3.ix", 7*sec) {
		t.Fatal("no read of its row since: still alive")
	}
	if !v.Unknown[3] {
		t.Fatal("a timeout after the read that found it absent, its row must be read again")
	}
	v.Observe(3, nil, "0.self", 7*sec, 7*sec+1)
	if v.Alive("x", "3.ix", 7*sec+1) {
		t.Fatal("absent at a read sent a timeout after the first: dead")
	}
}

// TestHeaderEvery: every member reads the header every round while the
// fleet is small; past about a thousand members, less often, so that the
// fleet's reads of that one item stay within headerBudget read units a
// second (DynamoDB throttles an item past 3,000).
func TestHeaderEvery(t *testing.T) {
	for _, tc := range []struct {
		members, rows int
		want          time.Duration
	}{
		{1, 1, 0},
		{20, 3, 0},
		{999, 125, 0},
		{1250, 157, 1250 * time.Millisecond},
		{5000, 625, 10 * time.Second}, // a 5.6 KB header: two units a read
	} {
		got := HeaderEvery(tc.members, tc.rows)
		if got != tc.want {
			t.Errorf("HeaderEvery(%d members, %d rows) = %v, want %v", tc.members, tc.rows, got, tc.want)
		}
		if got > 0 {
			units := float64((16 + 9*tc.rows + 4095) / 4096)
			if rate := float64(tc.members) * units / got.Seconds(); rate > headerBudget*1.001 {
				t.Errorf("%d members: %.0f header read units a second, over the budget %d", tc.members, rate, headerBudget)
			}
		}
	}
}

// TestMemberViewOwnerInTwoRows: an owner has entries in two rows (a
// process restarted with a fixed owner id joined a row other than its
// dead predecessor's). The predecessor's entry, marked leaving and then
// removed, does not hide the live one: the owner stays live in the view
// without its row being read again.
func TestMemberViewOwnerInTwoRows(t *testing.T) {
	t.Parallel()
	const timeout = 5 * time.Second
	old := leases.Member{Owner: "x", Incarnation: driver.NewIncarnation(3, "old"), Heartbeat: 90}
	cur := leases.Member{Owner: "x", Incarnation: driver.NewIncarnation(9, "new"), Heartbeat: 1}
	for _, order := range []string{"new row first", "old row first"} {
		v := NewView("self", timeout)
		at := int64(0)
		read := func(row int, ms ...leases.Member) {
			v.Observe(row, ms, "", at, at+int64(10*time.Millisecond))
			at += sec
		}
		if order == "new row first" {
			read(9, cur)
			read(3, old)
		} else {
			read(3, old)
			read(9, cur)
		}
		gone := old
		gone.Leaving = true
		read(3, gone) // found dead by the fleet
		if got := v.Latest["x"]; got.Incarnation != cur.Incarnation {
			t.Errorf("%s, the old entry leaving: latest %q, want the live %q", order, got.Incarnation, cur.Incarnation)
		}
		read(3) // removed
		if got := v.Latest["x"]; got.Incarnation != cur.Incarnation {
			t.Errorf("%s, the old entry removed: latest %q, want the live %q", order, got.Incarnation, cur.Incarnation)
		}
		if live := v.Live(at); !slices.Contains(live, "x") {
			t.Errorf("%s: live %v, want x", order, live)
		}
	}
}
