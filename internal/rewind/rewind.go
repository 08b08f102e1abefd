// Package rewind moves the checkpoints of a stream's shards while services
// read them: what kinesislease.Service.Rewind and `kinesislease rewind`
// share. It finds every shard's new position first (Resolve), so that a bad
// position or a failed read leaves every row as it was, then rewrites each
// row through the lease store's conditional writes (Apply): a free row at
// once, a held row by a request its holder applies, told through its
// membership entry.
package rewind

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/backoff"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
	"github.com/kinesislease/kinesislease/leases/driver"
)

// Store is the part of a lease store a rewind uses: the row of each shard,
// and the membership rows, to tell a holder. Both stores of this module
// implement it, as does every store the consumer runs on.
type Store interface {
	Get(ctx context.Context, key leases.Key) (leases.Lease, error)
	Create(ctx context.Context, key leases.Key) (leases.Lease, error)
	Rewind(ctx context.Context, l leases.Lease, cp leases.Checkpoint) (leases.Lease, error)
	Members(ctx context.Context, row int) ([]leases.Member, error)
	ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error)
}

// Pick returns the shard of shards named id, or an error matching
// kltype.ErrShardNotFound that names the stream and its shards.
func Pick(stream string, shards []types.Shard, id string) ([]types.Shard, error) {
	ids := make([]string, 0, len(shards))
	for _, sh := range shards {
		if aws.ToString(sh.ShardId) == id {
			return []types.Shard{sh}, nil
		}
		ids = append(ids, aws.ToString(sh.ShardId))
	}
	return nil, fmt.Errorf("%w: stream %q has no shard %s (its shards: %s; a shard whose records all aged out is no longer listed)",
		kltype.ErrShardNotFound, stream, id, strings.Join(ids, ", "))
}

// Plan is where one shard's checkpoint goes.
type Plan struct {
	// Shard is the shard id.
	Shard string
	// Closed: the shard was closed by a split or merge.
	Closed bool
	// To is the checkpoint the row gets.
	To leases.Checkpoint
	// Arrival, for a time, is when the first record at or after it arrived
	// (To names it); zero when none was found.
	Arrival time.Time
	// Note says how a time was resolved, for people.
	Note string
	// NothingAfter: the shard is closed and holds no record at or after
	// the position, so there is nothing to replay.
	NothingAfter bool
}

// concurrency bounds the shards resolved at once.
const concurrency = 8

// Resolve finds, for every shard, the checkpoint that makes it read from
// to: TRIM_HORIZON and LATEST as they are, a sequence number once Kinesis
// confirmed it is one of the shard (else a *kltype.PositionError), a time
// as the first record at or after it (or the time itself when there is
// none yet). It writes nothing. Errors name the stream and the shard.
func Resolve(ctx context.Context, kin kinesisx.Reader, stream string, shards []types.Shard, to kltype.StartPosition) ([]Plan, error) {
	plans := make([]Plan, len(shards))
	errs := make([]error, len(shards))
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i, sh := range shards {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			plans[i], errs[i] = resolve(ctx, kin, stream, sh, to)
		})
	}
	wg.Wait()
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

