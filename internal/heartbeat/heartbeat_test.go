package heartbeat

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kinesislease/kinesislease/leases"
)

func TestHeartbeatAction(t *testing.T) {
	t.Parallel()
	conflict := func(cur leases.Member) error {
		return &leases.MemberConflictError{Op: "Heartbeat", Owner: "o", Current: cur}
	}
	me := func(f func(*leases.Member)) leases.Member {
		m := leases.Member{Owner: "o", Incarnation: "i1", Heartbeat: 3}
		if f != nil {
			f(&m)
		}
		return m
	}
	cases := []struct {
		name  string
		err   error
		state State
		want  Action
	}{
		{"landed", nil, State{}, Landed},
		{"a network error", errors.New("timeout"), State{}, Failed},
		{"a missing table", fmt.Errorf("table gone: %w", leases.ErrMisconfigured), State{}, Misconfigured},
		{"notice bumped", conflict(me(func(m *leases.Member) { m.Notice = 2 })), State{Notice: 1}, Notice},
		{"found dead by others", conflict(me(func(m *leases.Member) { m.Leaving = true })), State{}, FoundDead},
		{"our own leaving heartbeat landed unanswered", conflict(me(func(m *leases.Member) { m.Leaving = true; m.Heartbeat = 4 })), State{NeedNewInc: true}, FoundDead},
		{"a new incarnation we tried landed unanswered", conflict(leases.Member{Owner: "o", Incarnation: "i2"}), State{NeedNewInc: true, Attempted: map[string]bool{"i2": true}}, OurAttempt},
		{"... and was found dead since", conflict(leases.Member{Owner: "o", Incarnation: "i2", Leaving: true}), State{NeedNewInc: true, Attempted: map[string]bool{"i2": true}}, OurAttempt},
		{"removed meanwhile, or the table recreated", conflict(leases.Member{}), State{}, Missing},
		{"another process took the entry", conflict(leases.Member{Owner: "o", Incarnation: "zz"}), State{}, Replaced},
		{"our own first join, applied late after the entry was removed", conflict(leases.Member{Owner: "o", Incarnation: "i0", Heartbeat: 1}),
			State{Earlier: func(inc string) bool { return inc == "i0" || inc == "i1" }}, OurAttempt},
		{"another process, though this one had incarnations too", conflict(leases.Member{Owner: "o", Incarnation: "zz"}),
			State{Earlier: func(inc string) bool { return inc == "i0" || inc == "i1" }}, Replaced},
	}
	for _, c := range cases {
		st := c.state
		if got, _ := Decide(c.err, &st, "i1"); got != c.want {
			t.Errorf("%s: action %d, want %d", c.name, got, c.want)
		}
	}
}
