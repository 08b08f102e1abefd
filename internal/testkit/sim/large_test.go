package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/observe"
	"github.com/kinesislease/kinesislease/internal/testkit/ddbmeter"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases/driver"
	"github.com/kinesislease/kinesislease/leases/dynamo"
)

// The large simulations: fleets of up to 1,000 engine Groups at the
// library's defaults on up to 20,000 idle shards, in virtual time, each
// Group on its own DynamoDB store (package leases/dynamo) over one shared
// ddbmeter.Table, which bills every call as DynamoDB would and throttles
// an item driven above 3,000 RCU/s or 1,000 WCU/s (as DynamoDB a
// partition: the store gets the ThrottlingException the SDK would return
// after one attempt). Kinesis is a
// kinesisfake.Kinesis whose shards never have records
// (newIdleKinesis): reading costs little, and no checkpoint is written, so
// what the table bills is the lease protocol alone. They run only with KINESISLEASE_SIM_LARGE set (see
// doc.go).

// largeEnv gates the large simulations.
const largeEnv = "KINESISLEASE_SIM_LARGE"

func largeOnly(t *testing.T) {
	t.Helper()
	if os.Getenv(largeEnv) == "" {
		t.Skipf("a large simulation (minutes of CPU, gigabytes of memory): set %s=1 to run it", largeEnv)
	}
}

const largeStream = "large"

// ownerIDLen is the length of every owner id of the large fleets: the
// longest the cost figures are stated for (driver.RowCapacity entries of
// this length keep a membership row under 1 KB).
const ownerIDLen = 64

// largeOwner returns member i's owner id, ownerIDLen bytes long.
func largeOwner(i int) string {
	s := fmt.Sprintf("member-%05d-", i)
	return s + strings.Repeat("x", ownerIDLen-len(s))
}

// largeNoThrottleEnv, set, makes the large simulations' table admit every
// call however hot its item (ddbmeter.NoThrottling), to compare.
const largeNoThrottleEnv = "KINESISLEASE_SIM_LARGE_NOTHROTTLE"

// largeTable returns the table of a large simulation: throttling hot items
// as DynamoDB does, unless largeNoThrottleEnv is set.
func largeTable() *ddbmeter.Table {
	if os.Getenv(largeNoThrottleEnv) != "" {
		return ddbmeter.NewTable(ddbmeter.NoThrottling())
	}
	return ddbmeter.NewTable()
}

// throttling describes the calls the table throttled so far (by item, the
// most throttled first) and the items' highest peak seconds.
func (f *fleet) throttling() string {
	b := f.table.Bill()
	var n int64
	keys := []string{}
	for k, u := range b.ByKey {
		n += u.Throttled
		if u.Throttled > 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, c string) int {
		if d := b.ByKey[c].Throttled - b.ByKey[a].Throttled; d != 0 {
			return int(d)
		}
		return strings.Compare(a, c)
	})
	out := fmt.Sprintf("%d calls throttled;", n)
	for i, k := range keys[:min(len(keys), 5)] {
		if i == 0 {
			out += ":"
		}
		out += fmt.Sprintf(" %d on %s;", b.ByKey[k].Throttled, k)
	}
	wk, w, rk, r := peaks(b.Peaks)
	return out + fmt.Sprintf(" peak seconds of one item %.0f WCU (%s), %.0f RCU (%s)", w.WCU, wk, r.RCU, rk)
}

// ---------------------------------------------------------------------------
// Kinesis: idle shards.

// newIdleKinesis returns a Kinesis (at its defaults: ListShards pages of
// 1,000 shards, as the service's) with one stream, largeStream, of shards
// open shards that never get a record. Every member reads it through a view
// of its own (Client) that adds the member's death.
func newIdleKinesis(t *testing.T, shards int) *kinesisfake.Kinesis {
	k := kinesisfake.New()
	if err := k.CreateStream(largeStream, shards); err != nil {
		t.Fatal(err)
	}
	return k
}

// errDead is what a dead member's store calls get: they never reach
// anything.
var errDead = errors.New("sim: the process is dead (injected)")

// deadableDynamo is a member's view of the table: nothing reaches it once
// the member is dead.
type deadableDynamo struct {
	c    *ddbmeter.Client
	dead *atomic.Bool
}

func (d deadableDynamo) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if d.dead.Load() {
		return nil, errDead
	}
	return d.c.GetItem(ctx, in, opts...)
}

func (d deadableDynamo) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if d.dead.Load() {
		return nil, errDead
	}
	return d.c.UpdateItem(ctx, in, opts...)
}

// ---------------------------------------------------------------------------
// The fleet.

type largeMember struct {
	i      int
	owner  string
	group  *engine.Group
	dead   atomic.Bool
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's, once done is closed
}

