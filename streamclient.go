package kinesislease

// A subscription's own Kinesis client (WithKinesisClient given to
// Subscribe) and the namespace of its lease rows (WithLeaseNamespace): a
// stream of another account or region read by the same service, with the
// same lease table, heartbeat and membership.

import (
	"fmt"

	"github.com/kinesislease/kinesislease/internal/engine"
	"github.com/kinesislease/kinesislease/internal/kinesiswire"
	"github.com/kinesislease/kinesislease/internal/kinesisx"
	"github.com/kinesislease/kinesislease/internal/read"
	"github.com/kinesislease/kinesislease/internal/subopts"
)

// WithKinesisClient sets the Kinesis client to call instead of one built
// from the aws.Config given to New.
//
// Given to New, it is the service's client: every subscription's, Publish
// and NewPublisher's, Rewind's. Given to Subscribe, it is that
// subscription's alone, for every Kinesis call of its stream: listing its
// shards, reading them (GetRecords, or SubscribeToShard and the consumer's
// registration with WithEnhancedFanOut), reading its retention, and
// writing its dead-letter stream (WithDeadLetterStream, resolved in that
// client's account and region). A stream of another account (a client
// whose credentials assume a role there) or region is read that way by
// the same service, with the same lease table, heartbeat and membership;
// the lease rows still live in the service's store. Give such a
// subscription WithLeaseNamespace too when a stream of the same name is
// (or may be) subscribed through another client: rows are keyed by the
// stream's name. WithKinesisOptions does not apply to a client given here.
// A nil client is refused.
func WithKinesisClient(client Kinesis) SharedOption { return kinesisClientOption{client} }

type kinesisClientOption struct{ client Kinesis }

// A kinesisClientOption given to Subscribe is a way in for kinesisleasetest too.
var _ subopts.Resolver = kinesisClientOption{}

func (o kinesisClientOption) err() error {
	if o.client == nil {
		return fmt.Errorf("%w: WithKinesisClient(nil)", ErrInvalidOption)
	}
	return nil
}

func (o kinesisClientOption) applyService(c *config) {
	if err := o.err(); err != nil {
		c.errs = append(c.errs, err)
	}
	c.client = o.client
}

func (o kinesisClientOption) applySub(s *subscription) {
	if err := o.err(); err != nil {
		s.errs = append(s.errs, err)
	}
	s.client = o.client
}

// ResolveSubscribeOptions implements subopts.Resolver (see subOption's).
func (kinesisClientOption) ResolveSubscribeOptions(opts []any, producer any) subopts.Settings {
	return resolveSubscribeOptions(opts, producer)
}

// WithLeaseNamespace keys the subscription's lease rows
// "namespace/stream:shard" instead of "stream:shard" (stream: the stream's
// name, however it is subscribed), so that two streams of the same name,
// in two accounts or regions (each subscription with its own
// WithKinesisClient), are read by one service with one lease table, each
// from its own checkpoints. "namespace/stream" is the subscription's lease
// key: Held, Unsubscribe and Rewind take it to name the subscription, and
// `kinesislease status` and `rewind` reach its rows with
// --lease-namespace. Every instance of the service gives the same
// namespace (an account id or alias, a region). A subscription whose lease
// key another subscription of the service has is refused
// (ErrDuplicateSubscription).
//
// A namespace is 1 to 128 letters, digits, '_', '.' and '-' (a stream
// name's characters: never '/' or ':'); anything else is refused with
// ErrInvalidOption. Without it a subscription's rows are keyed as they
// always were: adding it to a subscription that has checkpoints moves it to
// new rows, which start at its start position.
func WithLeaseNamespace(namespace string) SubscribeOption {
	return subOption(func(s *subscription) {
		if err := kinesisx.CheckNamespace(namespace); err != nil {
			s.errs = append(s.errs, fmt.Errorf("%w: WithLeaseNamespace: %w", ErrInvalidOption, err))
		}
		s.namespace = namespace
	})
}

// leaseKey is the stream part of the keys of sub's lease rows: its
// stream's name, after its namespace if it has one.
func (sub *subscription) leaseKey() string { return kinesisx.LeaseStream(sub.namespace, sub.stream) }

// clientOf returns the Kinesis client of sub: its own, or the service's.
func (s *Service) clientOf(sub *subscription) Kinesis {
	if sub.client != nil {
		return sub.client
	}
	return s.kin
}

// streamConfig returns the engine's configuration of sub: its stream, its
// lease key and client, its start position, and the moment Subscribe was
// called, which LATEST means if this instance marks the stream first (else
// the mark's: see WithStartPosition).
func (s *Service) streamConfig(sub *subscription) engine.StreamConfig {
	sc := engine.StreamConfig{Stream: sub.stream, Key: sub.leaseKey(), Start: sub.start, Since: sub.at, Worker: s.workerConfig(sub)}
	if sub.client != nil {
		sc.Client = sub.client
	}
	return sc
}

// subscriptionOf returns the subscription whose lease key is that of
// stream (a stream name or ARN, or a lease key), nil if none.
func (s *Service) subscriptionOf(stream string) *subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sub := range s.subs {
		if sub.leaseKey() == kinesisx.Name(stream) {
			return sub
		}
	}
	return nil
}

// duplicateError is the error of a subscription to stream whose lease key
// is that of prev's.
func duplicateError(stream string, prev *subscription) error {
	return fmt.Errorf("%w: %q (subscribed as %q): both key their lease rows %q; if they are different streams (in another account or region), give one of them WithLeaseNamespace",
		ErrDuplicateSubscription, stream, prev.stream, prev.leaseKey())
}

// workerConfig returns the shard workers' configuration of sub.
func (s *Service) workerConfig(sub *subscription) engine.WorkerConfig {
	w := sub.worker
	w.Budget = s.budget
	w.DrainTimeout = s.cfg.shutdownTimeout
	w.Encoding = kinesiswire.Encoding(s.cfg.encoding)
	if sub.fanOut != nil {
		w.FanOut = &read.FanOutConfig{Consumer: sub.fanOut}
	}
	if sub.deadLetterStream != "" {
		w.Sink = streamSink(s.clientOf(sub), sub.deadLetterStream)
	}
	return w
}
