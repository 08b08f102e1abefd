package engine

// What the Group's goroutines share beside package syncx's helpers: how
// many store calls a round runs at once, and the monotonic clock (mono).

import "github.com/kinesislease/kinesislease/internal/fence"

// storeConcurrency bounds the concurrent store calls of a round (row
// reads, takes, releases).
const storeConcurrency = 16

// mono is fence.Mono: the instants kept in atomics, the fence's among
// them, are on its clock.
func mono() int64 { return fence.Mono() }
