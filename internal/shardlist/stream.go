package shardlist

// The listing of one stream (Stream): its shards as last listed, the
// ListShards call in flight in the background (list) and its answer
// applied (apply); and the round's listing of every stream that is due
// (Sync).

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
)

// Stream is the listing of one stream of the Group: its shards as its last
// listing left them, the listing in flight, and the stream's own failure.
// The engine's state of the stream holds one (NewStream); the round
// goroutine writes it, but for Failure (see there), and the calls a round
// runs read it.
type Stream struct {
	// name is the stream as subscribed (a name or an ARN), for the calls
	// to Kinesis, which client makes (ListShards).
	name   string
	client kinesisx.Reader
	// Shards are the shards listed, by id (nil before the first listing),
	// and Order their ids in ListShards' order.
	Shards map[string]types.Shard
	Order  []string
	// LastSync is when the last listing applied was sent.
	LastSync time.Time
	// resync: this instance's own shard of the stream ended since the
	// last listing (Resync).
	resync bool
	// listed: the answer of the listing in flight (list), nil when none
	// is.
	listed chan listing
	// Failure is the stream's own (ListShards failed for good): the
	// engine sets it (Host.ListingDone) under the lock its Health reads it
	// under.
	Failure Failure
}

// NewStream returns the listing of the stream subscribed as name (a name
// or an ARN), listed through client, nothing listed yet.
func NewStream(name string, client kinesisx.Reader) *Stream {
	return &Stream{name: name, client: client}
}

// Resync has the next round list the stream again (this instance's own
// shard of it ended).
func (st *Stream) Resync() { st.resync = true }

// Failure is a shard or stream set aside after failing for good: it is
// tried again at Until.
type Failure struct {
	N     int // failures in a row
	Until time.Time
	Err   error
}

// Waiting reports whether f still sets its shard or stream aside.
func (f *Failure) Waiting(now time.Time) bool { return f != nil && now.Before(f.Until) }

// listing is the answer of a ListShards of a stream (every page), sent at
// sent.
type listing struct {
	shards []types.Shard
	err    error
	sent   time.Time
}

// Sync lists the shards of every stream that is due (due: the first
// round; this instance's own shard ended; for the stream's lister, every
// ShardSyncInterval and after a shard ended at another member; for the
// others, once its lister's digest of the shard set changes to one that
// differs from theirs), and publishes what it lists for the others
// (publish; see the package comment). ended: a member's Ended count moved
// since the last round; mine: the digest of this instance's streams
// (choose).
func (s *State) Sync(ctx context.Context, ended bool, mine string) {
	s.choose(mine)
	now := time.Now()
	s.prune() // removed
	for key := range s.cfg.Host.Subscribed() {
		st, _ := s.cfg.Host.Stream(key)
		s.othersEnded(key, ended)
		if st.listed != nil {
			select {
			case res := <-st.listed:
				st.listed = nil
				s.apply(ctx, key, st, res)
			default:
				continue // still listing: the round goes on with the shards it knows
			}
		}
		if !st.Failure.Waiting(now) && s.due(key, st.Shards == nil || st.resync || st.Failure.N > 0) {
			s.list(key, st)
		}
	}
	s.publish()
}

// listTimeout bounds a background listing of a stream's shards (every
// page, with the client's retries), when the timeout is shorter.
const listTimeout = 30 * time.Second

// list lists st's shards in the background: ListShards may take seconds
// (throttled, paged, slow), and the round's reads, takes and releases,
// which keep a vanished row's sightings close enough together to join and
// the plan's moves on time, must not wait on it. The round that finds the
// answer applies it (apply); the answer kicks one at once
// (Host.Background).
func (s *State) list(key string, st *Stream) {
	ch := make(chan listing, 1)
	st.listed = ch
	st.resync = false // asked for before this listing: it answers that
	s.listingNow(key)
	sent := time.Now()
	s.cfg.Host.Background(func(ctx context.Context) {
		// No round waits on it, so it is bounded by listTimeout rather
		// than the lease timeout: a listing slower than the timeout (a
		// loaded kinesis-local took over 600 ms a call for 30 s, the test
		// fleets' timeout) completes instead of being cancelled every time.
		lctx, cancel := context.WithTimeout(ctx, max(s.cfg.Timeout, listTimeout))
		defer cancel()
		shards, err := kinesisx.ListShards(lctx, st.client, st.name)
		ch <- listing{shards: shards, err: err, sent: sent}
	})
}

// apply applies the answer res of a listing of st, the stream keyed key
// (see list): it refreshes its shard list, has the engine do the rows'
// side (Host.ShardsListed), and tells the engine the outcome
// (Host.ListingDone).
func (s *State) apply(ctx context.Context, key string, st *Stream, res listing) {
	err := res.err
	if err == nil {
		old := st.Shards // nil before the first listing
		st.Shards, st.Order = ShardMap(res.shards, st.Order)
		st.LastSync = res.sent
		s.noteListed(key, st.Order)
		err = s.cfg.Host.ShardsListed(ctx, key, old)
	}
	s.retry(key, err != nil)
	s.cfg.Host.ListingDone(ctx, key, err)
}
