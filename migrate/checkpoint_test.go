package migrate

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/kinesislease/kinesislease/leases"
)

const seqA = "49590338271490256608559692538361571095921575989136588898"

// The KCL's checkpoint means "processed up to and including": it resumes
// with GetShardIterator AT_SEQUENCE_NUMBER on the checkpoint
// (IteratorBuilder.request; KinesisDataFetcher.initialize) and drops every
// user record whose (sequence, sub-sequence) compares <= the checkpoint
// (ProcessTask.filterAndGetMaxExtendedSequenceNumber,
// ExtendedSequenceNumber.compareTo), all in
// amazon-kinesis-client/src/main/java/software/amazon/kinesis/ at
// 024eb86e2163a3d211cacf21f44f5411b6c41c53 (v3.5.1). Ours counts the user
// records of Sequence done, 0 meaning all (leases.Checkpoint).
func TestFromKCL(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	for _, c := range []struct {
		name    string
		seq     string
		sub     int64
		records int
		want    leases.Checkpoint
	}{
		{"none", "", 0, 1, leases.Checkpoint{}},
		{"SHARD_END", "SHARD_END", 0, 1, leases.Checkpoint{Sequence: leases.ShardEnd}},
		{"TRIM_HORIZON", "TRIM_HORIZON", 0, 1, leases.Checkpoint{Sequence: leases.RewindTrimHorizon}},
		{"LATEST", "LATEST", 0, 1, leases.Checkpoint{Sequence: leases.RewindLatest}},
		{"AT_TIMESTAMP", "AT_TIMESTAMP", 0, 1, leases.RewindAtTimestamp(at)},
		{"plain record", seqA, 0, 1, leases.Checkpoint{Sequence: seqA}},
		{"first of an aggregate of 4", seqA, 0, 4, leases.Checkpoint{Sequence: seqA, SubSequence: 1}},
		{"third of 4", seqA, 2, 4, leases.Checkpoint{Sequence: seqA, SubSequence: 3}},
		{"last of 4: the record done", seqA, 3, 4, leases.Checkpoint{Sequence: seqA}},
		{"past the last", seqA, 9, 4, leases.Checkpoint{Sequence: seqA}},
		{"a record no longer readable", seqA, 2, 1, leases.Checkpoint{Sequence: seqA}},
		{"nothing of seq done", seqA, -1, 4, leases.RewindAtSequence(seqA)},
	} {
		got, err := FromKCL(c.seq, c.sub, c.records, at)
		if err != nil || got != c.want {
			t.Errorf("%s: FromKCL(%q, %d, %d) = %+v, %v; want %+v", c.name, c.seq, c.sub, c.records, got, err, c.want)
		}
	}
	if _, err := FromKCL("AT_TIMESTAMP", 0, 1, time.Time{}); !errors.Is(err, ErrNeedTimestamp) {
		t.Errorf("AT_TIMESTAMP without a time: %v, want ErrNeedTimestamp", err)
	}
	if _, err := FromKCL("12ab", 0, 1, at); !errors.Is(err, ErrSchema) {
		t.Errorf("a malformed checkpoint: %v, want ErrSchema", err)
	}
}

// vmware-go-kcl checkpoints the last record processed and resumes
// AFTER_SEQUENCE_NUMBER (commonShardConsumer.getStartingPosition in
// clientlibrary/worker/common-shard-consumer.go at
// f6e79f1a2d4169e05d949d465563c1c45f0a050c), without a sub-sequence.
func TestFromVMware(t *testing.T) {
	for seq, want := range map[string]leases.Checkpoint{
		"":          {},
		"SHARD_END": {Sequence: leases.ShardEnd},
		seqA:        {Sequence: seqA},
	} {
		if got, err := FromVMware(seq); err != nil || got != want {
			t.Errorf("FromVMware(%q) = %+v, %v; want %+v", seq, got, err, want)
		}
	}
	if _, err := FromVMware("LATEST"); !errors.Is(err, ErrSchema) {
		t.Errorf("vmware-go-kcl writes no LATEST: %v, want ErrSchema", err)
	}
}

