package engine_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/observe"
	"github.com/kinesislease/kinesislease/internal/testkit/sim"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// listFleet is a fleet of Groups on one stream, at the library's defaults,
// whose ListShards calls and lease-row reads are counted by member.
type listFleet struct {
	k      *kinesisfake.Kinesis
	stream string
	owners []string

	mu sync.Mutex
	// lists and pages: the listings (first pages) and the ListShards calls
	// of each member.
	lists, pages map[string]int
	// gets: the Get calls of each member on each lease row, by shard.
	gets map[string]map[string]int
	// holder: the member that last acquired each shard.
	holder map[string]string
	// gate: shards whose records the handlers hold until the channel is
	// closed (a slow handler).
	gate map[string]chan struct{}
	// dieOnEnd: the member whose release writes SHARD_END on this shard
	// dies at once (its answer lost, every later store call failing);
	// dead: the members dead so.
	dieOnEnd string
	dead     map[string]bool
}

// countingReader counts one member's ListShards calls.
type countingReader struct {
	kinesisx.Reader
	f     *listFleet
	owner string
}

func (c countingReader) ListShards(ctx context.Context, in *kinesis.ListShardsInput, opts ...func(*kinesis.Options)) (*kinesis.ListShardsOutput, error) {
	c.f.mu.Lock()
	c.f.pages[c.owner]++
	if in.NextToken == nil {
		c.f.lists[c.owner]++
	}
	c.f.mu.Unlock()
	return c.Reader.ListShards(ctx, in, opts...)
}

// startListFleet starts members Groups on a new stream of shards shards;
// they run until the test ends. With dropListing, the store drops every
// entry's Listing (as members of an earlier version would write none).
func startListFleet(t *testing.T, members, shards int, dropListing bool) *listFleet {
	t.Helper()
	k := sim.NewKinesis()
	f := &listFleet{k: k, stream: newSimStream(t, k, "listing", shards).Name(),
		lists: map[string]int{}, pages: map[string]int{}, gets: map[string]map[string]int{}, holder: map[string]string{}, gate: map[string]chan struct{}{}, dead: map[string]bool{}}
	var inner leases.Store = memory.New()
	if dropListing {
		inner = noListing{inner.(*memory.Store)}
	}
	for i := range members {
		owner := fmt.Sprintf("member-%02d", i)
		f.owners = append(f.owners, owner)
		store := sim.NewFaultStore(inner, sim.StoreHooks{Decide: func(op string, key leases.Key) sim.Decision {
			if op == "Get" {
				f.mu.Lock()
				if f.gets[owner] == nil {
					f.gets[owner] = map[string]int{}
				}
				f.gets[owner][key.Shard]++
				f.mu.Unlock()
			}
			return sim.Decision{}
		}, Dead: func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.dead[owner]
		}, Apply: func(op string, l leases.Lease, do func() (leases.Lease, error)) (leases.Lease, error) {
			got, err := do()
			f.mu.Lock()
			if op == "Release" && err == nil && l.Key.Shard == f.dieOnEnd && got.Checkpoint.Sequence == leases.ShardEnd {
				f.dead[owner] = true
			}
			f.mu.Unlock()
			return got, err
		}})
		cfg := engine.GroupConfig{
			Owner: owner, Store: store, Client: countingReader{Reader: k, f: f, owner: owner},
			Streams: []engine.StreamConfig{{Stream: f.stream, Start: kltype.TrimHorizon, Worker: engine.WorkerConfig{
				MinInterval: 200 * time.Millisecond, IdleInterval: time.Second,
				Handler: func(ctx context.Context, r *kltype.Record) error {
					f.mu.Lock()
					gate := f.gate[r.ShardID]
					f.mu.Unlock()
					if gate != nil {
						select {
						case <-gate:
						case <-ctx.Done():
							return ctx.Err()
						}
					}
					return nil
				},
			}}},
			Events: func(e observe.LeaseEvent) {
				if e.Type == observe.LeaseAcquired {
					f.mu.Lock()
					f.holder[e.ShardID] = owner
					f.mu.Unlock()
				}
			},
		}
		_, stop := startGroup(t, cfg)
		t.Cleanup(stop)
	}
	return f
}

