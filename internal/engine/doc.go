// Package engine reads the shards of a Kinesis stream under leases: the
// Group discovers shards and takes, balances and releases their leases
// under the membership protocol, and runs one worker per held shard
// (package shard), which hands records to a handler in order and
// checkpoints through its held lease (package lease). The shards
// themselves are read by package read.
//
// Nothing here is generic: records reach the handler as raw bytes with their
// metadata; decoding happens in the caller's typed wrapper.
package engine
