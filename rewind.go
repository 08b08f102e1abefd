package kinesislease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/rewind"
	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/leases"
)

// Rewind moves where shard of stream is read from to position: every shard
// of the stream when shard is "". position is kltype.TrimHorizon,
// kltype.Latest, kltype.AtTimestamp(t) (per shard, the first record that
// arrived at or after t), or, with a shard named, kltype.AtSequenceNumber
// or kltype.AfterSequenceNumber of a record of that shard. It is what
// `kinesislease rewind` does, through the service's lease store and
// Kinesis client, and works whether or not this service runs, and whoever
// holds the shards:
//
//   - a free row's checkpoint is rewritten at once: its next holder reads
//     from position;
//   - a held row gets a rewind request, and its holder, told through its
//     membership entry, finishes the record in flight, moves its checkpoint
//     and reads on from position within a heartbeat or two, keeping its
//     lease: no restart, no second reader;
//   - a shard without a row gets one, free, at position.
//
// The position of every shard is found before any row is written, so a
// bad position or a failed read leaves every row as it was. Rows are then
// rewound one by one; the results are those of the rows rewound, sorted by
// shard id, and the error joins the failures of the others.
//
// Errors name the stream and the shard: ErrStreamNotFound for a stream
// Kinesis does not know, kltype.ErrShardNotFound for a shard it does not list,
// kltype.ErrPositionNotInShard (a *kltype.PositionError) for a sequence number not
// in the shard, ErrInvalidOption for a position that cannot be asked for
// (a sequence number without a shard, a time in the future), and the lease
// store's own (leases.ErrMisconfigured, ...). The stream need not be one
// of the service's subscriptions: another service on the same lease table
// may read it.
//
// A subscription of the service with its own Kinesis client
// (WithKinesisClient given to Subscribe) is rewound through that client;
// one given WithLeaseNamespace is named by its lease key
// ("acct-b/orders"), a lease key no subscription has being refused with
// ErrNotSubscribed (its client and stream are unknown).
func (s *Service) Rewind(ctx context.Context, stream, shard string, position kltype.StartPosition) ([]kltype.RewindResult, error) {
	kin, key := s.kin, kinesisx.Name(stream)
	if sub := s.subscriptionOf(stream); sub != nil {
		kin, key = s.clientOf(sub), sub.leaseKey()
		if kinesisx.IsLeaseStream(stream) {
			stream = sub.stream
		}
	} else if kinesisx.IsLeaseStream(stream) {
		return nil, fmt.Errorf("%w: Rewind(%q): no subscription of this service has that lease key (WithLeaseNamespace): its stream and Kinesis client are unknown here", ErrNotSubscribed, stream)
	}
	if err := checkRewind(stream, shard, position); err != nil {
		return nil, err
	}
	var st rewind.Store = s.cfg.store
	shards, err := kinesisx.ListShards(ctx, kin, stream)
	if err != nil {
		return nil, rewindErr(stream, err)
	}
	slices.SortFunc(shards, func(a, b types.Shard) int { return strings.Compare(aws.ToString(a.ShardId), aws.ToString(b.ShardId)) })
	if shard != "" {
		if shards, err = rewind.Pick(stream, shards, shard); err != nil {
			return nil, err
		}
	}
	plans, err := rewind.Resolve(ctx, kin, stream, shards, position)
	if err != nil {
		if errors.Is(err, kltype.ErrPositionNotInShard) {
			return nil, err
		}
		return nil, rewindErr(stream, err)
	}
	var (
		results []kltype.RewindResult
		errs    []error
		what    = fmt.Sprintf("stream %q", stream)
	)
	if key != kinesisx.Name(stream) {
		what += fmt.Sprintf(" (lease key %q)", key)
	}
	for _, p := range plans {
		res, err := rewind.Apply(ctx, st, key, p, false)
		if err != nil {
			errs = append(errs, fmt.Errorf("kinesislease: Rewind: %s, shard %s: %w", what, p.Shard, err))
			if errors.Is(err, leases.ErrMisconfigured) || ctx.Err() != nil {
				break // the same for every row
			}
			continue
		}
		s.log.InfoContext(ctx, "kinesislease: rewind", "stream", stream, "lease_key", key, "shard", p.Shard, "from", res.From.Sequence, "to", res.To.Sequence, "holder", res.Holder)
		results = append(results, res)
	}
	return results, errors.Join(errs...)
}

// rewindErr names the stream in a Kinesis error of Rewind, matching
// ErrStreamNotFound or ErrAccessDenied when it says so.
func rewindErr(stream string, err error) error {
	switch {
	case kinesisx.IsNotFound(err):
		return fmt.Errorf("%w: Rewind: stream %q does not exist (or is not in this account and region): %w", ErrStreamNotFound, stream, err)
	case kinesisx.IsAccessDenied(err):
		return explain(stream, err)
	}
	return fmt.Errorf("kinesislease: Rewind: %w", err)
}

// checkRewind reports what is wrong with Rewind's arguments, if anything.
func checkRewind(stream, shard string, p kltype.StartPosition) error {
	if err := validStream(stream); err != nil {
		return err
	}
	if shard != "" {
		if _, err := leases.NewKey(stream, shard); err != nil {
			return fmt.Errorf("%w: Rewind: shard %q: %w", ErrInvalidOption, shard, err)
		}
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: Rewind: %w", ErrInvalidOption, err)
	}
	switch {
	case shard == "" && (p.Type == kltype.PositionAtSequenceNumber || p.Type == kltype.PositionAfterSequenceNumber):
		return fmt.Errorf("%w: Rewind(%q, every shard, %v): a sequence number belongs to one shard: name it", ErrInvalidOption, stream, p)
	case p.Type == kltype.PositionAtTimestamp && p.Time.After(time.Now()):
		return fmt.Errorf("%w: Rewind(%q, %v): the time is in the future: no record has arrived after it yet (to skip every record until new ones arrive, use kltype.Latest)",
			ErrInvalidOption, stream, p)
	}
	return nil
}
