package engine

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/roster"
	"github.com/kinesislease/kinesislease/leases"
)

// One lister per stream. ListShards is not asked by every member every
// ShardSyncInterval: of the live members that read the same streams
// (their entries carry this instance's Streams digest), each stream has
// one lister, chosen from the membership view every member computes
// (chooseListers). The lister lists the stream every ShardSyncInterval and
// whenever a member's Ended count moves (a shard ended somewhere), and
// publishes a digest of the shard set it found in its membership entry
// (leases.Member.Listing), bumping its row's version in the header so that
// every member reads the entry. Every other member lists the stream at its
// start, after its own shard ends, once each time the lister's digest
// changes to one that differs from its own listing's (jittered within
// listWindow, so that a fleet does not list in one burst), and on its own
// schedule, as before, only while no lister publishes one (listerFallback):
// a stream with no lister (more streams than maxListed per member), or a
// lister whose digest has not appeared for that long (an earlier version,
// or a lister whose listings fail).
//
// Open parents the same way (parentsToRead): the row of a parent of a
// split or merge not known to be done is polled only by the members that
// the plan, once the parents are done, gives a child (shadowPlan); the
// others read it once after an end is announced (an Ended count moved) by
// a member its row names or their plan gives it to.

// maxListed bounds the streams one member lists for the others: each is
// about 17 bytes of its membership entry. Streams beyond maxListed per
// member have no lister: every member lists them itself.
const maxListed = 4

// endedKeep is how many ShardSyncIntervals a member's moved Ended count
// ties the open parents it held or was planned to hold (parentsToRead).
const endedKeep = 10

// listerFallback is how many ShardSyncIntervals a member waits for its
// lister's digest of a stream before it lists the stream on its own
// schedule.
const listerFallback = 3

// listState returns the listing state of the stream keyed key.
func (g *Group) listState(key string) *listState {
	ls := g.listing.lists[key]
	if ls == nil {
		ls = &listState{}
		putIn(&g.listing.lists, key, ls)
	}
	return ls
}

// assignListers returns the lister of each stream of keys among owners:
// each stream in key order to its highest-scoring owner (rendezvous: owner
// o's score for stream k is hashOf(k, o)) that lists fewer than
// min(⌈streams/owners⌉, maxListed) streams already, so that no member
// lists more than its share; "" for a stream left over (more than
// maxListed streams per owner). A function of its arguments only: members
// with the same view choose the same listers.
func assignListers(keys, owners []string) map[string]string {
	out := make(map[string]string, len(keys))
	if len(owners) == 0 {
		return out
	}
	capacity := min((len(keys)+len(owners)-1)/len(owners), maxListed)
	load := make(map[string]int, len(owners))
	for _, k := range keys {
		best, bestScore := "", uint64(0)
		for _, o := range owners {
			if s := hashOf(k, o); load[o] < capacity && (best == "" || s > bestScore || s == bestScore && o < best) {
				best, bestScore = o, s
			}
		}
		if best != "" {
			load[best]++
		}
		out[k] = best
	}
	return out
}

// chooseListers sets the lister of every stream (listerOf) from the live
// members whose entries say they subscribe the same streams as this
// instance (an empty digest, an earlier version's, does not count: it
// publishes no listing), this instance included. Recomputed only when
// they or the streams change.
func (g *Group) chooseListers() {
	mine := g.streamsDigest()
	cand := []string{g.cfg.Owner}
	for _, e := range g.m.Live(mono()) {
		if e.Owner != g.cfg.Owner && e.Streams == mine {
			cand = append(cand, e.Owner)
		}
	}
	slices.Sort(cand)
	keys := g.subscribedKeys()
	if g.listing.listerOf != nil && slices.Equal(cand, g.listing.listerCand) && slices.Equal(keys, g.listing.listerKeys) {
		return
	}
	g.listing.listerCand, g.listing.listerKeys = cand, keys
	g.listing.listerOf = assignListers(keys, cand)
}

// listWindow is the window over which the members that list a stream
// because its lister's digest changed spread their listings: a heartbeat
// interval for up to 64 members, one more for each 64 more, up to 8.
func (g *Group) listWindow() time.Duration {
	return g.cfg.Heartbeat * time.Duration(min(max(len(g.listing.listerCand)/64, 1), 8))
}

