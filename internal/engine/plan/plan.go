// Package plan is the assignment planner: given what one instance sees of
// a stream's lease rows, it decides which leases the instance should take
// and whom it should ask for a handoff.
//
// The planner is pure: it reads no store, no clock and no global random
// source. Liveness (which holders are dead) arrives in the rows, and the
// randomness it uses (the order in which free leases are tried, which lease
// to ask for) comes from the caller's *rand.Rand. The same Input and the
// same random sequence give the same Decision.
//
// The rules:
//   - A shard is active (to be consumed) unless its row is at SHARD_END with
//     no rewind pending, or one of its parents still in the stream has a
//     row not at SHARD_END (a parent aged out of the stream does not block).
//     Shards this instance holds are active.
//   - Owners are this instance and every holder of an active row that is not
//     expired. The fair share is ceil(active / owners).
//   - Free rows are taken, in random order, then expired rows (a dead holder,
//     or a row held in this instance's name that runs no worker here: an
//     earlier incarnation or a lost answer), in shard order, up to the share.
//   - A free row this instance just handed over on request is left for the
//     requester.
//   - Below its share after its takes, the instance asks the most loaded
//     other owner for one of its leases, if that owner holds at least two
//     more than it does (ties: the smallest owner id), one request at a
//     time. A move narrows the gap: 4 shards on 3 instances settle at
//     2/1/1, not 2/2/0.
package plan

import (
	"math/rand/v2"
	"slices"
)

// Shard is one shard of the stream as ListShards returned it.
type Shard struct {
	// ID is the shard id.
	ID string
	// Parents are the ids of the shard's parent and adjacent parent, when
	// it has them (a child of a split has one, of a merge two). A parent
	// absent from Input.Shards has aged out of the stream.
	Parents []string
}

// Row is what the instance knows of the lease row of a shard it does not
// hold.
type Row struct {
	// Owner holds the lease; empty when it is free.
	Owner string
	// AtEnd: the checkpoint is SHARD_END (the shard was read to its end).
	AtEnd bool
	// Rewinding: an operator's rewind is pending on the row. A row at
	// SHARD_END with a rewind pending is still active: its holder reached
	// the end before it saw the request.
	Rewinding bool
	// Expired: liveness says the holder is dead (today: the row was read in
	// this scan and its holder has not renewed it for a whole lease
	// duration on this instance's clock). Meaningless for a free row.
	Expired bool
}

// Ended reports whether the row's shard is done: at SHARD_END with no
// rewind pending.
func (r Row) Ended() bool { return r.AtEnd && !r.Rewinding }

// Input is what one instance sees at one scan.
type Input struct {
	// Self is this instance's owner id.
	Self string
	// Shards are the shards of the stream, in ListShards order.
	Shards []Shard
	// Held reports the shards this instance holds (runs a worker for).
	Held map[string]bool
	// Rows are the rows of the shards of Shards this instance does not
	// hold, by shard id. A missing row reads as a zero Row (free, not at
	// its end).
	Rows map[string]Row
	// HandedOver reports free shards this instance handed over on request
	// recently (less than a lease duration ago): they are the requester's
	// to take, not this instance's.
	HandedOver map[string]bool
	// Pending: a handoff this instance asked for has not been taken yet.
	// No further request is made meanwhile.
	Pending bool
	// Rand orders the free rows. Nil leaves them in shard order.
	Rand *rand.Rand
}

// Decision is the planner's answer for one scan.
type Decision struct {
	// Take lists the leases to try to take, in order: the free rows
	// (shuffled by Input.Rand), then the expired ones (in shard order).
	// The caller takes them one by one until Want of them succeeded; a
	// take that fails (another instance was faster) is skipped.
	Take []string
	// Want is how many leases this instance is below its share: Share less
	// the leases it holds. Zero or negative: it takes nothing.
	Want int
	// Share is the fair share: ceil(active shards / owners).
	Share int
	// Active is the number of shards to consume: held, free, expired and
	// held by others, without the ended ones and the children waiting for
	// their parents.
	Active int
	// Live lists the owners counted, sorted: this instance and every holder
	// of an active row that is not expired.
	Live []string
	// Stable: nothing free, nothing expired and nobody to ask for a lease.
	Stable bool

	self    string
	held    int
	pending bool
	count   map[string]int      // leases held by each live owner, Self included
	byOwner map[string][]string // the active rows of each other live owner, in shard order
}