// noListing is a store that drops every entry's Listing.
type noListing struct{ *memory.Store }

func (s noListing) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	m.Listing = ""
	return s.Store.Join(ctx, row, m)
}

func (s noListing) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	m.Listing = ""
	return s.Store.Heartbeat(ctx, row, m)
}

func (s noListing) ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error) {
	next.Listing = ""
	return s.Store.ReplaceMember(ctx, row, seen, next)
}

// counts returns the listings and ListShards calls of every member so far.
func (f *listFleet) counts() (lists, pages map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneCounts(f.lists), cloneCounts(f.pages)
}

func cloneCounts(m map[string]int) map[string]int {
	c := make(map[string]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// since returns the counts of now less those of then, and their sum.
func since(now, then map[string]int) (map[string]int, int) {
	d, total := map[string]int{}, 0
	for k, v := range now {
		if v -= then[k]; v != 0 {
			d[k] = v
			total += v
		}
	}
	return d, total
}

// holders returns the members holding shards ids, and whether every one
// is held.
func (f *listFleet) holders(ids ...string) ([]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var hs []string
	for _, id := range ids {
		h, ok := f.holder[id]
		if !ok {
			return nil, false
		}
		if !slices.Contains(hs, h) {
			hs = append(hs, h)
		}
	}
	slices.Sort(hs)
	return hs, true
}

// waitHeld waits (virtual time) until every shard of ids has been acquired.
func (f *listFleet) waitHeld(t *testing.T, within time.Duration, ids ...string) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if hs, ok := f.holders(ids...); ok {
			return hs
		}
		if time.Now().After(deadline) {
			t.Fatalf("shards %v not all acquired within %v (virtual time)", ids, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestListingBoundedByFleet: 20 members on one stream list its shards
// (ListShards) about as often as one member would: in five minutes of
// steady state only the stream's lister lists (once a ShardSyncInterval),
// and a split costs at most the lister's listings and one listing per
// member (when the lister's published digest of the shard set changes),
// plus the ender's own when the parent ends. Before: every member listed
// every minute (20 x 5 = 100 listings in five minutes) and again on a shard
// end.
func TestListingBoundedByFleet(t *testing.T) {
	t.Parallel()
	const members, shards = 20, 8
	synctest.Test(t, func(t *testing.T) {
		f := startListFleet(t, members, shards, false)
		ids := make([]string, shards)
		for i := range ids {
			ids[i] = fmt.Sprintf("shardId-%012d", i)
		}
		f.waitHeld(t, time.Minute, ids...)
		time.Sleep(30 * time.Second) // the start's listings and moves are over
		startLists, _ := f.counts()
		if len(startLists) != members {
			t.Fatalf("%d members listed at their start, want %d (each lists once at its start)", len(startLists), members)
		}

		// Steady state: five minutes.
		const steady = 5 * time.Minute
		lists0, pages0 := f.counts()
		time.Sleep(steady)
		lists1, pages1 := f.counts()
		byMember, total := since(lists1, lists0)
		_, calls := since(pages1, pages0)
		t.Logf("steady state, %v: %d listings (%d ListShards calls) by %d members: %v", steady, total, calls, len(byMember), byMember)
		// The lister's, once a ShardSyncInterval (a minute): 5, or 6 with
		// the listing timed at both ends of the window.
		if limit := int(steady/time.Minute) + 1; total > limit {
			t.Errorf("%d listings in %v of steady state by %d members, want at most %d: the lister's, whatever the member count", total, steady, len(byMember), limit)
		}

		// A split, and its parent's end (an idle parent ends as soon as
		// its holder reads past its last record).
		splitAt := time.Now()
		children, err := f.k.SplitShard(f.stream, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		f.waitHeld(t, 3*time.Minute, children[0], children[1])
		time.Sleep(time.Minute)
		elapsed := time.Since(splitAt)
		lists2, pages2 := f.counts()
		byMember, total = since(lists2, lists1)
		_, calls = since(pages2, pages1)
		t.Logf("split and parent end, %v: %d listings (%d ListShards calls) by %d members: %v", elapsed.Round(time.Second), total, calls, len(byMember), byMember)
		// The lister's (once a minute, and once on the shard end), one per
		// member for the one change of the shard set, and the ender's own
		// on its shard end.
		if limit := int(elapsed/time.Minute) + 1 + 1 + members + 1; total > limit {
			t.Errorf("%d listings in %v for one split, want at most %d (the lister's, one per member, the ender's)", total, elapsed.Round(time.Second), limit)
		}
	})
}

// reads returns how many times each member read the row of shard id so far.
func (f *listFleet) reads(id string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]int{}
	for owner, byShard := range f.gets {
		if n := byShard[id]; n > 0 {
			m[owner] = n
		}
	}
	return m
}

// TestParentReadByChildPlanners: while the parent of a split stays open
// (its holder's handler holds its last record), its row is read only by
// the members whose plan gives them one of its children (they take the
// children the moment it ends), not by every member every fourth round;
// once it ends, its holder's announcement (its Ended count) has each other
// member read it about once. Before: each of the 12 members read it every
// fourth round (12 reads a minute each).
func TestParentReadByChildPlanners(t *testing.T) {
	t.Parallel()
	const members, shards = 12, 6
	synctest.Test(t, func(t *testing.T) {
		f := startListFleet(t, members, shards, false)
		ids := make([]string, shards)
		for i := range ids {
			ids[i] = fmt.Sprintf("shardId-%012d", i)
		}
		parent := ids[0]
		f.waitHeld(t, time.Minute, ids...)
		time.Sleep(30 * time.Second) // the start's moves are over
		gate := make(chan struct{})
		f.mu.Lock()
		f.gate[parent] = gate
		f.mu.Unlock()
		if _, err := f.k.PutRecord(context.Background(), &kinesis.PutRecordInput{StreamName: &f.stream, PartitionKey: strPtr("k"), Data: []byte("x"), ExplicitHashKey: strPtr("0")}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second) // its holder's handler holds it
		children, err := f.k.SplitShard(f.stream, parent)
		if err != nil {
			t.Fatal(err)
		}
		// Every member lists the children within a few minutes: a ListShards
		// a minute (the lister's, then everyone's once).
		time.Sleep(3 * time.Minute)
		before := f.reads(parent)
		const open = time.Minute
		time.Sleep(open)
		during, _ := since(f.reads(parent), before)
		if hs, ok := f.holders(children[0]); ok {
			t.Fatalf("child %s taken by %v while its parent was open", children[0], hs)
		}
		released := f.reads(parent)
		close(gate)
		planned := f.waitHeld(t, time.Minute, children[0], children[1])
		holder, _ := f.holders(parent)
		time.Sleep(30 * time.Second)
		after, _ := since(f.reads(parent), released)
		t.Logf("parent open %v: read by %v; children taken by %v, parent held by %v; from its release to 30 s after the children were taken: %v", open, during, planned, holder, after)
		for owner, n := range during {
			if !slices.Contains(planned, owner) && !slices.Contains(holder, owner) {
				t.Errorf("%s read the open parent's row %d times in %v, its plan giving it no child (the children went to %v)", owner, n, open, planned)
			}
		}
		polled := false
		for _, owner := range planned {
			polled = polled || during[owner] > 0
		}
		if !polled {
			t.Errorf("no member the children went to (%v) read the open parent's row in %v: nobody polls it", planned, open)
		}
		for _, owner := range f.owners {
			if slices.Contains(planned, owner) || slices.Contains(holder, owner) {
				continue
			}
			// Each other member learns of the end by one read, when its
			// holder's Ended count moves (nothing else tells it).
			if n := after[owner]; n < 1 || n > 2 {
				t.Errorf("%s read the parent's row %d times from its release to 30 s after its children were taken, want 1 or 2 (its holder's announcement)", owner, n)
			}
		}
	})
}

func strPtr(s string) *string { return &s }

// TestParentEndLearnedWhenHolderDies: the parent's holder dies the moment
// its release writes SHARD_END, before any heartbeat could carry its Ended
// count: the member the plan gives the parent to next comes to take it,
// finds it ended and announces that (its own Ended), so that every member
// learns of the end by one read. Without that announcement only the
// members that take the children ever read the parent again, and the
// others plan it as open for good.
func TestParentEndLearnedWhenHolderDies(t *testing.T) {
	t.Parallel()
	const members, shards = 8, 4
	synctest.Test(t, func(t *testing.T) {
		f := startListFleet(t, members, shards, false)
		ids := make([]string, shards)
		for i := range ids {
			ids[i] = fmt.Sprintf("shardId-%012d", i)
		}
		parent := ids[0]
		f.waitHeld(t, time.Minute, ids...)
		time.Sleep(30 * time.Second)
		gate := make(chan struct{})
		f.mu.Lock()
		f.gate[parent] = gate
		f.dieOnEnd = parent
		f.mu.Unlock()
		if _, err := f.k.PutRecord(context.Background(), &kinesis.PutRecordInput{StreamName: &f.stream, PartitionKey: strPtr("k"), Data: []byte("x"), ExplicitHashKey: strPtr("0")}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		children, err := f.k.SplitShard(f.stream, parent)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Minute) // every member lists the children
		holder, _ := f.holders(parent)
		released := f.reads(parent)
		close(gate)
		planned := f.waitHeld(t, time.Minute, children[0], children[1])
		time.Sleep(time.Minute)
		after, _ := since(f.reads(parent), released)
		f.mu.Lock()
		dead := maps.Clone(f.dead)
		f.mu.Unlock()
		t.Logf("parent held by %v (dead: %v); children taken by %v; parent's row read, from its release to a minute after: %v", holder, dead, planned, after)
		if len(dead) != 1 || !dead[holder[0]] {
			t.Fatalf("dead members %v, want the parent's holder %v alone", dead, holder)
		}
		for _, owner := range f.owners {
			if dead[owner] || slices.Contains(planned, owner) {
				continue
			}
			if n := after[owner]; n < 1 || n > 2 {
				t.Errorf("%s read the ended parent's row %d times, want 1 or 2: it learns of the end only from an announcement", owner, n)
			}
		}
	})
}

// TestListingFallsBackWithoutDigest: a lister whose digest never appears
// (an earlier version's, which writes none) leaves the others listing on
// their own schedule, every ShardSyncInterval, once three intervals have
// passed without it; a split is then seen by every member, and its
// children are taken.
func TestListingFallsBackWithoutDigest(t *testing.T) {
	t.Parallel()
	const members, shards = 5, 4
	synctest.Test(t, func(t *testing.T) {
		f := startListFleet(t, members, shards, true)
		ids := make([]string, shards)
		for i := range ids {
			ids[i] = fmt.Sprintf("shardId-%012d", i)
		}
		f.waitHeld(t, time.Minute, ids...)
		time.Sleep(3*time.Minute + 30*time.Second) // three ShardSyncIntervals without a digest
		lists0, _ := f.counts()
		const window = 5 * time.Minute
		time.Sleep(window)
		lists1, _ := f.counts()
		byMember, total := since(lists1, lists0)
		t.Logf("no digest published, %v past the fallback: %d listings: %v", window, total, byMember)
		for _, owner := range f.owners {
			if n := byMember[owner]; n < int(window/time.Minute)-1 || n > int(window/time.Minute)+1 {
				t.Errorf("%s listed %d times in %v with no lister's digest, want about one a minute", owner, n, window)
			}
		}
		children, err := f.k.SplitShard(f.stream, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		f.waitHeld(t, 2*time.Minute, children[0], children[1])
	})
}
