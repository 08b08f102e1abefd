package observe

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// callLog is a call hook that keeps what it is told.
type callLog struct {
	mu    sync.Mutex
	calls []kltype.CallInfo
}

func (c *callLog) OnCall(ci kltype.CallInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, ci)
}

// TestStoreCounts: each call through the Store is counted in its own
// Stats field, whether or not call hooks are set; with one set, every call
// is also told to it as a "dynamodb" call with the error it returned.
func TestStoreCounts(t *testing.T) {
	ctx := context.Background()
	key := leases.Key{Stream: "s", Shard: "shardId-000000000000"}
	m := leases.Member{Owner: "a", Incarnation: "i1", Heartbeat: 1}
	for _, hooked := range []bool{false, true} {
		log := &callLog{}
		var hs []kltype.Hook
		if hooked {
			hs = append(hs, log)
		}
		mem := memory.New()
		var st Stats
		s := NewStore(mem, mem, NewHooks(hs), &st)

		_, getErr := s.Get(ctx, key) // a read (the row is not there yet)
		if _, err := s.Create(ctx, key); err != nil {
			t.Fatal(err)
		}
		_, _ = s.StreamMark(ctx, "s")                           // a read
		_, _ = s.Join(ctx, 0, m)                                // a write
		_, _ = s.Heartbeat(ctx, 0, m)                           // a heartbeat
		_, _ = s.Members(ctx, 0)                                // a member read
		_, _ = s.Header(ctx)                                    // a member read
		_ = s.BumpRow(ctx, 0)                                   // a write
		_, _ = s.MarkStream(ctx, "s", leases.Mark{Token: "t1"}) // a write

		got := [4]int64{st.Reads.Load(), st.Writes.Load(), st.Heartbeats.Load(), st.MemberReads.Load()}
		if want := [4]int64{2, 4, 1, 2}; got != want {
			t.Errorf("hooked=%v: reads, writes, heartbeats, member reads = %v, want %v", hooked, got, want)
		}
		if !hooked {
			continue
		}
		var ops []string
		for _, c := range log.calls {
			if c.Service != "dynamodb" {
				t.Errorf("%s: service %q, want dynamodb", c.Op, c.Service)
			}
			ops = append(ops, c.Op)
		}
		want := []string{"Get", "Create", "StreamMark", "Join", "Heartbeat", "Members", "Header", "BumpRow", "MarkStream"}
		if !slices.Equal(ops, want) {
			t.Errorf("call hook ops = %v, want %v", ops, want)
		}
		if getErr == nil || log.calls[0].Err != getErr {
			t.Errorf("Get: hook told err %v, the call returned %v", log.calls[0].Err, getErr)
		}
	}
}

// TestTimed: timed returns what the call returned and tells the call hooks
// the service, the op, the error and at least the time the call took.
func TestTimed(t *testing.T) {
	log := &callLog{}
	h := NewHooks([]kltype.Hook{log})
	boom := errors.New("boom")
	v, err := timed(h, "kinesis", "GetRecords", func() (int, error) {
		time.Sleep(20 * time.Millisecond)
		return 7, boom
	})
	if v != 7 || err != boom {
		t.Fatalf("timed = %v, %v; want 7, boom", v, err)
	}
	if len(log.calls) != 1 {
		t.Fatalf("hook told %d calls, want 1", len(log.calls))
	}
	c := log.calls[0]
	if c.Service != "kinesis" || c.Op != "GetRecords" || c.Err != boom || c.Duration < 20*time.Millisecond {
		t.Errorf("hook told %+v, want kinesis GetRecords boom, at least 20ms", c)
	}
}

// leaseLog is a hook of two kinds: acquired and ended.
type leaseLog struct{ got []string }

func (l *leaseLog) OnLeaseAcquired(_ context.Context, i kltype.LeaseInfo) {
	l.got = append(l.got, "acquired "+i.ShardID)
}

func (l *leaseLog) OnShardEnded(s kltype.ShardInfo) { l.got = append(l.got, "ended "+s.ShardID) }

// TestEmit: NewHooks puts a hook in the list of each interface it
// implements, and Emit tells the events func and the hooks of that kind
// only.
func TestEmit(t *testing.T) {
	l := &leaseLog{}
	h := NewHooks([]kltype.Hook{l})
	if len(h.acquired) != 1 || len(h.ended) != 1 || len(h.released) != 0 || len(h.call) != 0 {
		t.Fatalf("NewHooks sorted %+v", h)
	}
	var events []LeaseEvent
	on := func(e LeaseEvent) { events = append(events, e) }
	for i, typ := range []LeaseEventType{LeaseAcquired, LeaseReleased, LeaseLost, ShardEnded} {
		Emit(h, on, typ, kltype.LeaseInfo{Stream: "s", ShardID: string(rune('a' + i))})
	}
	if want := []string{"acquired a", "ended d"}; !slices.Equal(l.got, want) {
		t.Errorf("hooks told %v, want %v", l.got, want)
	}
	if len(events) != 4 || events[2] != (LeaseEvent{Type: LeaseLost, Stream: "s", ShardID: "c"}) {
		t.Errorf("events = %v", events)
	}
	if s := LeaseLost.String(); s != "lost" {
		t.Errorf("LeaseLost.String() = %q", s)
	}
	Emit(h, nil, LeaseAcquired, kltype.LeaseInfo{ShardID: "e"}) // no events func
}
