package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

const rewindSynopsis = "rewind --table <value> --stream <value> --to <value> [--shard <value>] [--dry-run] [global options]"

// targetKind is what --to names.
type targetKind int

const (
	toTrimHorizon targetKind = iota
	toLatest
	toTime
	toSequence
)

// target is the parsed --to.
type target struct {
	kind targetKind
	t    time.Time // toTime
	seq  string    // toSequence
}

// parseTarget parses --to: TRIM_HORIZON, LATEST, an RFC 3339 time (not in
// the future) or a sequence number.
func parseTarget(s string, now time.Time) (target, error) {
	switch strings.ToUpper(s) {
	case leases.RewindTrimHorizon:
		return target{kind: toTrimHorizon}, nil
	case leases.RewindLatest:
		return target{kind: toLatest}, nil
	}
	if s != "" && len(s) <= 128 && strings.Trim(s, "0123456789") == "" {
		return target{kind: toSequence, seq: s}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return target{}, badArg("argument --to %q: want TRIM_HORIZON, LATEST, an RFC 3339 time (e.g. 2024-05-01T10:00:00Z) or a sequence number", s)
	}
	if t.After(now) {
		return target{}, badArg("argument --to %s: the time is in the future (it is %s): no record has arrived after it yet; to skip every record until new ones arrive, use --to LATEST",
			s, now.UTC().Format(time.RFC3339))
	}
	return target{kind: toTime, t: t}, nil
}

func (c *cli) rewind(args []string) int {
	cmd := commandNamed("rewind")
	var g globals
	fs := flag.NewFlagSet("rewind", flag.ContinueOnError)
	g.register(fs)
	to := fs.String("to", "", "")
	shardID := fs.String("shard", "", "")
	dry := fs.Bool("dry-run", false, "")
	if done, code := c.parse(cmd, fs, args); done {
		return code
	}
	var missing []string
	for _, a := range []struct{ name, v string }{{"--table", g.table}, {"--stream", g.stream}, {"--to", *to}} {
		if a.v == "" {
			missing = append(missing, a.name)
		}
	}
	if len(missing) > 0 {
		return c.usageError(cmd, "the following arguments are required: "+strings.Join(missing, ", "))
	}
	if err := g.check(); err != nil {
		return c.usageError(cmd, err.Error())
	}
	tg, err := parseTarget(*to, c.now())
	if err != nil {
		return c.fail("rewind", err)
	}
	if *shardID != "" {
		if _, err := leases.NewKey(g.stream, *shardID); err != nil {
			return c.fail("rewind", badArg("argument --shard %q: not a shard id", *shardID))
		}
	}
	if tg.kind == toSequence && *shardID == "" {
		return c.fail("rewind", badArg("argument --to %s: a sequence number belongs to one shard: name it with --shard", tg.seq))
	}
	s, err := c.connect(&g)
	if err != nil {
		return c.fail("rewind", err)
	}
	defer s.close()

	// Find every shard's new position before writing anything: a bad
	// argument or a failed read leaves every row as it was.
	shards, err := s.listShards(c.ctx)
	if err != nil {
		return c.fail("rewind", err)
	}
	if *shardID != "" {
		shards, err = s.pick(shards, *shardID)
		if err != nil {
			return c.fail("rewind", err)
		}
	}
	plans, err := s.resolveAll(c.ctx, shards, tg)
	if err != nil {
		return c.fail("rewind", err)
	}

	code := exitOK
	for _, p := range plans {
		msg, err := s.apply(c.ctx, p, *dry)
		if err != nil {
			var e error = s.rowErr(p.id, err)
			if errors.Is(err, leases.ErrMisconfigured) {
				e = fmt.Errorf("stream %q, shard %s: %w", s.stream, p.id, err) // the store's message names the table
			}
			if code == exitOK {
				code = c.fail("rewind", e)
			} else {
				c.fail("rewind", e)
			}
			if errors.Is(err, leases.ErrMisconfigured) || c.ctx.Err() != nil {
				break // the same for every row
			}
			continue
		}
		fmt.Fprintf(c.stdout, "%s: %s%s\n", p.id, msg, p.note)
	}
	return code
}

// pick returns the shard named id, or an error naming it and the stream.
func (s *session) pick(shards []ktypes.Shard, id string) ([]ktypes.Shard, error) {
	ids := make([]string, 0, len(shards))
	for _, sh := range shards {
		if aws.ToString(sh.ShardId) == id {
			return []ktypes.Shard{sh}, nil
		}
		ids = append(ids, aws.ToString(sh.ShardId))
	}
	return nil, &notFoundError{msg: fmt.Sprintf("stream %q has no shard %s (its shards: %s; a shard whose records all aged out is no longer listed)",
		s.stream, id, strings.Join(ids, ", "))}
}