// fleet is members Groups on one table and one idle stream, in a synctest
// bubble. It checks, at every lease acquisition, that no other member
// holds the shard at that moment (see event), and counts lease events.
type fleet struct {
	t       *testing.T
	table   *ddbmeter.Table
	kin     *kinesisfake.Kinesis
	shards  int
	members []*largeMember
	start   time.Time

	mu      sync.Mutex
	lastAcq map[string]int // shard -> the member that acquired it last
	events  [4]int         // by observe.LeaseEventType
	// watched: shards whose next acquisition by a live member is timed,
	// from watchFrom (see watchShards); taken: those acquired since.
	watched    map[string]bool
	watchFrom  time.Time
	taken      map[string]time.Duration
	violations []string
}

func newFleet(t *testing.T, members, shards int) *fleet {
	f := &fleet{t: t, table: largeTable(), kin: newIdleKinesis(t, shards), shards: shards, lastAcq: map[string]int{}, start: time.Now()}
	f.table.Classify(itemKind)
	for i := range members {
		m := &largeMember{i: i, owner: largeOwner(i), done: make(chan struct{})}
		store := dynamo.New(aws.Config{}, "large", dynamo.WithDynamoDBClient(deadableDynamo{c: f.table.Client(i), dead: &m.dead}))
		g, err := engine.NewGroup(engine.GroupConfig{
			Owner: m.owner, Store: store, Client: Client(f.kin, KinesisHooks{Dead: m.dead.Load}),
			Streams: []engine.StreamConfig{{Stream: largeStream, Start: kltype.TrimHorizon, Worker: engine.WorkerConfig{
				Handler: func(context.Context, *kltype.Record) error { return nil },
			}}},
			Events: func(e observe.LeaseEvent) { f.event(i, e) },
		})
		if err != nil {
			t.Fatal(err)
		}
		m.group = g
		f.members = append(f.members, m)
	}
	return f
}

// violate records a violation; safe from any goroutine (the test's own
// reports them).
func (f *fleet) violate(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.violations) < 20 {
		f.violations = append(f.violations, fmt.Sprintf("T+%v: ", f.since())+fmt.Sprintf(format, args...))
	}
}

func (f *fleet) since() time.Duration { return time.Since(f.start).Round(time.Millisecond) }

// event counts a lease event of member i and, for an acquisition, checks
// that the member that acquired the shard before (if another) no longer
// holds it. A member holds a shard (Group.Held) from when its worker
// starts, before the event, until its lease is lost, released or fenced:
// a holding of one member overlapping another's always overlaps the later
// acquisition, so checking the previous acquirer at each acquisition finds
// every overlap (dead members included: a crashed process whose fence has
// not passed may still deliver).
func (f *fleet) event(i int, e observe.LeaseEvent) {
	f.mu.Lock()
	if int(e.Type) < len(f.events) {
		f.events[e.Type]++
	}
	if e.Type != observe.LeaseAcquired {
		f.mu.Unlock()
		return
	}
	prev, ok := f.lastAcq[e.ShardID]
	f.lastAcq[e.ShardID] = i
	if _, done := f.taken[e.ShardID]; f.watched[e.ShardID] && !done && !f.members[i].dead.Load() {
		f.taken[e.ShardID] = time.Since(f.watchFrom)
	}
	f.mu.Unlock()
	if ok && prev != i && slices.Contains(f.members[prev].group.Held(largeStream), e.ShardID) {
		f.violate("%s acquired %s while %s (dead %v) still held it", f.members[i].owner[:12], e.ShardID, f.members[prev].owner[:12], f.members[prev].dead.Load())
	}
}

// watchShards times the next acquisition of each shard of ids by a live
// member, from from.
func (f *fleet) watchShards(ids map[string]int, from time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watched, f.watchFrom, f.taken = map[string]bool{}, from, map[string]time.Duration{}
	for id := range ids {
		f.watched[id] = true
	}
}

// takenAgain returns how long after watchShards' from each watched shard
// acquired since was acquired.
func (f *fleet) takenAgain() map[string]time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.taken)
}

func (f *fleet) eventCounts() [4]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.events
}

// run starts every member's Run, member i at offset[i] from now.
func (f *fleet) run(offsets []time.Duration) {
	for i, m := range f.members {
		ctx, cancel := context.WithCancel(context.Background())
		m.cancel = cancel
		go func() {
			defer close(m.done)
			time.Sleep(offsets[i])
			m.err = m.group.Run(ctx)
		}()
	}
}

