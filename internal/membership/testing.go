package membership

import (
	"context"
	"time"

	"github.com/kinesislease/kinesislease/internal/roster"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

// What the tests of the packages above (the engine's, which drive a
// Group's pieces by hand) need to set up a Member without running it.

// Arm makes me, not running, incarnation inc (one of its incarnations from
// then on) with its fence at fence (Mono()), writes its entry as inc in
// inc's row (heartbeat 1), and has that entry stand since since (Mono()),
// as if it had joined then and its heartbeat had just landed.
func (me *Member) Arm(ctx context.Context, inc string, fence, since int64) error {
	me.mu.Lock()
	me.inc = inc
	me.incs = append(me.incs, inc)
	me.mu.Unlock()
	me.fence.Store(fence)
	if _, err := me.mem.Join(ctx, roster.RowOf(inc), me.entry(inc, 1, 0)); err != nil {
		return err
	}
	me.entrySince.Store(since)
	return nil
}

// AddEarlier records inc as an earlier incarnation of this process (Ours).
func (me *Member) AddEarlier(inc string) {
	syncx.Guard(&me.mu, func() { me.incs = append(me.incs, inc) })
}

// Observe records membership row r as read by a call sent at sent that
// returned at ret (Mono()), as a read of the row does.
func (me *Member) Observe(r int, rows []leases.Member, sent, ret int64) {
	me.observe(r, rows, sent, ret)
}

// Proof returns the proof bound this instance's entry publishes (SetProof).
func (me *Member) Proof() time.Duration { return time.Duration(me.ownProof.Load()) }