func resolve(ctx context.Context, kin kinesisx.Reader, stream string, sh types.Shard, to kltype.StartPosition) (Plan, error) {
	p := Plan{Shard: aws.ToString(sh.ShardId)}
	p.Closed = sh.SequenceNumberRange != nil && sh.SequenceNumberRange.EndingSequenceNumber != nil
	switch to.Type {
	case kltype.PositionTrimHorizon:
		p.To = leases.Checkpoint{Sequence: leases.RewindTrimHorizon}
	case kltype.PositionLatest:
		p.To = leases.Checkpoint{Sequence: leases.RewindLatest}
		p.NothingAfter = p.Closed
	case kltype.PositionAtSequenceNumber, kltype.PositionAfterSequenceNumber:
		// The iterator exists only for a sequence number of this shard.
		_, err := kin.GetShardIterator(ctx, kinesisx.IteratorInput(stream, p.Shard, to))
		if err != nil {
			var (
				invalid  *types.InvalidArgumentException
				notFound *types.ResourceNotFoundException
			)
			// Kinesis answers InvalidArgumentException; kinesis-mock
			// ResourceNotFoundException (the shard exists: ListShards listed it).
			if errors.As(err, &invalid) || errors.As(err, &notFound) {
				return p, &kltype.PositionError{Stream: stream, ShardID: p.Shard, Position: to, Err: err}
			}
			return p, shardErr(stream, p.Shard, "GetShardIterator "+to.String(), err)
		}
		p.To = leases.RewindAtSequence(to.Sequence)
		if to.Type == kltype.PositionAfterSequenceNumber {
			p.To = leases.Checkpoint{Sequence: to.Sequence} // a checkpoint resumes after it
		}
	case kltype.PositionAtTimestamp:
		rec, complete, err := firstAtOrAfter(ctx, kin, stream, p.Shard, to)
		if err != nil {
			return p, err
		}
		at := to.Time.UTC().Format(time.RFC3339Nano)
		switch {
		case rec != nil:
			p.To = leases.RewindAtSequence(aws.ToString(rec.SequenceNumber))
			p.Arrival = aws.ToTime(rec.ApproximateArrivalTimestamp)
			p.Note = fmt.Sprintf(" [the first record at or after %s arrived %s]", at, p.Arrival.UTC().Format(time.RFC3339Nano))
		case complete:
			// No record at or after the time yet: every record that arrives
			// from now on is after it, including those that arrive before
			// the holder applies the rewind (LATEST would skip those).
			p.To = leases.RewindAtTimestamp(to.Time)
			p.NothingAfter = p.Closed
			p.Note = fmt.Sprintf(" [no record at or after %s yet: the shard is read from that time]", at)
		default:
			p.To = leases.RewindAtTimestamp(to.Time)
			p.Note = fmt.Sprintf(" [the first record at or after %s was not found in %d reads: the shard is read from that time]", at, maxTimeReads)
		}
	default:
		return p, fmt.Errorf("rewind: unknown position %v", to)
	}
	return p, nil
}

// shardErr names the stream and the shard in a Kinesis error of op.
func shardErr(stream, shard, op string, err error) error {
	return fmt.Errorf("stream %q, shard %s: %s: %w", stream, shard, op, err)
}

