package plan

// The hashes of the plans: the rendezvous score of the exact plan (FNV-1a
// through the splitmix64 finaliser), and the hashes of the units and the
// members that place them on the ring of the greedy.

// The rendezvous score: FNV-1a 64 over stream, NUL, shard, NUL, member for a
// unit (stream, NUL, member, then xor pairTag, for the pair of a stream and
// a member), through the splitmix64 finaliser so that every bit depends on
// every input byte, keeping the top scoreBits bits. All the arithmetic of
// the planner is on integers, so that members on different architectures
// compute the same plan. (The greedy of large.go keeps all 64 bits: mix.)
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
	pairTag   = 0x9e3779b97f4a7c15
	// scoreBits leaves room in an int64 for sums of score differences along
	// chains of moves over up to 2^20 members.
	scoreBits = 40
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// fnvSep adds a NUL byte.
func fnvSep(h uint64) uint64 { return h * fnvPrime }

func score(h uint64) int64 { return int64(mix(h) >> (64 - scoreBits)) }

// mix is the splitmix64 finaliser.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// unitHash hashes stream, NUL, shard.
func unitHash(u Unit) uint64 {
	return mix(fnvString(fnvSep(fnvString(fnvOffset, u.Stream)), u.Shard))
}

const memberTag = 0x2545f4914f6cdd1d

func memberHash(id string) uint64 { return mix(fnvString(fnvOffset, id) ^ memberTag) }