// Export then import gives back every checkpoint (AT_TIMESTAMP with its
// time given again), and the KCL form is the one a KCL worker resumes
// from at the same record.
func TestToKCLRoundTrip(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	for _, c := range []struct {
		cp      leases.Checkpoint
		records int
		seq     string
		sub     int64
	}{
		{leases.Checkpoint{Sequence: leases.ShardEnd}, 1, "SHARD_END", 0},
		{leases.Checkpoint{Sequence: leases.RewindTrimHorizon}, 1, "TRIM_HORIZON", 0},
		{leases.Checkpoint{Sequence: leases.RewindLatest}, 1, "LATEST", 0},
		{leases.RewindAtTimestamp(at), 1, "AT_TIMESTAMP", 0},
		{leases.RewindAtSequence(seqA), 1, seqA, -1},
		{leases.Checkpoint{Sequence: seqA}, 1, seqA, 0},
		{leases.Checkpoint{Sequence: seqA}, 4, seqA, 3},
		{leases.Checkpoint{Sequence: seqA, SubSequence: 1}, 4, seqA, 0},
		{leases.Checkpoint{Sequence: seqA, SubSequence: 3}, 4, seqA, 2},
	} {
		seq, sub, err := ToKCL(c.cp, c.records)
		if err != nil || seq != c.seq || sub != c.sub {
			t.Errorf("ToKCL(%+v, %d) = %q, %d, %v; want %q, %d", c.cp, c.records, seq, sub, err, c.seq, c.sub)
			continue
		}
		back, err := FromKCL(seq, sub, c.records, at)
		if err != nil || back != c.cp {
			t.Errorf("FromKCL(ToKCL(%+v)) = %+v, %v", c.cp, back, err)
		}
	}
	if _, _, err := ToKCL(leases.Checkpoint{}, 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("ToKCL(none): %v, want ErrInvalid", err)
	}
}

func TestProgressOrder(t *testing.T) {
	seqB := "49590338271490256608559692538361571095921575989136588899"
	// Each marks more of the shard done than the one before it.
	ours := []leases.Checkpoint{
		{},
		leases.RewindAtSequence(seqA),
		{Sequence: seqA, SubSequence: 1},
		{Sequence: seqA, SubSequence: 3},
		{Sequence: seqA},
		leases.RewindAtSequence(seqB),
		{Sequence: seqB},
		{Sequence: leases.ShardEnd},
	}
	for i := 1; i < len(ours); i++ {
		if c := oursProgress(ours[i-1]).cmp(oursProgress(ours[i])); c >= 0 {
			t.Errorf("%+v vs %+v: cmp %d, want < 0", ours[i-1], ours[i], c)
		}
	}
	for _, start := range []string{leases.RewindTrimHorizon, leases.RewindLatest, leases.AtTimestampPrefix + "1"} {
		if c := oursProgress(leases.Checkpoint{Sequence: start}).cmp(oursProgress(leases.Checkpoint{})); c != 0 {
			t.Errorf("%s marks something done: cmp %d", start, c)
		}
	}
	kcl := []struct {
		seq string
		sub int64
	}{{"TRIM_HORIZON", 0}, {seqA, -1}, {seqA, 0}, {seqA, math.MaxInt32}, {seqB, 0}, {"SHARD_END", 0}}
	for i := 1; i < len(kcl); i++ {
		if c := kclProgress(kcl[i-1].seq, kcl[i-1].sub).cmp(kclProgress(kcl[i].seq, kcl[i].sub)); c >= 0 {
			t.Errorf("KCL %v vs %v: cmp %d, want < 0", kcl[i-1], kcl[i], c)
		}
	}
	if cmpSeq("9", "10") >= 0 || cmpSeq("010", "10") != 0 {
		t.Error("cmpSeq does not compare numerically")
	}
}

func TestPickStreamID(t *testing.T) {
	ids := map[string]bool{
		"111111111111:orders:1700000000":   true,
		"111111111111:orders:1700009999":   true, // deleted and created again
		"222222222222:orders:1600000000":   true,
		"111111111111:payments:1700000000": true,
	}
	f := Foreign{Table: "kcl"}
	if got, err := pickStreamID(f, ids, "payments"); err != nil || got != "111111111111:payments:1700000000" {
		t.Errorf("by name: %q, %v", got, err)
	}
	if _, err := pickStreamID(f, ids, "orders"); !errors.Is(err, ErrInvalid) {
		t.Errorf("three streams named orders: %v, want ErrInvalid", err)
	}
	if got, err := pickStreamID(f, ids, "arn:aws:kinesis:eu-west-1:222222222222:stream/orders"); err != nil || got != "222222222222:orders:1600000000" {
		t.Errorf("by ARN: %q, %v", got, err)
	}
	if _, err := pickStreamID(f, ids, "arn:aws:kinesis:eu-west-1:111111111111:stream/orders"); !errors.Is(err, ErrInvalid) {
		t.Errorf("two epochs of one ARN: %v, want ErrInvalid", err)
	}
	f.StreamID = "111111111111:orders:1700000001"
	if _, err := pickStreamID(f, ids, "orders"); !errors.Is(err, ErrSchema) {
		t.Errorf("an identifier the table does not hold: %v, want ErrSchema", err)
	}
	f.StreamID = "111111111111:orders:1700009999"
	if got, err := pickStreamID(f, ids, "orders"); err != nil || got != f.StreamID {
		t.Errorf("by identifier: %q, %v", got, err)
	}
	if _, err := pickStreamID(f, ids, "payments"); !errors.Is(err, ErrInvalid) {
		t.Errorf("by identifier of another stream name: %v", err)
	}
}
