package membership

import (
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// TestBornOld: a table is known old by its birth only when it never had an
// earlier one, or was born more than two timeouts ago (one for the fence
// of a holder of the table before, one for clocks apart); an unknown
// birth proves nothing.
func TestBornOld(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	timeout := 5 * time.Second
	for _, c := range []struct {
		name string
		born int64
		want bool
	}{
		{"unknown", 0, false},
		{"no predecessor", leases.BornNoPredecessor, true},
		{"just now", now.UnixMilli(), false},
		{"one timeout ago", now.Add(-timeout).UnixMilli(), false},
		{"two timeouts ago", now.Add(-2 * timeout).UnixMilli(), false},
		{"just past two timeouts", now.Add(-2*timeout - time.Millisecond).UnixMilli(), true},
		{"an hour ago", now.Add(-time.Hour).UnixMilli(), true},
		{"in the future (a clock ahead)", now.Add(time.Minute).UnixMilli(), false},
	} {
		if got := bornOld(c.born, now, timeout); got != c.want {
			t.Errorf("%s: bornOld(%d) = %v, want %v", c.name, c.born, got, c.want)
		}
	}
}
