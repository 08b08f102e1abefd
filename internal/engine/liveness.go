package engine

import (
	"hash/fnv"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// liveness is what this instance knows of who is alive and since when: its
// observations of the rows it does not hold, which rows a scan reads, and
// the owners it saw alive in its last full scan. Times are passed in (on the
// local monotonic clock: time.Now values), never read here.
//
// It is used by the coordinator's loop goroutine only.
type liveness struct {
	self string
	ttl  time.Duration // a holder seen not renewing for this long is dead

	seen  map[string]observation
	fresh map[string]bool // rows read in the current scan
	// live: owners seen alive in the last full scan, sorted. stable: the
	// last full scan found nothing to take or move.
	live   []string
	stable bool
	scans  int
}

// observation is what this instance last saw of a row it does not hold, and
// since when (on its own monotonic clock) its holder has not renewed it.
//
// The holder's renewals are what a taker watches: the owner and the
// expires_at a renewal writes, compared as opaque values (never against a
// clock). Other writes bump the counter too (handoff and rewind requests):
// counting them as signs of life would let a requester keep a dead holder's
// lease alive by asking for it. The holder trusts only its renewals for its
// fence, so it stops delivering before a taker may act.
type observation struct {
	lease leases.Lease
	since time.Time
}

func newLiveness(self string, ttl time.Duration) *liveness {
	return &liveness{self: self, ttl: ttl, seen: map[string]observation{}, fresh: map[string]bool{}}
}

// fullScanEvery: in a stable assignment, every this many scans read every
// row; the others read only the rows this instance watches.
const fullScanEvery = 6

// scanReads is which rows one scan reads.
type scanReads struct {
	full bool
	// read: the rows to read now. unread: the rows a partial scan reads
	// only if one of read turns out free or expired (see moved).
	read, unread []string
	// rows: the rows not read whose observation stands in for them (an
	// ended shard's row, in a partial scan: it changes only by a rewind).
	rows map[string]leases.Lease
}

// begin starts a scan of the shards of order not in held: all of their rows
// in a full scan; in a stable assignment only the rows this instance
// watches, unless one of those turns out free or expired.
func (lv *liveness) begin(order []string, held map[string]bool) scanReads {
	s := scanReads{full: !lv.stable || lv.scans%fullScanEvery == 0, rows: map[string]leases.Lease{}}
	lv.scans++
	clear(lv.fresh)
	for _, id := range order {
		if held[id] {
			continue
		}
		o, ok := lv.seen[id]
		switch {
		case ok && o.lease.Checkpoint.Sequence == leases.ShardEnd && !s.full:
			s.rows[id] = o.lease // an ended shard's row changes only by a rewind
		case !ok || s.full || lv.watches(id, o.lease.Owner):
			s.read = append(s.read, id)
		default:
			s.unread = append(s.unread, id)
		}
	}
	return s
}

// observe records a read of row id that returned l, at the time the read
// returned. The write that produced this version was sent before then:
// counting the lease from there never starts it before the holder's own
// count (from the send of its renewal).
func (lv *liveness) observe(id string, l leases.Lease, at time.Time) {
	lv.fresh[id] = true
	if o, ok := lv.seen[id]; ok && sameHolding(o.lease, l) {
		lv.seen[id] = observation{lease: l, since: o.since} // the holder did not renew since o.since
		return
	}
	lv.seen[id] = observation{lease: l, since: at}
}

// sameHolding reports whether b shows the same holder, not renewed since a.
func sameHolding(a, b leases.Lease) bool {
	return a.Owner == b.Owner && a.ExpiresAt.Equal(b.ExpiresAt)
}

// moved reports whether one of the rows ids, just observed, is free or has
// not been renewed for a lease duration at now: a partial scan then reads
// every row.
func (lv *liveness) moved(ids []string, now time.Time) bool {
	for _, id := range ids {
		if o := lv.seen[id]; !o.lease.Held() || now.Sub(o.since) >= lv.ttl {
			return true
		}
	}
	return false
}

// recall puts the last observation of each of ids into rows: the rows a
// partial scan did not read.
func (lv *liveness) recall(ids []string, rows map[string]leases.Lease) {
	for _, id := range ids {
		rows[id] = lv.seen[id].lease
	}
}

// expired reports whether the holder of row id is dead at now: the row was
// read in this scan and its holder has not renewed it for a whole lease
// duration on our own clock.
func (lv *liveness) expired(id string, now time.Time) bool {
	return lv.fresh[id] && now.Sub(lv.seen[id].since) >= lv.ttl
}

// settle records what a full scan found: the owners alive (sorted) and
// whether the assignment is stable.
func (lv *liveness) settle(live []string, stable bool) {
	lv.live = append(lv.live[:0], live...)
	lv.stable = stable
}

// requested records our handoff request's write l on row id: no sign of
// the holder's life.
func (lv *liveness) requested(id string, l leases.Lease) {
	lv.seen[id] = observation{lease: l, since: lv.seen[id].since}
}

// forget drops the observation of row id (we took it, or tried to).
func (lv *liveness) forget(id string) { delete(lv.seen, id) }

// retain drops the observations of the shards not in the stream any more.
func (lv *liveness) retain(inStream func(id string) bool) {
	for id := range lv.seen {
		if !inStream(id) {
			delete(lv.seen, id)
		}
	}
}

// watches reports whether this instance reads row id, held by owner, in a
// partial scan. Each row held by a live owner is watched by one other live
// owner, chosen by a hash of the shard id, so that together the instances
// read each row about once per scan instead of once per instance.
func (lv *liveness) watches(id, owner string) bool {
	var candidates []string
	for _, o := range lv.live {
		if o != owner {
			candidates = append(candidates, o)
		}
	}
	if len(candidates) == 0 {
		return true
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return candidates[int(h.Sum32()%uint32(len(candidates)))] == lv.self
}
