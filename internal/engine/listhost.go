package engine

import (
	"iter"

	"github.com/kinesislease/kinesislease/internal/shardlist"
)

// listingHost is the Group as its listing (shardlist.State) sees it
// (shardlist.Host): its streams as listed, what it knows of their rows,
// what it holds and its last plan. Round goroutine.
type listingHost Group

var _ shardlist.Host = (*listingHost)(nil)

// Subscribed yields the keys of the streams not being removed, in
// subscription order.
func (h *listingHost) Subscribed() iter.Seq[string] {
	return func(yield func(string) bool) {
		for st := range (*Group)(h).subscribed() {
			if !yield(st.key) {
				return
			}
		}
	}
}

// Stream returns the stream keyed key as last listed, and whether the
// Group has it.
func (h *listingHost) Stream(key string) (shardlist.Stream, bool) {
	st := h.streams[key]
	if st == nil {
		return shardlist.Stream{}, false
	}
	return shardlist.Stream{Shards: st.shards, Order: st.order, LastSync: st.lastSync}, true
}

// Row returns the owner the row of u names and whether it is done
// (rowDone), as this instance last read or wrote it.
func (h *listingHost) Row(u unit) (string, bool) {
	st := h.streams[u.Stream]
	if st == nil {
		return "", false
	}
	r := st.row(u.Shard)
	return r.Lease.Owner, rowDone(r)
}

// Unread reports whether the row of u is still unread since the first
// listing.
func (h *listingHost) Unread(u unit) bool { return (*Group)(h).unreadRow(u) }

// Holds reports whether this instance runs a worker on u.
func (h *listingHost) Holds(u unit) bool { return (*Group)(h).holds(u) }

// PlanMembers returns the live owners the plan spreads the streams over.
func (h *listingHost) PlanMembers(now int64) []string { return (*Group)(h).planMembers(now) }

// Planned returns the owner the last plan gave u to.
func (h *listingHost) Planned(u unit) string { return h.rs.lastAssign[u] }