// crash kills the members of ids at once: none of their calls reaches the
// table or Kinesis any more; their Runs are cancelled so that their
// goroutines end.
func (f *fleet) crash(ids []int) {
	for _, i := range ids {
		f.members[i].dead.Store(true)
	}
	for _, i := range ids {
		f.members[i].cancel()
	}
}

// stop shuts every member down and waits for their Runs; a live member's
// Run must return nil.
func (f *fleet) stop() {
	for _, m := range f.members {
		m.cancel()
	}
	for _, m := range f.members {
		<-m.done
		if m.err != nil && !m.dead.Load() {
			f.violate("%s: Run returned %v", m.owner[:12], m.err)
		}
	}
}

// holdings returns what each live member holds now (Group.Held), and the
// live members' indexes; doubles lists the shards more than one member
// holds (dead members whose fence has not passed included).
func (f *fleet) holdings() (live []int, held [][]string, doubles []string) {
	by := map[string]int{}
	for _, m := range f.members {
		h := m.group.Held(largeStream)
		for _, id := range h {
			by[id]++
			if by[id] == 2 {
				doubles = append(doubles, id)
			}
		}
		if !m.dead.Load() {
			live = append(live, m.i)
			held = append(held, h)
		}
	}
	return live, held, doubles
}

// waitFor polls cond every 250ms (virtual time) until it holds or within
// has passed, and returns how long it took and whether it held. Every poll
// also checks that no shard is held twice.
func (f *fleet) waitFor(within time.Duration, cond func(held [][]string) bool) (time.Duration, bool) {
	from := time.Now()
	for {
		_, held, doubles := f.holdings()
		if len(doubles) > 0 {
			f.violate("held by two members at once: %v", doubles[:min(len(doubles), 5)])
		}
		if cond(held) {
			return time.Since(from), true
		}
		if time.Since(from) >= within {
			return time.Since(from), false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// allHeld reports whether the live members hold every shard between them.
func (f *fleet) allHeld(held [][]string) bool {
	n := 0
	for _, h := range held {
		n += len(h)
	}
	return n >= f.shards && len(coverage(held)) == f.shards
}

func coverage(held [][]string) map[string]bool {
	m := map[string]bool{}
	for _, h := range held {
		for _, id := range h {
			m[id] = true
		}
	}
	return m
}

// fairNow reports whether the live members hold every shard once, fairly
// (fairSplit: at most ceil(S/L) each, within one of each other).
func (f *fleet) fairNow(held [][]string) bool {
	_, ok := fairSplit(f.shards, held)
	return ok
}

// shares describes the spread of the live members' holdings.
func shares(held [][]string) string {
	lo, hi, n := -1, 0, 0
	for _, h := range held {
		n += len(h)
		if lo < 0 || len(h) < lo {
			lo = len(h)
		}
		hi = max(hi, len(h))
	}
	return fmt.Sprintf("%d held by %d live members, %d to %d each", n, len(held), lo, hi)
}

// report fails t with the fleet's violations.
func (f *fleet) report() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.violations) > 0 {
		f.t.Errorf("%d violations:\n  %s", len(f.violations), strings.Join(f.violations, "\n  "))
	}
}

// startOffsets spreads n starts over spread, drawn from seed.
func startOffsets(n int, spread time.Duration, seed uint64) []time.Duration {
	r := rand.New(rand.NewPCG(seed, 0x57a7))
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(r.Int64N(int64(spread) + 1))
	}
	return out
}

