package membership

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kinesislease/kinesislease/internal/fence"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// TestOwnLateJoinIsNoDuplicate: an entry of this owner id in another row,
// whose incarnation this process tried to join as (the attempt's answer
// was lost, and it landed late, after the process had joined elsewhere),
// is this process's own, never another process: duplicates stays quiet
// however long it is seen. An entry of an incarnation this process never
// tried, heartbeating, still ends Run after the wait; one that stops
// heartbeating is forgotten, its row read every round meanwhile.
func TestOwnLateJoinIsNoDuplicate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingMembers{Store: memory.New(), reads: map[int]int{}}
		me := testMember(store, "a")
		if err := me.Arm(context.Background(), "0.CUR", fence.Mono()+int64(time.Minute), fence.Mono()-int64(time.Hour)); err != nil {
			t.Fatal(err)
		}
		me.tryInc("1.LATE")
		wait := max(me.cfg.ShutdownTimeout, 2*me.cfg.Timeout)
		late := leases.Member{Owner: "a", Incarnation: "1.LATE", Heartbeat: 1}
		other := leases.Member{Owner: "a", Incarnation: "2.OTHER", Heartbeat: 1}
		for start := time.Now(); time.Since(start) < wait+5*time.Second; time.Sleep(time.Second) {
			late.Heartbeat++ // as if it heartbeat: still our own
			me.observe(1, []leases.Member{late}, fence.Mono(), fence.Mono())
			if err := me.Duplicates(); err != nil {
				t.Fatalf("an entry of an incarnation this process tried to join as: %v", err)
			}
		}
		me.viewMu.Lock()
		me.view.Unknown = map[int]bool{}
		me.viewMu.Unlock()
		var err error
		for start := time.Now(); err == nil && time.Since(start) < wait+5*time.Second; time.Sleep(time.Second) {
			other.Heartbeat++
			me.observe(2, []leases.Member{other}, fence.Mono(), fence.Mono())
			err = me.Duplicates()
		}
		var dup *DuplicateOwnerError
		if !errors.As(err, &dup) {
			t.Fatalf("another process heartbeating with this owner id: duplicates = %v, want a *DuplicateOwnerError", err)
		}
		// Its row is read at every refresh, whatever its roster version, so
		// that a process that stops heartbeating is seen stale.
		store.reads = map[int]int{}
		me.Refresh(context.Background())
		if store.reads[2] == 0 {
			t.Fatal("the row of another process with this owner id was not read at the refresh")
		}
	})
}

// countingMembers counts the reads of each membership row.
type countingMembers struct {
	*memory.Store
	mu    sync.Mutex
	reads map[int]int
}

func (s *countingMembers) Members(ctx context.Context, row int) ([]leases.Member, error) {
	s.mu.Lock()
	s.reads[row]++
	s.mu.Unlock()
	return s.Store.Members(ctx, row)
}
