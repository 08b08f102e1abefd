// Package read reads one Kinesis shard in order, from a start position:
// by polling (Reader: GetShardIterator and GetRecords) or by enhanced
// fan-out (Subscriber: SubscribeToShard, with its stream consumer
// registered by Consumer). Throttling, expired iterators, ended
// subscriptions and transient errors are retried inside each, without
// skipping a record. WithCallHook times the calls of a Kinesis client.
//
// Nothing here knows leases or handlers: a Subscriber is told whether its
// lease is valid through a function, and a memory budget is a Reserve
// function and a Batch's Cost.
package read
