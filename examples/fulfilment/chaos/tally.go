package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/kinesislease/kinesislease/examples/fulfilment/internal/harness"
	"github.com/kinesislease/kinesislease/kinesisfake"
)

// procInfo is one process of a run, as the tally needs it.
type procInfo struct {
	Owner string
	Slot  int
	// Started and Exited; Killed is when it was SIGKILLed (zero: never),
	// Interrupted when it was SIGINTed; Stops its SIGSTOP episodes.
	Started, Exited, Killed, Interrupted time.Time
	Stops                                []episode
	// From its log: checkpoints refused because the lease was lost,
	// re-reads of held rows that found the lease taken, ERROR lines, leases
	// taken.
	RefusedCheckpoints, FoundLost, Errors int
	Takes                                 []take
}

// take is a lease a process took, from its log: From is the owner it took
// the lease over from, empty for a free lease. At has millisecond precision.
type take struct {
	Shard, From string
	At          time.Time
}

// rowRun is a run of lease-table reads of one row that showed the same
// owner ("" for free): the reads were sent from First to Last (each read
// is strongly consistent and sent after its time).
type rowRun struct {
	Owner       string
	First, Last time.Time
}

// observations is everything a run saw: what was published, the instances'
// reports, the processes and what the chaos did to them, the owners of the
// lease table's rows as polled, and the problems found while running (lease
// table checks, failed graceful stops).
type observations struct {
	Begin              time.Time
	Published          []published
	Deliveries         []harness.Delivery
	Events             []harness.LeaseEvent
	Procs              []procInfo
	Actions            []actionRecord
	Rows               map[string][]rowRun // by shard
	Problems           []string
	Heartbeat, Timeout time.Duration
	CheckpointInterval time.Duration
	Seed               uint64
	Duration           time.Duration
	Instances, Shards  int
	// FanOut is what the in-memory Kinesis counted once every instance
	// stopped, in fan-out mode; nil when the instances polled.
	FanOut *kinesisfake.SubscribeStats
}

// tally is what a chaos run found.
type tally struct {
	Seed      uint64
	Duration  time.Duration
	Instances int
	Shards    int

	Published  int // orders put on the stream
	Handled    int // distinct published orders handled
	Deliveries int // handler calls, duplicates included
	Lost       int // published orders never handled (must be 0)
	LostSample []string
	Unknown    int // handled orders never published (must be 0)
	// Republished: orders delivered under a sequence number other than the
	// one PutRecords returned (a producer retry put them twice).
	Republished int

	// Duplicates counts deliveries beyond the first of an order;
	// DuplicatedOrders the orders delivered more than once. Causes counts
	// the redeliveries explained by a checkpoint window, by why the first
	// holder stopped before checkpointing past the record; Unexplained
	// lists the others (must be none).
	Duplicates, DuplicatedOrders int
	Causes                       map[string]int
	Unexplained                  []string
	// MaxWindow is the largest checkpoint window redelivered after one
	// takeover: records, and the span of their first deliveries.
	MaxWindow     int
	MaxWindowSpan time.Duration
	MaxWindowAt   string

	// Overlaps lists shards handled by two processes at overlapping times
	// (must be none); InFlight the deliveries excused as in flight across a
	// SIGSTOP. Tenures lists lease-tenure violations (deliveries outside a
	// tenure, gaps and reorders within one, resumes past undelivered
	// records, lease events out of order).
	Overlaps, InFlight, Tenures []string
	// Order lists keys whose first deliveries are not in counter order.
	Order []string
	Keys  int

	// Takeovers, by what disrupted the holder: the longest time from the
	// signal until another process acquired a shard the disrupted process
	// held, and how many were measured. Early lists takeovers sooner than
	// half the timeout after a SIGKILL or SIGSTOP (a live lease taken), Missing
	// shards never taken over after a SIGKILL.
	Longest        map[kind]time.Duration
	LongestAt      map[kind]string
	TakeoverCount  map[kind]int
	Early, Missing []string
	// StopsKept counts leases a stopped process still held after SIGCONT
	// (stopped for less than a takeover takes).
	StopsKept int
	// PutBack counts tenures that delivered nothing, acquired right after
	// a SIGCONT, whose acquisition was put back because the take may have
	// landed before the SIGSTOP; PutBackBounded those the lease table kept
	// from going back all the way to the SIGSTOP (see takeBound).
	PutBack, PutBackBounded int

	// The fence: leases taken from stopped processes, and how many of
	// those the process itself then saw lost; checkpoints refused and held
	// rows found taken, for a lost lease (instance logs); ERROR log lines.
	TakenFromStopped, NoticedLost int
	RefusedCheckpoints            int
	FoundLost                     int
	ErrorLines                    int

	// Chaos carried out (by kind), longer-than-timeout stops, and skipped
	// actions.
	Done      map[kind]int
	LongStops int
	Skipped   int

	// Problems found while running: checkpoint regressions, final rows,
	// failed graceful stops, catch-up timeouts.
	Problems []string

	// ReadTenures counts the tenures that handled records. FanOut is what
	// the in-memory Kinesis counted, in fan-out mode (nil: polling): each
	// tenure is a worker of its own that subscribes before it reads, so
	// FanOut.Subscribed must be at least ReadTenures (see fanOutProblem).
	ReadTenures int
	FanOut      *kinesisfake.SubscribeStats

	Heartbeat, Timeout, CheckpointInterval time.Duration
}

// Violations lists every broken invariant; empty means the run passed.
func (t *tally) Violations() []string {
	var v []string
	if t.Lost > 0 {
		v = append(v, fmt.Sprintf("%d orders lost, e.g. %s", t.Lost, strings.Join(t.LostSample, " ")))
	}
	if t.Unknown > 0 {
		v = append(v, fmt.Sprintf("%d handled orders were never published", t.Unknown))
	}
	add := func(what string, list []string) {
		for _, s := range list {
			v = append(v, what+": "+s)
		}
	}
	add("overlap", t.Overlaps)
	add("unexplained duplicate", t.Unexplained)
	add("tenure", t.Tenures)
	add("per-key order", t.Order)
	add("early takeover", t.Early)
	add("no takeover", t.Missing)
	add("problem", t.Problems)
	if p := t.fanOutProblem(); p != "" {
		v = append(v, p)
	}
	return v
}

// fanOutProblem says, in fan-out mode, why the records were not all read
// with fan-out: fewer successful SubscribeToShard calls than tenures that
// handled records. Empty: none (or polling).
func (t *tally) fanOutProblem() string {
	if t.FanOut == nil || t.FanOut.Subscribed >= t.ReadTenures {
		return ""
	}
	return fmt.Sprintf("fan-out: %d SubscribeToShard calls succeeded for %d tenures that handled records: some were not read with fan-out",
		t.FanOut.Subscribed, t.ReadTenures)
}

// longestTakeover is the longest time from a SIGKILL or SIGSTOP of a
// holder to another process acquiring one of its shards.
func (t *tally) longestTakeover() time.Duration { return max(t.Longest[kill], t.Longest[stop]) }
