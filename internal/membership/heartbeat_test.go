package membership

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/memory"
)

func TestHeartbeatAction(t *testing.T) {
	t.Parallel()
	conflict := func(cur leases.Member) error {
		return &leases.MemberConflictError{Op: "Heartbeat", Owner: "o", Current: cur}
	}
	me := func(f func(*leases.Member)) leases.Member {
		m := leases.Member{Owner: "o", Incarnation: "i1", Heartbeat: 3}
		if f != nil {
			f(&m)
		}
		return m
	}
	cases := []struct {
		name  string
		err   error
		state heartbeatState
		want  hbAction
	}{
		{"landed", nil, heartbeatState{}, hbLanded},
		{"a network error", errors.New("timeout"), heartbeatState{}, hbFailed},
		{"a missing table", fmt.Errorf("table gone: %w", leases.ErrMisconfigured), heartbeatState{}, hbMisconfigured},
		{"notice bumped", conflict(me(func(m *leases.Member) { m.Notice = 2 })), heartbeatState{notice: 1}, hbNotice},
		{"found dead by others", conflict(me(func(m *leases.Member) { m.Leaving = true })), heartbeatState{}, hbFoundDead},
		{"our own leaving heartbeat landed unanswered", conflict(me(func(m *leases.Member) { m.Leaving = true; m.Heartbeat = 4 })), heartbeatState{needNewInc: true}, hbFoundDead},
		{"a new incarnation we tried landed unanswered", conflict(leases.Member{Owner: "o", Incarnation: "i2"}), heartbeatState{needNewInc: true, attempted: map[string]bool{"i2": true}}, hbOurAttempt},
		{"... and was found dead since", conflict(leases.Member{Owner: "o", Incarnation: "i2", Leaving: true}), heartbeatState{needNewInc: true, attempted: map[string]bool{"i2": true}}, hbOurAttempt},
		{"removed meanwhile, or the table recreated", conflict(leases.Member{}), heartbeatState{}, hbMissing},
		{"another process took the entry", conflict(leases.Member{Owner: "o", Incarnation: "zz"}), heartbeatState{}, hbReplaced},
		{"our own first join, applied late after the entry was removed", conflict(leases.Member{Owner: "o", Incarnation: "i0", Heartbeat: 1}),
			heartbeatState{earlier: func(inc string) bool { return inc == "i0" || inc == "i1" }}, hbOurAttempt},
		{"another process, though this one had incarnations too", conflict(leases.Member{Owner: "o", Incarnation: "zz"}),
			heartbeatState{earlier: func(inc string) bool { return inc == "i0" || inc == "i1" }}, hbReplaced},
	}
	for _, c := range cases {
		st := c.state
		if got, _ := heartbeatAction(c.err, &st, "i1"); got != c.want {
			t.Errorf("%s: action %d, want %d", c.name, got, c.want)
		}
	}
}

// TestOwnLateJoinIsNoDuplicate: an entry of this owner id in another row,
// whose incarnation this process tried to join as (the attempt's answer
// was lost, and it landed late, after the process had joined elsewhere),
// is this process's own, never another process: duplicates stays quiet
// however long it is seen. An entry of an incarnation this process never
// tried, heartbeating, still ends Run after the wait; one that stops
// heartbeating is forgotten, its row read every round meanwhile.
func TestOwnLateJoinIsNoDuplicate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingMembers{Store: memory.New(), reads: map[int]int{}}
		me := testMember(store, "a")
		if err := me.Arm(context.Background(), "0.CUR", fence.Mono()+int64(time.Minute), fence.Mono()-int64(time.Hour)); err != nil {
			t.Fatal(err)
		}
		me.tryInc("1.LATE")
		wait := max(me.cfg.ShutdownTimeout, 2*me.cfg.Timeout)
		late := leases.Member{Owner: "a", Incarnation: "1.LATE", Heartbeat: 1}
		other := leases.Member{Owner: "a", Incarnation: "2.OTHER", Heartbeat: 1}
		for start := time.Now(); time.Since(start) < wait+5*time.Second; time.Sleep(time.Second) {
			late.Heartbeat++ // as if it heartbeat: still our own
			me.observe(1, []leases.Member{late}, fence.Mono(), fence.Mono())
			if err := me.Duplicates(); err != nil {
				t.Fatalf("an entry of an incarnation this process tried to join as: %v", err)
			}
		}
		me.viewMu.Lock()
		me.view.unknown = map[int]bool{}
		me.viewMu.Unlock()
		var err error
		for start := time.Now(); err == nil && time.Since(start) < wait+5*time.Second; time.Sleep(time.Second) {
			other.Heartbeat++
			me.observe(2, []leases.Member{other}, fence.Mono(), fence.Mono())
			err = me.Duplicates()
		}
		var dup *DuplicateOwnerError
		if !errors.As(err, &dup) {
			t.Fatalf("another process heartbeating with this owner id: duplicates = %v, want a *DuplicateOwnerError", err)
		}
		// Its row is read at every refresh, whatever its roster version, so
		// that a process that stops heartbeating is seen stale.
		store.reads = map[int]int{}
		me.Refresh(context.Background())
		if store.reads[2] == 0 {
			t.Fatal("the row of another process with this owner id was not read at the refresh")
		}
	})
}