// published returns the digest of the stream keyed key that owner's entry
// publishes, as this instance last read it.
func (g *Group) published(owner, key string) (string, bool) {
	e, _ := g.m.Latest(owner)
	l := e.Listing
	tag := streamTag(key)
	for seg := range strings.SplitSeq(l, ",") {
		if len(seg) == len(tag)+12 && strings.HasPrefix(seg, tag) {
			return seg[len(tag):], true
		}
	}
	return "", false
}

// listDue reports whether st's shards are to be listed now (see the
// comment at the top of this file). ls is st's listing state.
func (g *Group) listDue(st *streamState, ls *listState) bool {
	now := mono()
	lister := g.listing.listerOf[st.key]
	if lister != ls.lister {
		// A new lister. seenAt, due and dueAt matter only while the lister
		// is another member, so the zero state stands for none ("").
		ls.lister, ls.seenAt, ls.due = lister, now, false
	}
	periodic := time.Since(st.lastSync) >= g.cfg.ShardSyncInterval
	switch {
	case st.shards == nil || st.resync || st.listing.n > 0 || ls.retry:
		return true // the first listing, this instance's own shard ended, or a failed listing tried again
	case lister == g.cfg.Owner || lister == "":
		return ls.othersEnded || periodic
	}
	pub, ok := g.published(lister, st.key)
	if ok {
		ls.seenAt = now
		if pub != ls.digest && pub != ls.actedOn {
			ls.actedOn = pub
			if !ls.due {
				ls.due, ls.dueAt = true, now+rand.Int64N(int64(g.listWindow()))
			}
		}
	}
	switch {
	case ls.due && now >= ls.dueAt:
		return true
	case !ok && time.Duration(now-ls.seenAt) >= listerFallback*g.cfg.ShardSyncInterval:
		return ls.othersEnded || periodic // no digest from the lister: list as if there were none
	}
	ls.othersEnded = false // the lister lists for it
	return false
}

// listingNow notes that st's shards are being listed now: the listing answers
// whatever its lister published so far, and every reason to list.
func (g *Group) listingNow(st *streamState) {
	ls := g.listState(st.key)
	ls.due, ls.othersEnded = false, false
	if ls.lister != "" && ls.lister != g.cfg.Owner {
		ls.actedOn, _ = g.published(ls.lister, st.key)
	}
}

// publishListing sets what this instance's entry publishes (Listing): the
// digest of each stream it is the lister of, from a listing sent within
// two ShardSyncIntervals (a lister whose listings fail stops publishing,
// and the others list on their own after listerFallback).
func (g *Group) publishListing() {
	var segs []string
	for _, key := range g.listing.listerKeys {
		st, ls := g.streams[key], g.listing.lists[key]
		if st == nil || ls == nil || ls.digest == "" || g.listing.listerOf[key] != g.cfg.Owner || time.Since(st.lastSync) >= 2*g.cfg.ShardSyncInterval {
			continue
		}
		segs = append(segs, streamTag(key)+ls.digest)
	}
	l := strings.Join(segs, ",")
	g.listing.listingPub.Store(&l)
}

// listingDigest is what this instance's membership entry publishes of the
// streams it lists (leases.Member.Listing).
func (g *Group) listingDigest() string { return loadString(&g.listing.listingPub) }

// announceEntry bumps the version of this instance's membership row in
// the header once its entry, as a heartbeat last returned it, shows an
// Ended count or a Listing that the others have not been told of: the
// others re-read only rows whose version moved, and both are meant for
// every member (the listers list again when a shard ended; the others
// list when a lister's digest changes). A bump that fails is tried again
// at the next round.
func (g *Group) announceEntry(ctx context.Context) {
	inc := g.Incarnation()
	own, ok := g.m.Latest(g.cfg.Owner)
	if !ok || own.Incarnation != inc || own.Ended == g.listing.bumpedEnded && own.Listing == g.listing.bumpedListing {
		return
	}
	if err := g.mem.BumpRow(ctx, roster.RowOf(inc)); err != nil {
		if ctx.Err() == nil {
			g.log.Warn("kinesislease: announcing a shard end or a listing failed; retrying", "err", err)
		}
		return
	}
	g.listing.bumpedEnded, g.listing.bumpedListing = own.Ended, own.Listing
}

