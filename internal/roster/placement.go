package roster

import (
	"cmp"
	"hash/fnv"
	"math/bits"
	"slices"

	"github.com/kinesislease/kinesislease/leases/driver"
)

// Where an owner's membership entry goes. A join must find an earlier
// entry of its own owner id (a process restarted with a fixed owner id:
// its entry is replaced in place, or another process with the same id is
// detected), and must find a row with room. Reading every row for that
// costs a fleet started together N × N/RowCapacity reads; instead, each
// owner has a few home rows in every band of rows, drawn from a hash of its
// owner id (HomeRows), and joins only one of them:
//
//   - band 0 is row 0, band b (b ≥ 1) the rows [2^(b-1), 2^b): a band is as
//     large as every band below it together, and the highest row the
//     header lists tells the highest band any entry is in (JoinTop);
//   - a join reads its home rows of the bands up to that one that the
//     header lists (JoinRows: about joinProbes × log2(N/RowCapacity)
//     reads, 19 on average at 1,000 members and 28 at 5,000, against 125
//     and 625 for every row; TestHomeRowsPacking), finds its owner's earlier
//     entry among them if there is one, and otherwise joins the fullest of
//     them with room (JoinCandidate), a band higher if every one is full.
//
// The same owner id always has the same home rows, so a restarted process
// reads the row its predecessor joined, as long as that row's roster bump
// landed (the header lists it) or a higher row is listed. An entry that is
// missed all the same (its bump lost with its process; an entry written by
// an earlier version of the library, which joined the lowest row with
// room) is another row's entry of this owner id: seen by the first full
// view (View.Dupes) and timed there, forgotten once it stands still
// for a timeout, and removed by the fleet three timeouts after its process
// died, as any dead member's entry.
//
// Rows fill to about 80% (sequential joins, TestHomeRowsPacking: 150 rows
// for 1,000 members, 751 for 5,000, against 125 and 625 packed from row 0):
// the header and a full view are that much larger, and nothing else costs
// more.

// joinProbes is how many home rows an owner has in each band (fewer in the
// bands of fewer rows).
const joinProbes = 4

// rowBand returns the band of membership row r: 0 for row 0, b for the
// rows from 2^(b-1) to 2^b - 1.
func rowBand(r int) int { return bits.Len(uint(r)) }

// maxBand is the band of the last membership row.
var maxBand = rowBand(driver.MaxMemberRows - 1)

// HomeRows returns owner's home rows in band b, sorted and distinct: every
// row of a band of at most joinProbes rows, else joinProbes of them drawn
// from a hash of the owner id (the same in every version of the library:
// a restarted process must find its predecessor's entry).
func HomeRows(owner string, b int) []int {
	if b == 0 {
		return []int{0}
	}
	lo := 1 << (b - 1)
	n := min(lo, driver.MaxMemberRows-lo) // the band's rows, the last band cut at MaxMemberRows
	if n <= joinProbes {
		rows := make([]int, n)
		for i := range rows {
			rows[i] = lo + i
		}
		return rows
	}
	h := fnv.New64a()
	h.Write([]byte(owner))
	seed := h.Sum64()
	rows := make([]int, 0, joinProbes)
	for j := uint64(0); len(rows) < joinProbes; j++ {
		r := lo + int(splitmix(seed^(uint64(b)<<32|j))%uint64(n))
		if !slices.Contains(rows, r) {
			rows = append(rows, r)
		}
	}
	slices.Sort(rows)
	return rows
}

// splitmix is SplitMix64's finaliser: a well-mixed 64-bit hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// JoinTop returns the highest band a join reads, the header listing rows:
// the band of the highest row it lists (0 for none).
func JoinTop(listed map[int]int64) int {
	top := 0
	for r := range listed {
		top = max(top, rowBand(r))
	}
	return top
}

// JoinRows returns owner's home rows in bands 0 to top, in band order.
func JoinRows(owner string, top int) []int {
	var rows []int
	for b := 0; b <= min(top, maxBand); b++ {
		rows = append(rows, HomeRows(owner, b)...)
	}
	return rows
}

// JoinCandidate picks the membership row a join of owner tries next,
// counts holding the entries of the rows read (a row not read counts as
// empty: a join there that finds it full is refused, and one that finds
// an entry of this owner shows it), never row skip: among owner's home
// rows with room, the fullest first (packing rows), then the lowest band
// (a band higher only once every home row below is full). Before any
// row-full conflict the first of them; after each, at random among twice
// as many (up to 64): joiners that read the same counts at once spread
// over the rows instead of all aiming at the same one, one conflict each
// for all but the row's room. pick(n) returns a number in [0, n). When
// every home row is full (a fleet of tens of thousands), the lowest rows
// with room of all. It reports false when every row is full.
func JoinCandidate(owner string, counts map[int]int, skip, full int, pick func(n int) int) (int, bool) {
	window := 1 << min(full, 6)
	rows := slices.DeleteFunc(JoinRows(owner, maxBand), func(r int) bool {
		return r == skip || counts[r] >= driver.RowCapacity
	})
	slices.SortStableFunc(rows, func(a, b int) int { return cmp.Compare(counts[b], counts[a]) })
	if len(rows) == 0 {
		for r := 0; r < driver.MaxMemberRows && len(rows) < window; r++ {
			if r != skip && counts[r] < driver.RowCapacity {
				rows = append(rows, r)
			}
		}
	}
	if len(rows) == 0 {
		return 0, false
	}
	rows = rows[:min(len(rows), window)]
	return rows[pick(len(rows))], true
}
