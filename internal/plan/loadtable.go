package plan

// loadTable, the greedy's count of the units of each (stream, member)
// pair, and resize, the reuse of a buffer the greedy and the ring share.

import "math/bits"

// loadTable holds how many units of stream s member m holds: a dense table
// when streams × members is small, a hash table otherwise.
type loadTable struct {
	n     int32
	flat  bool
	dense []int32
	keys  []uint64 // s<<32 | m, plus one; 0 is empty
	vals  []int32
	shift uint
}

func (t *loadTable) reset(streams, n, units int) {
	t.n = int32(n)
	t.flat = int64(streams)*int64(n) <= 16*int64(units)+4096
	if t.flat {
		t.dense = resize(t.dense, streams*n)
		clear(t.dense)
		return
	}
	b := bits.Len(uint(2*units + 16)) // at most half full
	t.shift = uint(64 - b)
	t.keys = resize(t.keys, 1<<b)
	t.vals = resize(t.vals, 1<<b)
	clear(t.keys)
}

func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

func (t *loadTable) slot(key uint64) int {
	mask := len(t.keys) - 1
	i := int(((key) * 0x9e3779b97f4a7c15) >> t.shift)
	for t.keys[i] != key && t.keys[i] != 0 {
		i = (i + 1) & mask
	}
	return i
}

func (t *loadTable) get(s, m int32) int32 {
	if t.flat {
		return t.dense[s*t.n+m]
	}
	key := uint64(s)<<32 | uint64(m) + 1
	if i := t.slot(key); t.keys[i] == key {
		return t.vals[i]
	}
	return 0
}

func (t *loadTable) add(s, m, d int32) {
	if t.flat {
		t.dense[s*t.n+m] += d
		return
	}
	key := uint64(s)<<32 | uint64(m) + 1
	i := t.slot(key)
	if t.keys[i] == 0 {
		t.keys[i], t.vals[i] = key, 0
	}
	t.vals[i] += d
}