// memNow describes the process's memory now (the Go heap in use and what
// the runtime holds from the system) and, when KINESISLEASE_SIM_LARGE_HEAP
// names a file, writes a heap profile there.
func memNow() string {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	out := fmt.Sprintf("heap in use %d MiB, %d MiB from the system", ms.HeapInuse>>20, ms.Sys>>20)
	if path := os.Getenv("KINESISLEASE_SIM_LARGE_HEAP"); path != "" {
		if fh, err := os.Create(path); err == nil {
			pprof.WriteHeapProfile(fh)
			fh.Close()
			out += ", heap profile in " + path
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Billing.

// Kinds of item, as the bill breaks them down.
const (
	kindHeader = "header"     // driver.MemberHeaderKey
	kindRow    = "member row" // driver.MemberKey(i)
	kindLease  = "lease row"  // stream:shard
)

func itemKind(key string) string {
	switch {
	case key == driver.MemberHeaderKey:
		return kindHeader
	case driver.IsMemberKey(key):
		return kindRow
	}
	return kindLease
}

// billRates is the bill of a window, as rates per second.
type billRates struct {
	window  time.Duration
	members int
	// Per member, the fleet's mean: every write; the membership protocol's
	// reads (the header and membership rows); reads and writes of lease
	// rows (in steady state: the reconciliation's re-reads).
	wcu, memberRCU, leaseRCU, leaseWCU float64
	headerRCU, rowRCU                  float64 // memberRCU's parts
	// The busiest member's writes and membership reads.
	maxWCU, maxMemberRCU float64
	// The whole fleet's.
	fleetWCU, fleetRCU float64
	// The hottest item of each kind of unit.
	hotWCU, hotRCU       float64
	hotWCUKey, hotRCUKey string
	// The most units one item consumed in one second of the window, and
	// in one second of the start (from the members' start to the window).
	peakWCU, peakRCU           ddbmeter.Peak
	peakWCUKey, peakRCUKey     string
	startPeakWCU, startPeakRCU ddbmeter.Peak
	startWCUKey, startRCUKey   string
	// Calls throttled (their item hot) in the window and at the start,
	// and the item most throttled in the window, or at the start if none
	// was in the window.
	throttled, startThrottled int64
	throttledKey              string
	throttledMost             int64
	// Reconciliation: lease-row reads in the window, and how many the
	// members' holdings allow at one re-read per held row per
	// engine.DefaultReconcile (each member's rounded up, plus one).
	leaseReads, leaseReadsAllowed int64
	overReaders                   int    // members above their allowance
	overExample                   string // one of them
}

// billOf turns the bill between b0 and b1 (a window of length window) into
// rates; held is what each member held at the end of the window. b0's
// peaks are the start's; b1's the window's (the table's peaks were reset
// when b0 was taken).
func billOf(b0, b1 ddbmeter.Bill, window time.Duration, held map[int]int) billRates {
	s := window.Seconds()
	r := billRates{window: window, members: len(b1.ByClient)}
	r.peakWCUKey, r.peakWCU, r.peakRCUKey, r.peakRCU = peaks(b1.Peaks)
	r.startWCUKey, r.startPeakWCU, r.startRCUKey, r.startPeakRCU = peaks(b0.Peaks)
	for k, u := range b1.ByKey {
		r.startThrottled += b0.ByKey[k].Throttled
		d := u.Sub(b0.ByKey[k]).Throttled
		r.throttled += d
		if d > r.throttledMost {
			r.throttledKey, r.throttledMost = k, d
		}
	}
	if r.throttled == 0 {
		for k, u := range b0.ByKey {
			if u.Throttled > r.throttledMost {
				r.throttledKey, r.throttledMost = k, u.Throttled
			}
		}
	}
	for id, ks := range b1.ByClientKind {
		var w, mr float64
		var leaseReads int64
		for kind, u := range ks {
			d := u.Sub(b0.ByClientKind[id][kind])
			w += d.WCU
			r.fleetWCU += d.WCU / s
			r.fleetRCU += d.RCU / s
			switch kind {
			case kindLease:
				r.leaseRCU += d.RCU / s
				r.leaseWCU += d.WCU / s
				leaseReads += d.Reads
			default:
				mr += d.RCU
				r.memberRCU += d.RCU / s
				if kind == kindHeader {
					r.headerRCU += d.RCU / s
				} else {
					r.rowRCU += d.RCU / s
				}
			}
		}
		r.wcu += w / s
		r.maxWCU = max(r.maxWCU, w/s)
		r.maxMemberRCU = max(r.maxMemberRCU, mr/s)
		allowed := int64(held[id])*int64(window)/int64(engine.DefaultReconcile) + 1
		if int64(held[id])*int64(window)%int64(engine.DefaultReconcile) != 0 {
			allowed++
		}
		r.leaseReads += leaseReads
		r.leaseReadsAllowed += allowed
		if leaseReads > allowed {
			if r.overReaders == 0 {
				r.overExample = fmt.Sprintf("member %d re-read %d lease rows holding %d (allowed %d)", id, leaseReads, held[id], allowed)
			}
			r.overReaders++
		}
	}
	n := float64(r.members)
	r.wcu, r.memberRCU, r.leaseRCU, r.leaseWCU = r.wcu/n, r.memberRCU/n, r.leaseRCU/n, r.leaseWCU/n
	r.headerRCU, r.rowRCU = r.headerRCU/n, r.rowRCU/n
	for k, u := range b1.ByKey {
		d := u.Sub(b0.ByKey[k])
		if d.WCU/s > r.hotWCU {
			r.hotWCU, r.hotWCUKey = d.WCU/s, k
		}
		if d.RCU/s > r.hotRCU {
			r.hotRCU, r.hotRCUKey = d.RCU/s, k
		}
	}
	return r
}

// peaks returns the items of the highest peak second of writes and of
// reads, and their peaks.
func peaks(ps map[string]ddbmeter.Peak) (wKey string, w ddbmeter.Peak, rKey string, r ddbmeter.Peak) {
	for k, p := range ps {
		if p.WCU > w.WCU || p.WCU == w.WCU && p.WCU > 0 && k < wKey {
			wKey, w = k, p
		}
		if p.RCU > r.RCU || p.RCU == r.RCU && p.RCU > 0 && k < rKey {
			rKey, r = k, p
		}
	}
	return wKey, w, rKey, r
}

// itemSizes describes the sizes of the table's items, as DynamoDB counts
// them: the header, the largest membership row, the largest lease row.
func (f *fleet) itemSizes() string {
	var header, row, lease int
	var rowKey string
	for _, k := range f.table.Keys() {
		n := ddbmeter.Size(f.table.Item(k))
		switch itemKind(k) {
		case kindHeader:
			header = n
		case kindRow:
			if n > row {
				row, rowKey = n, k
			}
		default:
			lease = max(lease, n)
		}
	}
	return fmt.Sprintf("header %d bytes, largest membership row %d bytes (%s), largest lease row %d bytes", header, row, rowKey, lease)
}

// ---------------------------------------------------------------------------
// TestBilledUnits.

type fleetSize struct{ members, shards int }

func (s fleetSize) String() string { return fmt.Sprintf("%dx%d", s.members, s.shards) }

// largeSizes returns the fleet sizes of TestBilledUnits: all of them, or
// those KINESISLEASE_SIM_LARGE_SIZES lists ("20x1000,1000x5000").
func largeSizes(t *testing.T) []fleetSize {
	all := []fleetSize{{20, 1000}, {20, 20000}, {200, 1000}, {200, 20000}, {1000, 1000}, {1000, 20000}}
	v := os.Getenv("KINESISLEASE_SIM_LARGE_SIZES")
	if v == "" {
		return all
	}
	var out []fleetSize
	for _, s := range strings.Split(v, ",") {
		var c fleetSize
		if _, err := fmt.Sscanf(strings.TrimSpace(s), "%dx%d", &c.members, &c.shards); err != nil || c.members < 1 || c.shards < 1 {
			t.Fatalf("KINESISLEASE_SIM_LARGE_SIZES=%q: want sizes like 20x1000,1000x5000", v)
		}
		out = append(out, c)
	}
	return out
}

// The goals of the lease protocol's cost (issue 19), per instance and per
// item, in billed units per second.
const (
	goalWCU     = 1.0 // per instance: every write
	goalRCU     = 2.0 // per instance: the membership protocol's reads
	goalItemWCU = 500.0
	goalItemRCU = 1500.0
)

const (
	billStartSpread = 5 * time.Second // members start within it
	billSettleMax   = 5 * time.Minute // fair shares by then
	// billSettled: once shares are fair, hand-offs may still be under way
	// (a holder hands a lease over only once the plan stood for two
	// rounds): wait a few more rounds.
	billSettled = 10 * time.Second
	billWindow  = time.Minute // the steady-state window measured
)

// TestBilledUnits measures what the lease protocol costs in DynamoDB
// billed units in steady state: fleets of 20, 200 and 1,000 members
// (64-byte owner ids) on 1,000 and 20,000 idle shards at the library's
// defaults, in virtual time (see the large simulations above), each member
// on its own DynamoDB store over one billing table. Once shares are fair
// and the plan settled, it bills a one-minute window and checks:
//
//   - no lease moved in the window (steady state);
//   - every member's writes at most goalWCU per second, and its reads of
//     the membership (header and rows) at most goalRCU;
//   - no item above goalItemWCU or goalItemRCU, and no call throttled
//     (the table throttles an item above DynamoDB's 3,000 RCU/s or 1,000
//     WCU/s);
//   - the reconciliation's re-reads of held lease rows (the only lease-row
//     calls in steady state: idle shards write no checkpoint) at most one
//     per held row per engine.DefaultReconcile, per member (rounded up,
//     plus one).
//
// A fleet whose shares are not fair within billSettleMax fails, and is
// billed all the same (its line says "shares not fair"): what the protocol
// costs while it does not settle.
//
// It logs a table of the figures per size (per instance: writes, the
// membership's reads, the lease rows' reads, all reads; the fleet's; the
// hottest items, their mean and their peak second; the calls throttled at
// the start and in the window), the start's peak seconds, and the wall
// time and memory of each size.
// KINESISLEASE_SIM_LARGE_SIZES=20x1000,200x20000 runs only those sizes. A
// size whose estimated memory (see largeMemory) exceeds what the machine
// has available is skipped with the estimate.
func TestBilledUnits(t *testing.T) {
	largeOnly(t)
	var lines []string
	for _, size := range largeSizes(t) {
		t.Run(fmt.Sprintf("fleet=%d/shards=%d", size.members, size.shards), func(t *testing.T) {
			largeMemory(t, size)
			wall := time.Now()
			var r billRates
			var mem string
			var unfair bool
			// Reported even when the bubble failed (synctest.Test then
			// ends the test with FailNow, which runs this).
			defer func() {
				if r.members == 0 {
					return // failed before the window
				}
				t.Logf("wall time %v; memory at the end of the window: %s", time.Since(wall).Round(time.Second), mem)
				if r.wcu > goalWCU || r.maxWCU > goalWCU {
					t.Errorf("writes: %.2f WCU/s per member (the busiest %.2f); goal %v", r.wcu, r.maxWCU, goalWCU)
				}
				if r.memberRCU > goalRCU || r.maxMemberRCU > goalRCU {
					t.Errorf("membership reads: %.2f RCU/s per member (the busiest %.2f); goal %v", r.memberRCU, r.maxMemberRCU, goalRCU)
				}
				if r.hotWCU > goalItemWCU || r.hotRCU > goalItemRCU {
					t.Errorf("hottest items: %s %.1f WCU/s, %s %.1f RCU/s; goal at most %v and %v", r.hotWCUKey, r.hotWCU, r.hotRCUKey, r.hotRCU, goalItemWCU, goalItemRCU)
				}
				if r.throttled > 0 {
					t.Errorf("%d calls throttled in the steady-state window (%d of them on %s): an item above DynamoDB's limits", r.throttled, r.throttledMost, r.throttledKey)
				}
				if r.overReaders > 0 {
					t.Errorf("reconciliation: the members re-read %d held lease rows in the %v window, where one re-read per held row per %v allows %d; %d of %d members re-read more than their holdings allow, e.g. %s",
						r.leaseReads, billWindow, engine.DefaultReconcile, r.leaseReadsAllowed, r.overReaders, r.members, r.overExample)
				}
				line := r.line(size)
				if unfair {
					line += " shares not fair"
				}
				t.Log(billHeader + "\n" + line)
				lines = append(lines, line)
			}()
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, size.members, size.shards)
				f.run(startOffsets(size.members, billStartSpread, 1))
				defer f.report()
				defer f.stop()
				took, ok := f.waitFor(billSettleMax, f.fairNow)
				if !ok {
					// Measured all the same (the line says so): what the
					// protocol costs while it does not settle.
					_, held, _ := f.holdings()
					t.Errorf("no fair shares %v after the start: %s; %s", took, shares(held), f.throttling())
					unfair = true
				} else {
					t.Logf("fair shares %v after the start", took.Round(time.Millisecond))
				}
				time.Sleep(billSettled)
				ev0, b0, t0 := f.eventCounts(), f.table.Bill(), time.Now()
				f.table.ResetPeaks() // b1's peaks are the window's
				var start ddbmeter.Units
				for _, u := range b0.ByClient {
					start = start.Add(u)
				}
				sw, pw, sr, pr := peaks(b0.Peaks)
				t.Logf("the start, until %v after it: %.0f WCU and %.0f RCU in all (%d writes, %d of them failed conditions; %d reads; %d calls throttled), %d leases acquired; "+
					"peak seconds of one item %.0f WCU (%s), %.0f RCU (%s)",
					time.Since(f.start).Round(time.Millisecond), start.WCU, start.RCU, start.Writes, start.FailedWrites, start.Reads, start.Throttled, ev0[observe.LeaseAcquired],
					pw.WCU, sw, pr.RCU, sr)
				time.Sleep(billWindow)
				b1, ev1 := f.table.Bill(), f.eventCounts()
				held := map[int]int{}
				for _, m := range f.members {
					held[m.i] = len(m.group.Held(largeStream))
				}
				r = billOf(b0, b1, time.Since(t0), held)
				mem = memNow()
				t.Logf("item sizes at the end of the window: %s", f.itemSizes())
				moves := ev1[observe.LeaseAcquired] - ev0[observe.LeaseAcquired]
				_, holding, _ := f.holdings()
				switch {
				case unfair:
					t.Logf("a window of a fleet not settled: %d leases acquired in it; at its end %s; %s", moves, shares(holding), f.throttling())
				case moves > 0:
					t.Errorf("%d leases acquired in the steady-state window: the plan had not settled", moves)
				}
				if !unfair && !f.fairNow(holding) {
					t.Errorf("shares no longer fair at the end of the window: %s", shares(holding))
				}
			})
		})
	}
	t.Logf("billed units per second in steady state (%v window):\n%s\n%s", billWindow, billHeader, strings.Join(lines, "\n"))
}

