// Package engine reads the shards of a Kinesis stream under leases: the
// per-shard worker that hands records to a handler in order and
// checkpoints, and the Group that discovers shards and takes, balances and
// releases their leases under the membership protocol. The shards
// themselves are read by package read.
//
// Nothing here is generic: records reach the handler as raw bytes with their
// metadata; decoding happens in the caller's typed wrapper.
package engine
