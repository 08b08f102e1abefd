package sim

import (
	"sync"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

// Scenarios of writes landing late (Decision.Late) that broke the
// protocol before the engine's fixes, found by TestMembership with
// KINESISLEASE_SIM_LATE: each a deterministic scenario (virtual time, the
// faults on chosen calls) with every check of TestMembership.

// lateCalls counts the calls a scenario's decide made late.
type lateCalls struct {
	mu    sync.Mutex
	n     int
	first time.Time // when the first was sent
}

func (c *lateCalls) add() {
	c.mu.Lock()
	if c.n == 0 {
		c.first = time.Now()
	}
	c.n++
	c.mu.Unlock()
}

// since returns how long ago the first late call was sent, and whether
// there was one.
func (c *lateCalls) since() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.first), c.n > 0
}

func (c *lateCalls) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestLateCheckpointOnRecreatedRow: one process reads one shard; every
// other checkpoint it sends from T+2s to T+19s lands 35s late (its caller
// times out after 300ms and the next checkpoint, on time, lands instead),
// so late checkpoints wait conditional on every counter of the row's first
// life. The row is deleted at T+20s; the holder recreates it from its
// checkpoint (CreateAs, counter 1 again) and checkpoints on until records
// stop at T+30s, when the row's counter stays where it is. The late
// checkpoint conditional on that counter, with the holder's owner and
// incarnation, lands on the recreated row (T+37s to T+54s) with a
// checkpoint of the first life: the checkpoint moves backwards (checker
// rule (c)), with no operator's rewind.
//
// Today's stores condition a holder's write on the row's counter, owner
// and incarnation only, and a recreated row restarts its counter at 1.
func TestLateCheckpointOnRecreatedRow(t *testing.T) {
	t.Parallel()
	p := scenario(1, 1, 20, 60*time.Second)
	p.produce = 24 * time.Second
	p.events = []mevent{{at: 20 * time.Second, kind: mDeleteRow, slot: -1, shard: 0}}
	var late lateCalls
	var mu sync.Mutex
	odd := false
	p.decide = func(pr *mproc, op string, key leases.Key) (Decision, bool) {
		el := time.Since(pr.w.start)
		if pr.slot != 0 || pr.gen != 0 || op != "Checkpoint" || key.Shard != shardID(0) || el < 2*time.Second || el >= 19*time.Second {
			return Decision{}, false
		}
		mu.Lock()
		odd = !odd
		l := odd
		mu.Unlock()
		if !l {
			return Decision{}, true
		}
		late.add()
		return Decision{Late: 35 * time.Second, Delay: 300 * time.Millisecond}, true
	}
	p.check = func(w *mworld) {
		if late.count() == 0 {
			w.violate("(k) no checkpoint was sent late: the scenario tests nothing")
		}
		if w.chk.stats.restarts == 0 {
			w.violate("(k) the deleted row was never recreated: the scenario tests nothing")
		}
	}
	runScenario(t, p)
}

