package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// kind is what a chaos action does to an instance.
type kind int

const (
	kill      kind = iota // SIGKILL, then a new process (a new owner id) after Hold
	stop                  // SIGSTOP for Hold, then SIGCONT
	interrupt             // SIGINT (drain, checkpoint, release), then a new process Hold after it exited
)

func (k kind) String() string { return [...]string{"SIGKILL", "SIGSTOP", "SIGINT"}[k] }

// action is one planned disruption of the instance in slot Slot, At after the
// chaos starts.
type action struct {
	At   time.Duration
	Slot int
	Kind kind
	// Hold: for kill, how long the slot stays empty before a new process
	// starts; for stop, how long the process stays stopped; for interrupt,
	// how long after the process exited a new one starts.
	Hold time.Duration
}

func (a action) String() string {
	verb := map[kind]string{kill: "restart after", stop: "SIGCONT after", interrupt: "restart after exit +"}[a.Kind]
	return fmt.Sprintf("%6.2fs slot %d %s, %s %v", a.At.Seconds(), a.Slot+1, a.Kind, verb, a.Hold.Round(time.Millisecond))
}

// planConfig bounds a chaos schedule.
type planConfig struct {
	Duration  time.Duration // every action ends (as planned) within it
	Instances int
	MaxDown   int           // at most this many slots disrupted at once (< Instances)
	Timeout   time.Duration // the instances' timeout: a silent one's leases are taken after it
	// Drain is how long a graceful stop is expected to take, and Settle how
	// long a restarted or continued instance is left alone before its slot
	// may be disrupted again; both count as "down" for MaxDown.
	Drain, Settle time.Duration
	// MinGap and MaxGap bound the time between two actions' starts.
	MinGap, MaxGap time.Duration
}

// plan draws a chaos schedule from seed: actions at random gaps, each on a
// random slot that is up, with at most MaxDown slots down at any time (as
// planned: a slot is down from its action's start until its restart or
// SIGCONT plus Settle). Kinds: 35% SIGKILL (restart after 0..2×timeout),
// 40% SIGSTOP (half of them shorter than the timeout, half 1..3× the
// timeout, long enough for the leases to be taken over), 25% SIGINT
// (restart 0..1 timeout after the exit). The same seed and config give the same schedule.
func plan(seed uint64, c planConfig) []action {
	rng := rand.New(rand.NewPCG(seed, 0x63_68_61_6f_73)) // "chaos"
	uniform := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	downUntil := make([]time.Duration, c.Instances)
	var out []action
	t := time.Duration(0)
	for {
		t += uniform(c.MinGap, c.MaxGap)
		if t >= c.Duration {
			return out
		}
		var a action
		var down time.Duration // planned time the slot is not up
		switch p := rng.Float64(); {
		case p < 0.35:
			a = action{Kind: kill, Hold: uniform(0, 2*c.Timeout)}
			down = a.Hold
		case p < 0.75:
			if rng.IntN(2) == 0 {
				a = action{Kind: stop, Hold: uniform(c.Timeout/10, c.Timeout)}
			} else {
				a = action{Kind: stop, Hold: uniform(c.Timeout, 3*c.Timeout)}
			}
			down = a.Hold
		default:
			a = action{Kind: interrupt, Hold: uniform(0, c.Timeout)}
			down = c.Drain + a.Hold
		}
		// Every action ends within the chaos: shorten the last ones.
		if t+down+c.Settle > c.Duration {
			cut := t + down + c.Settle - c.Duration
			if a.Hold <= cut {
				continue
			}
			a.Hold -= cut
			down -= cut
		}
		var up []int
		nDown := 0
		for s, until := range downUntil {
			if until > t {
				nDown++
			} else {
				up = append(up, s)
			}
		}
		if nDown >= c.MaxDown || len(up) == 0 {
			continue // wait for the next gap
		}
		a.At = t
		a.Slot = up[rng.IntN(len(up))]
		downUntil[a.Slot] = t + down + c.Settle
		out = append(out, a)
	}
}

// describePlan lists a schedule, one action a line.
func describePlan(as []action) string {
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, "  %s\n", a)
	}
	return b.String()
}
