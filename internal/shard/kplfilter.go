package shard

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/kinesislease/kinesislease/kltype"
	"github.com/kinesislease/kinesislease/kpl"
)

// outOfRange returns which user records of the aggregate seq, from skip on,
// hash outside the shard's range, or nil when none does (or the range is
// not known); it logs and reports those it finds to the hooks.
//
// After a reshard, a KPL whose shard map is stale can aggregate user
// records for a shard that no longer owns all their hash keys; Kinesis
// routes the aggregate by the explicit hash key the KPL gives it (its
// first user record's), and the KPL, seeing the put land on a shard other
// than the one it predicted, puts every user record whose hash key is not
// in that shard's range again, which Kinesis routes to the shard owning it.
// Those user records would be delivered twice, once here out of their
// key's order: they are skipped here. The others are delivered: the KPL
// counts them as written here and does not put them again (since
// amazon-kinesis-producer f4a64f1fdb3cfd98bf6aebcc1d31e501acacbc04,
// aws/kinesis/core/retrier.cc, Retrier::succeed_if_correct_shard; earlier
// KPLs put every user record of such an aggregate again, so those are
// delivered twice). KCL drops the whole aggregate instead
// (AggregatorUtil.deaggregate with startingHashKey and endingHashKey,
// amazon-kinesis-client/src/main/java/software/amazon/kinesis/retrieval/AggregatorUtil.java
// at awslabs/amazon-kinesis-client 024eb86e2163a3d211cacf21f44f5411b6c41c53),
// which loses the in-range user records under a KPL with f4a64f1.
//
// A user record whose explicit hash key cannot be parsed is kept: nothing
// is dropped without proof that it belongs elsewhere.
func (w *Worker) outOfRange(seq string, users []kpl.UserRecord, skip int) []bool {
	if w.hashRange == nil {
		return nil
	}
	var out []bool
	n := 0
	for i := skip; i < len(users); i++ {
		k, err := users[i].HashKey()
		if err != nil || w.hashRange.Contains(k) {
			continue
		}
		if out == nil {
			out = make([]bool, len(users))
		}
		out[i] = true
		n++
	}
	if n == 0 {
		return nil
	}
	w.log.Warn("kinesislease: KPL user records hash outside the shard's range: skipped (after a reshard the KPL puts them again, to the shard that owns them)",
		"seq", seq, "skipped", n, "user_records", len(users))
	for _, x := range w.hooks.Filtered {
		x.OnUserRecordsFiltered(kltype.FilterInfo{Stream: w.stream, ShardID: w.shard, SequenceNumber: seq, Filtered: n, UserRecords: len(users)})
	}
	return out
}

// HashRangeOf returns the hash key range ListShards gave sh, or nil when
// it gave none (or an unreadable one) or the range is the whole key space:
// then no user record is filtered.
func HashRangeOf(sh types.Shard) *kpl.HashRange {
	hr := sh.HashKeyRange
	if hr == nil {
		return nil
	}
	r, err := kpl.ParseHashRange(aws.ToString(hr.StartingHashKey), aws.ToString(hr.EndingHashKey))
	if err != nil || r.Whole() {
		return nil
	}
	return &r
}
