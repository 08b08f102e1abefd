// Package kltype holds the types shared by kinesislease, its engine, its
// lease stores and its adapters, each under one name: the record a handler
// sees, start positions, handler outcomes and their errors, the retry
// policy, dead letters, the hook interfaces (lease hooks among them) and
// the values they receive, the results and errors of a rewind, and the
// service's statistics.
//
// It is a leaf package (it imports only the standard library), modelled on
// river's rivertype: code that only inspects records, writes hooks or
// matches outcomes can import it without the service.
//
// Handlers return outcomes as errors built by kinesislease.RetryAfter,
// kinesislease.Drop and kinesislease.DeadLetter, and the types here let a
// caller match them:
//
//	var after *kltype.RetryAfterError
//	if errors.As(err, &after) { ... after.Delay ... }
package kltype
