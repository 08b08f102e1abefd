package kinesislease

import (
	"errors"
)

// Errors returned by New, Subscribe, Run and Rewind; match them with errors.Is.
// Errors of the lease store match the sentinels of package leases
// (leases.ErrMisconfigured: a missing table, denied access).
var (
	// ErrInvalidOption: an option's value cannot work (or a Rewind's
	// position cannot be asked for); the message names it.
	ErrInvalidOption = errors.New("kinesislease: invalid option")
	// ErrDuplicateSubscription: the service already has a subscription to
	// the stream.
	ErrDuplicateSubscription = errors.New("kinesislease: stream already subscribed")
	// ErrStreamNotFound: a subscribed stream does not exist.
	ErrStreamNotFound = errors.New("kinesislease: stream not found")
	// ErrAccessDenied: the credentials may not call a Kinesis operation the
	// service needs.
	ErrAccessDenied = errors.New("kinesislease: access denied")
	// ErrRunning: Run called again on a service whose Run was called
	// before (Run may be called once), or Subscribe while Run runs at a
	// moment it cannot add the subscription: Run did not finish starting
	// in time, or returned meanwhile.
	ErrRunning = errors.New("kinesislease: service already running")
	// ErrStopped: Ready was waiting when Run returned (or Run returned
	// before it was called).
	ErrStopped = errors.New("kinesislease: service stopped")
	// ErrNotSubscribed is returned by Unsubscribe for a stream the service
	// does not subscribe.
	ErrNotSubscribed = errors.New("kinesislease: stream not subscribed")
	// ErrDuplicateOwner: another process uses this instance's owner id in
	// the lease table (WithOwner) and keeps heartbeating, or took this
	// instance's membership entry over. The two never deliver at once.
	ErrDuplicateOwner = errors.New("kinesislease: duplicate owner id")
)
