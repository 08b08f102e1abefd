package kltype

import (
	"errors"
	"time"
)

// Errors of a deferred acknowledgement (kinesislease.Defer); match them with
// errors.Is. Each means the call had no effect. From Done none of them
// needs handling beyond, perhaps, a log line or a metric; from Defer,
// ErrNotDeferred is a bug of the caller's (see kinesislease.Defer).
var (
	// ErrNotDeferred: Defer was called outside a handler call (from a
	// context that carries no delivery, or after the handler returned).
	// Defer returns it, with an acknowledgement that belongs to no record:
	// resolving that does nothing, and returns it again.
	ErrNotDeferred = errors.New("kinesislease: not a deferred acknowledgement: Defer was called outside a handler call")
	// ErrAlreadyResolved: the deferred acknowledgement was resolved already
	// (a second call), or the record's attempt ended otherwise first (the
	// handler panicked or overran WithHandlerTimeout after deferring).
	ErrAlreadyResolved = errors.New("kinesislease: deferred acknowledgement already resolved")
	// ErrLeaseGone: the shard's lease was released or lost before the
	// deferred acknowledgement was resolved: it is ignored and checkpoints
	// nothing; the record is delivered again by the shard's next reader.
	ErrLeaseGone = errors.New("kinesislease: deferred acknowledgement after the shard's lease was released or lost")
)

// ReleaseInfo tells a subscription's release callback
// (kinesislease.WithOnRelease) that a shard is about to be let go.
type ReleaseInfo struct {
	// Stream is the stream's name or ARN, as subscribed.
	Stream string
	// ShardID is the shard being let go.
	ShardID string
	// Outstanding counts the shard's deferred acknowledgements not yet
	// resolved, records (a deferred batch counts its records).
	Outstanding int
	// Lost: the lease was lost (taken over, or this instance's fence
	// passed). Nothing is waited for, and acknowledgements resolved from
	// now on are ignored (ErrLeaseGone): the shard's next reader delivers
	// those records again.
	Lost bool
	// Ended: the shard was read to its end; its SHARD_END checkpoint waits
	// for every outstanding acknowledgement, without a time bound, unless
	// the lease is let go first.
	Ended bool
	// Wait is how long the release waits for outstanding acknowledgements
	// (the shutdown timeout) before it releases at the resolved prefix; 0
	// when it does not wait (Lost) or waits without a bound (Ended).
	Wait time.Duration
}
