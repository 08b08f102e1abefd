// Package shardlist is the listing of each stream's shards by one lister,
// and what the listings tell of the shard graph.
//
// One lister per stream. ListShards is not asked by every member every
// ShardSyncInterval: of the live members that read the same streams
// (their entries carry this instance's Streams digest), each stream has
// one lister, chosen from the membership view every member computes
// (choose). The lister lists the stream every ShardSyncInterval and
// whenever a member's Ended count moves (a shard ended somewhere), and
// publishes a digest of the shard set it found in its membership entry
// (leases.Member.Listing), bumping its row's version in the header so that
// every member reads the entry. Every other member lists the stream at its
// start, after its own shard ends, once each time the lister's digest
// changes to one that differs from its own listing's (jittered within
// listWindow, so that a fleet does not list in one burst), and on its own
// schedule, as before, only while no lister publishes one (listerFallback):
// a stream with no lister (more streams than maxListed per member), or a
// lister whose digest has not appeared for that long (an earlier version,
// or a lister whose listings fail).
//
// Open parents the same way (State.ParentsToRead): the row of a parent of a
// split or merge not known to be done is polled only by the members that
// the plan, once the parents are done, gives a child (shadowPlan); the
// others read it once after an end is announced (an Ended count moved) by
// a member its row names or their plan gives it to.
//
// Each stream's listing is a Stream, which the engine's state of the
// stream holds: its shards as last listed, the ListShards call in flight
// in the background (bounded by listTimeout) and the stream's failure.
// Each round the engine asks the State to list (Sync): it applies the
// listings answered, starts those that are due and publishes; the engine
// is told of each listing applied, to create the rows of new shards
// (Host.ShardsListed), and of its outcome (Host.ListingDone). The engine
// keeps the streams and their rows; a State keeps what the listing
// decides over them (State, per stream listState), and reads the Group
// through Host and the member view through View. It imports neither the
// engine nor the root package.
package shardlist