const billHeader = "| fleet | shards | WCU/s per instance (busiest) | RCU/s per instance: membership = header + rows (busiest) | lease rows | all | fleet WCU/s | fleet RCU/s | hottest item WCU/s | hottest item RCU/s | " +
	"peak second of one item: WCU | RCU | peak second at the start: WCU | RCU | calls throttled: start, window |\n" +
	"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"

func (r billRates) line(size fleetSize) string {
	throttled := fmt.Sprintf("%d, %d", r.startThrottled, r.throttled)
	if r.throttledMost > 0 {
		throttled += fmt.Sprintf(" (most: %d on `%s`)", r.throttledMost, r.throttledKey)
	}
	return fmt.Sprintf("| %d | %d | %.2f (%.2f) | %.2f = %.2f + %.2f (%.2f) | %.2f | %.2f | %.0f | %.0f | %.1f `%s` | %.1f `%s` | %.0f `%s` | %.0f `%s` | %.0f `%s` | %.0f `%s` | %s |",
		size.members, size.shards, r.wcu, r.maxWCU, r.memberRCU, r.headerRCU, r.rowRCU, r.maxMemberRCU, r.leaseRCU, r.memberRCU+r.leaseRCU,
		r.fleetWCU, r.fleetRCU, r.hotWCU, r.hotWCUKey, r.hotRCU, r.hotRCUKey,
		r.peakWCU.WCU, r.peakWCUKey, r.peakRCU.RCU, r.peakRCUKey, r.startPeakWCU.WCU, r.startWCUKey, r.startPeakRCU.RCU, r.startRCUKey, throttled)
}

