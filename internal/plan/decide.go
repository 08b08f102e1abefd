package plan

// What one instance does with the plan (Decide): pure, for the engine's
// round.

import "slices"

// Held is what Decide needs of a lease the instance holds.
type Held struct {
	Stopping bool // its worker is draining already
	Active   bool // its shard may be read (not ended, parents done)
}

// Actions is what one round of an instance does to leases: the outcome
// of Decide.
type Actions struct {
	Handoffs []Unit // held, the plan gives them another member: drain and release
	OverCap  []Unit // held beyond the cap, the plan gives them nobody: drain and release
	Takes    []Unit // the plan gives them this instance: read the row, take it if free or dead
	Retakes  []Unit // orphans the plan gives this instance: take them directly, as the new incarnation
	Releases []Unit // orphans the plan gives another member or nobody: release them
}

// Decide turns the plan a (unit → owner) into actions for self, given the
// leases it holds, its orphans (true: a worker of the orphan still runs, so
// wait for it), whether the plan has stood for two rounds (settled: only
// then are held leases handed over, so that views settling do not move
// leases back and forth), the lease cap (0: none) and the units set aside
// after a failure. It is pure. An orphan never waits for a release before
// it is taken again: the self-fencing livelock of releasing every row one
// at a time after a fence, and then taking each back, cannot happen.
func Decide(self string, a map[Unit]string, held map[Unit]Held, orphans map[Unit]bool, settled bool, maxLeases int, failing func(Unit) bool) Actions {
	var act Actions
	over := len(held) - maxLeases
	for u, h := range held {
		if !settled || h.Stopping {
			continue
		}
		owner, ok := a[u]
		switch {
		case ok && owner != self:
			act.Handoffs = append(act.Handoffs, u)
		case !ok && maxLeases > 0 && over > 0 && h.Active:
			over--
			act.OverCap = append(act.OverCap, u)
		}
	}
	for u, running := range orphans {
		switch {
		case running:
			// Its old worker is still stopping: the next round.
		case a[u] == self && !failing(u):
			act.Retakes = append(act.Retakes, u)
		default:
			act.Releases = append(act.Releases, u)
		}
	}
	for u, owner := range a {
		_, h := held[u]
		_, o := orphans[u]
		if owner == self && !h && !o && !failing(u) {
			act.Takes = append(act.Takes, u)
		}
	}
	for _, s := range [][]Unit{act.Handoffs, act.OverCap, act.Takes, act.Retakes, act.Releases} {
		slices.SortFunc(s, CompareUnits)
	}
	return act
}