// children returns the children of shard id of st (by the last listing).
func (g *Group) children(st *streamState, id string) []string {
	ls := g.listState(st.key)
	if ls.kids == nil {
		ls.kids = map[string][]string{}
		for _, c := range st.order {
			for _, p := range kinesisx.Parents(st.shards[c]) {
				ls.kids[p] = append(ls.kids[p], c)
			}
		}
	}
	return ls.kids[id]
}

// rowDone reports whether row r is at its shard's end with no rewind
// pending.
func rowDone(r lostrow.Row) bool {
	return r.Lease.Checkpoint.Sequence == leases.ShardEnd && r.Lease.RewindTo.IsZero()
}

// shadowPlan returns the plan as it will be once every open parent is
// done: the shards that are no parent and not done, over the members the
// plan spreads the streams over. It names the members that will take the
// children of the open parents: those poll the parents' rows.
func (g *Group) shadowPlan() map[unit]string {
	var units []unit
	for st := range g.subscribed() {
		for _, id := range st.order {
			if len(g.children(st, id)) == 0 && !rowDone(st.row(id)) {
				units = append(units, unit{Stream: st.key, Shard: id})
			}
		}
	}
	live := g.planMembers(mono())
	return g.rs.shadow.Assign(live, units, g.cfg.MaxLeases)
}

// parentsToRead returns the rows of open parents (parents of a listed
// shard, not known to be done, not held here) to read this round: when
// poll, those with a child that the plan, once they are done, gives this
// instance (shadowPlan: it takes the child the moment they are); and the
// ones a member whose Ended count moved lately held or was planned to
// hold (an end announced: one read each, whoever's plan has the child).
// So the fleet polls each open parent from the few members that will hold
// its children, not from every member.
func (g *Group) parentsToRead(poll bool) []unit {
	now := mono()
	// A move is kept for ten intervals: a member whose plan gave the
	// parent to another when the end was announced (its view of the
	// members differed from the ender's for a while) reads it once its
	// plan gives it to the ender. Each parent is read once a move at most.
	keep := max(endedKeep*g.cfg.ShardSyncInterval, 6*g.cfg.Timeout)
	moves := g.m.EndedMoves(now, keep)
	var shadow map[unit]string
	var parents []unit
	for st := range g.subscribed() {
		for _, id := range st.order {
			kids := g.children(st, id)
			if len(kids) == 0 {
				continue
			}
			u := unit{Stream: st.key, Shard: id}
			r := st.row(id)
			if rowDone(r) || g.holds(u) {
				delete(g.listing.parentRead, u)
				continue
			}
			if poll && shadow == nil {
				shadow = g.shadowPlan()
			}
			want := poll && slices.ContainsFunc(kids, func(c string) bool {
				return shadow[unit{Stream: st.key, Shard: c}] == g.cfg.Owner
			})
			read, wasRead := g.listing.parentRead[u]
			for _, o := range []string{r.Lease.Owner, g.rs.lastAssign[u]} {
				if at, moved := moves[o]; moved && (!wasRead || read < at) {
					want = true
				}
			}
			if want {
				parents = append(parents, u)
			}
		}
	}
	return parents
}

// notePlannedOpen notes, before the round's takes, the shards plan a
// gives this instance that it does not hold and whose rows it has read
// since its first listing and does not know at their end (see
// noteFoundEnded). A row not read yet is left out: at the start, the plan
// gives this instance rows of shards that ended long ago.
func (g *Group) notePlannedOpen(a map[unit]string) {
	clear(g.rs.plannedOpen)
	for u, owner := range a {
		if owner == g.cfg.Owner && !rowDone(g.streams[u.Stream].row(u.Shard)) && !g.unreadRow(u) && !g.holds(u) {
			putIn(&g.rs.plannedOpen, u, true)
		}
	}
}

// noteFoundEnded counts in this instance's Ended the shards the round's
// plan gave it to take, not known at their end before, that it found at
// their end (a take that read SHARD_END): their holder may have died before it
// announced the end, and the members whose plans still have them must
// learn it (they read the open parents that a member whose Ended moved
// was planned to hold). The shards it reads to their end itself are
// counted when their workers end.
func (g *Group) noteFoundEnded() {
	n := 0
	for u := range g.rs.plannedOpen {
		if st := g.streams[u.Stream]; st != nil && rowDone(st.row(u.Shard)) && !g.holds(u) {
			n++
		}
	}
	clear(g.rs.plannedOpen)
	g.sig.ended.Add(int64(n))
}
