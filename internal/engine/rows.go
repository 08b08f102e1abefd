package engine

// What each subscribed stream knows of its shards and their rows: its
// listing (shardlist.Stream: its shards as listed, the listing in flight),
// its rows and mark (rowbook.Book), and the shards set aside after
// failing.

import (
	"log/slog"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/rowbook"
	"github.com/kinesislease/kinesislease/internal/shardlist"
)

type streamState struct {
	cfg StreamConfig
	// key is the stream's identity in the lease table: cfg.Key, else its
	// name however it was subscribed (a name or an ARN, cfg.Stream, used
	// for the calls to Kinesis). Units, rows and the plan use it.
	key string
	log *slog.Logger
	// list is the stream's listing (shardlist.Stream): its shards as
	// listed, the listing in flight, and the stream's own failure
	// (ListShards failed for good).
	list *shardlist.Stream
	// book is what this instance knows of the stream's rows and its mark
	// (rowbook.Book), safe for a round's concurrent calls.
	book *rowbook.Book
	// removing: RemoveStream was called; removed get nil once every shard
	// of the stream is released.
	removing bool
	removed  []chan error
	// failed holds the shards set aside after failing for good, by shard id.
	failed map[string]*failure
}

// failure is a shard or stream set aside after failing for good
// (shardlist.Failure).
type failure = shardlist.Failure

// row is what this instance knows of the row of id (rowbook.Book.Row).
func (st *streamState) row(id string) lostrow.Row { return st.book.Row(id) }