// countingMembers counts the reads of each membership row.
type countingMembers struct {
	*memory.Store
	mu    sync.Mutex
	reads map[int]int
}

func (s *countingMembers) Members(ctx context.Context, row int) ([]leases.Member, error) {
	s.mu.Lock()
	s.reads[row]++
	s.mu.Unlock()
	return s.Store.Members(ctx, row)
}

func TestJoinCandidate(t *testing.T) {
	t.Parallel()
	const owner = "member-0042"
	full := driver.RowCapacity
	first := func(int) int { return 0 }
	last := func(n int) int { return n - 1 }
	home := joinRows(owner, maxBand)
	b5 := homeRows(owner, 5) // four of the rows 16 to 31
	cases := []struct {
		name         string
		counts       map[int]int
		skip, conf   int
		pick         func(int) int
		want         int
		wantOK       bool
		wantWindowed int // the number of candidates pick is given
	}{
		{"a new table: row 0", map[int]int{}, -1, 0, last, 0, true, 1},
		{"full rows skipped, the lowest band first", map[int]int{0: full}, -1, 0, last, 1, true, 1},
		{"the fullest home row with room", map[int]int{0: full, 1: 2, 2: 5, 3: 7, b5[2]: 6}, -1, 0, last, 3, true, 1},
		{"a row not home is not joined", map[int]int{0: full, 1: full, 2: full, 3: full, 4: full, 5: full, 6: full, 7: full, 100: 3}, -1, 0, last, homeRows(owner, 4)[0], true, 1},
		{"the row to skip", map[int]int{}, 0, 0, first, 1, true, 1},
		{"after a row-full conflict, twice as many", map[int]int{}, -1, 1, last, 1, true, 2},
		{"after three", map[int]int{1: full}, -1, 3, last, home[8], true, 8},
		{"at most 64", map[int]int{}, -1, 9, last, home[min(len(home), 64)-1], true, min(len(home), 64)},
		{"every home row full: the lowest rows with room of all", func() map[int]int {
			m := map[int]int{}
			for _, r := range home {
				m[r] = full
			}
			return m
		}(), -1, 0, last, func() int {
			for r := 0; ; r++ {
				if !slices.Contains(home, r) {
					return r
				}
			}
		}(), true, 1},
		{"every row full", func() map[int]int {
			m := map[int]int{}
			for r := range driver.MaxMemberRows {
				m[r] = full
			}
			return m
		}(), -1, 0, first, 0, false, 0},
	}
	for _, c := range cases {
		var n int
		got, ok := joinCandidate(owner, c.counts, c.skip, c.conf, func(k int) int { n = k; return c.pick(k) })
		if got != c.want || ok != c.wantOK || n != c.wantWindowed {
			t.Errorf("%s: joinCandidate = %d, %v (among %d); want %d, %v (among %d)", c.name, got, ok, n, c.want, c.wantOK, c.wantWindowed)
		}
	}
}