// TestLateTakeAfterDisproof: process 0 starts alone on two shards; its
// TakeAs calls in its first second land 8s late, its client timing out
// after 4s. Process 1 joins at T+1s, but its writes on lease rows fail
// (throttled) until T+15s. When process 0's takes time out, its plan gives
// one shard to process 1: the take presumed landed (an orphan) is to be
// released, the release conflicts, the read after it shows the row free
// (the take has not landed), and the orphan is forgotten. Then the take
// lands: the row names process 0's current incarnation, which does not
// read it, and process 1 waits for it to be handed over for as long as
// process 0 lives. The checker's rule (u) (no shard unread by the live
// incarnation its row names for longer than 3 timeouts and the latest a
// write lands late) and (g) fail.
func TestLateTakeAfterDisproof(t *testing.T) {
	// throttled: process 1's lease-row writes fail until 11.5s after
	// process 0's first late take was sent (until T+15s when it is sent
	// at T+3.5s).
	throttled := func(late *lateCalls) bool {
		d, ok := late.since()
		return !ok || d < 11500*time.Millisecond
	}
	t.Parallel()
	p := scenario(2, 2, 20, 60*time.Second)
	p.procs[1].start = 3500 * time.Millisecond
	var late lateCalls
	p.decide = func(pr *mproc, op string, key leases.Key) (Decision, bool) {
		el := time.Since(pr.w.start)
		switch {
		case pr.slot == 0 && pr.gen == 0 && op == "TakeAs" && late.count() < 2 && el < 30*time.Second:
			// Its first two takes, whenever the new stream's rows are
			// first taken.
			late.add()
			return Decision{Late: 8 * time.Second, Delay: 4 * time.Second}, true
		case pr.slot == 1 && !isMemberOp(op) && op != "Get" && el < 30*time.Second && throttled(&late):
			return Decision{Delay: 10 * time.Millisecond, Err: &InjectedError{Op: op, Key: key, Msg: "ProvisionedThroughputExceededException"}}, true
		}
		return Decision{}, false
	}
	p.check = func(w *mworld) {
		if late.count() == 0 {
			w.violate("(k) no take was sent late: the scenario tests nothing")
		}
	}
	runScenario(t, p)
}

// TestDuplicateOwnerAfterRestart (seed 127 of TestMembership with
// KINESISLEASE_SIM_LATE=0.05): process 0 crashes at T+15s; the heartbeats
// it sent in the 1.4s before land 8s late (T+21.6s to T+23s). It restarts
// at T+15.5s with the same owner id (a new incarnation); the restarted
// process reads its predecessor's entry, then its reads of the membership
// fail (throttled) from T+16.5s to T+26s, over which the late heartbeats
// land (the other member's ReplaceMember calls fail from T+15s to T+28s:
// it does not mark the dead entry leaving meanwhile). Its next read finds
// the entry's heartbeat changed, more than the join's wait (2 timeouts)
// after its first read: the join takes one change between two reads,
// however far apart, for a live process heartbeating with the same owner
// id, and Run returns ErrDuplicateOwner although the entry has stood still
// since it changed (checker rule (o): no other live process has that
// owner id).
func TestDuplicateOwnerAfterRestart(t *testing.T) {
	t.Parallel()
	p := scenario(2, 2, 20, 60*time.Second)
	crash := 15 * time.Second
	p.events = []mevent{
		{at: crash, kind: mCrash, slot: 0},
		{at: crash + 500*time.Millisecond, kind: mRestart, slot: 0, sameOwner: true},
	}
	var late lateCalls
	p.decide = func(pr *mproc, op string, key leases.Key) (Decision, bool) {
		el := time.Since(pr.w.start)
		switch {
		case pr.slot == 0 && pr.gen == 0 && op == "Heartbeat" && el >= crash-1400*time.Millisecond && el < crash:
			late.add()
			return Decision{Late: 8 * time.Second, Delay: 300 * time.Millisecond}, true
		case pr.slot == 1 && op == "ReplaceMember" && el >= crash && el < crash+13*time.Second:
			// The other member does not mark the dead entry leaving (as
			// the restarted process would then take it over at once).
			return Decision{Delay: 10 * time.Millisecond, Err: &InjectedError{Op: op, Key: key, Msg: "ProvisionedThroughputExceededException"}}, true
		case pr.slot == 0 && pr.gen == 1 && (op == "Members" || op == "Header") && el >= crash+1500*time.Millisecond && el < crash+11*time.Second:
			return Decision{Delay: 10 * time.Millisecond, Err: &InjectedError{Op: op, Key: key, Msg: "ProvisionedThroughputExceededException"}}, true
		}
		return Decision{}, false
	}
	p.check = func(w *mworld) {
		if late.count() == 0 {
			w.violate("(k) no heartbeat was sent late: the scenario tests nothing")
		}
	}
	runScenario(t, p)
}
