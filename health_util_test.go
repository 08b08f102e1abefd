package kinesislease_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kinesislease/kinesislease"
	"github.com/kinesislease/kinesislease/kinesisfake"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/memory"
)

// peersStore is a memory store whose membership reads show, beside the
// entry of owner, peers: live members (their heartbeat advances at every
// read) of capacity 1 that publish the load owner's entry publishes and
// utilization util (thousandths). They hold no lease.
type peersStore struct {
	*memory.Store
	owner string
	peers int
	util  int64
	beat  atomic.Int64
}

// with returns ms and, when owner's entry is among them, the peers.
func (s *peersStore) with(ms []leases.Member, err error) ([]leases.Member, error) {
	if err != nil {
		return ms, err
	}
	for _, m := range ms {
		if m.Owner != s.owner {
			continue
		}
		hb := s.beat.Add(1)
		for i := range s.peers {
			ms = append(ms, leases.Member{Owner: fmt.Sprintf("peer-%d", i), Incarnation: fmt.Sprintf("0.peer%d", i), Heartbeat: hb,
				Capacity: 1000, Load: m.Load, Utilization: s.util})
		}
		break
	}
	return ms, nil
}

func (s *peersStore) Join(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	return s.with(s.Store.Join(ctx, row, m))
}

func (s *peersStore) Heartbeat(ctx context.Context, row int, m leases.Member) ([]leases.Member, error) {
	return s.with(s.Store.Heartbeat(ctx, row, m))
}

func (s *peersStore) Members(ctx context.Context, row int) ([]leases.Member, error) {
	return s.with(s.Store.Members(ctx, row))
}

var _ leases.MembershipStore = (*peersStore)(nil)

// TestHealthBalanceUtilization: an instance of capacity 3 with
// WithUtilization (0.5) among three members of capacity 1 that publish
// the same load and a utilization of 0.375: its cost per byte (0.5 × 3)
// is 4 times theirs, 2.29 times the fleet's, so Health().Balance shows
// the utilization it published, 0.5, its cost as the plan computes it,
// 2.3, and its fair share corrected by it: 3/2.3 (1304 thousandths, as the
// plan counts it) over 1304 + 3 × 1000, not 3/6. (A tolerance of 10 keeps
// the shard where the count plan puts it, on this instance, so that its
// load stays published.)
func TestHealthBalanceUtilization(t *testing.T) {
	t.Parallel()
	k := kinesisfake.New()
	if err := k.CreateStream("orders", 1); err != nil {
		t.Fatal(err)
	}
	store := &peersStore{Store: memory.New(), owner: "costly", peers: 3, util: 375}
	svc, err := kinesislease.New(aws.Config{},
		kinesislease.WithKinesisClient(k),
		kinesislease.WithLeaseStore(store),
		kinesislease.WithOwner("costly"),
		kinesislease.WithCapacity(3),
		kinesislease.WithBalance(kinesislease.ByThroughput{Tolerance: 10}),
		kinesislease.WithUtilization(func() float64 { return 0.5 }),
		kinesislease.WithHeartbeat(50*time.Millisecond, 300*time.Millisecond),
		kinesislease.WithLogger(testLogger(t)),
	)
	if err != nil {
		t.Fatal(err)
	}
	handled := make(chan struct{}, 100)
	err = kinesislease.Subscribe(svc, "orders", func(context.Context, Order) error { handled <- struct{}{}; return nil },
		kinesislease.WithStartPosition(kltype.TrimHorizon), kinesislease.WithPolling(10*time.Millisecond, 20*time.Millisecond, 0))
	if err != nil {
		t.Fatal(err)
	}
	if b := svc.Health().Balance; b.Utilization != 0 || b.Cost != 0 || b.Members != 0 {
		t.Errorf("Health().Balance before Run: %+v, want no utilization, cost nor members", b)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	for i := range 20 {
		if err := kinesislease.Publish(ctx, svc, "orders", "customer-1", Order{ID: fmt.Sprintf("order-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		<-handled
	}
	deadline := time.Now().Add(20 * time.Second)
	b := svc.Health().Balance
	for ; b.Members != 4 || b.Load == 0 || b.FleetLoad != 4*b.Load; b = svc.Health().Balance {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s, no load published beside the peers': %+v", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("Health().Balance: %+v", b)
	if b.Utilization != 0.5 || b.Cost != 2.3 || b.FairShare != 1304.0/4304 || b.Share != 0.25 || b.Legacy {
		t.Errorf("Health().Balance %+v: want utilization 0.5, cost 2.3, fair share %v, share 0.25", b, 1304.0/4304)
	}
}
