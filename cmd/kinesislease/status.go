package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// shardStatus is one line of `status`, and one object of `status --json`
// (the JSON field names are stable).
type shardStatus struct {
	ShardID string `json:"shard_id"`
	// RowExists is false for a shard no instance has created a row for yet.
	RowExists bool `json:"row_exists"`
	// Owner holds the lease; "" when it is free.
	Owner string `json:"owner"`
	// Incarnation is the holder's process (one per run of the owner); ""
	// when free.
	Incarnation string `json:"incarnation"`
	Counter     int64  `json:"counter"`
	// Checkpoint is a sequence number, SHARD_END, a position written by a
	// rewind and not yet replaced (TRIM_HORIZON, LATEST,
	// AT_SEQUENCE_NUMBER:<seq>, AT_TIMESTAMP:<unix ms>), or "" (none).
	Checkpoint  string `json:"checkpoint"`
	SubSequence int64  `json:"sub_sequence"`
	// CheckpointPending: Checkpoint is such a rewind position.
	CheckpointPending bool `json:"checkpoint_pending"`
	// ShardEnd: the row's checkpoint is SHARD_END (read to its end).
	ShardEnd bool `json:"shard_end"`
	// Closed: the stream closed the shard (a split or merge); its records
	// are still readable until they age out.
	Closed  bool     `json:"closed"`
	Parents []string `json:"parents"`
	// PendingRewind is a rewind an operator asked the holder for, "" if none.
	PendingRewind string `json:"pending_rewind"`
	// LagMs is how far the checkpoint is behind the tip of the shard
	// (GetRecords' MillisBehindLatest read right after the checkpoint);
	// null for a shard at SHARD_END, or when it could not be read.
	LagMs *int64 `json:"lag_ms"`
	// CaughtUp: no record follows the checkpoint. LagMs is 0 both when
	// caught up and when the one record left is the newest of the shard.
	CaughtUp *bool  `json:"caught_up"`
	LagError string `json:"lag_error,omitempty"`
	// BytesPerSecond and RecordsPerSecond are the shard's throughput as
	// its holder last wrote it on the row (a decayed average over about a
	// minute, written with its checkpoints and its release); 0 when the
	// row holds none.
	BytesPerSecond   int64 `json:"bytes_per_s"`
	RecordsPerSecond int64 `json:"records_per_s"`

	rewindTo leases.Checkpoint // PendingRewind, for the text output
}

const statusSynopsis = "status --table <value> --stream <value> [--lease-namespace <value>] [--json] [global options]"

func (c *cli) status(args []string) int {
	cmd := commandNamed("status")
	g := globals{namespaced: true}
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	g.register(fs)
	asJSON := fs.Bool("json", false, "")
	if done, code := c.parse(cmd, fs, args); done {
		return code
	}
	if err := g.check(); err != nil {
		return c.usageError(cmd, err.Error())
	}
	s, err := c.connect(&g)
	if err != nil {
		return c.fail("status", err)
	}
	defer s.close()
	rows, lagErr, err := s.status(c.ctx)
	if err != nil {
		return c.fail("status", err)
	}
	if *asJSON {
		err = writeJSON(c.stdout, rows)
	} else {
		err = writeTable(c.stdout, rows)
	}
	if err != nil {
		return c.fail("status", err)
	}
	if lagErr != nil {
		// Everything else was printed; say why a lag is missing.
		return c.fail("status", lagErr)
	}
	return exitOK
}

// statusConcurrency bounds the shards read at once.
const statusConcurrency = 8

// eachShard calls fn for every shard, statusConcurrency at a time, and
// returns when every call has.
func eachShard(shards []ktypes.Shard, fn func(i int, sh ktypes.Shard)) {
	sem := make(chan struct{}, statusConcurrency)
	var wg sync.WaitGroup
	for i, sh := range shards {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			fn(i, sh)
		})
	}
	wg.Wait()
}

// status reads every shard's row and lag. A row that cannot be read fails
// the whole status (err); a lag that cannot be measured is reported in its
// line and returned as lagErr.
func (s *session) status(ctx context.Context) (rows []shardStatus, lagErr, err error) {
	shards, err := s.listShards(ctx)
	if err != nil {
		return nil, nil, err
	}
	rows = make([]shardStatus, len(shards))
	errs := make([]error, len(shards))
	lagErrs := make([]error, len(shards))
	eachShard(shards, func(i int, sh ktypes.Shard) { rows[i], errs[i], lagErrs[i] = s.shardStatus(ctx, sh) })
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	for _, err := range lagErrs {
		if err != nil {
			return rows, err, nil
		}
	}
	return rows, nil, nil
}