// largeMemory skips t when the simulation of size would need more memory
// than the machine has available (Linux: MemAvailable). The estimate comes
// from heap profiles of these runs: each member (an engine Group) keeps
// about 850 bytes per shard (its rows, shard list and plan) and about 930
// bytes per member (the planner's ring), and the process holds about 2.1
// times the live heap from the system.
func largeMemory(t *testing.T, size fleetSize) {
	t.Helper()
	live := float64(size.members) * (850*float64(size.shards) + 930*float64(size.members))
	need := 2.1 * live // the Go collector's default headroom
	if lim := debug.SetMemoryLimit(-1); lim < math.MaxInt64 {
		// GOMEMLIMIT set: the collector keeps the heap under it, at the
		// cost of CPU, so long as what is live fits.
		need = max(1.15*live, min(need, float64(lim)))
	}
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err == nil && need > kb*1024 {
				t.Skipf("%v members x %v shards needs about %.0f GiB, the machine has %.0f GiB available: choose a smaller size (see doc.go)",
					size.members, size.shards, need/(1<<30), kb*1024/(1<<30))
			}
		}
	}
}

// ---------------------------------------------------------------------------
// TestLargeFleetFailover.

// The bounds of TestLargeFleetFailover, at the library's defaults
// (T = engine.DefaultTimeout, R = a round at most: the heartbeat interval
// and its 10% jitter).
const (
	failStartSpread = 5 * time.Second // every member starts within it
	failCrashShare  = 10              // percent of the members crashed at once
)