// TestHomeRows: an owner's home rows are in their band, distinct, as many
// as the band has up to joinProbes, the same at every call; different
// owners have different ones; a join reads the home rows of the bands up
// to the highest row the header lists.
func TestHomeRows(t *testing.T) {
	t.Parallel()
	for b := 0; b <= maxBand; b++ {
		lo, hi := 0, 1
		if b > 0 {
			lo, hi = 1<<(b-1), min(1<<b, driver.MaxMemberRows)
		}
		rows := homeRows("member-0042", b)
		if want := min(hi-lo, joinProbes); len(rows) != want {
			t.Errorf("band %d: %d home rows %v, want %d", b, len(rows), rows, want)
		}
		for i, r := range rows {
			if r < lo || r >= hi || rowBand(r) != b || (i > 0 && r <= rows[i-1]) {
				t.Errorf("band %d [%d, %d): home rows %v not distinct, sorted and in the band", b, lo, hi, rows)
			}
		}
		if again := homeRows("member-0042", b); !slices.Equal(rows, again) {
			t.Errorf("band %d: home rows %v, then %v", b, rows, again)
		}
	}
	// 1,000 owners over band 10 (512 rows): spread, not piled on a few.
	per := map[int]int{}
	for i := range 1000 {
		for _, r := range homeRows(fmt.Sprintf("member-%04d", i), 10) {
			per[r]++
		}
	}
	if most := slices.Max(slices.Collect(maps.Values(per))); len(per) < 450 || most > 25 {
		t.Errorf("1,000 owners' home rows in band 10: %d of 512 rows, at most %d on one; want spread", len(per), most)
	}
	if got := joinTop(map[int]int64{0: 3, 5: 1, 40: 2}); got != 6 {
		t.Errorf("joinTop with row 40 listed = %d, want 6", got)
	}
	if got := joinTop(nil); got != 0 {
		t.Errorf("joinTop of no header = %d, want 0", got)
	}
	rows := joinRows("member-0042", 6)
	if len(rows) != 1+1+2+4+4+4+4 {
		t.Errorf("joinRows to band 6 = %v: want 20 rows", rows)
	}
}

// TestHomeRowsPacking: owners joining one after the other (joinCandidate
// over the counts of the rows a join reads: its home rows the header
// lists, in the bands up to the highest row listed) read a few rows each,
// about joinProbes a band, and fill the rows they use to about 80%. It
// logs the figures for fleets of 20 to 5,000 (placement.go quotes them):
//
//	members  rows used  highest row  fill  rows read per join: mean, most
//	20       3          2            83%   1.6, 3
//	200      31         30           81%   10.0, 16
//	1,000    150        213          83%   18.9, 26
//	5,000    751        920          83%   28.1, 36
//
// (against N/8 rows read per join, 125 at 1,000 and 625 at 5,000, when a
// join read every row; rows packed full from row 0).
func TestHomeRowsPacking(t *testing.T) {
	t.Parallel()
	for _, n := range []int{20, 200, 1000, 5000} {
		counts := map[int]int{}
		listed := map[int]int64{}
		reads, most := 0, 0
		for i := range n {
			owner := fmt.Sprintf("member-%05d-%s", i, strings.Repeat("x", 51))
			read := map[int]int{}
			k := 0
			for _, r := range joinRows(owner, joinTop(listed)) {
				if _, ok := listed[r]; ok {
					read[r] = counts[r]
					k++
				}
			}
			reads, most = reads+k, max(most, k)
			row, ok := joinCandidate(owner, read, -1, 0, func(int) int { return 0 })
			if !ok {
				t.Fatalf("%d members: no row for member %d", n, i)
			}
			counts[row]++
			listed[row]++
		}
		hi := 0
		for r := range counts {
			hi = max(hi, r)
		}
		fill := float64(n) / float64(driver.RowCapacity*len(counts))
		mean := float64(reads) / float64(n)
		t.Logf("%d members: %d rows used, highest %d, %.0f%% full; rows read per join: mean %.1f, most %d", n, len(counts), hi, 100*fill, mean, most)
		if fill < 0.75 {
			t.Errorf("%d members: the rows used are %.0f%% full, want at least 75%%", n, 100*fill)
		}
		if limit := joinProbes * (rowBand(hi) + 1); most > limit {
			t.Errorf("%d members: a join read %d rows, want at most %d (joinProbes a band)", n, most, limit)
		}
	}
}
