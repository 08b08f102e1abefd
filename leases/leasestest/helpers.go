package leasestest

// The helpers of the lease-row subtests alone: a row held by "a" on a new
// key (heldRow) and a race of takers for one row (raceTake). The helpers
// membershiptest uses too are in package kit.

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/leasestest/internal/kit"
)

// heldRow creates a row on a new key and takes it as "a".
func heldRow(t *testing.T, s leases.Store) (leases.Key, leases.Lease) {
	t.Helper()
	k := kit.NewKey(t)
	return k, kit.MustTake(t, s, kit.MustCreate(t, s, k), "a")
}

// raceTake has takers race for l (the row of k, as read last) in round of a
// race, each with take(i), and checks that exactly one wins, that the
// others fail only with conflicts, and that the store holds the winner's
// answer at the next counter; it returns the winner's answer and the row
// as stored.
func raceTake(t *testing.T, s leases.Store, k leases.Key, l leases.Lease, round, takers int, op string,
	take func(i int) (leases.Lease, error),
) (won, stored leases.Lease) {
	t.Helper()
	var (
		wins      atomic.Int64
		winner    atomic.Value
		otherErrs = make(chan error, takers)
	)
	kit.Together(takers, func(i int) {
		got, err := take(i)
		switch {
		case err == nil:
			wins.Add(1)
			winner.Store(got)
		case errors.Is(err, leases.ErrConflict):
		default:
			otherErrs <- err
		}
	})
	close(otherErrs)
	for err := range otherErrs {
		t.Fatalf("round %d: %s failed with a non-conflict error: %v", round, op, err)
	}
	if n := wins.Load(); n != 1 {
		t.Fatalf("round %d: %d takers won, want exactly 1", round, n)
	}
	won = winner.Load().(leases.Lease)
	stored = kit.MustGet(t, s, k)
	if !kit.Same(stored, won) || stored.Counter != l.Counter+1 {
		t.Fatalf("round %d: the store holds %+v, the winner got %+v (counter before %d)", round, stored, won, l.Counter)
	}
	return won, stored
}
