package shardlist

// The digests a membership entry publishes: of the streams an instance
// subscribes (leases.Member.Streams, see the engine's setDigest), and of
// the shard set of each stream it lists for the others
// (leases.Member.Listing: each stream's tag, then its shards' digest). All
// are FNV-1a (FNV); the tags and the shard digests, like the listers'
// rendezvous scores (assignListers), are well mixed (hashOf).

import (
	"fmt"
	"hash/fnv"
	"slices"
)

// mix64 is murmur3's 64-bit finalizer: FNV's high bits alone are poorly
// mixed for keys that differ in their last bytes (member-01, member-02).
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// FNV is the 64-bit FNV-1a hash of parts, each followed by a zero byte.
func FNV(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// hashOf is FNV(parts), well mixed (mix64).
func hashOf(parts ...string) uint64 { return mix64(FNV(parts...)) }

// streamTag names a stream in a membership entry's Listing: 4 hex digits
// of its key's hash.
func streamTag(key string) string { return fmt.Sprintf("%04x", hashOf(key)>>48) }

// shardDigest returns the digest of a shard set (ids in any order): 12
// hex digits (48 bits).
func shardDigest(ids []string) string {
	sorted := slices.Sorted(slices.Values(ids))
	return fmt.Sprintf("%012x", hashOf(sorted...)>>16)
}
