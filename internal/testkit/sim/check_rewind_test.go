package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// checkRig drives a checker by hand over one shard of a ledger: the writes
// that land and the handler calls, as the simulation reports them.
type checkRig struct {
	t    *testing.T
	c    *checker
	key  leases.Key
	seqs []string // the shard's records, by user index
	row  leases.Lease
}

func newCheckRig(t *testing.T, records int) *checkRig {
	t.Helper()
	stream, err := NewStream(NewKinesis(), "check", 1)
	if err != nil {
		t.Fatal(err)
	}
	id := stream.ShardIDs()[0]
	r := &checkRig{t: t, c: newChecker(stream), key: leases.Key{Stream: "check", Shard: id}}
	for i := range records {
		seq, err := stream.Put(id, fmt.Sprint(i), []byte{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		r.seqs = append(r.seqs, seq)
	}
	return r
}

// upTo is a checkpoint covering the first n records.
func (r *checkRig) upTo(n int) leases.Checkpoint { return leases.Checkpoint{Sequence: r.seqs[n-1]} }

// at is an operator's rewind position: read again from record n.
func (r *checkRig) at(n int) leases.Checkpoint { return leases.RewindAtSequence(r.seqs[n]) }

// write lands op by writer, making the row next from the row as it is.
func (r *checkRig) write(op, writer string, next leases.Lease) {
	next.Key = r.key
	next.Token = fmt.Sprintf("t%d", r.c.stats.writes)
	if op != "Create" && op != "CreateAs" {
		next.Counter = r.row.Counter + 1
	}
	r.c.mu.Lock()
	r.c.applied(op, writer, r.row, next)
	r.c.mu.Unlock()
	r.row = next
}

// delete deletes the row, held by holder, which knew a checkpoint covering
// known records.
func (r *checkRig) delete(holder string, known int) {
	r.c.mu.Lock()
	r.c.deleted(r.key.Shard, holder, map[string]int{holder: known})
	r.c.mu.Unlock()
	r.row = leases.Lease{}
}

// deliver has owner's handler acknowledge records from..to-1.
func (r *checkRig) deliver(owner string, from, to int) {
	for i := from; i < to; i++ {
		h := r.c.enter(owner, &kltype.Record{ShardID: r.key.Shard, SequenceNumber: r.seqs[i]})
		r.c.exit(h, true)
	}
}

func (r *checkRig) violations() string {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return strings.Join(r.c.violations, "\n")
}

// TestCheckerHolderTakesBackAtOperatorsRewind: the holder of a row that was
// deleted finds it recreated by another member and rewound by an operator
// since (on the free row), and takes it back at the rewind's position, its
// worker reading again from there (the engine's recreate: lostrow.Point
// returns the shard's last rewind, and the lease is marked rewound). Its
// release from there, before it delivered, leaves the operator's
// checkpoint as it was: not a checkpoint behind its lease (seed 94102999:
// (b) flagged it against the tenure the holder had before the deletion).
// Going on from where it was before the deletion would skip the replay the
// operator asked for.
func TestCheckerHolderTakesBackAtOperatorsRewind(t *testing.T) {
	const first, holder, recoverer, next = "i3", "i2", "i1", "i0"
	setup := func(t *testing.T) *checkRig {
		r := newCheckRig(t, 70)
		r.write("CreateAs", first, leases.Lease{Owner: first, Incarnation: "c", Counter: 1})
		r.deliver(first, 0, 20)
		r.write("Release", first, leases.Lease{Checkpoint: r.upTo(20)})
		r.c.tenureEnded(first, r.key.Shard)
		// The holder's lease starts at #20, after the operator's rewind to
		// come.
		r.write("TakeAs", holder, leases.Lease{Owner: holder, Incarnation: "a", Checkpoint: r.upTo(20)})
		r.deliver(holder, 20, 40)
		r.write("Checkpoint", holder, leases.Lease{Owner: holder, Incarnation: "a", Checkpoint: r.upTo(40)})
		r.deliver(holder, 40, 45)
		r.delete(holder, 40)
		// Recreated free by a member that knew an older copy, then rewound
		// by the operator, on the free row.
		r.write("CreateAs", recoverer, leases.Lease{Counter: 1, Checkpoint: r.upTo(30), Recovered: "r"})
		r.write("Rewind", "operator", leases.Lease{Checkpoint: r.at(10), Rewind: "w", Recovered: "r"})
		// The holder takes it back where the operator put it.
		r.write("TakeAs", holder, leases.Lease{Owner: holder, Incarnation: "a", Checkpoint: r.at(10), Rewind: "w", Recovered: "r"})
		return r
	}

	t.Run("released before delivering", func(t *testing.T) {
		r := setup(t)
		r.write("Release", holder, leases.Lease{Checkpoint: r.at(10), Rewind: "w", Recovered: "r"})
		r.c.tenureEnded(holder, r.key.Shard)
		r.write("TakeAs", next, leases.Lease{Owner: next, Incarnation: "b", Checkpoint: r.at(10), Rewind: "w", Recovered: "r"})
		r.deliver(next, 10, 50)
		r.write("Checkpoint", next, leases.Lease{Owner: next, Incarnation: "b", Checkpoint: r.upTo(50), Rewind: "w"})
		if v := r.violations(); v != "" {
			t.Errorf("violations:\n%s", v)
		}
	})
	t.Run("replayed from the rewind", func(t *testing.T) {
		r := setup(t)
		r.deliver(holder, 10, 50)
		r.write("Checkpoint", holder, leases.Lease{Owner: holder, Incarnation: "a", Checkpoint: r.upTo(50), Rewind: "w"})
		r.write("Release", holder, leases.Lease{Checkpoint: r.upTo(50), Rewind: "w"})
		if v := r.violations(); v != "" {
			t.Errorf("violations:\n%s", v)
		}
	})
	t.Run("going on past the rewind", func(t *testing.T) {
		r := setup(t)
		r.deliver(holder, 45, 46)
		if v := r.violations(); !strings.Contains(v, "(a) "+holder+" delivered") || !strings.Contains(v, "out of order") {
			t.Errorf("the holder went on from #45 past the operator's rewind to #10 unflagged; violations:\n%s", v)
		}
	})
}
