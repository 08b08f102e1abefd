// Package heartbeat is the heartbeat loop's own state (State) and what a
// heartbeat's answer calls for (Decide), pure: internal/membership's loop
// writes the entry, moves the fence and acts on the Action
// (docs/lease-protocol.md, "Membership, heartbeats and the fence").
package heartbeat

import (
	"errors"

	"github.com/kinesislease/kinesislease/leases"
)

// State is the heartbeat loop's own state (and join's, before the
// loop starts): nothing else reads or writes it.
type State struct {
	Beat   int64 // the last heartbeat value written
	Notice int64 // our entry's Notice as last seen
	// NeedNewInc: fenced; go on as a new incarnation before taking
	// anything. Attempted holds the incarnations this instance tried to go
	// on as (ReplaceMember) without an answer: one may have landed. None is
	// ever used again: others may have timed it, found it dead and removed
	// it since; a later attempt replaces whichever entry is there with a
	// brand-new incarnation.
	NeedNewInc bool
	Attempted  map[string]bool
	// Earlier reports whether an incarnation is one this process was or
	// tried to write an entry as (internal/membership's Member.ownInc): an entry of one found in
	// its place (a join applied late, after the entry was removed) is its
	// own, replaced by a new incarnation, never another process's.
	Earlier func(inc string) bool
	Failed  bool // the last heartbeat failed
	// JoinConflicts: rows where a join met an entry of this owner (read
	// by membership's readAll whether or not the header lists them).
	JoinConflicts map[int]bool
}

// Action is what the heartbeat loop does with a heartbeat's result.
type Action int

// The actions, as Decide returns them.
const (
	Landed        Action = iota // extend the fence
	Failed                      // retry in half an interval
	Notice                      // someone bumped our Notice: adopt it, heartbeat again
	OurAttempt                  // a new incarnation we tried landed unanswered: replace it with a new one
	FoundDead                   // others marked this incarnation dead: fence all, go on as a new one
	Replaced                    // another incarnation stands in our entry: join again
	Misconfigured               // the store cannot work (a missing table, denied access)
	Missing                     // our entry is gone: join again
)

// Decide maps a heartbeat's error onto what to do. cur is the
// entry a conflict found.
func Decide(err error, s *State, inc string) (Action, leases.Member) {
	var conflict *leases.MemberConflictError
	switch {
	case err == nil:
		return Landed, leases.Member{}
	case errors.As(err, &conflict):
		cur := conflict.Current
		switch {
		case cur.Incarnation == inc && cur.Notice != s.Notice && !cur.Leaving:
			return Notice, cur
		case s.Attempted[cur.Incarnation] || (cur.Incarnation != inc && cur.Incarnation != "" && s.Earlier != nil && s.Earlier(cur.Incarnation)):
			return OurAttempt, cur
		case cur.Incarnation == inc && cur.Leaving:
			// Found dead by others, or (NeedNewInc) our own leaving
			// heartbeat whose answer was lost: either way, on as a new one.
			return FoundDead, cur
		case cur.Owner == "":
			return Missing, cur // removed, or the table recreated: join again
		}
		return Replaced, cur
	case errors.Is(err, leases.ErrMisconfigured):
		return Misconfigured, leases.Member{}
	}
	return Failed, leases.Member{}
}