// plan is where one shard's checkpoint goes.
type plan struct {
	id     string
	closed bool
	cp     leases.Checkpoint
	// note says how a time was resolved, for people.
	note string
	// nothingAfter: the shard holds no record at or after the position and
	// is closed, so there is nothing to replay.
	nothingAfter bool
}

// resolveAll resolves the target for every shard, a few shards at a time.
func (s *session) resolveAll(ctx context.Context, shards []ktypes.Shard, tg target) ([]plan, error) {
	plans := make([]plan, len(shards))
	errs := make([]error, len(shards))
	eachShard(shards, func(i int, sh ktypes.Shard) { plans[i], errs[i] = s.resolve(ctx, sh, tg) })
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return plans, nil
}

// maxTimeReads bounds the GetRecords calls that look for the first record
// at or after a time in one shard.
const maxTimeReads = 10

func (s *session) resolve(ctx context.Context, sh ktypes.Shard, tg target) (plan, error) {
	p := plan{id: aws.ToString(sh.ShardId)}
	p.closed = sh.SequenceNumberRange != nil && sh.SequenceNumberRange.EndingSequenceNumber != nil
	switch tg.kind {
	case toTrimHorizon:
		p.cp = leases.Checkpoint{Sequence: leases.RewindTrimHorizon}
	case toLatest:
		p.cp = leases.Checkpoint{Sequence: leases.RewindLatest}
		p.nothingAfter = p.closed
	case toSequence:
		// The iterator exists only for a sequence number of this shard.
		_, err := s.kin.GetShardIterator(ctx, kinesisx.IteratorInput(s.stream, p.id, kltype.AtSequenceNumber(tg.seq)))
		if err != nil {
			var (
				invalid  *ktypes.InvalidArgumentException
				notFound *ktypes.ResourceNotFoundException
			)
			// Kinesis answers InvalidArgumentException; kinesis-mock
			// ResourceNotFoundException (the shard exists: ListShards listed it).
			if errors.As(err, &invalid) || errors.As(err, &notFound) {
				return p, badArg("argument --to %s: not a sequence number of shard %s of stream %q: %v", tg.seq, p.id, s.stream, apiMessage(err))
			}
			return p, s.kinesisErr(p.id, "GetShardIterator AT_SEQUENCE_NUMBER", err)
		}
		p.cp = leases.RewindAtSequence(tg.seq)
	case toTime:
		rec, complete, err := s.firstAtOrAfter(ctx, p.id, tg.t)
		if err != nil {
			return p, err
		}
		at := tg.t.UTC().Format(time.RFC3339Nano)
		switch {
		case rec != nil:
			p.cp = leases.RewindAtSequence(aws.ToString(rec.SequenceNumber))
			p.note = fmt.Sprintf(" [the first record at or after %s arrived %s]", at,
				aws.ToTime(rec.ApproximateArrivalTimestamp).UTC().Format(time.RFC3339Nano))
		case complete:
			// No record at or after the time yet: every record that arrives
			// from now on is after it, including those that arrive before
			// the holder applies the rewind (LATEST would skip those).
			p.cp = leases.RewindAtTimestamp(tg.t)
			p.nothingAfter = p.closed
			p.note = fmt.Sprintf(" [no record at or after %s yet: the shard is read from that time]", at)
		default:
			p.cp = leases.RewindAtTimestamp(tg.t)
			p.note = fmt.Sprintf(" [the first record at or after %s was not found in %d reads: the shard is read from that time]", at, maxTimeReads)
		}
	}
	return p, nil
}

// firstAtOrAfter returns the first record of shard id that arrived at or
// after t, or nil. complete reports whether the shard was read to its tip
// (or end) to learn that there is none.
func (s *session) firstAtOrAfter(ctx context.Context, id string, t time.Time) (rec *ktypes.Record, complete bool, err error) {
	it, err := s.kin.GetShardIterator(ctx, kinesisx.IteratorInput(s.stream, id, kltype.AtTimestamp(t)))
	if err != nil {
		var invalid *ktypes.InvalidArgumentException
		if errors.As(err, &invalid) {
			return nil, false, badArg("argument --to %s: shard %s of stream %q: %v", t.UTC().Format(time.RFC3339Nano), id, s.stream, apiMessage(err))
		}
		return nil, false, s.kinesisErr(id, "GetShardIterator AT_TIMESTAMP", err)
	}
	iter := it.ShardIterator
	for i := 0; i < maxTimeReads && iter != nil; i++ {
		if i > 0 {
			// Kinesis allows 5 GetRecords per second per shard, shared with
			// the service reading it.
			if err := backoff.Sleep(ctx, 200*time.Millisecond); err != nil {
				return nil, false, err
			}
		}
		out, err := s.getRecords(ctx, iter, 1)
		if err != nil {
			return nil, false, s.kinesisErr(id, "GetRecords", err)
		}
		if len(out.Records) > 0 {
			return &out.Records[0], true, nil
		}
		if aws.ToInt64(out.MillisBehindLatest) == 0 {
			return nil, true, nil // at the tip
		}
		iter = out.NextShardIterator
	}
	return nil, iter == nil, nil // nil: the end of a closed shard
}

