package plan

// A Unit, the shard every plan places, and the order units are sorted in.

import (
	"cmp"
	"strings"
)

// A Unit is one shard to place: an active shard of one of the streams the
// service subscribes to. The caller leaves out shards that are done (at
// SHARD_END, no rewind pending) and children whose parents still in the
// stream are not done.
type Unit struct {
	Stream string
	Shard  string
}

// CompareUnits orders units by stream, then shard.
func CompareUnits(a, b Unit) int {
	return cmp.Or(strings.Compare(a.Stream, b.Stream), strings.Compare(a.Shard, b.Shard))
}