func (s *session) shardStatus(ctx context.Context, sh ktypes.Shard) (st shardStatus, err, lagErr error) {
	id := aws.ToString(sh.ShardId)
	st = shardStatus{
		ShardID: id,
		Parents: kinesisx.Parents(sh),
		Closed:  sh.SequenceNumberRange != nil && sh.SequenceNumberRange.EndingSequenceNumber != nil,
	}
	l, err := s.store.Get(ctx, leases.Key{Stream: s.key, Shard: id})
	switch {
	case errors.Is(err, leases.ErrNotFound):
	case errors.Is(err, leases.ErrMisconfigured):
		// The table itself: the store's message names it and says what to do.
		return st, fmt.Errorf("%s: reading the lease rows: %w", s.streamRows(), err), nil
	case err != nil:
		return st, s.rowErr(id, err), nil
	default:
		st.RowExists = true
		st.Owner = l.Owner
		st.Incarnation = l.Incarnation
		st.Counter = l.Counter
		st.Checkpoint = l.Checkpoint.Sequence
		st.SubSequence = l.Checkpoint.SubSequence
		st.CheckpointPending = isRewindPosition(l.Checkpoint.Sequence)
		st.ShardEnd = l.Checkpoint.Sequence == leases.ShardEnd
		st.PendingRewind = l.RewindTo.String()
		st.rewindTo = l.RewindTo
		st.BytesPerSecond, st.RecordsPerSecond = l.Throughput.BytesPerSecond, l.Throughput.RecordsPerSecond
	}
	if st.ShardEnd {
		return st, nil, nil
	}
	lag, caughtUp, err := s.lag(ctx, id, l.Checkpoint)
	if err != nil {
		st.LagError = err.Error()
		return st, nil, err
	}
	st.LagMs, st.CaughtUp = &lag, &caughtUp
	return st, nil, nil
}

// lag returns how far checkpoint cp of shard id is behind the tip of the
// shard: the MillisBehindLatest of one GetRecords (Limit 1) read right after
// cp (from TRIM_HORIZON without a checkpoint), and whether no record
// follows cp.
func (s *session) lag(ctx context.Context, id string, cp leases.Checkpoint) (ms int64, caughtUp bool, err error) {
	pos, ok := kinesisx.PositionAfter(cp)
	if !ok {
		pos = kltype.TrimHorizon
	}
	it, err := s.kin.GetShardIterator(ctx, kinesisx.IteratorInput(s.stream, id, pos))
	if err != nil {
		return 0, false, s.kinesisErr(id, "measuring the lag: GetShardIterator "+pos.String(), err)
	}
	if it.ShardIterator == nil {
		return 0, true, nil // a closed shard read to its end
	}
	out, err := s.getRecords(ctx, it.ShardIterator, 1)
	if err != nil {
		return 0, false, s.kinesisErr(id, "measuring the lag: GetRecords", err)
	}
	return aws.ToInt64(out.MillisBehindLatest), len(out.Records) == 0, nil
}

// isRewindPosition reports whether a checkpoint is a position a rewind
// wrote, which the next record's sequence number replaces.
func isRewindPosition(seq string) bool {
	return seq == leases.RewindTrimHorizon || seq == leases.RewindLatest ||
		strings.HasPrefix(seq, leases.AtSequencePrefix) || strings.HasPrefix(seq, leases.AtTimestampPrefix)
}

// showCheckpoint renders a checkpoint for people: "-" for none, and an
// AT_TIMESTAMP position as an RFC 3339 time.
func showCheckpoint(cp leases.Checkpoint) string {
	if cp.IsZero() {
		return "-"
	}
	if ms, ok := strings.CutPrefix(cp.Sequence, leases.AtTimestampPrefix); ok {
		if n, err := strconv.ParseInt(ms, 10, 64); err == nil {
			return leases.AtTimestampPrefix + time.UnixMilli(n).UTC().Format("2006-01-02T15:04:05.000Z07:00")
		}
	}
	return cp.String()
}

func showLag(st shardStatus) string {
	switch {
	case st.ShardEnd:
		return "-"
	case st.LagMs == nil:
		return "?"
	}
	return (time.Duration(*st.LagMs) * time.Millisecond).String()
}

// showRate renders a rate for people: "-" for none, else to three
// significant digits with an SI prefix (850, 12.3k, 1.2M).
func showRate(v int64) string {
	if v <= 0 {
		return "-"
	}
	f, prefix := float64(v), ""
	for _, p := range []string{"k", "M", "G", "T"} {
		if f < 999.5 {
			break
		}
		f, prefix = f/1000, p
	}
	digits := 0
	switch {
	case prefix == "":
	case f < 9.995:
		digits = 2
	case f < 99.95:
		digits = 1
	}
	s := strconv.FormatFloat(f, 'f', digits, 64)
	if digits > 0 {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + prefix
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// statusHeader names the columns of the text output.
var statusHeader = []string{"SHARD", "OWNER", "INCARNATION", "COUNTER", "CHECKPOINT", "SHARD_END", "PARENTS", "REWIND", "LAG", "BYTES/S", "RECORDS/S"}

func writeTable(w io.Writer, rows []shardStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(statusHeader, "\t"))
	for _, st := range rows {
		counter := "-"
		if st.RowExists {
			counter = strconv.FormatInt(st.Counter, 10)
		}
		end := "no"
		if st.ShardEnd {
			end = "yes"
		}
		rewind := showCheckpoint(st.rewindTo)
		fmt.Fprintln(tw, strings.Join([]string{
			st.ShardID,
			dash(st.Owner),
			dash(st.Incarnation),
			counter,
			showCheckpoint(leases.Checkpoint{Sequence: st.Checkpoint, SubSequence: st.SubSequence}),
			end,
			dash(strings.Join(st.Parents, ",")),
			rewind,
			showLag(st),
			showRate(st.BytesPerSecond),
			showRate(st.RecordsPerSecond),
		}, "\t"))
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, rows []shardStatus) error {
	if rows == nil {
		rows = []shardStatus{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}
