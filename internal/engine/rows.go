package engine

// What each subscribed stream knows of its shards and their rows: its
// shards as listed, its rows and mark (rowbook.Book), and the shards set
// aside after failing; with the answer of its listing in flight (listing).

import (
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/lostrow"
	"github.com/kinesislease/kinesislease/internal/rowbook"
)

type streamState struct {
	cfg StreamConfig
	// key is the stream's identity in the lease table: its name, however
	// it was subscribed (a name or an ARN, cfg.Stream, used for the calls
	// to Kinesis). Units, rows and the plan use it.
	key      string
	log      *slog.Logger
	shards   map[string]types.Shard
	order    []string
	lastSync time.Time
	resync   bool
	// listed: the answer of the listing in flight (listAsync), nil when
	// none is.
	listed chan listing
	// book is what this instance knows of the stream's rows and its mark
	// (rowbook.Book), safe for a round's concurrent calls.
	book *rowbook.Book
	// removing: RemoveStream was called; removed get nil once every shard
	// of the stream is released.
	removing bool
	removed  []chan error
	// failed holds the shards set aside after failing for good, by shard
	// id; listing is the stream's own (ListShards failed for good).
	failed  map[string]*failure
	listing failure
}

// failure is a shard or stream set aside after failing for good: it is
// tried again at until.
type failure struct {
	n     int // failures in a row
	until time.Time
	err   error
}

// waiting reports whether f still sets its shard or stream aside.
func (f *failure) waiting(now time.Time) bool { return f != nil && now.Before(f.until) }

// listing is the answer of a ListShards of a stream (every page), sent at
// sent.
type listing struct {
	shards []types.Shard
	err    error
	sent   time.Time
}

// row is what this instance knows of the row of id (rowbook.Book.Row).
func (st *streamState) row(id string) lostrow.Row { return st.book.Row(id) }