// firstAtOrAfter returns the first record of shard id that arrived at or
// after to.Time, or nil. complete reports whether the shard was read to its
// tip (or end) to learn that there is none.
func firstAtOrAfter(ctx context.Context, kin kinesisx.Reader, stream, id string, to kltype.StartPosition) (rec *types.Record, complete bool, err error) {
	it, err := kin.GetShardIterator(ctx, kinesisx.IteratorInput(stream, id, to))
	if err != nil {
		var invalid *types.InvalidArgumentException
		if errors.As(err, &invalid) {
			return nil, false, &kltype.PositionError{Stream: stream, ShardID: id, Position: to, Err: err}
		}
		return nil, false, shardErr(stream, id, "GetShardIterator AT_TIMESTAMP", err)
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
		out, err := kin.GetRecords(ctx, kinesisx.GetRecordsInput(stream, aws.ToString(iter), 1))
		if err != nil {
			return nil, false, shardErr(stream, id, "GetRecords", err)
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

// attempts bounds the conditional writes tried on one row: a held row's
// counter moves at every checkpoint.
const attempts = 5

// Apply moves the checkpoint of shard p.Shard of stream through st, as p
// says (stream: a name or an ARN, whose rows are keyed by its name, or the
// stream part of a namespaced key, kinesisx.LeaseStream), or, with dry, finds what it would do and writes nothing. It reads
// the row, creates it if missing (free), and rewinds it: at once when
// free, by a request to its holder when held, whom it tells by bumping the
// Notice of the holder's membership entry. On a conflict (the row moved:
// a checkpoint, a take, a release) it reads the row again, up to 5 times.
// The store's errors are returned as they are.
func Apply(ctx context.Context, st Store, stream string, p Plan, dry bool) (kltype.RewindResult, error) {
	key := leases.Key{Stream: kinesisx.Name(stream), Shard: p.Shard}
	res := kltype.RewindResult{ShardID: p.Shard, To: p.To, Arrival: p.Arrival}
	var lastErr error
	for attempt := 1; attempt <= attempts; attempt++ {
		if attempt > 1 {
			if err := backoff.Sleep(ctx, time.Duration(attempt-1)*50*time.Millisecond+rand.N(50*time.Millisecond)); err != nil {
				return res, err
			}
		}
		res.Created = false
		l, err := st.Get(ctx, key)
		if errors.Is(err, leases.ErrNotFound) {
			res.Created = true
			if dry {
				return res, nil
			}
			// As an instance would: a conditional write on a missing row,
			// free and recovered where the store can (the row may have
			// vanished under a holder that still delivers: nobody reads it
			// before the recovery wait; see leases.Lease.Recovered).
			if mem, ok := st.(interface {
				CreateAs(ctx context.Context, key leases.Key, owner, incarnation string, cp leases.Checkpoint, rewind string) (leases.Lease, error)
			}); ok {
				l, err = mem.CreateAs(ctx, key, "", "", leases.Checkpoint{}, "")
			} else {
				l, err = st.Create(ctx, key)
			}
			if errors.Is(err, leases.ErrConflict) {
				lastErr = err
				continue // created meanwhile: read it
			}
		}
		if err != nil {
			return res, err
		}
		res.From, res.Replaced = l.Checkpoint, l.RewindTo
		if p.NothingAfter && !l.Held() && l.Checkpoint.Sequence == leases.ShardEnd && l.RewindTo.IsZero() {
			res.Unchanged = true
			return res, nil
		}
		if dry {
			res.Holder = l.Owner // "" when free
			return res, nil
		}
		nl, err := st.Rewind(ctx, l, p.To)
		if errors.Is(err, leases.ErrConflict) {
			lastErr = err
			continue // taken, released or checkpointed meanwhile: read it again
		}
		if err != nil {
			return res, err
		}
		if !nl.Held() {
			return res, nil
		}
		res.Holder = nl.Owner
		// The holder writes its row only to checkpoint: tell it through its
		// membership entry.
		res.NotifyErr = Notify(ctx, st, nl.Owner, nl.Incarnation)
		return res, nil
	}
	return res, fmt.Errorf("the row kept changing (%d attempts); try again: %w", attempts, lastErr)
}

// Members is the part of a store Notify needs.
type Members interface {
	Members(ctx context.Context, row int) ([]leases.Member, error)
	ReplaceMember(ctx context.Context, row int, seen, next leases.Member) ([]leases.Member, error)
}

// Notify bumps the Notice of owner's membership entry (incarnation inc),
// so that the holder looks at its rows at its next heartbeat. An entry gone
// or of another incarnation needs no notice: the row's next holder applies
// the rewind before reading.
func Notify(ctx context.Context, st Members, owner, inc string) error {
	row, ok := driver.IncarnationRow(inc)
	if !ok {
		return nil // an earlier version's holder: the next holder applies it
	}
	var err error
	for range attempts {
		var ms []leases.Member
		if ms, err = st.Members(ctx, row); err != nil {
			return err
		}
		i := slices.IndexFunc(ms, func(m leases.Member) bool { return m.Owner == owner && m.Incarnation == inc })
		if i < 0 {
			return nil
		}
		next := ms[i]
		next.Notice++
		if _, err = st.ReplaceMember(ctx, row, ms[i], next); !errors.Is(err, leases.ErrConflict) {
			return err
		}
	}
	return err
}
