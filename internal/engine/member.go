package engine

import (
	"context"

	"github.com/kinesislease/kinesislease/internal/balance"
	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/membership"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

// memberHost is the Group as its membership.Member sees it
// (membership.Host): what its entry publishes, and what a fence does to
// its workers.
type memberHost Group

var _ membership.Host = (*memberHost)(nil)

// Published returns what this instance's entry publishes of it.
func (h *memberHost) Published() leases.Member {
	g := (*Group)(h)
	return balance.Published(g.rs.balance, leases.Member{Ended: g.sig.ended.Load(), Held: g.heldCount(), Streams: g.streamsDigest(), Listing: g.listing.Digest()}, &g.mu, g.workers, (*worker).Lease)
}

// FenceWorkers stops every worker at once: no lease of this incarnation may
// be trusted any more. Each row becomes an orphan, kept with the checkpoint
// last written, to be taken again directly by the next incarnation. It
// returns how many it stopped. The Member calls it holding its lock (a
// new incarnation waits for it), and it takes g.mu.
func (h *memberHost) FenceWorkers() int {
	g := (*Group)(h)
	g.mu.Lock()
	defer g.mu.Unlock()
	fenced := map[unit]lostrow.Orphan{}
	for u, w := range g.workers {
		if w.Lease().IsLost() {
			continue
		}
		w.Lease().MarkLost()
		w.Kill()
		fenced[u] = lostrow.Orphan{Inc: w.Lease().Current().Incarnation, Known: w.Lease().AsOrphan(), Vanished: w.Lease().Vanished()}
	}
	g.lost.PutAll(fenced) // at once, under g.mu, with the workers fenced
	return len(fenced)
}

// Kick runs a round now.
func (h *memberHost) Kick() { (*Group)(h).kickRound() }

// Reconcile has the next round re-read every held row, and the rows
// released or read lately.
func (h *memberHost) Reconcile() { h.sig.reconcileNow.Store(true) }

// EndedMoved has the listers list their streams again (a member ended a
// shard: its children are in the shard lists now).
func (h *memberHost) EndedMoved() { h.sig.resync.Store(true) }

// HeldStreams returns the keys of the streams this instance holds a row
// of, or an orphan of.
func (h *memberHost) HeldStreams() map[string]bool {
	g := (*Group)(h)
	keys := map[string]bool{}
	g.mu.Lock()
	for u := range g.workers {
		keys[u.Stream] = true
	}
	for u := range g.lost.Orphans() {
		keys[u.Stream] = true
	}
	g.mu.Unlock()
	return keys
}

// MarkStream marks the stream keyed key as this incarnation
// (markToCreate), if it is still subscribed.
func (h *memberHost) MarkStream(ctx context.Context, key string) error {
	g := (*Group)(h)
	st := syncx.Guarded(g.streamsMu.RLocker(), func() *streamState { return g.streams[key] })
	if st == nil {
		return nil
	}
	return g.markToCreate(ctx, st)
}

// ForgetMarks forgets every stream mark this instance knows.
func (h *memberHost) ForgetMarks() { (*Group)(h).forgetMarks() }

// heldCount returns how many rows this instance holds: workers running,
// and orphans (rows that may name it, or that vanished and it will
// recreate).
func (g *Group) heldCount() int64 {
	return syncx.Guarded(&g.mu, func() int64 { return int64(len(g.workers) + g.lost.Len()) })
}
