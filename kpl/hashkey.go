package kpl

import (
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"math/bits"
)

// HashKey is a 128-bit Kinesis hash key. Kinesis puts a record in the shard
// whose hash key range holds the record's explicit hash key or, without
// one, the MD5 of its partition key read as a big-endian integer.
type HashKey struct{ Hi, Lo uint64 }

// MaxHashKey is the largest hash key, 2^128 - 1.
var MaxHashKey = HashKey{Hi: ^uint64(0), Lo: ^uint64(0)}

// ErrBadHashKey is matched (errors.Is) by the errors of ParseHashKey and
// ParseHashRange.
var ErrBadHashKey = errors.New("kpl: bad hash key")

// ParseHashKey parses a hash key written in decimal, as ListShards writes a
// shard's range and a producer writes an explicit hash key: 0 to 2^128 - 1.
func ParseHashKey(s string) (HashKey, error) {
	if s == "" {
		return HashKey{}, fmt.Errorf("%w: empty", ErrBadHashKey)
	}
	var k HashKey
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return HashKey{}, fmt.Errorf("%w: %q is not a decimal integer", ErrBadHashKey, s)
		}
		// k = k*10 + digit, refusing anything above 2^128 - 1.
		hiHi, hiLo := bits.Mul64(k.Hi, 10)
		loHi, loLo := bits.Mul64(k.Lo, 10)
		hi, carry := bits.Add64(hiLo, loHi, 0)
		lo, carry2 := bits.Add64(loLo, uint64(c-'0'), 0)
		hi, carry3 := bits.Add64(hi, 0, carry2)
		if hiHi != 0 || carry != 0 || carry3 != 0 {
			return HashKey{}, fmt.Errorf("%w: %q is above 2^128 - 1", ErrBadHashKey, s)
		}
		k = HashKey{Hi: hi, Lo: lo}
	}
	return k, nil
}

// PartitionKeyHash returns the hash key Kinesis gives partition key pk: the
// MD5 of its UTF-8 bytes as a big-endian 128-bit integer.
func PartitionKeyHash(pk string) HashKey {
	sum := md5.Sum([]byte(pk))
	return HashKey{Hi: binary.BigEndian.Uint64(sum[:8]), Lo: binary.BigEndian.Uint64(sum[8:])}
}

// Compare returns -1, 0 or +1 as k is below, equal to or above o.
func (k HashKey) Compare(o HashKey) int {
	switch {
	case k.Hi < o.Hi || (k.Hi == o.Hi && k.Lo < o.Lo):
		return -1
	case k == o:
		return 0
	}
	return 1
}

// String returns k in decimal.
func (k HashKey) String() string {
	b := new(big.Int).SetUint64(k.Hi)
	b.Lsh(b, 64)
	return b.Or(b, new(big.Int).SetUint64(k.Lo)).String()
}

// HashKey returns the hash key Kinesis would route u by: its explicit hash
// key if it has one, else the MD5 of its partition key. An explicit hash key
// that is not a decimal integer of 128 bits is an error matching
// ErrBadHashKey.
func (u UserRecord) HashKey() (HashKey, error) {
	if u.ExplicitHashKey != "" {
		return ParseHashKey(u.ExplicitHashKey)
	}
	return PartitionKeyHash(u.PartitionKey), nil
}

// HashRange is a shard's range of hash keys, both ends included, as
// ListShards reports it (Shard.HashKeyRange).
type HashRange struct{ Start, End HashKey }

// ParseHashRange parses a shard's StartingHashKey and EndingHashKey.
func ParseHashRange(start, end string) (HashRange, error) {
	s, err := ParseHashKey(start)
	if err != nil {
		return HashRange{}, fmt.Errorf("starting hash key: %w", err)
	}
	e, err := ParseHashKey(end)
	if err != nil {
		return HashRange{}, fmt.Errorf("ending hash key: %w", err)
	}
	if s.Compare(e) > 0 {
		return HashRange{}, fmt.Errorf("%w: range %s to %s is empty", ErrBadHashKey, start, end)
	}
	return HashRange{Start: s, End: e}, nil
}

// Contains reports whether k lies in r.
func (r HashRange) Contains(k HashKey) bool { return r.Start.Compare(k) <= 0 && k.Compare(r.End) <= 0 }

// Whole reports whether r is the whole hash key space, 0 to 2^128 - 1 (the
// range of a stream's only shard): it contains every key.
func (r HashRange) Whole() bool { return r.Start == HashKey{} && r.End == MaxHashKey }