// TestLargeFleetFailover runs one seed of a fleet of 1,000 members on
// 20,000 idle shards (KINESISLEASE_SIM_LARGE_FLEET sets another size, as
// 200x4000; KINESISLEASE_SIM_LARGE_SEED another seed) at the library's
// defaults, in virtual time, and checks the liveness bounds:
//
//   - every shard is held by a live member within heldBound of the start
//     (the members start within 5s: 5s + 2 heartbeats + 4R, 13s), and
//     shares are fair (fairSplit: every shard held once, at most
//     ceil(S/L) each, within one of each other) within fairBound (5s +
//     18R, 29.75s);
//   - then 10% of the members, drawn from the seed, crash at once: every
//     shard they held is held again by a live member within the failover
//     bound T + 2R + 1s (8.75s, as the scenarios state it), and shares are
//     fair again within refairBound of the crash (the failover bound +
//     10R, 22.5s);
//   - at no moment is a shard held by two members (Group.Held; dead members
//     whose fence has not passed count): checked at every acquisition (see
//     fleet.event) and at every poll.
//
// It logs the times measured, the wall time and the memory of the run.
func TestLargeFleetFailover(t *testing.T) {
	largeOnly(t)
	size := fleetSize{1000, 20000}
	if v := os.Getenv("KINESISLEASE_SIM_LARGE_FLEET"); v != "" {
		if _, err := fmt.Sscanf(v, "%dx%d", &size.members, &size.shards); err != nil || size.members < 10 || size.shards < 1 {
			t.Fatalf("KINESISLEASE_SIM_LARGE_FLEET=%q: want members x shards, as 1000x20000 (at least 10 members)", v)
		}
	}
	largeMemory(t, size)
	seed := uint64(1)
	if v := os.Getenv("KINESISLEASE_SIM_LARGE_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil || seed == 0 {
			t.Fatalf("KINESISLEASE_SIM_LARGE_SEED=%q: want a positive number", v)
		}
	}
	T, R := engine.DefaultTimeout, engine.DefaultHeartbeat+engine.DefaultHeartbeat/10
	var (
		// The last member starts within failStartSpread; a first listing
		// on an empty membership waits two heartbeats before it creates
		// every row; four rounds for joins to be seen and rows taken.
		heldBound = failStartSpread + 2*engine.DefaultHeartbeat + 4*R
		// Then the plan stands two rounds before a holder hands a lease
		// over, the hand-off drains and releases, the new holder takes it
		// at its next round; room for joins retried on rows found full.
		fairBound = failStartSpread + 18*R
		// The failover bound of the scenarios (scenario_test.go).
		failBound = T + 2*R + time.Second
		// After the failover, the same hand-offs as at the start.
		refairBound = failBound + 10*R
	)
	wall := time.Now()
	var mem string
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, size.members, size.shards)
		f.run(startOffsets(size.members, failStartSpread, seed))
		defer f.report()
		defer f.stop()

		took, ok := f.waitFor(heldBound, f.allHeld)
		if !ok {
			_, held, _ := f.holdings()
			t.Errorf("not every shard held %v after the start (bound %v): %s", took, heldBound, shares(held))
			return
		}
		t.Logf("every shard held by a live member %v after the start (bound %v)", took, heldBound)
		if _, ok = f.waitFor(fairBound-time.Since(f.start), f.fairNow); !ok {
			_, held, _ := f.holdings()
			t.Errorf("no fair shares %v after the start (bound %v): %s", time.Since(f.start), fairBound, shares(held))
			return
		}
		t.Logf("fair shares %v after the start (bound %v)", time.Since(f.start).Round(time.Millisecond), fairBound)
		time.Sleep(10 * time.Second) // the plan stands: no hand-off under way

		// The crash.
		r := rand.New(rand.NewPCG(seed, 0xc7a5))
		victims := r.Perm(size.members)[:size.members*failCrashShare/100]
		orphaned := map[string]int{} // shard -> the victim that held it
		for _, i := range victims {
			for _, id := range f.members[i].group.Held(largeStream) {
				orphaned[id] = i
			}
		}
		crashAt := time.Now()
		f.watchShards(orphaned, crashAt)
		f.crash(victims)
		t.Logf("T+%v: %d members crashed at once, holding %d shards", f.since(), len(victims), len(orphaned))

		// Failover: when each orphaned shard is acquired by a live member
		// (the acquisition's event comes once its worker runs).
		_, ok = f.waitFor(failBound+5*time.Second, func([][]string) bool { return len(f.takenAgain()) == len(orphaned) })
		taken := f.takenAgain()
		var worst time.Duration
		var late []string
		for id := range orphaned {
			d, ok := taken[id]
			if !ok || d > failBound {
				late = append(late, id)
			}
			worst = max(worst, d)
		}
		slices.Sort(late)
		if !ok || len(late) > 0 {
			t.Errorf("%d of %d shards of the crashed members not held again within %v of the crash (T + 2 rounds + 1s; %d never in %v); first: %v",
				len(late), len(orphaned), failBound, len(orphaned)-len(taken), failBound+5*time.Second, late[:min(len(late), 5)])
		}
		ds := slices.Sorted(func(yield func(time.Duration) bool) {
			for _, d := range taken {
				if !yield(d) {
					return
				}
			}
		})
		if len(ds) > 0 {
			t.Logf("failover: every orphaned shard held again within %v of the crash (bound %v); median %v, 99th percentile %v",
				worst.Round(time.Millisecond), failBound, ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)*99/100].Round(time.Millisecond))
		}
		_, ok = f.waitFor(refairBound-time.Since(crashAt), f.fairNow)
		fairAfter := time.Since(crashAt)
		if !ok {
			_, held, _ := f.holdings()
			t.Errorf("no fair shares %v after the crash (bound %v): %s", fairAfter, refairBound, shares(held))
		} else {
			t.Logf("fair shares again %v after the crash (bound %v)", fairAfter.Round(time.Millisecond), refairBound)
		}
		mem = memNow()
		ev := f.eventCounts()
		t.Logf("lease events: %d acquired, %d released, %d lost", ev[observe.LeaseAcquired], ev[observe.LeaseReleased], ev[observe.LeaseLost])
	})
	t.Logf("%d members x %d shards, seed %d: wall time %v; memory after the failover: %s", size.members, size.shards, seed, time.Since(wall).Round(time.Second), mem)
}
