package shardlist

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/internal/roster"
)

// maxListed bounds the streams one member lists for the others: each is
// about 17 bytes of its membership entry. Streams beyond maxListed per
// member have no lister: every member lists them itself.
const maxListed = 4

// endedKeep is how many ShardSyncIntervals a member's moved Ended count
// ties the open parents it held or was planned to hold (ParentsToRead).
const endedKeep = 10

// listerFallback is how many ShardSyncIntervals a member waits for its
// lister's digest of a stream before it lists the stream on its own
// schedule.
const listerFallback = 3

// mono is the membership's monotonic clock.
func mono() int64 { return fence.Mono() }

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

// choose sets the lister of every subscribed stream (listerOf) from the
// live members whose entries say they subscribe the same streams as this
// instance (mine, the digest of its streams: an empty digest, an earlier
// version's, does not count: it publishes no listing), this instance
// included. Recomputed only when they or the streams change.
func (s *State) choose(mine string) {
	cand := []string{s.cfg.Owner}
	for _, e := range s.cfg.View.Live(mono()) {
		if e.Owner != s.cfg.Owner && e.Streams == mine {
			cand = append(cand, e.Owner)
		}
	}
	slices.Sort(cand)
	keys := slices.Sorted(s.cfg.Host.Subscribed())
	if s.listerOf != nil && slices.Equal(cand, s.listerCand) && slices.Equal(keys, s.listerKeys) {
		return
	}
	s.listerCand, s.listerKeys = cand, keys
	s.listerOf = assignListers(keys, cand)
}

// listWindow is the window over which the members that list a stream
// because its lister's digest changed spread their listings: a heartbeat
// interval for up to 64 members, one more for each 64 more, up to 8.
func (s *State) listWindow() time.Duration {
	return s.cfg.Heartbeat * time.Duration(min(max(len(s.listerCand)/64, 1), 8))
}

// published returns the digest of the stream keyed key that owner's entry
// publishes, as this instance last read it.
func (s *State) published(owner, key string) (string, bool) {
	e, _ := s.cfg.View.Latest(owner)
	l := e.Listing
	tag := streamTag(key)
	for seg := range strings.SplitSeq(l, ",") {
		if len(seg) == len(tag)+12 && strings.HasPrefix(seg, tag) {
			return seg[len(tag):], true
		}
	}
	return "", false
}

// prune forgets the listing state of the streams the Group no longer has
// (removed).
func (s *State) prune() {
	maps.DeleteFunc(s.lists, func(key string, _ *listState) bool { _, ok := s.cfg.Host.Stream(key); return !ok })
}

// othersEnded notes, when ended, that a member's Ended count moved since
// the stream keyed key was last listed: its lister lists it again.
func (s *State) othersEnded(key string, ended bool) {
	ls := s.listState(key)
	ls.othersEnded = ls.othersEnded || ended
}

// due reports whether the shards of the stream keyed key are to be listed
// now (see the package comment). must: the stream has a reason of its
// own (the first listing, this instance's own shard ended, the stream's
// listing failing; see Sync).
func (s *State) due(key string, must bool) bool {
	ls := s.listState(key)
	st, _ := s.cfg.Host.Stream(key)
	now := mono()
	lister := s.listerOf[key]
	if lister != ls.lister {
		// A new lister. seenAt, due and dueAt matter only while the lister
		// is another member, so the zero state stands for none ("").
		ls.lister, ls.seenAt, ls.due = lister, now, false
	}
	periodic := time.Since(st.LastSync) >= s.cfg.ShardSyncInterval
	switch {
	case must || ls.retry:
		return true // the first listing, this instance's own shard ended, or a failed listing tried again
	case lister == s.cfg.Owner || lister == "":
		return ls.othersEnded || periodic
	}
	pub, ok := s.published(lister, key)
	if ok {
		ls.seenAt = now
		if pub != ls.digest && pub != ls.actedOn {
			ls.actedOn = pub
			if !ls.due {
				ls.due, ls.dueAt = true, now+rand.Int64N(int64(s.listWindow()))
			}
		}
	}
	switch {
	case ls.due && now >= ls.dueAt:
		return true
	case !ok && time.Duration(now-ls.seenAt) >= listerFallback*s.cfg.ShardSyncInterval:
		return ls.othersEnded || periodic // no digest from the lister: list as if there were none
	}
	ls.othersEnded = false // the lister lists for it
	return false
}

// listingNow notes that the shards of the stream keyed key are being
// listed now: the listing answers whatever its lister published so far,
// and every reason to list.
func (s *State) listingNow(key string) {
	ls := s.listState(key)
	ls.due, ls.othersEnded = false, false
	if ls.lister != "" && ls.lister != s.cfg.Owner {
		ls.actedOn, _ = s.published(ls.lister, key)
	}
}

// retry notes whether the last listing of the stream keyed key failed: if
// so, the next round lists it again.
func (s *State) retry(key string, failed bool) { s.listState(key).retry = failed }

// noteListed notes a listing of the stream keyed key applied, its shard ids
// in order: its digest (shardDigest) is this instance's now, and the
// children are computed again when asked for.
func (s *State) noteListed(key string, order []string) {
	ls := s.listState(key)
	ls.digest, ls.kids = shardDigest(order), nil
}

// publish sets what this instance's entry publishes (Digest): the digest
// of each stream it is the lister of, from a listing sent within two
// ShardSyncIntervals (a lister whose listings fail stops publishing, and
// the others list on their own after listerFallback).
func (s *State) publish() {
	var segs []string
	for _, key := range s.listerKeys {
		st, in := s.cfg.Host.Stream(key)
		ls := s.lists[key]
		if !in || ls == nil || ls.digest == "" || s.listerOf[key] != s.cfg.Owner || time.Since(st.LastSync) >= 2*s.cfg.ShardSyncInterval {
			continue
		}
		segs = append(segs, streamTag(key)+ls.digest)
	}
	l := strings.Join(segs, ",")
	s.listingPub.Store(&l)
}

// Announce bumps the version of this instance's membership row in the
// header once its entry, as a heartbeat last returned it, shows an Ended
// count or a Listing that the others have not been told of: the others
// re-read only rows whose version moved, and both are meant for every
// member (the listers list again when a shard ended; the others list when
// a lister's digest changes). A bump that fails is tried again at the
// next round.
func (s *State) Announce(ctx context.Context) {
	inc := s.cfg.View.Incarnation()
	own, ok := s.cfg.View.Latest(s.cfg.Owner)
	if !ok || own.Incarnation != inc || own.Ended == s.bumpedEnded && own.Listing == s.bumpedListing {
		return
	}
	if err := s.cfg.Store.BumpRow(ctx, roster.RowOf(inc)); err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.WarnContext(ctx, "kinesislease: announcing a shard end or a listing failed; retrying", "err", err)
		}
		return
	}
	s.bumpedEnded, s.bumpedListing = own.Ended, own.Listing
}