// rewindAttempts bounds the conditional writes tried on one row: a held
// row's counter moves at every checkpoint.
const rewindAttempts = 5

// apply moves one shard's checkpoint through the store, or, with dry, says
// what it would do. It reads the row, creates it if missing, and rewinds it:
// at once when free, by a request to its holder when held; on a conflict it
// reads the row again.
func (s *session) apply(ctx context.Context, p plan, dry bool) (string, error) {
	key := leases.Key{Stream: kinesisx.Name(s.stream), Shard: p.id}
	to := showCheckpoint(p.cp)
	var lastErr error
	for attempt := 1; attempt <= rewindAttempts; attempt++ {
		if attempt > 1 {
			if err := backoff.Sleep(ctx, time.Duration(attempt-1)*50*time.Millisecond+rand.N(50*time.Millisecond)); err != nil {
				return "", err
			}
		}
		l, err := s.store.Get(ctx, key)
		created := ""
		if errors.Is(err, leases.ErrNotFound) {
			if dry {
				return fmt.Sprintf("would create its row and rewrite it: - -> %s", to), nil
			}
			// As an instance would: a conditional write on a missing row.
			l, err = s.store.Create(ctx, key)
			if errors.Is(err, leases.ErrConflict) {
				lastErr = err
				continue // created meanwhile: read it
			}
			created = "row created, "
		}
		if err != nil {
			return "", err
		}
		from := showCheckpoint(l.Checkpoint)
		replacing := ""
		if !l.RewindTo.IsZero() {
			replacing = fmt.Sprintf(" (replacing the pending rewind to %s)", showCheckpoint(l.RewindTo))
		}
		if p.nothingAfter && !l.Held() && l.Checkpoint.Sequence == leases.ShardEnd && l.RewindTo.IsZero() {
			return fmt.Sprintf("unchanged: %s; the shard is closed and holds no record at or after %s", from, to), nil
		}
		if dry {
			if l.Held() {
				return fmt.Sprintf("would request from %s: %s -> %s%s", l.Owner, from, to, replacing), nil
			}
			return fmt.Sprintf("would rewrite (free): %s -> %s%s", from, to, replacing), nil
		}
		nl, err := s.store.Rewind(ctx, l, p.cp)
		if errors.Is(err, leases.ErrConflict) {
			lastErr = err
			continue // taken, released or checkpointed meanwhile: read it again
		}
		if err != nil {
			return "", err
		}
		if !nl.Held() {
			return fmt.Sprintf("%srewritten (free): %s -> %s%s", created, from, to, replacing), nil
		}
		if nl.Incarnation == "" {
			// A row held by an instance of an earlier release (the per-row
			// renewal protocol): it has no membership entry to tell.
			return fmt.Sprintf("requested from %s: %s -> %s%s; %s holds the row without an incarnation (an earlier release): "+
				"the next holder applies the rewind before reading", nl.Owner, from, to, replacing, nl.Owner), nil
		}
		// The holder writes its row only to checkpoint: tell it through its
		// membership entry.
		when := "it applies the rewind within a heartbeat"
		if err := s.notify(ctx, nl.Owner, nl.Incarnation); err != nil {
			when = fmt.Sprintf("it applies the rewind at its next checkpoint or reconciliation (telling it failed: %v)", err)
		}
		return fmt.Sprintf("requested from %s: %s -> %s%s; %s", nl.Owner, from, to, replacing, when), nil
	}
	return "", fmt.Errorf("the row kept changing (%d attempts); try again: %w", rewindAttempts, lastErr)
}

// notify bumps the Notice of owner's membership entry (incarnation inc),
// so that the holder looks at its rows at its next heartbeat. An entry gone
// or of another incarnation needs no notice: the row's next holder applies
// the rewind before reading.
func (s *session) notify(ctx context.Context, owner, inc string) error {
	row, ok := leases.IncarnationRow(inc)
	if !ok {
		return nil // an earlier version's holder: the next holder applies it
	}
	var err error
	for range rewindAttempts {
		var ms []leases.Member
		if ms, err = s.store.Members(ctx, row); err != nil {
			return err
		}
		i := slices.IndexFunc(ms, func(m leases.Member) bool { return m.Owner == owner && m.Incarnation == inc })
		if i < 0 {
			return nil
		}
		next := ms[i]
		next.Notice++
		if _, err = s.store.ReplaceMember(ctx, row, ms[i], next); !errors.Is(err, leases.ErrConflict) {
			return err
		}
	}
	return err
}

// apiMessage returns an AWS error's own message.
func apiMessage(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode() + ": " + apiErr.ErrorMessage()
	}
	return err.Error()
}
