package shardlist

import (
	"slices"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/syncx"
)

// Children returns the children of shard id of the stream keyed key (by
// the last listing).
func (s *State) Children(key, id string) []string {
	ls := s.listState(key)
	if ls.kids == nil {
		st, _ := s.cfg.Host.Stream(key)
		ls.kids = map[string][]string{}
		for _, c := range st.Order {
			for _, p := range kinesisx.Parents(st.Shards[c]) {
				ls.kids[p] = append(ls.kids[p], c)
			}
		}
	}
	return ls.kids[id]
}

// shadowPlan returns the plan as it will be once every open parent is
// done: the shards that are no parent and not done, over the members the
// plan spreads the streams over. It names the members that will take the
// children of the open parents: those poll the parents' rows.
func (s *State) shadowPlan() map[unit]string {
	var units []unit
	for key := range s.cfg.Host.Subscribed() {
		st, _ := s.cfg.Host.Stream(key)
		for _, id := range st.Order {
			if u := (unit{Stream: key, Shard: id}); len(s.Children(key, id)) == 0 && !s.done(u) {
				units = append(units, u)
			}
		}
	}
	live := s.cfg.Host.PlanMembers(mono())
	return s.shadow.Assign(live, units, s.cfg.MaxLeases)
}

// done reports whether the row of u is done (Host.Row).
func (s *State) done(u unit) bool {
	_, done := s.cfg.Host.Row(u)
	return done
}

// ParentsToRead returns the rows of open parents (parents of a listed
// shard, not known to be done, not held here) to read this round: when
// poll, those with a child that the plan, once they are done, gives this
// instance (shadowPlan: it takes the child the moment they are); and the
// ones a member whose Ended count moved lately held or was planned to
// hold (an end announced: one read each, whoever's plan has the child).
// So the fleet polls each open parent from the few members that will hold
// its children, not from every member.
func (s *State) ParentsToRead(poll bool) []unit {
	now := mono()
	// A move is kept for ten intervals: a member whose plan gave the
	// parent to another when the end was announced (its view of the
	// members differed from the ender's for a while) reads it once its
	// plan gives it to the ender. Each parent is read once a move at most.
	keep := max(endedKeep*s.cfg.ShardSyncInterval, 6*s.cfg.Timeout)
	moves := s.cfg.View.EndedMoves(now, keep)
	var shadow map[unit]string
	var parents []unit
	for key := range s.cfg.Host.Subscribed() {
		st, _ := s.cfg.Host.Stream(key)
		for _, id := range st.Order {
			kids := s.Children(key, id)
			if len(kids) == 0 {
				continue
			}
			u := unit{Stream: key, Shard: id}
			owner, done := s.cfg.Host.Row(u)
			if done || s.cfg.Host.Holds(u) {
				delete(s.parentRead, u)
				continue
			}
			if poll && shadow == nil {
				shadow = s.shadowPlan()
			}
			want := poll && slices.ContainsFunc(kids, func(c string) bool {
				return shadow[unit{Stream: key, Shard: c}] == s.cfg.Owner
			})
			read, wasRead := s.parentRead[u]
			for _, o := range []string{owner, s.cfg.Host.Planned(u)} {
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

// ParentRead notes that the row of open parent u was read by a call sent
// at sent (mono).
func (s *State) ParentRead(u unit, sent int64) { syncx.PutIn(&s.parentRead, u, sent) }

// PollSoon has the next round poll the open parents (a listing found new
// children).
func (s *State) PollSoon() { s.pollSoon = true }

// TakePollSoon reports whether a listing found new children since it was
// last called.
func (s *State) TakePollSoon() bool {
	soon := s.pollSoon
	s.pollSoon = false
	return soon
}

// NotePlannedOpen notes, before the round's takes, the shards plan a
// gives this instance that it does not hold and whose rows it has read
// since its first listing and does not know at their end (see
// FoundEnded). A row not read yet is left out: at the start, the plan
// gives this instance rows of shards that ended long ago.
func (s *State) NotePlannedOpen(a map[unit]string) {
	clear(s.plannedOpen)
	for u, owner := range a {
		if owner == s.cfg.Owner && !s.done(u) && !s.cfg.Host.Unread(u) && !s.cfg.Host.Holds(u) {
			syncx.PutIn(&s.plannedOpen, u, true)
		}
	}
}

// FoundEnded returns how many of the shards the round's plan gave this
// instance to take, not known at their end before, it found at their end
// (a take that read SHARD_END), for its Ended count: their holder may
// have died before it announced the end, and the members whose plans
// still have them must learn it (they read the open parents that a member
// whose Ended moved was planned to hold). The shards it reads to their
// end itself are counted when their workers end.
func (s *State) FoundEnded() int64 {
	n := 0
	for u := range s.plannedOpen {
		if s.done(u) && !s.cfg.Host.Holds(u) {
			n++
		}
	}
	clear(s.plannedOpen)
	return int64(n)
}
