package shardlist

import (
	"context"
	"iter"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/plan"
	"github.com/kinesislease/kinesislease/internal/syncx"
	"github.com/kinesislease/kinesislease/leases"
)

// unit names one shard of one stream.
type unit = plan.Unit

// View is the member view the listing reads: this instance's
// membership.Member.
type View interface {
	// Incarnation returns this process's current incarnation id.
	Incarnation() string
	// Live returns the latest entry of every owner the plan spreads the
	// shards over at now (mono), sorted by owner, this instance's
	// included.
	Live(now int64) []leases.Member
	// Latest returns the entry of owner as last read, and whether one was.
	Latest(owner string) (leases.Member, bool)
	// EndedMoves returns when (mono) each member's Ended count was last
	// seen moving, as of now, forgetting the moves older than keep.
	EndedMoves(now int64, keep time.Duration) map[string]int64
}

// Host is the Group as the listing sees it: its streams, what it knows of
// their rows, what it holds and its plan; and what the Group does of a
// listing. The listing calls it from the round goroutine only.
type Host interface {
	// Subscribed yields the keys of the streams subscribed and not being
	// removed, in subscription order.
	Subscribed() iter.Seq[string]
	// Stream returns the listing of the stream keyed key, and whether the
	// Group has it (a stream being removed included); an empty one if not.
	Stream(key string) (*Stream, bool)
	// Row returns the owner the row of u names and whether the row is
	// done (at its shard's end with no rewind pending), as this instance
	// last read or wrote it.
	Row(u plan.Unit) (owner string, done bool)
	// Unread reports whether the row of u is still unread since the first
	// listing.
	Unread(u plan.Unit) bool
	// Holds reports whether this instance runs a worker on u.
	Holds(u plan.Unit) bool
	// PlanMembers returns the live owners the plan spreads this
	// instance's streams over at now (mono).
	PlanMembers(now int64) []string
	// Planned returns the owner the last plan gave u to ("": none).
	Planned(u plan.Unit) string
	// ShardsListed does the rows' side of a listing of the stream keyed
	// key applied (its Shards and Order set): after the first (old nil),
	// the rows unread; after another, the rows of the new shards created
	// (PollSoon). An error fails the listing.
	ShardsListed(ctx context.Context, key string, old map[string]types.Shard) error
	// ListingDone is told the outcome of a listing of the stream keyed
	// key: nil once applied, else why it failed (its Stream's Failure is
	// the engine's to set).
	ListingDone(ctx context.Context, key string, err error)
	// Background runs fn in the background with Run's context (Run waits
	// for it before it drains), then has the round loop run a round.
	Background(fn func(ctx context.Context))
}

// Config configures a State. Every duration is set (the engine's defaults
// apply before).
type Config struct {
	Owner             string        // this instance's owner id
	Heartbeat         time.Duration // the membership heartbeat interval
	Timeout           time.Duration // the membership timeout
	ShardSyncInterval time.Duration // how often a lister lists its streams
	MaxLeases         int           // the plan's cap on the leases a member holds
	// Store bumps this instance's membership row (Announce).
	Store leases.Membership
	Log   *slog.Logger // already carrying the owner
	View  View         // the member view (this instance's membership.Member)
	Host  Host         // the Group
}

// State is the listing of each stream by one lister (round goroutine,
// but for Digest): lists by stream key; listerOf each stream's lister,
// chosen from listerCand over listerKeys; listingPub what this instance's
// entry publishes (read by the heartbeat loop); bumpedEnded and
// bumpedListing its entry's Ended and Listing as last announced by a bump
// of its row; parentRead when (mono) this instance last read each open
// parent's row for the engine's readBehind; pollSoon: a listing found new
// children, poll their parents at the next round; shadow the planner of
// shadowPlan; plannedOpen the shards the round's plan gave this instance
// to take, not known at their end (FoundEnded).
type State struct {
	cfg                    Config
	lists                  map[string]*listState
	listerOf               map[string]string
	listerCand, listerKeys []string
	listingPub             atomic.Pointer[string]
	bumpedEnded            int64
	bumpedListing          string
	parentRead             map[unit]int64
	pollSoon               bool
	shadow                 plan.Planner
	plannedOpen            map[unit]bool
}

// New returns the listing state of a Group, nothing listed yet.
func New(cfg Config) *State { return &State{cfg: cfg} }

// listState is what this instance knows of the listing of one stream
// (round goroutine).
type listState struct {
	// digest is that of the shard set of this instance's last listing
	// (shardDigest); "" before the first.
	digest string
	// kids maps each listed shard to its children (nil after a listing
	// until Children needs it).
	kids map[string][]string
	// lister is the stream's lister in this instance's view ("": none),
	// and seenAt when its digest of the stream was last seen in its entry
	// (mono; since it became the lister until it is).
	lister string
	seenAt int64
	// actedOn is the lister's digest as it stood when this instance last
	// listed, or decided to: a listing answers any digest published
	// before it.
	actedOn string
	// due: a listing is due at dueAt (mono), the lister's digest having
	// changed to one that differs from this instance's.
	due   bool
	dueAt int64
	// othersEnded: a member's Ended count moved since the last listing.
	othersEnded bool
	// retry: the last listing failed; the next round lists again.
	retry bool
}

// listState returns the listing state of the stream keyed key.
func (s *State) listState(key string) *listState {
	ls := s.lists[key]
	if ls == nil {
		ls = &listState{}
		syncx.PutIn(&s.lists, key, ls)
	}
	return ls
}

// Digest is what this instance's membership entry publishes of the
// streams it lists (leases.Member.Listing). Any goroutine may call it.
func (s *State) Digest() string {
	if l := s.listingPub.Load(); l != nil {
		return *l
	}
	return ""
}
