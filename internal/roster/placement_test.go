package roster

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kinesislease/kinesislease/leases/driver"
)

func TestJoinCandidate(t *testing.T) {
	t.Parallel()
	const owner = "member-0042"
	full := driver.RowCapacity
	first := func(int) int { return 0 }
	last := func(n int) int { return n - 1 }
	home := JoinRows(owner, maxBand)
	b5 := HomeRows(owner, 5) // four of the rows 16 to 31
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
		{"a row not home is not joined", map[int]int{0: full, 1: full, 2: full, 3: full, 4: full, 5: full, 6: full, 7: full, 100: 3}, -1, 0, last, HomeRows(owner, 4)[0], true, 1},
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
		got, ok := JoinCandidate(owner, c.counts, c.skip, c.conf, func(k int) int { n = k; return c.pick(k) })
		if got != c.want || ok != c.wantOK || n != c.wantWindowed {
			t.Errorf("%s: JoinCandidate = %d, %v (among %d); want %d, %v (among %d)", c.name, got, ok, n, c.want, c.wantOK, c.wantWindowed)
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
		rows := HomeRows("member-0042", b)
		if want := min(hi-lo, joinProbes); len(rows) != want {
			t.Errorf("band %d: %d home rows %v, want %d", b, len(rows), rows, want)
		}
		for i, r := range rows {
			if r < lo || r >= hi || rowBand(r) != b || (i > 0 && r <= rows[i-1]) {
				t.Errorf("band %d [%d, %d): home rows %v not distinct, sorted and in the band", b, lo, hi, rows)
			}
		}
		if again := HomeRows("member-0042", b); !slices.Equal(rows, again) {
			t.Errorf("band %d: home rows %v, then %v", b, rows, again)
		}
	}
	// 1,000 owners over band 10 (512 rows): spread, not piled on a few.
	per := map[int]int{}
	for i := range 1000 {
		for _, r := range HomeRows(fmt.Sprintf("member-%04d", i), 10) {
			per[r]++
		}
	}
	if most := slices.Max(slices.Collect(maps.Values(per))); len(per) < 450 || most > 25 {
		t.Errorf("1,000 owners' home rows in band 10: %d of 512 rows, at most %d on one; want spread", len(per), most)
	}
	if got := JoinTop(map[int]int64{0: 3, 5: 1, 40: 2}); got != 6 {
		t.Errorf("JoinTop with row 40 listed = %d, want 6", got)
	}
	if got := JoinTop(nil); got != 0 {
		t.Errorf("JoinTop of no header = %d, want 0", got)
	}
	rows := JoinRows("member-0042", 6)
	if len(rows) != 1+1+2+4+4+4+4 {
		t.Errorf("JoinRows to band 6 = %v: want 20 rows", rows)
	}
}

// TestHomeRowsPacking: owners joining one after the other (JoinCandidate
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
			for _, r := range JoinRows(owner, JoinTop(listed)) {
				if _, ok := listed[r]; ok {
					read[r] = counts[r]
					k++
				}
			}
			reads, most = reads+k, max(most, k)
			row, ok := JoinCandidate(owner, read, -1, 0, func(int) int { return 0 })
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