// Request is a handoff to ask for: Owner is asked to hand Shard over.
// The zero Request asks for nothing.
type Request struct {
	Owner string
	Shard string
}

// Plan decides what the instance described by in should take and ask for.
func Plan(in Input) Decision {
	held := 0
	for _, h := range in.Held {
		if h {
			held++
		}
	}
	d := Decision{
		self:    in.Self,
		held:    held,
		pending: in.Pending,
		count:   map[string]int{in.Self: held},
		byOwner: map[string][]string{},
		Active:  held,
	}
	inStream := make(map[string]bool, len(in.Shards))
	for _, s := range in.Shards {
		inStream[s.ID] = true
	}
	var free, expired []string
	for _, s := range in.Shards {
		if in.Held[s.ID] {
			continue
		}
		r := in.Rows[s.ID]
		if r.Ended() || !parentsDone(s, in, inStream) {
			continue
		}
		d.Active++
		switch {
		case r.Owner == "":
			if !in.HandedOver[s.ID] {
				free = append(free, s.ID)
			}
		case r.Owner == in.Self:
			// Held in our name by the store, but no worker runs here (our own
			// earlier incarnation, or a lost answer): take it back at once.
			expired = append(expired, s.ID)
		case r.Expired:
			expired = append(expired, s.ID)
		default:
			d.count[r.Owner]++
			d.byOwner[r.Owner] = append(d.byOwner[r.Owner], s.ID)
		}
	}
	d.Share = (d.Active + len(d.count) - 1) / len(d.count)
	d.Want = d.Share - held
	for owner := range d.count {
		d.Live = append(d.Live, owner)
	}
	slices.Sort(d.Live)
	d.Stable = len(free) == 0 && len(expired) == 0 && d.victim(held, d.Want) == ""
	if in.Rand != nil {
		in.Rand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	}
	d.Take = append(free, expired...)
	return d
}

// parentsDone reports whether shard s may start: every parent still in the
// stream has its row at SHARD_END. A parent this instance holds is not done
// (it has no row in in.Rows).
func parentsDone(s Shard, in Input, inStream map[string]bool) bool {
	for _, p := range s.Parents {
		if p == "" || !inStream[p] {
			continue // none, or aged out of the stream
		}
		if in.Held[p] || !in.Rows[p].AtEnd {
			return false
		}
	}
	return true
}

// Handoff returns the handoff to ask for once taken of the leases of Take
// were taken, or the zero Request: when the instance is still below its
// share, no request of its is pending, and another owner holds at least two
// more leases than it now does. r picks which of that owner's leases to ask
// for; nil picks the first in shard order.
func (d Decision) Handoff(taken int, r *rand.Rand) Request {
	victim := d.victim(d.held+taken, d.Want-taken)
	if victim == "" || d.pending {
		return Request{} // nobody to ask, or an earlier request still pending: one move at a time
	}
	ids := d.byOwner[victim]
	i := 0
	if r != nil {
		i = r.IntN(len(ids))
	}
	return Request{Owner: victim, Shard: ids[i]}
}

// victim returns the owner to ask for a lease, or "": only when this
// instance, holding mine, is below its share (want > 0), the most loaded
// other owner holding at least two more (ties: the smallest owner id).
func (d Decision) victim(mine, want int) string {
	if want <= 0 {
		return ""
	}
	var victim string
	for owner, n := range d.count {
		if owner != d.self && n >= mine+2 && (victim == "" || n > d.count[victim] || (n == d.count[victim] && owner < victim)) {
			victim = owner
		}
	}
	return victim
}
